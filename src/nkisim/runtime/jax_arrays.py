"""JAX arrays as kernel arguments: the adapter ``runtime.launch`` uses for them (``ADAPTERS``).

Duck-typed: nkisim never imports jax to take a jax array in (``np.asarray``, what any jax array
supports), and turns results back into jax arrays only through the caller's own, already
imported ``jax.numpy``. Imports numpy and nkisim's errors only.
"""
from __future__ import annotations

import sys

import numpy as np

from ..errors import UnsupportedError


def to_numpy(x) -> np.ndarray:
    """A writable NumPy copy of the jax array ``x`` (shape and dtype kept; bfloat16 and fp8 come
    as ml_dtypes arrays, as jax stores them). A copy: jax arrays are immutable and
    ``np.asarray`` of one is read-only."""
    return np.array(np.asarray(x), copy=True)


def from_numpy(array: np.ndarray, like=None):
    """``array`` (a kernel output) as a jax array on the default device, through the caller's
    ``jax.numpy`` (loaded, since the caller passed a jax array); NumPy if it is somehow not."""
    jnp = sys.modules.get("jax.numpy")
    return np.asarray(array) if jnp is None else jnp.asarray(array)


def after_write(array: np.ndarray, x) -> None:
    """Called after the kernel wrote the argument ``x``. Decision: an error: a jax array is
    immutable (on a device a jax-mode kernel hands its outputs back only by returning them), so
    the write could never reach the caller; silently dropping it would hide the bug.
    Raises: UnsupportedError."""
    raise UnsupportedError("nki.jit", f"the kernel wrote a jax array argument (shape {list(np.shape(array))}, "
                                      f"{np.asarray(array).dtype}); jax arrays are immutable, so the write "
                                      f"cannot reach the caller: return the output from the kernel "
                                      f"(nl.ndarray(..., buffer=nl.shared_hbm)) or pass a NumPy array")


__all__ = ["to_numpy", "from_numpy", "after_write"]
