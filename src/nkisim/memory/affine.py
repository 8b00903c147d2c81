"""Beta-1 index expressions (``nl.arange``, ``nl.mgrid`` and affine arithmetic over them), the
strided views they index, and mask predicates reduced to one index range per axis.

An expression is an integer array of affine form over a grid: the value at grid position
``g = (g_0, g_1, ...)`` is ``const + sum(coefs[a] * g[a])``; ``[:, None]`` / ``[None, :]`` place
it on grid axes and expressions broadcast like NumPy arrays (right-aligned), so every form
(``i_p * 2 + k``, ``i_f + j * 512`` with ``j`` another ``arange``, ``k * 128 + i_p``) means what
the same NumPy integer arrays mean as advanced indices. Indexing a tensor with them gives a
strided view (no copy). Comparisons build ``masks.Predicate``s. Imports numpy, errors and
memory.masks; ``tensor`` imports this module.
Source: aws-neuron-sdk 2.26 general/nki/api/nki/language/__init__.py (arange, mgrid, par_dim),
programming_model.rst ("Tensor Indexing"), nki.api.shared.rst ("NKI API Masking").
"""
from __future__ import annotations

import math
import operator

import numpy as np

from ..errors import BoundsError, ShapeError, UnsupportedError


def _int(value, what):
    if isinstance(value, (bool, np.bool_)):
        raise ShapeError(what, f"expected an integer, got bool {value!r}")
    try:
        return operator.index(value)
    except TypeError:
        raise UnsupportedError(what, f"expected an integer or an index expression, got "
                                     f"{type(value).__name__} {value!r} (only affine integer expressions "
                                     f"of nl.arange / nl.mgrid are index expressions)") from None


def dynamic_scalar(value, what: str) -> int | None:
    """The runtime value of a one-element integer SBUF tile used in a Beta-1 index
    (``src[i_p, offsets[0, k] + i_f]``, ``src[i_p, offsets[0, k], i_z]``: the "dynamic offset
    ... a scalar value resided in SBUF" of ``nisa.tensor_copy_dynamic_src`` / ``_dst``); None
    for anything that is not a tensor.
    Decision: the simulation is eager, so the offset is read when the index is built (the
    value the tile holds then; the instruction that uses the view follows at once); an offset
    reaching outside the dim makes the view out of bounds, and the instruction raises
    BoundsError, as for any index expression. Raises UnsupportedError for a tensor that is not a
    one-element integer SBUF tile."""
    from .tensor import NkiTensor
    if not isinstance(value, NkiTensor):
        return None
    from .. import dtypes as _dt
    from .buffers import sbuf
    if value.size != 1 or value.buffer is not sbuf or not _dt.name(value.dtype).startswith(("int", "uint")):
        raise UnsupportedError(what, f"a tensor in an index must be a one-element integer SBUF tile (a "
                                     f"dynamic offset), got {value.shape} {_dt.name(value.dtype)} in "
                                     f"{value.buffer}")
    return int(np.asarray(value.np()).reshape(-1)[0])


def _broadcast(a: tuple, b: tuple, what: str) -> tuple:
    n = max(len(a), len(b))
    a = (1,) * (n - len(a)) + a
    b = (1,) * (n - len(b)) + b
    out = []
    for x, y in zip(a, b):
        if x != y and x != 1 and y != 1:
            raise ShapeError(what, f"index expressions of shapes {a} and {b} do not broadcast")
        out.append(max(x, y))
    return tuple(out)


def _align(coefs: tuple, shape: tuple) -> tuple:
    return (0,) * (len(shape) - len(coefs)) + coefs


