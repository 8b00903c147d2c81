"""Beta-1 masks: ``Predicate`` (comparisons of index expressions combined with ``&``, ``|``, ``~``) and
``Box``, a predicate reduced to one index range per grid axis (plus, for predicates that are not
ranges, their truth values in the bounding box); ``axis_ranges`` aligns a box with an operand.
The dispatcher applies them (``isa.dispatch._masked_args``). Imports numpy, errors, memory.affine.
Source: aws-neuron-sdk 2.26 general/nki/api/nki.api.shared.rst ("NKI API Masking").
"""
from __future__ import annotations

import numpy as np

from ..errors import UnsupportedError
from .affine import IndexExpr, _align, _broadcast

_NEGATE = {"<": ">=", "<=": ">", ">": "<=", ">=": "<", "==": "!=", "!=": "=="}
_TEST = {"<": np.less, "<=": np.less_equal, ">": np.greater, ">=": np.greater_equal,
         "==": np.equal, "!=": np.not_equal}


_MAX_CLAUSES = 256      # a negated or combined predicate's disjunctive form grows past this: refused
_FALSE = (IndexExpr((), 0, ()), "!=")            # the constant comparison 0 != 0


class Predicate:
    """A ``mask=``: comparisons ``expr <op> 0`` (built by comparing index expressions with ints or
    each other) combined with ``&``, ``|`` and ``~``, held in disjunctive form: ``clauses`` is a
    tuple of conjunctions (each a tuple of ``(expr, op)`` terms); the documented masks, comparisons
    joined by ``&``, are one clause (``terms``).

    Decision: Python's ``and`` cannot be overloaded: ``(a < n and b < m)`` is ``b < m`` (a
    predicate is truthy), as under the Beta-1 tracer; combine with ``&``. Decision (``|`` and
    ``~`` of a compound predicate, which the docs do not mention: they define masks as
    comparisons joined by ``&``): accepted as element-wise predicates, like a comparison of two
    axes (``i_f < i_p``): the instruction runs on the predicate's bounding box and writes only
    the elements it keeps (see ``isa.dispatch._masked_args``); a union that is one range per axis
    (``(i < 4) | (i < 8)``) is that range. ``~`` applies De Morgan's laws; a form of more than
    256 conjunctions raises UnsupportedError."""
    __slots__ = ("clauses", "_box")

    def __init__(self, terms: tuple = (), clauses: tuple | None = None):
        self.clauses = (tuple(terms),) if clauses is None else clauses
        if len(self.clauses) > _MAX_CLAUSES:
            raise UnsupportedError("mask", f"the predicate's disjunctive form has {len(self.clauses)} "
                                           f"conjunctions, more than {_MAX_CLAUSES}; simplify the mask")
        self._box = None

    @property
    def terms(self) -> tuple:
        """The comparisons of a one-clause predicate (a conjunction)."""
        if len(self.clauses) != 1:
            raise UnsupportedError("mask", "a predicate combined with | is not one conjunction")
        return self.clauses[0]

    def __and__(self, other):
        if isinstance(other, (bool, np.bool_)):
            return self if other else Predicate(clauses=tuple(c + (_FALSE,) for c in self.clauses))
        if not isinstance(other, Predicate):
            return NotImplemented
        return Predicate(clauses=tuple(a + b for a in self.clauses for b in other.clauses))

    __rand__ = __and__

    def __or__(self, other):
        if isinstance(other, (bool, np.bool_)):
            return Predicate(clauses=((),)) if other else self
        if not isinstance(other, Predicate):
            return NotImplemented
        return Predicate(clauses=self.clauses + other.clauses)

    __ror__ = __or__

    def __invert__(self):
        out = None
        for clause in self.clauses:       # ~(c1 | c2) = ~c1 & ~c2; ~(t1 & t2) = ~t1 | ~t2
            neg = Predicate(clauses=tuple(((e, _NEGATE[op]),) for e, op in clause) or ((_FALSE,),))
            out = neg if out is None else out & neg
        return out

    def __bool__(self):
        return True

    def __repr__(self):
        return "Predicate(" + " | ".join(" & ".join(f"({e!r} {op} 0)" for e, op in c) or "True"
                                         for c in self.clauses) + ")"

    def _shape(self) -> tuple:
        shape = ()
        for c in self.clauses:
            for e, _ in c:
                shape = _broadcast(shape, e.shape, "mask")
        return shape

    def __array__(self, dtype=None, copy=None):
        """The predicate's truth values on its grid (a NumPy reference)."""
        shape = self._shape()
        out = np.zeros(shape, np.bool_)
        for c in self.clauses:
            part = np.ones(shape, np.bool_)
            for e, op in c:
                np.logical_and(part, _TEST[op](np.asarray(e), 0), out=part)
            np.logical_or(out, part, out=out)
        return out if dtype is None else out.astype(dtype)

    def box(self) -> "Box":
        """The mask as one index range per grid axis (computed once)."""
        b = self._box
        if b is None:
            b = self._box = _box(self.terms) if len(self.clauses) == 1 else _general_box(self, self._shape())
        return b


