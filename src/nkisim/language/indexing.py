"""Beta-1 index expressions and masks: ``nl.arange``, ``nl.mgrid``, affine expressions built from
them (``i_p * 2 + k``, ``[:, None]`` broadcasting) as tile indices, ``nl.par_dim`` block dimensions,
and ``mask=`` predicates (``masked(mask)``: the instructions issued inside neither read nor write
the masked-off elements).

The expressions and their views live in ``memory.affine``, masks in ``memory.masks``; a mask is applied by
the dispatcher (``isa.dispatch._masked_args``) to every instruction issued under ``masked``.
Source: aws-neuron-sdk 2.26 ``general/nki/api/nki.language.rst`` (arange, mgrid, par_dim) and the
programming guide's "Tensor Indexing" and nki.api.shared.rst "NKI API Masking" sections.
"""
from __future__ import annotations

import contextlib

from .. import state
from ..memory.affine import Grid, IndexExpr, ParDim, arange, mgrid, par_dim
from ..memory.masks import Predicate, as_box

__all__ = ["arange", "mgrid", "par_dim", "masked", "IndexExpr", "Predicate", "Grid", "ParDim"]


@contextlib.contextmanager
def masked(mask):
    """Run the instructions issued inside under ``mask``: each sees only the operand positions the
    mask keeps (see ``isa.dispatch._masked_args``); masked-off elements are neither read nor
    written, and may lie outside their tensor (``nl.load(a[k * 128 + i_p, i_f], mask=(k * 128 +
    i_p < n))`` for a last partial tile).

    ``mask``: None or True (no mask); False (no instruction is issued); a ``Predicate`` --
    comparisons of index expressions with ints or each other, each restricting one grid axis to
    one range, combined with ``&`` (UnsupportedError otherwise: ``|``, a comparison varying along
    two axes, a comparison keeping two ranges such as ``i != 3``). Decision: masks nest as the
    intersection of their ranges. Assignments ``t[...] = v`` are not instructions and take no mask.
    """
    box = as_box(mask)
    core = state.current.get() if box is not None else None
    if core is None:                    # no mask, or outside a kernel (the instructions raise)
        yield
        return
    prev = core.mask
    core.mask = box if prev is None else prev.intersect(box)
    try:
        yield
    finally:
        core.mask = prev