class IndexExpr:
    """An affine integer index expression over a grid of ``shape``: the value at position ``g`` is
    ``const + sum(coefs[a] * g[a])`` (``coefs[a]`` is 0 where ``shape[a]`` is 1).

    Supports ``+``/``-`` with ints and expressions, ``*`` by an int, unary ``-``, ``[:, None]``
    style axis placement and slicing, comparisons (building a ``Predicate`` for ``mask=``) and
    ``np.asarray(expr)`` (its values). Anything not affine (``i * j``, ``//``, ``%``) raises
    UnsupportedError. Hashing is by identity (``==`` builds a predicate); ``key`` is the value key.
    """
    __slots__ = ("shape", "const", "coefs", "key")
    __array_ufunc__ = None          # NumPy scalars defer to our reflected operators
    __hash__ = object.__hash__

    def __init__(self, shape: tuple, const: int, coefs: tuple):
        coefs = tuple(0 if n == 1 else c for n, c in zip(shape, coefs))
        self.shape, self.const, self.coefs = shape, const, coefs
        self.key = ("expr", shape, const, coefs)

    # ---- shape -----------------------------------------------------------------------------
    @property
    def ndim(self) -> int:
        return len(self.shape)

    def __repr__(self):
        terms = [f"{c}*g{a}" for a, c in enumerate(self.coefs) if c]
        return f"IndexExpr({' + '.join([str(self.const)] + terms)}, shape={self.shape})"

    def __array__(self, dtype=None, copy=None):
        """The expression's values as an int64 array of its shape (a NumPy reference)."""
        out = np.full(self.shape, self.const, np.int64)
        for a, (n, c) in enumerate(zip(self.shape, self.coefs)):
            if c:
                shp = [1] * len(self.shape)
                shp[a] = n
                out = out + c * np.arange(n, dtype=np.int64).reshape(shp)
        return out if dtype is None else out.astype(dtype)

    def bounds(self) -> tuple[int, int]:
        """(smallest, largest) value over the grid."""
        lo = hi = self.const
        for n, c in zip(self.shape, self.coefs):
            if c > 0:
                hi += c * (n - 1)
            else:
                lo += c * (n - 1)
        return lo, hi

    def __getitem__(self, key):
        """``e[:, None]``, ``e[None, :]``, ``e[2:10]``: ``None`` inserts a size-1 axis, a slice
        (step >= 1, within the extent) selects positions of an axis; missing trailing axes are whole."""
        op = "nl.arange indexing"
        if type(key) is not tuple:
            key = (key,)
        if sum(1 for k in key if k is not None) > len(self.shape):
            raise BoundsError(op, f"{len(key)} indices for an index expression of shape {self.shape}")
        shape, coefs, const, a = [], [], self.const, 0
        for k in key + (slice(None),) * (len(self.shape) - sum(1 for k in key if k is not None)):
            if k is None:
                shape.append(1)
                coefs.append(0)
                continue
            n, c = self.shape[a], self.coefs[a]
            a += 1
            if type(k) is not slice:
                raise UnsupportedError(op, f"an index expression takes only None and slices, got {k!r}")
            start, stop, step = k.indices(n) if k.step is None or k.step > 0 else (0, 0, 0)
            if step < 1 or (k.start is not None and not -n <= k.start <= n) or \
                    (k.stop is not None and not -n <= k.stop <= n):
                raise BoundsError(op, f"slice {k.start}:{k.stop}:{k.step} is outside the extent {n} "
                                      f"(step must be >= 1)")
            m = len(range(start, stop, step))
            if m < 1:
                raise BoundsError(op, f"slice {k.start}:{k.stop}:{k.step} of extent {n} is empty")
            const += c * start
            shape.append(m)
            coefs.append(c * step)
        return IndexExpr(tuple(shape), const, tuple(coefs))

    # ---- affine arithmetic -----------------------------------------------------------------
    def _combine(self, other, sign: int, what: str) -> "IndexExpr":
        if type(other) is IndexExpr:
            shape = _broadcast(self.shape, other.shape, what)
            a, b = _align(self.coefs, shape), _align(other.coefs, shape)
            a = tuple(0 if n == 1 else c for n, c in zip(_align_shape(self.shape, shape), a))
            b = tuple(0 if n == 1 else c for n, c in zip(_align_shape(other.shape, shape), b))
            return IndexExpr(shape, self.const + sign * other.const,
                             tuple(x + sign * y for x, y in zip(a, b)))
        if isinstance(other, _masks.Predicate):
            return NotImplemented
        dyn = dynamic_scalar(other, what)
        return IndexExpr(self.shape, self.const + sign * (_int(other, what) if dyn is None else dyn), self.coefs)

    def __add__(self, other):
        return self._combine(other, 1, "index expression +")

    __radd__ = __add__

    def __sub__(self, other):
        return self._combine(other, -1, "index expression -")

    def __rsub__(self, other):
        return (-self)._combine(other, 1, "index expression -")

    def __neg__(self):
        return IndexExpr(self.shape, -self.const, tuple(-c for c in self.coefs))

    def __pos__(self):
        return self

    def __mul__(self, other):
        if type(other) is IndexExpr:
            raise UnsupportedError("index expression *", "the product of two index expressions is not "
                                   "affine; multiply an index expression by an integer only")
        k = _int(other, "index expression *")
        return IndexExpr(self.shape, self.const * k, tuple(c * k for c in self.coefs))

    __rmul__ = __mul__

    def _not_affine(self, *_):
        raise UnsupportedError("index expression", "only +, - and * by an integer keep an index "
                                                   "expression affine (no /, //, %, ** or bit operations)")

    __truediv__ = __rtruediv__ = __floordiv__ = __rfloordiv__ = __mod__ = __rmod__ = _not_affine
    __pow__ = __rpow__ = __lshift__ = __rshift__ = __and__ = __rand__ = __or__ = __ror__ = _not_affine

    # ---- comparisons: mask predicates -----------------------------------------------------
    def _cmp(self, other, op: str):
        if isinstance(other, _masks.Predicate):
            return NotImplemented
        diff = self - other if type(other) is IndexExpr else self._combine(other, -1, f"index expression {op}")
        return _masks.Predicate(((diff, op),))

    def __lt__(self, other): return self._cmp(other, "<")
    def __le__(self, other): return self._cmp(other, "<=")
    def __gt__(self, other): return self._cmp(other, ">")
    def __ge__(self, other): return self._cmp(other, ">=")
    def __eq__(self, other): return self._cmp(other, "==")
    def __ne__(self, other): return self._cmp(other, "!=")