class Box:
    """A mask reduced to ranges: ``shape`` (the grid of its expressions), ``ranges`` (per axis
    ``(lo, hi)`` of valid positions, or None for the whole axis), ``empty`` (no valid element),
    ``keep`` (a predicate that is not a range of each axis, e.g. ``i_f < i_p``: its truth values
    inside the ranges, which are then its bounding box; else None)."""
    __slots__ = ("shape", "ranges", "empty", "keep")

    def __init__(self, shape, ranges, empty, keep=None):
        self.shape, self.ranges, self.empty, self.keep = shape, ranges, empty, keep

    def __repr__(self):
        return f"Box(shape={self.shape}, ranges={self.ranges}, empty={self.empty})"

    def intersect(self, other: "Box") -> "Box":
        if self.keep is not None or other.keep is not None:
            raise UnsupportedError("nested mask", "a mask that is not a range of each axis cannot be nested "
                                                  "in another; combine them with & in one mask")
        shape = _broadcast(self.shape, other.shape, "nested mask")
        a = (None,) * (len(shape) - len(self.ranges)) + self.ranges
        b = (None,) * (len(shape) - len(other.ranges)) + other.ranges
        ranges, empty = [], self.empty or other.empty
        for x, y in zip(a, b):
            if x is None or y is None:
                ranges.append(x if y is None else y)
            else:
                r = (max(x[0], y[0]), min(x[1], y[1]))
                empty = empty or r[0] >= r[1]
                ranges.append(r)
        return Box(shape, tuple(ranges), empty)


