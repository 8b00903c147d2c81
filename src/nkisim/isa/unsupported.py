"""Documented ``nki.isa`` ops nkisim does not simulate yet: each is an ``@instruction`` spec with the
documented signature (an unknown keyword raises TypeError like any op) whose rules raise
UnsupportedError naming it, so a kernel using one fails with a clear message, never an
AttributeError. Signatures: aws-neuron-sdk nki/api/nki/isa/__init__.py. Imports errors, dispatch.
"""
from __future__ import annotations

from ..errors import UnsupportedError
from .dispatch import instruction
from .enums import engine as _engine, oob_mode as _oob_mode, reduce_cmd as _cmd


def _not_simulated(ins, *args):
    raise UnsupportedError(ins.op, "this instruction is documented but not simulated by nkisim yet")


def _unsupported(stub):
    """``stub`` (its documented signature and docstring) as an op that raises UnsupportedError."""
    return instruction(rules=_not_simulated, compute=_not_simulated, memo=False)(stub)


@_unsupported
def activate2(dst, op, data, imm0, imm1, op0, op1, relu_param=0.0, reverse0=False, reverse1=False,
              reduce_op=None, reduce_res=None, reduce_cmd=_cmd.idle, name=None):
    """Activation with two tensor-scalar operations and an optional reduction (Scalar engine).
    Not simulated yet: raises UnsupportedError."""


@_unsupported
def tensor_scalar_cumulative(dst, src, op0, op1, imm0, imm1=None, reduce_cmd=_cmd.reset_reduce, name=None):
    """Tensor-scalar arithmetic with a cumulative reduction (Vector engine).
    Not simulated yet: raises UnsupportedError."""


@_unsupported
def rng(dst, engine=_engine.vector, name=None):
    """Pseudo random numbers (Vector or GpSimd engine). Not simulated yet: raises UnsupportedError."""


@_unsupported
def rand2(dst, min, max, name=None):
    """Uniformly distributed pseudo random numbers in [min, max) (Vector engine).
    Not simulated yet: raises UnsupportedError."""


@_unsupported
def dropout(dst, data, prob, name=None):
    """Replace elements of ``data`` by zeros with probability ``prob`` (Vector engine).
    Not simulated yet: raises UnsupportedError."""


@_unsupported
def quantize_mx(dst, src, dst_scale, name=None):
    """Quantize FP16/BF16 data to MXFP8 data and scales (Vector engine).
    Not simulated yet: raises UnsupportedError."""


@_unsupported
def nc_matmul_mx(dst, stationary, moving, stationary_scale, moving_scale, tile_position=None,
                 tile_size=None, accumulate=None, name=None):
    """Matrix multiplication of MXFP8/MXFP4 matrices with dequantization (Tensor engine).
    Not simulated yet: raises UnsupportedError."""


@_unsupported
def set_rng_seed(src_seeds, name=None):
    """Seed the Vector engine's pseudo random number generator. Not simulated yet: raises
    UnsupportedError."""


@_unsupported
def rand_set_state(src_seeds, engine=_engine.gpsimd, name=None):
    """Set the engine's pseudo random number generator state. Not simulated yet: raises
    UnsupportedError."""


@_unsupported
def rand_get_state(dst, engine=_engine.gpsimd, name=None):
    """Store the engine's pseudo random number generator state. Not simulated yet: raises
    UnsupportedError."""


def builtin_custom_op(function_name, lib_file_name, ulib_to_ucode_version, ulib_to_isa_version, srcs, dsts,
                      **kwargs):
    """Run a custom GpSimd library op. Not simulated yet: raises UnsupportedError.

    Decision: not an ``@instruction`` spec: its documented signature (the NKI Beta 1 API page; the
    current page no longer lists it) forwards ``**kwargs`` to the custom op, so there is no
    unknown keyword to reject.
    """
    raise UnsupportedError("nisa.builtin_custom_op", "this instruction is documented but not simulated "
                                                      "by nkisim yet")


__all__ = ["activate2", "tensor_scalar_cumulative", "rng", "rand2", "dropout", "quantize_mx",
           "nc_matmul_mx", "set_rng_seed", "rand_set_state", "rand_get_state", "builtin_custom_op"]