def _align_shape(shape: tuple, full: tuple) -> tuple:
    return (1,) * (len(full) - len(shape)) + shape


# ---- nl.arange / nl.mgrid / nl.par_dim ----------------------------------------------------------

def arange(*args) -> IndexExpr:
    """``arange(stop)`` / ``arange(start, stop)``: the 1-D index expression ``start, ..., stop - 1``
    (``arange(start, stop, step)`` too, step >= 1). Raises ShapeError for an empty range."""
    op = "nl.arange"
    if not 1 <= len(args) <= 3:
        raise TypeError(f"nl.arange takes 1 to 3 integer arguments, got {len(args)}")
    vals = [_int(a, op) for a in args]
    start, stop, step = (0, vals[0], 1) if len(vals) == 1 else (vals[0], vals[1], vals[2] if len(vals) == 3 else 1)
    if step < 1:
        raise ShapeError(op, f"step {step} must be >= 1")
    n = len(range(start, stop, step))
    if n < 1:
        raise ShapeError(op, f"arange({', '.join(map(str, vals))}) is empty")
    return IndexExpr((n,), start, (step,))


class Grid(tuple):
    """What ``mgrid[...]`` returns: a tuple of one dense index expression per axis (unpack it, or
    index a tensor with it whole), also as attributes ``.p`` (axis 0), ``.x``, ``.y``, ``.z``
    (axes 1, 2, 3). Decision: the attribute names follow the SDK's examples (``grid.p``,
    ``grid.x``, ``a_mgrid.y`` for a 3-D grid); the docs do not define them."""
    __slots__ = ()

    def _axis(self, a: int, name: str):
        if a >= len(self):
            raise AttributeError(f"a {len(self)}-D mgrid has no axis {name!r} (axis {a})")
        return self[a]

    p = property(lambda self: self._axis(0, "p"))
    x = property(lambda self: self._axis(1, "x"))
    y = property(lambda self: self._axis(2, "y"))
    z = property(lambda self: self._axis(3, "z"))


class _MGrid:
    """``nl.mgrid[0:P, 0:F]``: like ``numpy.mgrid``, one index expression per axis, each of the
    full grid's shape (dense). Slices need integer bounds, step >= 1."""

    def __getitem__(self, key) -> Grid:
        op = "nl.mgrid"
        if type(key) is not tuple:
            key = (key,)
        ranges = []
        for k in key:
            if type(k) is not slice or k.stop is None:
                raise UnsupportedError(op, f"mgrid takes slices start:stop[:step], got {k!r}")
            start = 0 if k.start is None else _int(k.start, op)
            stop, step = _int(k.stop, op), 1 if k.step is None else _int(k.step, op)
            if step < 1:
                raise ShapeError(op, f"step {step} must be >= 1")
            n = len(range(start, stop, step))
            if n < 1:
                raise ShapeError(op, f"mgrid axis {start}:{stop}:{step} is empty")
            ranges.append((start, step, n))
        shape = tuple(n for _, _, n in ranges)
        return Grid(IndexExpr(shape, start, tuple(step if b == a else 0 for b in range(len(shape))))
                    for a, (start, step, _) in enumerate(ranges))

    def __repr__(self):
        return "nl.mgrid"


