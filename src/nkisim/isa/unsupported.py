"""Documented ``nki.isa`` ops nkisim does not simulate yet: each is an ``@instruction`` spec with the
documented signature (an unknown keyword raises TypeError like any op) whose rules raise
UnsupportedError naming it, so a kernel using one fails with a clear message, never an
AttributeError. Signatures: aws-neuron-sdk nki/api/nki/isa/__init__.py. Imports errors, dispatch.
"""
from __future__ import annotations

from ..errors import UnsupportedError
from .dispatch import instruction


def _not_simulated(ins, *args):
    raise UnsupportedError(ins.op, "this instruction is documented but not simulated by nkisim yet")


def _unsupported(stub):
    """``stub`` (its documented signature and docstring) as an op that raises UnsupportedError."""
    return instruction(rules=_not_simulated, compute=_not_simulated, memo=False)(stub)


@_unsupported
def quantize_mx(dst, src, dst_scale, name=None):
    """Quantize FP16/BF16 data to MXFP8 data and scales (Vector engine).
    Not simulated yet: raises UnsupportedError."""


@_unsupported
def nc_matmul_mx(dst, stationary, moving, stationary_scale, moving_scale, tile_position=None,
                 tile_size=None, accumulate=None, name=None):
    """Matrix multiplication of MXFP8/MXFP4 matrices with dequantization (Tensor engine).
    Not simulated yet: raises UnsupportedError."""


def builtin_custom_op(function_name, lib_file_name, ulib_to_ucode_version, ulib_to_isa_version, srcs, dsts,
                      **kwargs):
    """Run a custom GpSimd library op. Not simulated yet: raises UnsupportedError.

    Decision: not an ``@instruction`` spec: its documented signature (the NKI Beta 1 API page; the
    current page no longer lists it) forwards ``**kwargs`` to the custom op, so there is no
    unknown keyword to reject.
    """
    raise UnsupportedError("nisa.builtin_custom_op", "this instruction is documented but not simulated "
                                                      "by nkisim yet")


__all__ = ["quantize_mx", "nc_matmul_mx", "builtin_custom_op"]