def _below(c: int, k: int, n: int) -> tuple[int, int]:
    """The positions ``g`` in ``0 .. n-1`` with ``c + k * g < 0`` (``k != 0``): one range."""
    if k > 0:                       # g < -c / k
        return 0, max(0, min(n, -(c // k)))
    return max(0, min(n, c // -k + 1)), n     # g > c / |k|


def _solve(c: int, k: int, cmp: str, n: int):
    """The range ``(lo, hi)`` of positions ``g`` in ``0 .. n-1`` where ``c + k * g <cmp> 0``
    (integers; an empty range has lo >= hi), or None when they are not one range (``!=``)."""
    if cmp == "<":
        return _below(c, k, n)
    if cmp == "<=":
        return _below(c - 1, k, n)
    if cmp == ">":
        return _below(-c, -k, n)
    if cmp == ">=":
        return _below(-c - 1, -k, n)
    a, b = _below(c - 1, k, n), _below(-c - 1, -k, n)
    if cmp == "==":
        return max(a[0], b[0]), min(a[1], b[1])
    lo, hi = max(a[0], b[0]), min(a[1], b[1])      # !=: everything but [lo, hi)
    if lo >= hi:
        return 0, n
    if lo == 0:
        return hi, n
    if hi == n:
        return 0, lo
    return None


def _box(terms) -> Box:
    op = "mask"
    shape = ()
    for e, _ in terms:
        shape = _broadcast(shape, e.shape, op)
    ranges = [None] * len(shape)
    empty = False
    for e, cmp in terms:
        coefs = _align(e.coefs, shape)
        axes = [a for a, c in enumerate(coefs) if c]
        if not axes:                        # no index varies: the comparison is a constant
            if not _TEST[cmp](e.const, 0):
                empty = True
            continue
        if len(axes) > 1:
            return _general_box(Predicate(terms), shape)
        a = axes[0]
        r = _solve(e.const, coefs[a], cmp, shape[a])
        if r is None:
            return _general_box(Predicate(terms), shape)
        lo, hi = r
        if lo >= hi:
            empty = True
            continue
        old = ranges[a]
        if old is not None:
            lo, hi = max(lo, old[0]), min(hi, old[1])
            if lo >= hi:
                empty = True
        ranges[a] = (lo, hi)
    for a, r in enumerate(ranges):       # a range covering the whole axis restricts nothing
        if r is not None and r == (0, shape[a]):
            ranges[a] = None
    return Box(shape, tuple(ranges), empty)


def _general_box(pred: Predicate, shape) -> Box:
    """A predicate that is not a range of each axis: its bounding box, and its truth values in it."""
    full = np.asarray(pred)
    full = np.broadcast_to(full, shape)
    if not full.any():
        return Box(shape, (None,) * len(shape), True)
    ranges = []
    for a in range(len(shape)):
        hit = np.flatnonzero(full.any(axis=tuple(b for b in range(len(shape)) if b != a)))
        lo, hi = int(hit[0]), int(hit[-1]) + 1
        ranges.append(None if (lo, hi) == (0, shape[a]) else (lo, hi))
    keep = full[tuple(slice(*r) if r else slice(None) for r in ranges)]
    return Box(shape, tuple(ranges), False, None if keep.all() else np.ascontiguousarray(keep))


def as_box(mask) -> Box | None:
    """The ``Box`` of a ``mask=`` value: None (no mask) for None or True; an empty box for False;
    a predicate's ranges otherwise. Raises UnsupportedError for anything else."""
    if mask is None or mask is True or (isinstance(mask, np.bool_) and bool(mask)):
        return None
    if mask is False or isinstance(mask, np.bool_):
        return Box((), (), True)
    if isinstance(mask, Predicate):
        return mask.box()
    raise UnsupportedError("mask", f"a mask is a predicate over nl.arange / nl.mgrid index expressions "
                                   f"(e.g. (i_p < n) & (i_f >= 3)), got {type(mask).__name__} {mask!r}")


def axis_ranges(box: Box, shape: tuple, axes: tuple | None) -> tuple | None:
    """The ranges ``restrict`` takes for an operand of ``shape`` under ``box``, or None when the
    mask leaves it whole. Operand dim ``d`` is aligned with one mask axis: ``axes[d]`` when given
    (negative, counted from the last axis); else NumPy's right alignment, except that dim 0 (the
    partition dim of a tile, the rows of an HBM view) is aligned with the mask's first axis when
    the mask has two or more (the other dims right-aligned with the other axes: a (P,) reduction
    result follows the partition range, a (P, F1, F2) operand takes ``i_p < n`` of a 2-D mask). A dim is restricted when the mask restricts its axis and the
    dim has the axis' extent; dims of another extent (size-1 broadcast dims, a reduction's
    output, the other free dim of a matmul) stay whole."""
    m = len(box.ranges)
    nd = len(shape)
    out, any_ = [], False
    for d, n in enumerate(shape):
        if axes is not None and d < len(axes):
            a = axes[d]
        elif m >= 2:
            a = -m if d == 0 else d - nd
            if d > 0 and -a >= m:           # would reach the partition axis: no axis of its own
                out.append(None)
                continue
        else:
            a = d - nd
        if -a > m:
            out.append(None)
            continue
        r = box.ranges[a]
        if r is not None and box.shape[a] == n:
            out.append(r)
            any_ = True
        else:
            out.append(None)
    return tuple(out) if any_ else None


__all__ = ["Predicate", "Box", "as_box", "axis_ranges"]