mgrid = _MGrid()


class ParDim(int):
    """``nl.par_dim(P)``: the size ``P`` marked as the partition dimension of a shape (an int).
    Dims before it in an SBUF/PSUM shape are block dimensions (``language.creation.ndarray``)."""
    __slots__ = ()

    def __repr__(self):
        return f"par_dim({int(self)})"


def par_dim(size) -> ParDim:
    """Mark ``size`` as the partition dimension of a shape ("Mark a dimension explicitly as a
    partition dimension", nki.language.par_dim)."""
    return ParDim(_int(size, "nl.par_dim"))


# ---- views --------------------------------------------------------------------------------------

class OutOfBounds(str):
    """The bounds error text of an index-expression view reaching outside its tensor, with the
    affine form of each tensor dim over the view's axes (``forms``: (extent, const, coefs)) so a
    mask that keeps only in-bounds positions makes a sub-view that is in bounds."""
    __slots__ = ("forms", "label")


def _check_forms(forms, shape, label):
    """The OutOfBounds of a view whose dims have these affine forms, or None when in bounds."""
    for d, (n, c, coefs) in enumerate(forms):
        lo = hi = c
        for m, k in zip(shape, coefs):
            if k > 0:
                hi += k * (m - 1)
            else:
                lo += k * (m - 1)
        if lo < 0 or hi >= n:
            bad = lo if lo < 0 else hi
            oob = OutOfBounds(f"index expression on dim {d} of {label} reaches {bad}, outside 0:{n}")
            oob.forms, oob.label = forms, label
            return oob
    return None


