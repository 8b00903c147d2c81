"""Documented ``nki.isa`` ops nkisim does not simulate yet: each raises UnsupportedError naming
itself, so a kernel using one fails with a clear message, never an AttributeError."""
from __future__ import annotations

from ..errors import UnsupportedError

_NAMES = ("activate2", "nonzero_with_count", "tensor_scalar_cumulative", "local_gather", "nc_n_gather",
          "nc_stream_shuffle", "rng", "rand2", "dropout", "dma_compute", "quantize_mx", "nc_matmul_mx",
          "sequence_bounds", "set_rng_seed", "rand_set_state", "rand_get_state", "topk",
          "builtin_custom_op")


def _stub(name):
    def op(*args, **kwargs):
        raise UnsupportedError(f"nisa.{name}", "this instruction is documented but not simulated by "
                                               "nkisim yet")
    op.__name__ = op.__qualname__ = name
    op.__doc__ = f"``nisa.{name}``: not simulated yet (raises UnsupportedError)."
    return op


globals().update({n: _stub(n) for n in _NAMES})
__all__ = list(_NAMES)
