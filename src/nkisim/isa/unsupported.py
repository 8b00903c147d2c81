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
def nonzero_with_count(dst, src, index_offset=0, padding_val=-1, name=None):
    """Indices of the nonzero elements of ``src`` and their count (GpSimd engine).
    Not simulated yet: raises UnsupportedError."""


@_unsupported
def tensor_scalar_cumulative(dst, src, op0, op1, imm0, imm1=None, reduce_cmd=_cmd.reset_reduce, name=None):
    """Tensor-scalar arithmetic with a cumulative reduction (Vector engine).
    Not simulated yet: raises UnsupportedError."""


@_unsupported
def local_gather(dst, src_buffer, index, num_elem_per_idx=1, num_valid_indices=None, name=None):
    """Gather SBUF data in ``src_buffer`` by ``index`` within groups of partitions (GpSimd engine).
    Not simulated yet: raises UnsupportedError."""


@_unsupported
def nc_n_gather(dst, data, indices, name=None):
    """Gather elements of ``data`` by ``indices`` within each partition (GpSimd engine).
    Not simulated yet: raises UnsupportedError."""


@_unsupported
def nc_stream_shuffle(dst, src, shuffle_mask, name=None):
    """Cross-partition data movement within a quadrant of 32 partitions.
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
def dma_compute(dst, srcs, reduce_op, scales=None, unique_indices=True, oob_mode=_oob_mode.error,
                name=None):
    """Scaled element-wise reduction of several source tensors inside the DMA engines.
    Not simulated yet: raises UnsupportedError."""


@_unsupported
def sequence_bounds(dst, segment_ids, name=None):
    """Sequence bounds of a set of segment ids (GpSimd engine). Not simulated yet: raises
    UnsupportedError."""


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


@_unsupported
def topk(val_dst, idx_dst, src, n, name=None):
    """The ``n`` largest values of ``src`` and their indices (GpSimd engine).
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


__all__ = ["activate2", "nonzero_with_count", "tensor_scalar_cumulative", "local_gather", "nc_n_gather",
           "nc_stream_shuffle", "rng", "rand2", "dropout", "dma_compute",
           "sequence_bounds", "set_rng_seed", "rand_set_state", "rand_get_state", "topk",
           "builtin_custom_op"]