def index_view(t, key: tuple, op: str):
    """``t[key]`` where ``key`` holds index expressions: ints and expressions first (broadcast
    together, like NumPy advanced indices), then optional slices (basic, trailing dims).

    The view's dims are the broadcast grid's axes, then the sliced and unindexed trailing dims;
    grid axis ``a`` strides by ``sum(strides[d] * coef of a in dim d's expression)``, so any affine
    form is a strided view (two expressions on one axis, one expression on two dims, negative
    coefficients). Bounds: ints (negative ones count from the end, as in basic indexing) and
    slices are checked at once; expression values never wrap: an expression reaching outside
    its dim makes a view marked out of bounds (``oob``): any instruction using it raises
    BoundsError unless a mask keeps only in-bounds positions (``restrict``).
    On SBUF/PSUM the first grid axis is the partition axis: dim 0's expression must be ``c + g_0``
    (step 1) or a constant (a size-1 partition axis), and no free dim may vary with it
    (UnsupportedError: no partition striding; "flexible indexing is not supported along the
    partition dimension", programming_model.rst).
    Decision: a slice before an expression (``t[:, i_f]``) raises UnsupportedError ("NKI does not
    support mixing Basic and Advanced Tensor Indexing", programming_model.rst); trailing slices
    (``t[i_p, :]``) are NumPy's trailing basic dims.
    """
    from .tensor import NkiTensor
    ndim = len(t.shape)
    flat = []
    for k in key:
        if type(k) is Grid:
            flat.extend(k)
        elif k is Ellipsis:
            raise UnsupportedError(op, "... together with index expressions is not supported; index every dim")
        else:
            flat.append(k)
    if len(flat) > ndim:
        raise BoundsError(op, f"{len(flat)} indices for {t._label()} with {ndim} dims")
    if flat and isinstance(flat[0], NkiTensor):
        return _gather_view(t, flat, op)
    lead = 0
    while lead < len(flat) and type(flat[lead]) is int:
        lead += 1
    if 0 < lead < len(flat) and isinstance(flat[lead], NkiTensor) and not t.on_chip:
        # t[b, idx_tile, ...]: the gather within the sub-tensor t[b] (ints drop their dims on HBM)
        return _gather_view(t[tuple(flat[:lead])], flat[lead:], op)
    adv = 0
    while adv < len(flat) and type(flat[adv]) is not slice:
        adv += 1
    for k in flat[adv:]:
        if type(k) is not slice:
            raise UnsupportedError(op, f"index {k!r} after a slice in {t._label()}[...]: mixing slices and "
                                       f"index expressions is supported only with the slices last")
    exprs = []
    for d in range(adv):
        k, n = flat[d], t.shape[d]
        if type(k) is IndexExpr:
            exprs.append(k)
            continue
        if type(k) is not int:
            dyn = dynamic_scalar(k, op) if d > 0 and isinstance(k, NkiTensor) else None
            if dyn is not None:
                k = dyn
            elif hasattr(k, "shape") and not isinstance(k, np.integer):
                raise UnsupportedError(op, "indexing with a tensor or array is not supported; use "
                                           ".ap(scalar_offset=..) / .ap(vector_offset=..) or .select()")
            else:
                k = _int(k, op)
        if -n <= k < 0:
            k += n
        if not 0 <= k < n:
            raise BoundsError(op, f"index {k} on dim {d} of {t._label()} is outside 0:{n}")
        exprs.append(IndexExpr((), k, ()))
    grid = ()
    for e in exprs:
        grid = _broadcast(grid, e.shape, op)
    coefs = [tuple(0 if m == 1 else c for m, c in zip(_align_shape(e.shape, grid), _align(e.coefs, grid)))
             for e in exprs]
    on_chip = t.on_chip
    pre = 0
    if on_chip:
        c0 = coefs[0]
        varying = [a for a, c in enumerate(c0) if c]
        if varying:
            if varying != [0] or c0[0] != 1:
                raise UnsupportedError(op, f"the partition index of {t._label()} must be c + an index of the "
                                           f"first grid axis with step 1 ({exprs[0]!r}); on-chip tensors "
                                           f"have no partition striding")
            if any(cd[0] for cd in coefs[1:]) and grid[0] > 1:
                raise UnsupportedError(op, f"a free index of {t._label()} varies with the partition index; "
                                           f"every partition must use the same free access pattern")
        elif not (len(grid) >= 2 and grid[0] == 1):
            pre = 1                       # a constant partition index: a size-1 partition axis
    strides = t.strides
    offset = t.offset + sum(s * e.const for s, e in zip(strides, exprs))
    shape = [1] * pre + list(grid)
    vstrides = [strides[0]] * pre + [sum(s * c[a] for s, c in zip(strides, coefs)) for a in range(len(grid))]
    forms = [(t.shape[d], e.const, (0,) * pre + coefs[d]) for d, e in enumerate(exprs)]
    for d in range(adv, ndim):                # trailing slices and unindexed dims
        n, s = t.shape[d], strides[d]
        k = flat[d] if d < len(flat) else slice(None)
        start, stop, step = k.start, k.stop, k.step
        start = 0 if start is None else _int(start, op)
        stop = n if stop is None else _int(stop, op)
        step = 1 if step is None else _int(step, op)
        if -n <= start < 0:
            start += n
        if -n <= stop < 0:
            stop += n
        if step < 1 or start < 0 or stop > n or start > stop:
            raise BoundsError(op, f"slice {start}:{stop}:{step} on dim {d} of {t._label()} is outside 0:{n}")
        offset += start * s
        shape.append(len(range(start, stop, step)))
        vstrides.append(s * step)
    extra = len(shape) - len(forms[0][2]) if forms else 0
    forms = tuple((n, c, cf + (0,) * extra) for n, c, cf in forms)
    oob = _check_forms(forms, shape, t._label())
    v = NkiTensor(t.alloc, shape, vstrides, offset, t.dtype, t.storage)
    if t.dynamic:
        v.dynamic, v.oob = True, t.oob
    elif oob is not None:
        v.oob = oob
    elif t.oob is not None:
        v.oob = t.oob
    return v


def in_beta1_program() -> bool:
    """True while a Beta-1 (``neuronxcc.nki``) kernel runs on this thread."""
    from .. import state
    core = state.maybe_core()
    return core is not None and core.extras.get("beta1_program") is not None


