"""Beta-1 index expressions and masks: ``nl.arange``, ``nl.mgrid``, affine expressions built from
them (``i_p * 2 + k``, ``[:, None]`` broadcasting) as tile indices, ``nl.par_dim`` block dimensions,
and ``mask=`` predicates (``masked(mask)``: the instructions issued inside neither read nor write
the masked-off elements).

Not simulated yet: every entry point raises ``UnsupportedError`` naming the feature (issue 15).
Source: aws-neuron-sdk 2.26 ``general/nki/api/nki.language.rst`` (arange, mgrid, par_dim) and the
programming guide's "Tile indexing" and "Masking" sections.
"""
from __future__ import annotations

import contextlib

from ..errors import UnsupportedError

__all__ = ["arange", "mgrid", "par_dim", "masked"]


def _unsupported(feature: str):
    raise UnsupportedError(f"{feature} (a Beta 1 index expression) is not simulated yet; "
                           "index with slices or nl.ds(start, size) instead")


def arange(*args, **kwargs):
    """``nl.arange(stop)`` / ``nl.arange(start, stop)``: a 1-D index expression (not yet)."""
    _unsupported("nl.arange")


class _MGrid:
    """``nl.mgrid[0:P, 0:F]``: one index expression per axis, broadcast like ``numpy.mgrid`` (not yet)."""

    def __getitem__(self, key):
        _unsupported("nl.mgrid")


mgrid = _MGrid()


def par_dim(size):
    """``nl.par_dim(P)`` in a shape: marks the partition dimension after block dimensions (not yet)."""
    _unsupported("nl.par_dim")


@contextlib.contextmanager
def masked(mask):
    """Run the instructions issued inside under ``mask`` (a Beta-1 predicate over index
    expressions); ``None`` is no mask. Raises UnsupportedError for any other mask (not yet)."""
    if mask is not None:
        raise UnsupportedError("mask= (a Beta 1 predicate over nl.arange/nl.mgrid indices) is not "
                               "simulated yet")
    yield