def slices_as_exprs(key: tuple, shape: tuple) -> tuple:
    """A basic key of ints and slices (start, stop given or implied) as index expressions: slice
    ``j`` becomes ``start + step * g_j`` on grid axis ``j`` of its own, ints stay ints, so
    ``index_view`` builds the same view as basic indexing, but one reaching past a dim's end is
    an out-of-bounds view (checked where used, a mask may keep only in-bounds rows).

    Decision: in a Beta-1 kernel a slice past the end of an HBM tensor's dim
    (``t[256:384]`` of 288 rows) is such a view, not an immediate BoundsError: Beta 1 treats a
    slice as ``nl.arange`` indices, and its masks (``mask=(i_p < n)``) exist to cut partial tiles
    (nki-samples' adaptive_avg_pool2d slices whole 128-row tiles of a 288-row tensor)."""
    slices = [k for k in key if type(k) is slice]
    out, j = [], 0
    for d, k in enumerate(key):
        if type(k) is not slice:
            out.append(k)
            continue
        start = 0 if k.start is None else _int(k.start, "tensor indexing")
        stop = shape[d] if k.stop is None else _int(k.stop, "tensor indexing")
        step = 1 if k.step is None else _int(k.step, "tensor indexing")
        m = len(range(start, stop, step))
        grid = tuple(m if a == j else 1 for a in range(len(slices)))
        out.append(IndexExpr(grid, start, tuple(step if a == j else 0 for a in range(len(slices)))))
        j += 1
    return tuple(out)


def _gather_view(t, flat: list, op: str):
    """``t[idx_tile, <rest>]``: row ``w`` of the view is row ``idx_tile[w, 0]`` of the HBM tensor
    ``t``, the rest of the key indexing within the rows (a DMA gather / scatter view,
    ``memory.indirect``; "data_tensor[idx_tile[i_p, 0], i_f]", nl.load / nl.store indirect
    examples). ``<rest>`` may not vary along the index tile's axis (the first grid axis).
    Raises: MemorySpaceError, ShapeError, DtypeError (``indirect.make``), UnsupportedError."""
    from . import indirect
    idx = flat[0]
    rest = tuple(flat[1:])
    if any(type(k) is IndexExpr for k in rest):
        sub = index_view(t, (0,) + rest, op)
        if sub.shape[0] != 1 and sub.strides[0] != 0:
            raise UnsupportedError(op, f"the indices after the index tile of {t._label()}[...] vary along its "
                                       f"first axis (the gathered rows)")
        counts, steps = sub.shape[1:], sub.strides[1:]
    elif t.ndim == 1:
        sub, counts, steps = t, (), ()
    else:
        sub = t[(0,) + rest]
        counts, steps = sub.shape, sub.strides
    if sub.oob is not None:
        raise BoundsError(op, str(sub.oob))
    rows = idx.shape[0] if idx.shape else 1
    row_step = math.prod(t.shape[1:])
    return indirect.make(t, (rows,) + tuple(counts), (row_step,) + tuple(steps), sub.offset, idx, 0, op)


def restrict(t, ranges: tuple):
    """The sub-view of ``t`` keeping positions ``ranges[d] = (lo, hi)`` of each dim (None: whole
    dim): a masked instruction's operand. A view out of bounds by an index expression is in
    bounds again when the kept positions are (``OutOfBounds.forms``)."""
    views = t._views
    key = ("restrict", ranges)
    if views is not None:
        hit = views.get(key)
        if hit is not None:
            return hit
    v = _restrict(t, ranges)
    if views is None:
        views = t._views = {}
    elif len(views) >= 256:
        views.clear()
    views[key] = v              # a view is immutable: the same ranges give the same sub-view
    return v


def _restrict(t, ranges: tuple):
    from .tensor import NkiTensor
    offset, shape = t.offset, list(t.shape)
    for d, r in enumerate(ranges):
        if r is not None:
            offset += r[0] * t.strides[d]
            shape[d] = r[1] - r[0]
    v = NkiTensor(t.alloc, shape, t.strides, offset, t.dtype, t.storage)
    oob = t.oob
    if t.dynamic:
        v.dynamic, v.oob = True, oob
    elif type(oob) is OutOfBounds:
        lows = [0 if r is None else r[0] for r in ranges] + [0] * (len(shape) - len(ranges))
        forms = tuple((n, c + sum(k * lo for k, lo in zip(cf, lows)), cf) for n, c, cf in oob.forms)
        v.oob = _check_forms(forms, shape, oob.label)
    elif oob is not None:
        v.oob = t._outside(shape, t.strides, offset)
    return v


__all__ = ["IndexExpr", "Grid", "ParDim", "OutOfBounds", "arange", "mgrid", "par_dim", "index_view", "restrict"]

from . import masks as _masks  # noqa: E402  (masks builds on IndexExpr; comparisons build masks)
