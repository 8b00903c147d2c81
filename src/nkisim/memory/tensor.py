"""NkiTensor: one allocation's storage plus a view (shape, strides, offset, dtype), and its methods.

Every index, slice, ``nl.ds``, view method and ``.ap()`` yields a new view of the same storage;
every one is bounds-checked when built, so NumPy's wrap-around and clipping never leak.
Source: aws-neuron-sdk nki/api/nki/language/__init__.py (NkiTensor and its view methods),
nki/deep-dives access-pattern guide. Imports numpy, dtypes, errors and memory only.
"""
from __future__ import annotations

import math
import operator
import threading
import weakref

import numpy as np

from .. import dtypes as _dt
from .. import state as _state
from ..errors import BoundsError, DtypeError, ShapeError, UnsupportedError
from . import affine as _affine
from . import hooks as _hooks
from .buffers import HBM, ON_CHIP, MemoryRegion, psum, sbuf

_FILL_LOCK = threading.Lock()   # the lazy sentinel fill of an allocation shared by LNC2 cores


class Allocation:
    """One allocation: a flat NumPy array in the storage dtype and where it lives.

    ``written`` is set by the first write; a caller's array used in place (``snapshot`` is not
    None) is copied aside on that first write so a failing kernel can restore it;
    ``mm_flags`` (PSUM only) marks elements whose last write was an ``nc_matmul``; ``blank``
    (PSUM only) marks elements never written (``memory.access.unwritten``).
    """
    __slots__ = ("storage", "buffer", "shape", "dtype", "name", "core_id", "written", "mm_flags",
                 "where", "snapshot", "rec", "init", "watch", "serial", "precise",
                 "pending", "pool", "lazy", "dependents", "_id", "local", "address", "ops", "parts",
                 "mm_view", "blank", "__weakref__")

    def __init__(self, storage, buffer, shape, dtype, name="", core_id=None, where="", precise=True):
        self.storage = storage
        self.buffer = buffer
        self.shape = tuple(shape)
        self.dtype = dtype
        self.name = name
        self.core_id = core_id
        self.written = False
        self.mm_flags = False if buffer is psum else None   # bool (uniform) or a bool array
        self.blank = True if buffer is psum else None       # never written: bool (uniform), a bool array
        #                                                     or the list of views written (access.unwritten)
        self.where = where
        self.snapshot = None   # a caller's array used in place: its values before the first write
        self.rec = None        # SBUF/PSUM: lifetime record for the capacity check (memory.capacity)
        self.init = None       # strict uninitialised reads: bool mask of written elements
        self.watch = None      # race detection: callable(view, kind, matmul) seeing every access
        self.serial = 0        # the core's allocation count when this was made (0: an argument)
        self.precise = precise  # NKI_PRECISE_FP of the launch: round low-precision writes
        self.pending = False    # storage not yet filled with the NaN / 4 sentinel (filled lazily)
        self.pool = None        # a per-core free list the storage returns to when this dies
        self.lazy = None        # deferred copy: a NumPy view (this shape) of the source it copies
        self.dependents = None  # weakrefs to allocations whose deferred copy reads this storage
        self._id = ""           # stable within a launch: arg:<name>, c<core>.<n>, shared<k> (trace);
        #                         None: c<core_id>.<local>, made when first read (``id``)
        self.local = 0          # the core's count of its own allocations when this was made
        self.address = None     # nl.ndarray(address=(partition_offset, free_offset)), if given
        self.ops = None         # recording: event operands of this allocation's views, by view (trace)
        self.parts = None       # fast path: () or the views written while ``pending`` (``wrote_part``)
        self.mm_view = None     # fast path (PSUM): the view last marked in an ``mm_flags`` array, and
        #                         its value (access.set_matmul_flags); None: not kept

    @property
    def id(self) -> str:
        """The allocation's name in traces: ``arg:<name>``, ``c<core>.<n>`` or ``shared<k>``."""
        i = self._id
        if i is None:       # a core-local allocation: named when a trace first asks
            i = self._id = f"c{self.core_id}.{self.local}"
        return i

    @id.setter
    def id(self, value: str) -> None:
        self._id = value

    def __del__(self):
        pool = getattr(self, "pool", None)
        if pool is not None:        # storage a deferred copy never touched is likely out of cache
            pool.give(self.storage, cold=self.lazy is not None)

    def fill(self, view=None) -> None:
        """Fill with the sentinel now (on the first read, or a first write that covers only part),
        unless ``view`` (the view about to be accessed) is one of the views already written
        (``wrote_part``): every element it holds was written, so no sentinel can be seen yet.

        Once only, under a lock: LNC2 cores run as threads and share HBM allocations, so two
        cores may both see ``pending``; without the re-check one would wipe the other's rows.
        A core's own allocation (``core_id`` set) is touched by that core only: no lock.
        """
        if self.core_id is not None:
            if self.pending:
                parts = self.parts
                if parts:
                    if view is not None and view.storage is self.storage and (
                            _among(view, parts) or _inside(view, parts, self.shape)):
                        return
                    kept = [(p[3], p[3].copy()) for p in parts]     # written: keep the values
                    _dt.fill_sentinel(self.storage, self.dtype)
                    for a, values in kept:
                        a[...] = values
                else:
                    _dt.fill_sentinel(self.storage, self.dtype)
                self.pending = False
                self.parts = None
            return
        with _FILL_LOCK:
            if self.pending:
                _dt.fill_sentinel(self.storage, self.dtype)
                self.pending = False

    def materialize(self) -> None:
        """Carry out a deferred copy (``memory.access.copy_deferred``) into this storage."""
        src = self.lazy
        if src is not None:
            self.lazy = None
            self.storage.reshape(src.shape)[...] = src

    def add_dependent(self, alloc) -> None:
        """``alloc`` now reads this storage through a deferred copy (a weak reference: a dead
        tile needs no copy)."""
        deps = self.dependents
        if deps is None:
            deps = self.dependents = []
        elif len(deps) >= 64 and not len(deps) & (len(deps) - 1):   # at 64, 128, ...: drop stale
            live = {id(a): r for r in deps if (a := r()) is not None and a.lazy is not None}
            deps[:] = live.values()
        deps.append(weakref.ref(alloc))

    def release_dependents(self) -> None:
        """Before this storage changes: every allocation still reading it through a deferred
        copy takes its own copy now."""
        deps, self.dependents = self.dependents, None
        for ref in deps:
            alloc = ref()
            if alloc is not None:
                alloc.materialize()

    def wrote_part(self, view) -> None:
        """A write through ``view``, covering only part of the allocation, while the sentinel
        fill is still pending: fill now, or -- fast path, a core's own allocation (``parts`` is
        not None) -- remember the view and fill later, keeping what was written, when a view
        that is not one of those written is accessed (``fill``).

        Decision (speed; no visible effect): a fresh tile written in part and then read only
        through the views written (a matmul into ``psum[0:m, 0:n]`` read back through the same
        view) never pays for filling the rest; any other access sees the sentinel as before."""
        parts = self.parts
        if parts is None or view.oob is not None or view.dynamic or view.storage is not self.storage:
            self.fill()
        elif not _among(view, parts):
            if len(parts) >= _PARTS_MAX:
                self.fill()
            else:       # the geometry and NumPy view, not the NkiTensor (which refers to self)
                self.parts = parts + ((view.offset, view.shape, view.strides, view._array()),)

    def skip_fill(self) -> None:
        """A first write covers everything: no sentinel needed (waits for a fill in progress;
        only allocations without a core, i.e. shared, can be filled by another thread)."""
        if self.core_id is not None:
            self.pending = False
            self.parts = None
            return
        with _FILL_LOCK:
            self.pending = False


_PARTS_MAX = 16          # written views remembered per allocation before the fill is made


def _among(view, parts) -> bool:
    """``view`` (of the allocation's own storage) has the place, shape and strides of one of
    ``parts`` ((offset, shape, strides, array) of the views written, ``wrote_part``)."""
    offset, shape, strides = view.offset, view.shape, view.strides
    for p in parts:
        if p[0] == offset and p[1] == shape and p[2] == strides:
            return True
    return False


def _inside(view, parts, shape) -> bool:
    """Every element of ``view`` lies in one of ``parts`` (``wrote_part``'s written views), both
    boxes of the allocation's row-major layout of ``shape``: the same number of dims, its
    strides, and each dim's start + size within the dim (e.g. ``x[0:n, k0:k1]`` read after
    ``x[0:n, :]`` was written). False when that cannot be told this way (then ``fill`` fills)."""
    strides = view.strides
    offset = view.offset
    if view.dynamic or type(offset) is not int or len(strides) != len(shape) or \
            strides != _contiguous_strides(shape):
        return False
    box = _box(offset, view.shape, strides, shape)
    if box is None:
        return False
    for p in parts:
        if p[2] != strides:
            continue
        pbox = _box(p[0], p[1], strides, shape)
        if pbox is not None and all(ps <= s and s + n <= ps + pn for (s, n), (ps, pn) in zip(box, pbox)):
            return True
    return False


def _box(offset, vshape, strides, shape):
    """((start, size), ...) per dim of a view of row-major ``strides`` over ``shape`` starting at
    element ``offset``, or None when a dim runs past its end (the view is not a box)."""
    out = []
    for st, n, size in zip(strides, vshape, shape):
        start, offset = divmod(offset, st)
        if start + n > size:
            return None
        out.append((start, n))
    return out


def _contiguous_strides(shape):
    strides, acc = [], 1
    for n in reversed(shape):
        strides.append(acc)
        acc *= n
    return tuple(reversed(strides))


_ALL = slice(None)


class DynamicSlice:
    """``nl.ds(start, size)`` with a runtime start (a register or a 1-element integer tile): the
    view it indexes is dynamic, so its bounds are checked by the instruction that uses it (a DMA
    with ``oob_mode=skip`` skips the transfer; see ``NkiTensor._view``)."""
    __slots__ = ("start", "size")

    def __init__(self, start, size):
        self.start, self.size = start, size

    def __repr__(self):
        return f"ds({self.start!r}, {self.size})"


def _index(value, op="index"):
    """An integer index from an int, NumPy integer or anything with ``__index__`` (not a bool)."""
    if isinstance(value, (bool, np.bool_)):
        raise BoundsError(op, f"index must be an integer, got bool {value!r}")
    try:
        return operator.index(value)
    except TypeError:
        raise BoundsError(op, f"index must be an integer, got {type(value).__name__} {value!r}") from None


class NkiTensor:
    """A view of an allocation: element ``i`` lives at ``storage[offset + sum(strides[k] * i[k])]``.

    Shapes: dim 0 of an SBUF/PSUM tensor is the partition dimension; the rest are free dims laid out
    row-major per partition. Strides and offset count elements of the storage dtype.
    """
    __slots__ = ("alloc", "storage", "shape", "strides", "offset", "dtype", "_np", "_whole", "_sig", "oob",
                 "dynamic", "_views", "_geo", "_order")

    def __init__(self, alloc: Allocation, shape, strides, offset, dtype=None, storage=None):
        self.alloc = alloc
        self.storage = alloc.storage if storage is None else storage
        self.shape = tuple(shape)
        self.strides = tuple(strides)
        self.offset = offset
        self.dtype = alloc.dtype if dtype is None else dtype
        self._np = None
        self._whole = None      # covers its allocation's storage exactly (access._whole), if known
        self._sig = None        # static signature for the rule memo (isa.dispatch._key), if built
        self.oob = None         # a dynamic-offset view outside its storage: the BoundsError's text
        self.dynamic = False    # the offset holds a runtime value (dynamic select, .ap(scalar_offset))
        self._views = None      # static index key -> the view ``self[key]`` built before (__getitem__)
        self._geo = None        # the view's Geometry record, when it has one (see Geometry)
        self._order = None      # its allocation's whole row-major view (access._in_order), if known

    # ---- attributes -------------------------------------------------------------------------
    @property
    def buffer(self) -> MemoryRegion:
        return self.alloc.buffer

    @property
    def name(self) -> str:
        return self.alloc.name

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def itemsize(self) -> int:
        return self.dtype.itemsize

    @property
    def on_chip(self) -> bool:
        return self.alloc.buffer in ON_CHIP

    @property
    def partitions(self) -> int:
        """Partition count of an on-chip view (dim 0); 1 for a 0-d view."""
        return self.shape[0] if self.shape else 1

    @property
    def free_size(self) -> int:
        """Elements per partition (product of the free dims)."""
        return math.prod(self.shape[1:])

    def __len__(self):
        return self.shape[0]

    @property
    def address(self):
        """``(partition_offset, free_offset)`` given to ``nl.ndarray(address=...)`` for the
        allocation (free offset in bytes), or None when the allocator places it."""
        return self.alloc.address

    def __repr__(self):
        """``NkiTensor([...values...], shape=..., dtype=..., buffer=..., name=...)``: a NumPy-style
        preview of the current values (summarised past 1000 elements, as NumPy does).

        Reading the values for display is not an instruction read: no uninitialised-read or race
        check runs and the tile's lifetime is not extended; never-written elements show as they
        are stored (the NaN / 4 sentinel). Source: aws-neuron-sdk nki/guides/nki_simulator.rst
        ("you can use print() to inspect any intermediate tensor")."""
        meta = (f"shape={self.shape}, dtype={_dt.name(self.dtype)}, buffer={self.buffer}"
                + (f", name={self.name!r}" if self.name else ""))
        try:
            values = self._peek()
        except Exception as exc:            # never let a debug print break the kernel
            return f"NkiTensor(<{exc}>, {meta})"
        body = np.array2string(values, separator=", ", prefix="NkiTensor(", threshold=1000)
        return f"NkiTensor({body}, {meta})"

    __str__ = __repr__

    def __array__(self, dtype=None, copy=None):
        """``np.asarray(tile)``: a copy of the current values in the tile's dtype (tfloat32 as
        float32); like ``print``, not an instruction read (see ``__repr__``).
        Decision: always a copy, so writing into it cannot bypass the simulator."""
        _state.value_read("np.asarray(tile)")
        a = self._peek()
        return a if dtype is None else a.astype(dtype, copy=False)

    def _peek(self) -> np.ndarray:
        """The view's values as a fresh NumPy array, without any access hook or lifetime effect."""
        if self.oob is not None:
            raise BoundsError("NkiTensor", self.oob)
        alloc = self.alloc
        rec, alloc.rec = alloc.rec, None        # no lifetime effect
        try:
            a = self.np()
        finally:
            alloc.rec = rec
        out = np.float32 if self.dtype == _dt.tfloat32 else self.dtype
        return _dt.from_storage(a, np.dtype(out))

    def __bool__(self):
        """Always True, as a tensor object is when the compiler specialises the kernel: it knows
        shapes, not values, so ``if t:`` / ``if cfg.index_tensor:`` tests that a tensor was given
        (nki-library's mlp_tkg_constants does exactly that) and can never branch on tile values
        (docs: nki-language-guide, "Tensors represent on-device memory at runtime"). Decision:
        reading values this way would make a kernel take a branch the compiled one cannot."""
        return True

    # ---- Python operators: the nl tile functions (registered by language.operators) --------
    # a + b, a * 2, -a, a < b, ... return new SBUF tiles; a += b writes into a. ``==`` is
    # element-wise (nl.equal), so hashing stays by identity. Outside a kernel they return
    # NotImplemented (plain identity for ==). NumPy scalars defer to the reflected operators.
    __hash__ = object.__hash__
    __array_ufunc__ = None

    def __add__(self, other): return _tile_op("add", self, other)
    def __radd__(self, other): return _tile_op("add", other, self)
    def __sub__(self, other): return _tile_op("subtract", self, other)
    def __rsub__(self, other): return _tile_op("subtract", other, self)
    def __mul__(self, other): return _tile_op("multiply", self, other)
    def __rmul__(self, other): return _tile_op("multiply", other, self)
    def __truediv__(self, other): return _tile_op("divide", self, other)
    def __rtruediv__(self, other): return _tile_op("divide", other, self)
    def __mod__(self, other): return _tile_op("mod", self, other)
    def __rmod__(self, other): return _tile_op("mod", other, self)
    def __pow__(self, other): return _tile_op("power", self, other)
    def __rpow__(self, other): return _tile_op("power", other, self)
    def __and__(self, other): return _tile_op("bitwise_and", self, other)
    def __rand__(self, other): return _tile_op("bitwise_and", other, self)
    def __or__(self, other): return _tile_op("bitwise_or", self, other)
    def __ror__(self, other): return _tile_op("bitwise_or", other, self)
    def __xor__(self, other): return _tile_op("bitwise_xor", self, other)
    def __rxor__(self, other): return _tile_op("bitwise_xor", other, self)
    def __lshift__(self, other): return _tile_op("left_shift", self, other)
    def __rshift__(self, other): return _tile_op("right_shift", self, other)
    def __eq__(self, other): return _tile_op("equal", self, other)
    def __ne__(self, other): return _tile_op("not_equal", self, other)
    def __lt__(self, other): return _tile_op("less", self, other)
    def __le__(self, other): return _tile_op("less_equal", self, other)
    def __gt__(self, other): return _tile_op("greater", self, other)
    def __ge__(self, other): return _tile_op("greater_equal", self, other)
    def __neg__(self): return _tile_op("negative", self)
    def __abs__(self): return _tile_op("abs", self)
    def __invert__(self): return _tile_op("invert", self)
    def __iadd__(self, other): return _tile_op("add", self, other, inplace=True)
    def __isub__(self, other): return _tile_op("subtract", self, other, inplace=True)
    def __imul__(self, other): return _tile_op("multiply", self, other, inplace=True)
    def __itruediv__(self, other): return _tile_op("divide", self, other, inplace=True)

    # ---- NumPy access (used by the op layer only) -------------------------------------------
    def np(self) -> np.ndarray:
        """The NumPy view of this tensor's elements (storage dtype; shares memory)."""
        alloc = self.alloc
        if alloc.pending:
            alloc.fill(self)
        if alloc.lazy is not None:
            alloc.materialize()
        rec = alloc.rec
        if rec is not None:          # every read or write goes through here: the tile is used now
            rec.use()
        a = self._np
        if a is None:
            if self.oob is not None:        # a dynamic offset out of bounds, found when used
                op, role = _hooks.accessor(self, "r")
                raise BoundsError(op, f"{role} {self.oob}")
            a = self._array()
        return a

    def _array(self) -> np.ndarray:
        """The NumPy view of the elements, made (and cached) without any access effect."""
        a = self._np
        if a is None:
            st = self.storage
            geo = self._geo
            hit = geo.layout if geo is not None else None
            if hit is not None:
                a = np.ndarray(self.shape, st.dtype, st, self.offset * st.itemsize, hit[0]) if not hit[1] \
                    else np.lib.stride_tricks.as_strided(st[self.offset:], self.shape, hit[0])
                self._np = a
                return a
            isz = st.itemsize
            bkey = (self.strides, isz)
            hit = _BYTE_STRIDES.get(bkey)
            if hit is None:
                strides = tuple([s * isz for s in self.strides])
                if len(_BYTE_STRIDES) >= _GEOM_LIMIT:
                    _BYTE_STRIDES.clear()
                hit = _BYTE_STRIDES[bkey] = (strides, bool(strides) and min(strides) < 0)
            if geo is not None:
                geo.layout = hit
            strides = hit[0]
            if hit[1]:
                a = np.lib.stride_tricks.as_strided(st[self.offset:], self.shape, strides)
            else:
                a = np.ndarray(self.shape, st.dtype, st, self.offset * isz, strides)
            self._np = a
        return a

    # ---- building views ---------------------------------------------------------------------
    def _view(self, shape, strides, offset, op, dynamic=False, defer=False):
        """A new view after checking every element lies inside the storage.

        ``dynamic=True`` (the offset holds a runtime value: ``.ap(scalar_offset=...)``, a dynamic
        ``select``): an out-of-bounds view is still made, marked ``oob``, and the bounds error is
        raised by the instruction that uses it -- unless that is a DMA with ``oob_mode=skip``,
        which skips the transfer ("skip the DMA transfer for a given dynamic address ... when it
        is out of bound", nisa.dma_copy). ``defer=True`` (a static ``.ap()`` pattern): an
        out-of-bounds view is made too, and the instruction using it raises the bounds error.
        Source: aws-neuron-sdk nki/api/nki/isa/__init__.py."""
        shape = tuple(shape)
        if any(n < 0 for n in shape):
            raise ShapeError(op, f"negative dimension in shape {shape}")
        dynamic = dynamic or self.dynamic       # views of a dynamic view are dynamic too
        oob = self._outside(shape, strides, offset)
        if oob is not None:
            if not dynamic and not defer:
                raise BoundsError(op, oob)
            if dynamic:
                oob = f"{oob} (dynamic offset {offset}; oob_mode=error)"
        t = NkiTensor(self.alloc, shape, strides, offset, self.dtype, self.storage)
        if dynamic:
            t.oob, t.dynamic = oob or self.oob, True
        elif oob is not None:
            t.oob = oob
        elif type(self.oob) is _affine.OutOfBounds:    # a view of an index-expression view outside
            t.oob = self.oob                            # its dims stays out of bounds
        return t

    def _outside(self, shape, strides, offset) -> str | None:
        """The bounds error's text when a view reaches outside the storage, else None."""
        if 0 in shape:
            return None
        lo = offset + sum((n - 1) * s for n, s in zip(shape, strides) if s < 0)
        hi = offset + sum((n - 1) * s for n, s in zip(shape, strides) if s > 0)
        if lo < 0 or hi >= self.storage.size:
            return (f"view of {self._label()} reaches element {hi if hi >= self.storage.size else lo}, "
                    f"outside its {self.storage.size} elements")
        return None

    def _label(self):
        return f"tensor {self.name!r} {self.shape}" if self.name else f"tensor {self.shape}"

    def _dim(self, dim, op, allow_end=False):
        d = _index(dim, op)
        n = self.ndim + (1 if allow_end else 0)
        if d < 0:
            d += n
        if not 0 <= d < n:
            raise ShapeError(op, f"dim {dim} out of range for a {self.ndim}-d tensor {self.shape}")
        return d

    def _check_not_partition(self, dim, op):
        if self.on_chip and dim == 0:
            raise ShapeError(op, f"cannot change the partition dim (dim 0) of an on-chip tensor "
                                 f"{self.shape} in {self.buffer}")

    def __getitem__(self, key) -> "NkiTensor":
        """Basic indexing: ints, slices (step >= 1), ``nl.ds``, ``...``; missing trailing dims are ``:``.

        On SBUF/PSUM an int on dim 0 keeps the partition dim (size 1) and the result is never below
        2-D; on HBM ints drop their dim (never below 1-D). Negative indices and slice bounds count
        from the end as in Python ("Supports integers (select), slices, Ellipsis, negative indices",
        NkiTensor.__getitem__); anything outside ``-n .. n-1`` (indices) or ``-n .. n`` (slice
        bounds) raises BoundsError: no wrap-around past the start, no clipping past the end.
        ``None``, floats and bools raise BoundsError too.
        Beta-1 index expressions (``nl.arange``, ``nl.mgrid``, affine forms of them; an mgrid
        grid as the whole key) give a strided view too: ``memory.affine.index_view``.
        """
        op = "tensor indexing"
        if type(key) is not tuple:
            key = tuple(key) if isinstance(key, tuple) else (key,)     # (an nl.mgrid grid: its axes)
        memo = _memo_key(key) if not self.dynamic and self.oob is None else None
        if memo is not None:
            views = self._views
            if views is not None:
                hit = views.get(memo)
                if hit is not None:
                    return hit
            geo = self._geo
            if geo is not None:         # a fresh tile of a loop: its layout's records (Geometry)
                kid = geo.kids.get(memo)
                if kid is None:
                    t = self._index_view(key, op)
                    if t.oob is None and not t.dynamic:
                        kids = geo.kids
                        if len(kids) >= _VIEW_MEMO_LIMIT:
                            kids.clear()
                        t._geo = kids[memo] = Geometry(t.shape, t.strides, t.offset)
                else:
                    t = NkiTensor(self.alloc, kid.shape, kid.strides, kid.offset, self.dtype, self.storage)
                    t._geo = kid
                    t._sig = kid.sig
                if views is None:       # (_remember, inlined: once per view of every fresh tile)
                    self._views = {memo: t}
                else:
                    self._remember(memo, t)
                return t
            # the same static key on a view of the same geometry (a fresh tile of a loop) gives
            # the same geometry: built and checked once per process (errors are never stored)
            gkey = (self.shape, self.strides, self.offset, self.alloc.buffer in ON_CHIP, memo)
            geom = _GEOM.get(gkey)
            if geom is None:
                t = self._index_view(key, op)
                if t.oob is None and not t.dynamic:  # an out-of-bounds index-expression view keeps
                    if len(_GEOM) >= _GEOM_LIMIT:    # its mark: never shared as plain geometry
                        _GEOM.clear()
                    _GEOM[gkey] = (t.shape, t.strides, t.offset)
            else:
                t = NkiTensor(self.alloc, geom[0], geom[1], geom[2], self.dtype, self.storage)
        else:
            t = self._index_view(key, op)
        if memo is not None:
            self._remember(memo, t)
        return t

    def _remember(self, memo, t: "NkiTensor") -> None:
        """Keep view ``t`` under its static key ``memo`` (at most ``_VIEW_MEMO_LIMIT`` per tensor:
        the memo is emptied when full)."""
        views = self._views
        if views is None:
            views = self._views = {}
        elif len(views) >= _VIEW_MEMO_LIMIT:
            views.clear()
        views[memo] = t

    def _index_view(self, key: tuple, op: str) -> "NkiTensor":
        """``__getitem__``'s view of ``key`` (a tuple), built and checked."""
        ndim = len(self.shape)
        for j, k in enumerate(key):
            if k is Ellipsis:
                key = key[:j] + (slice(None),) * (ndim - (len(key) - 1)) + key[j + 1:]
                break
        if len(key) > ndim:
            raise BoundsError(op, f"{len(key)} indices for {self._label()} with {ndim} dims")
        offset = self.offset
        shape, strides, last_dropped = [], [], None
        on_chip = self.alloc.buffer in ON_CHIP
        oob, dynamic = self.oob, self.dynamic
        for d, (n, s) in enumerate(zip(self.shape, self.strides)):
            k = key[d] if d < len(key) else _ALL
            if type(k) is DynamicSlice:
                from .access import dynamic_index
                start, size = dynamic_index(k.start, op), _index(k.size, op)
                if size < 1:
                    raise BoundsError(op, f"nl.ds size {size} on dim {d} of {self._label()} must be >= 1")
                if (start < 0 or start + size > n) and oob is None:
                    oob = (f"dynamic slice {start}:{start + size} on dim {d} of {self._label()} is outside "
                           f"0:{n} (oob_mode=error)")
                dynamic = True
                offset += start * s
                shape.append(size)
                strides.append(s)
                continue
            if type(k) is slice:
                start, stop, step = k.start, k.stop, k.step
                start = 0 if start is None else (start if type(start) is int else _index(start, op))
                stop = n if stop is None else (stop if type(stop) is int else _index(stop, op))
                step = 1 if step is None else (step if type(step) is int else _index(step, op))
                if step < 1:
                    raise BoundsError(op, f"slice step {step} on dim {d} of {self._label()} must be >= 1")
                if start < 0 and start >= -n:       # Python's negative bounds count from the end
                    start += n
                if stop < 0 and stop >= -n:
                    stop += n
                if start < 0 or stop > n or start > stop:
                    if 0 <= start < stop and (k.start is None or k.start == start) and not on_chip and not dynamic \
                            and _affine.in_beta1_program():
                        return _affine.index_view(self, _affine.slices_as_exprs(key, self.shape), op)
                    raise BoundsError(op, f"slice {start}:{stop} on dim {d} of {self._label()} is outside 0:{n}")
                offset += start * s
                shape.append((stop - start + step - 1) // step)
                strides.append(s * step)
            else:
                if type(k) is not int:
                    if type(k) is _IndexExpr or (type(k) is NkiTensor and all(type(j) is int for j in key[:d])):
                        return _affine.index_view(self, key, op)    # Beta 1: an affine / gather view
                    if hasattr(k, "shape") and not isinstance(k, np.integer):
                        raise UnsupportedError(op, "indexing with a tensor or array is not supported; use "
                                                   ".ap(scalar_offset=..) / .ap(vector_offset=..) or .select()")
                    k = _index(k, op)
                if k < 0 and k >= -n:               # Python's negative index counts from the end
                    k += n
                if k < 0 or k >= n:
                    raise BoundsError(op, f"index {k} on dim {d} of {self._label()} is outside 0:{n}")
                offset += k * s
                if on_chip and d == 0:
                    shape.append(1)
                    strides.append(s)
                else:
                    last_dropped = s
        if on_chip and len(shape) < 2 and last_dropped is not None:
            shape.append(1)
            strides.append(last_dropped)
        elif not shape:
            shape, strides = [1], [1 if last_dropped is None else last_dropped]
        # Every start/stop/index was checked against its dim, so the view stays inside the parent.
        t = NkiTensor(self.alloc, shape, strides, offset, self.dtype, self.storage)
        if dynamic:                         # nl.ds with a runtime start, or a view of a dynamic view
            t.oob, t.dynamic = oob, True
        elif type(oob) is _affine.OutOfBounds:     # a part of an index-expression view outside its
            t.oob = oob                             # dims: stays out of bounds (checked where used)
        elif oob is not None:               # a part of an out-of-bounds .ap() view: checked again
            t.oob = self._outside(t.shape, t.strides, t.offset)
        return t

    def __setitem__(self, key, value):
        """``t[key] = value``: write a tensor, array or scalar through the view (rounded once).

        ``t[key] op= y`` runs as ``v = t[key]; v = v.__iop__(y); t[key] = v``: the in-place op
        already wrote through the view, so assigning a view to exactly itself does nothing (it
        is not a second, plain write: ``psum[...] += nl.matmul(...)`` stays a reduction)."""
        from .access import assign
        dst = self[key]
        if (type(value) is NkiTensor and value.alloc is dst.alloc and value.storage is dst.storage
                and value.offset == dst.offset and value.shape == dst.shape
                and value.strides == dst.strides and value.dtype == dst.dtype):
            return
        assign(dst, value)

    def slice(self, dim, start, end, step=1) -> "NkiTensor":
        """``t[..., start:end:step, ...]`` on ``dim``; requires ``0 <= start < end <= shape[dim]``."""
        op = "NkiTensor.slice"
        d = self._dim(dim, op)
        start, end, step = _index(start, op), _index(end, op), _index(step, op)
        if not (0 <= start < end <= self.shape[d]) or step < 1:
            raise BoundsError(op, f"slice({d}, {start}, {end}, {step}) of {self._label()} needs "
                                  f"0 <= start < end <= {self.shape[d]} and step >= 1")
        shape, strides = list(self.shape), list(self.strides)
        shape[d] = -(-(end - start) // step)
        strides[d] *= step
        return self._view(shape, strides, self.offset + start * self.strides[d], "NkiTensor.slice")

    def select(self, dim, index) -> "NkiTensor":
        """Remove ``dim`` by taking position ``index`` (static int). On-chip: ``dim != 0``."""
        op = "NkiTensor.select"
        d = self._dim(dim, op)
        self._check_not_partition(d, op)
        dynamic = hasattr(index, "shape") or type(index).__name__ == "VirtualRegister"
        if dynamic:
            self._not_indirect(op, "a dynamic select")
            from .access import dynamic_index
            index = dynamic_index(index, op)
        i = _index(index, op)
        shape = self.shape[:d] + self.shape[d + 1:]
        strides = self.strides[:d] + self.strides[d + 1:]
        if not 0 <= i < self.shape[d]:
            if not dynamic:
                raise BoundsError(op, f"index {i} on dim {d} of {self._label()} is outside 0:{self.shape[d]}")
            t = NkiTensor(self.alloc, shape, strides, self.offset + i * self.strides[d], self.dtype,
                          self.storage)      # out of bounds: raised (or skipped) where it is used
            t.oob = (f"dynamic index {i} on dim {d} of {self._label()} is outside 0:{self.shape[d]} "
                     f"(oob_mode=error)")
            t.dynamic = True
            return t
        return self._view(shape, strides, self.offset + i * self.strides[d], op, dynamic=dynamic)

    def permute(self, dims) -> "NkiTensor":
        """Reorder dims; on-chip tensors keep the partition dim first (``dims[0] == 0``)."""
        op = "NkiTensor.permute"
        dims = tuple(self._dim(d, op) for d in dims)
        if sorted(dims) != list(range(self.ndim)):
            raise ShapeError(op, f"dims {dims} is not a permutation of {self.ndim} dims")
        if self.on_chip and dims[0] != 0:
            raise ShapeError(op, f"on-chip tensors must keep the partition dim first, got dims {dims}")
        return self._view([self.shape[d] for d in dims], [self.strides[d] for d in dims],
                          self.offset, op)

    def broadcast(self, dim, size) -> "NkiTensor":
        """Expand a size-1 ``dim`` to ``size`` with stride 0 (on-chip: ``dim != 0``)."""
        op = "NkiTensor.broadcast"
        d = self._dim(dim, op)
        self._check_not_partition(d, op)
        if self.shape[d] != 1:
            raise ShapeError(op, f"dim {d} of {self._label()} has size {self.shape[d]}, must be 1")
        shape, strides = list(self.shape), list(self.strides)
        shape[d], strides[d] = _index(size, op), 0
        return self._view(shape, strides, self.offset, op)

    def expand_dim(self, dim) -> "NkiTensor":
        """Insert a size-1 dim at ``dim`` (on-chip: ``dim != 0``)."""
        op = "NkiTensor.expand_dim"
        d = self._dim(dim, op, allow_end=True)
        self._check_not_partition(d, op)
        return self._view(self.shape[:d] + (1,) + self.shape[d:],
                          self.strides[:d] + (1,) + self.strides[d:], self.offset, op)

    def squeeze_dim(self, dim) -> "NkiTensor":
        """Remove the size-1 dim ``dim`` (on-chip: ``dim != 0``)."""
        op = "NkiTensor.squeeze_dim"
        d = self._dim(dim, op)
        self._check_not_partition(d, op)
        if self.shape[d] != 1:
            raise ShapeError(op, f"dim {d} of {self._label()} has size {self.shape[d]}, must be 1")
        return self._view(self.shape[:d] + self.shape[d + 1:], self.strides[:d] + self.strides[d + 1:],
                          self.offset, op)

    def reshape_dim(self, dim, shape) -> "NkiTensor":
        """Split ``dim`` into ``shape`` (one -1 allowed); on-chip: ``dim != 0`` unless trivial."""
        op = "NkiTensor.reshape_dim"
        d = self._dim(dim, op)
        shape = _fill_minus_one(tuple(_index(s, op) for s in shape), self.shape[d], op)
        if self.on_chip and d == 0 and len(shape) != 1:
            raise ShapeError(op, f"cannot reshape the partition dim of on-chip {self._label()}")
        inner = _contiguous_strides(shape)
        new_strides = tuple(s * self.strides[d] for s in inner)
        return self._view(self.shape[:d] + shape + self.shape[d + 1:],
                          self.strides[:d] + new_strides + self.strides[d + 1:], self.offset, op)

    def flatten_dims(self, start, end) -> "NkiTensor":
        """Merge dims ``start..end`` (inclusive); they must be contiguous in memory; on-chip start > 0."""
        op = "NkiTensor.flatten_dims"
        a, b = self._dim(start, op), self._dim(end, op)
        if a >= b:
            raise ShapeError(op, f"start dim {a} must be less than end dim {b}")
        if self.on_chip and a == 0:
            raise ShapeError(op, f"cannot flatten the partition dim of on-chip {self._label()}")
        for k in range(a, b):
            if self.strides[k] != self.strides[k + 1] * self.shape[k + 1] and self.shape[k + 1] != 1:
                raise ShapeError(op, f"dims {a}..{b} of {self._label()} are not contiguous in memory "
                                     f"(strides {self.strides})")
        n = math.prod(self.shape[a:b + 1])
        return self._view(self.shape[:a] + (n,) + self.shape[b + 1:],
                          self.strides[:a] + (self.strides[b],) + self.strides[b + 1:], self.offset, op)

    def reshape(self, shape, *more) -> "NkiTensor":
        """Same elements in a new shape (one -1 allowed); the view's layout must allow it without a
        copy; on-chip tensors keep their partition count."""
        op = "NkiTensor.reshape"
        if more or isinstance(shape, (int, np.integer)):
            shape = (shape,) + tuple(more)
        shape = _fill_minus_one(tuple(_index(s, op) for s in shape), self.size, op)
        if math.prod(shape) != self.size:
            raise ShapeError(op, f"cannot reshape {self._label()} ({self.size} elements) to {shape}")
        if self.on_chip and shape[0] != self.shape[0]:
            raise ShapeError(op, f"on-chip reshape must keep the partition dim {self.shape[0]}, got {shape}")
        if shape == self.shape:
            return self
        fake = np.lib.stride_tricks.as_strided(np.zeros(1, np.uint8), self.shape, self.strides)
        try:
            strides = fake.reshape(shape, copy=False).strides
        except (ValueError, AttributeError, TypeError):
            raise ShapeError(op, f"{self._label()} with strides {self.strides} cannot be viewed as "
                                 f"{shape} without a copy") from None
        return self._view(shape, strides, self.offset, op)

    # ---- Beta-1 tensor methods (nki.tensor of neuronxcc.nki): run what the language registered ----
    def astype(self, dtype) -> "NkiTensor":
        """A copy cast into ``dtype`` (Beta 1: "Copy ALWAYS occur"): one instruction."""
        return _hooks.tensor_method("astype", self, dtype)

    def broadcast_to(self, shape) -> "NkiTensor":
        """``shape`` by NumPy broadcasting (Beta 1); see ``language.beta1.tensor_method``."""
        return _hooks.tensor_method("broadcast_to", self, shape)

    def assert_shape(self, shape) -> "NkiTensor":
        """ShapeError unless the tensor has ``shape``; returns the tensor (Beta 1)."""
        if tuple(self.shape) != tuple(shape):
            raise ShapeError("NkiTensor.assert_shape", f"{self._label()} has shape {list(self.shape)}, "
                                                       f"expected {list(shape)}")
        return self

    def view(self, dtype) -> "NkiTensor":
        """Reinterpret the bits as ``dtype``; the last dim (contiguous) scales by the size ratio."""
        op = "NkiTensor.view"
        new = _dt.as_dtype(dtype)
        if new is None:
            raise DtypeError(op, f"{dtype!r} is not an NKI dtype")
        if new == self.dtype:
            return self
        self._not_indirect(op, "a dtype reinterpretation")
        if self.storage.dtype.itemsize != self.dtype.itemsize:
            raise UnsupportedError(op, f"reinterpreting {_dt.name(self.dtype)} stored as float32 "
                                       f"(NKI_PRECISE_FP=0) is not possible; run with NKI_PRECISE_FP=1")
        old_sz, new_sz = self.dtype.itemsize, new.itemsize
        if self.strides and self.strides[-1] != 1 and self.shape[-1] != 1:
            raise ShapeError(op, f"the last dim of {self._label()} must be contiguous to change dtype")
        byte_off = self.offset * old_sz
        if byte_off % new_sz or (self.shape[-1] * old_sz) % new_sz or any(
                (s * old_sz) % new_sz for s in self.strides[:-1]):
            raise ShapeError(op, f"{self._label()} of {_dt.name(self.dtype)} does not divide into "
                                 f"{_dt.name(new)} elements")
        storage = self.alloc.storage.view(_dt.storage_dtype(new, True)) if \
            self.alloc.storage.dtype.itemsize * self.alloc.storage.size % new_sz == 0 else None
        if storage is None:
            raise ShapeError(op, f"storage of {self._label()} does not divide into {_dt.name(new)}")
        shape = self.shape[:-1] + (self.shape[-1] * old_sz // new_sz,)
        strides = tuple(s * old_sz // new_sz for s in self.strides[:-1]) + (1,)
        t = NkiTensor(self.alloc, shape, strides, byte_off // new_sz, new, storage)
        return t._view(shape, strides, byte_off // new_sz, op)

    reinterpret_cast = view

    def ap(self, pattern, offset=None, scalar_offset=None, vector_offset=None, indirect_dim=0,
           dtype=None) -> "NkiTensor":
        """A raw access pattern: ``pattern`` = [[step, count], ...] outermost first; element
        ``(i0, i1, ...)`` is ``storage[offset + sum(step_k * i_k)]``.

        Decision (docs disagree): ``offset=None`` keeps this view's offset; an explicit offset is
        absolute in the storage. ``.ap()`` ignores this view's shape and strides. On-chip, the first
        step must equal the allocation's elements per partition (no partition striding).
        ``scalar_offset`` (register or 1x1 int tensor) adds ``value * strides[indirect_dim]`` of the
        tensor ``.ap`` is called on (see ``_indirect_step``); the resulting view is bounds-checked
        when an instruction uses it (``_view(dynamic=True)``: ``oob_mode=skip`` skips a DMA).
        Decision: a static pattern reaching outside the tensor is also an error only when an
        instruction uses the view (nki-library builds such views under a guard that then skips
        them, e.g. the last partial tile of output_projection_tkg).
        ``vector_offset`` (SBUF int tensor (rows, 1), ``indirect_dim=0``) on an HBM tensor returns an
        ``indirect.IndirectTensor`` for ``nisa.dma_copy`` gather/scatter: row w is base row
        ``vector_offset[w]``, the row step being prod(shape[1:]) of the tensor ``.ap`` is called on
        (Decision: a reshape of an argument counts as its own base, as NKI's reshape returns a new
        tensor handle; the tensor must be contiguous).
        """
        op = "NkiTensor.ap"
        if scalar_offset is not None or vector_offset is not None:
            self._not_indirect(op, "a scalar_offset/vector_offset access pattern")
        base = self.view(dtype) if dtype is not None else self
        pairs = [(int(p[0]), int(p[1])) for p in pattern]
        steps = tuple(p[0] for p in pairs)
        counts = tuple(p[1] for p in pairs)
        off = base.offset if offset is None else _index(offset, op)
        if vector_offset is not None:
            if scalar_offset is not None:
                raise ShapeError(op, "scalar_offset and vector_offset are mutually exclusive")
            from . import indirect
            return indirect.make(base, counts, steps, off, vector_offset, _index(indirect_dim, op), op)
        if base.on_chip and len(steps) > 1:
            per_part = math.prod(self.alloc.shape[1:]) * self.alloc.dtype.itemsize // base.dtype.itemsize
            if counts[0] > 1 and steps[0] != per_part:
                raise ShapeError(op, f"on-chip partition step {steps[0]} must equal the elements per "
                                     f"partition {per_part} of {self._label()} (no partition striding)")
        if scalar_offset is not None:
            from .access import dynamic_index
            value = dynamic_index(scalar_offset, op)
            off += value * self._indirect_step(_index(indirect_dim, op), base, op)
            return base._view(counts, steps, off, op, dynamic=True)
        return base._view(counts, steps, off, op, defer=True)

    def _indirect_step(self, d, base, op) -> int:
        """The stride of dim ``d`` of this view, in elements of ``base``'s dtype: what one unit of
        an ``.ap()`` scalar offset moves ("indirect_dim: dimension in self.shape whose stride
        scales the indirect scalar/vector offset", NkiTensor.ap). Decision: with ``dtype=`` the
        stride is this view's, converted to the reinterpreted element size (bytes are kept)."""
        if not 0 <= d < self.ndim:
            raise ShapeError(op, f"indirect_dim {d} out of range for a {self.ndim}-d tensor {self.shape}")
        nbytes = self.strides[d] * self.dtype.itemsize
        if nbytes % base.dtype.itemsize:
            raise ShapeError(op, f"the stride of dim {d} ({nbytes} bytes) is not a whole number of "
                                 f"{_dt.name(base.dtype)} elements")
        return nbytes // base.dtype.itemsize

    def get_pattern(self):
        """The view as ``[[stride, count], ...]``, outermost first."""
        return [[s, n] for s, n in zip(self.strides, self.shape)]

    def is_contiguous(self) -> bool:
        """True if the free dims (all dims for HBM) are row-major contiguous."""
        first = 1 if self.on_chip else 0
        expect = 1
        for n, s in zip(reversed(self.shape[first:]), reversed(self.strides[first:])):
            if n != 1 and s != expect:
                return False
            expect *= n
        return True

    def covers_all(self) -> bool:
        """True when the view touches every element of its storage exactly once."""
        if self.offset != 0:
            return False
        expect = 1
        for st, n in sorted((st, n) for n, st in zip(self.shape, self.strides) if n != 1):
            if st != expect:
                return False
            expect *= n
        return expect == self.storage.size

    def is_indirect(self) -> bool:
        """True for a view with a runtime (dynamic) offset: a dynamic ``select`` or
        ``.ap(scalar_offset=...)`` (and views of one). Such a view cannot be re-indirected
        (``_not_indirect``). Source: NkiTensor.is_indirect, nki-language-guide "Querying layout"."""
        return self.dynamic

    def _not_indirect(self, op, what) -> None:
        """"Indirect views cannot be re-indirected" / "only one dynamic select per tensor (no
        chaining)" / view(dtype) "Not supported after dynamic / vector select" (NkiTensor docs)."""
        if self.dynamic:
            raise ShapeError(op, f"{what} of {self._label()}, which is already an indirect (dynamic-offset) "
                                 f"view; indirect views cannot be re-indirected")

    def vector_select(self, dim, vector_offset):
        """Per-partition gather view: row ``w`` is row ``vector_offset[w]`` of this HBM tensor
        (shape ``(vector_offset.shape[0],) + shape[1:]``), for ``nisa.dma_copy`` (same as
        ``.ap(get_pattern(), vector_offset=..., indirect_dim=0)`` with the row count replaced).
        Constraints (NkiTensor.vector_select): ``dim`` must be 0; HBM only; one dynamic select per
        tensor; ``vector_offset`` an SBUF integer tensor ``(num_partitions, 1)``.
        Raises: ShapeError, MemorySpaceError, DtypeError."""
        op = "NkiTensor.vector_select"
        d = self._dim(dim, op)
        if d != 0:
            raise ShapeError(op, f"dim must be 0, got {d}")
        self._not_indirect(op, "a vector_select")
        rows = vector_offset.shape[0] if isinstance(vector_offset, NkiTensor) else 0
        from . import indirect
        return indirect.make(self, (rows,) + self.shape[1:], self.strides, self.offset, vector_offset, 0, op)

    def rearrange(self, src_pattern, dst_pattern, fixed_sizes=None) -> "NkiTensor":
        """einops-style view: split the grouped dims of ``src_pattern``, reorder to
        ``dst_pattern``, merge its groups; e.g. ``t.rearrange(('b', ('h', 'w')), ('b', 'w', 'h'),
        {'h': 4})`` on (128, 24) gives (128, 6, 4). Composed of ``reshape_dim``, ``permute`` and
        ``flatten_dims``, so their rules hold (on chip the partition dim stays first, merged
        dims must be contiguous). Source: NkiTensor.rearrange. Raises: ShapeError."""
        op = "NkiTensor.rearrange"
        sizes = dict(fixed_sizes or {})

        def names(pattern):
            out = []
            for p in pattern:
                group = (p,) if isinstance(p, str) else tuple(p)
                if not group or not all(isinstance(n, str) for n in group):
                    raise ShapeError(op, f"pattern {pattern!r} must hold names or tuples of names")
                out.append(group)
            return out
        src, dst = names(src_pattern), names(dst_pattern)
        if len(src) != self.ndim:
            raise ShapeError(op, f"src_pattern {src_pattern!r} has {len(src)} dims, the tensor {self.ndim}")
        flat_src = [n for g in src for n in g]
        flat_dst = [n for g in dst for n in g]
        if len(set(flat_src)) != len(flat_src) or sorted(flat_src) != sorted(flat_dst):
            raise ShapeError(op, f"dst_pattern {dst_pattern!r} must use each name of src_pattern "
                                 f"{src_pattern!r} exactly once")
        t = self
        for d in reversed(range(len(src))):          # split from the last dim: indices stay valid
            group = src[d]
            if len(group) > 1:
                t = t.reshape_dim(d, tuple(sizes.get(n, -1) for n in group))
            for n, size in zip(group, t.shape[d:d + len(group)]):
                sizes[n] = size
        order = [flat_src.index(n) for n in flat_dst]
        if order != list(range(len(order))):
            t = t.permute(tuple(order))
        pos = 0
        for group in dst:                             # merge the dst groups, left to right
            if len(group) > 1:
                t = t.flatten_dims(pos, pos + len(group) - 1)
            pos += 1
        return t

    def indirect(self, *args, **kwargs):
        raise UnsupportedError("NkiTensor.indirect", "tensor indirection is not supported yet")


class Geometry:
    """What is static about one kind of view, shared by every view of that kind: its shape,
    strides and offset over a storage of one layout (the layout of an allocation of one shape,
    dtype and buffer on one target, as ``memory.access.allocate`` makes them), the dispatcher's
    signature id of such a view (``sig``, once interned: ``isa.dispatch._intern_sig``), its
    NumPy byte strides (``layout``: ``NkiTensor._array``), whether it covers the whole storage
    (``whole``: ``memory.access._whole``) and the records of its static index views (``kids``:
    index key -> Geometry).

    Decision (speed; no visible effect): a fresh tile in a loop is indexed with the keys the
    previous iteration's tile was; its views take shape, strides, offset, signature and byte
    strides from these records instead of building them again (``__getitem__``). The records
    hold no values and no allocation; a view has one only when its allocation's layout gave
    its root one (``allocate``) and it was made by static indexing from there, so everything a
    record holds is a function of its place in that tree."""
    __slots__ = ("shape", "strides", "offset", "sig", "layout", "whole", "kids")

    def __init__(self, shape, strides, offset):
        self.shape, self.strides, self.offset = shape, strides, offset
        self.sig = None         # the signature id (isa.dispatch._intern_sig), once a view had one
        self.layout = None      # (byte strides, any negative) of NkiTensor._array, once built
        self.whole = None       # covers the layout's storage exactly (access._whole), once asked
        self.kids: dict = {}


_IndexExpr = _affine.IndexExpr
_VIEW_MEMO_LIMIT = 256     # memoised index views kept per tensor; a full table starts over
# (parent shape, strides, offset, on chip, static key) -> (shape, strides, offset) of the view:
# ``__getitem__``'s geometry, which depends on nothing else for a static key of a static view
_GEOM: dict = {}
_GEOM_LIMIT = 1 << 16
# (element strides, itemsize) -> (byte strides, any negative): ``NkiTensor.np``'s layout
_BYTE_STRIDES: dict = {}


def _memo_key(key: tuple):
    """A hashable key for a static index (Python ints, None-or-int slices, ``...``), or None.

    Decision (speed; no visible effect): a view is immutable, so ``t[key]`` with the same static
    key returns the view built the first time (``NkiTensor._views``; it sees every later write,
    sharing the storage). A tensor lives within one launch, so the memo does too. Anything else
    (NumPy integers, ``nl.ds``, bools, floats) is not memoised: equal hashes (``True == 1``,
    ``1.0 == 1``) must not find a checked entry."""
    out = []
    for k in key:
        tk = type(k)
        if tk is slice:
            a, b, c = k.start, k.stop, k.step
            if ((a is not None and type(a) is not int) or (b is not None and type(b) is not int)
                    or (c is not None and type(c) is not int)):
                return None
            out.append((a, b, c))
        elif tk is int or k is Ellipsis:
            out.append(k)
        elif tk is _IndexExpr:
            out.append(k.key)
        else:
            return None
    return tuple(out)


def _tile_op(name, x, *y, inplace=False):
    """NkiTensor's operators run what the language layer registered (``hooks.operator`` and
    ``hooks.inplace``, set by ``language/operators.py``): memory never imports the language."""
    return _hooks.inplace(name, x, *y) if inplace else _hooks.operator(name, x, *y)


def _fill_minus_one(shape, total, op):
    if shape.count(-1) > 1:
        raise ShapeError(op, f"at most one -1 in shape {shape}")
    if -1 in shape:
        rest = math.prod(s for s in shape if s != -1)
        if rest == 0 or total % rest:
            raise ShapeError(op, f"cannot infer -1 in {shape} for {total} elements")
        shape = tuple(total // rest if s == -1 else s for s in shape)
    if math.prod(shape) != total:
        raise ShapeError(op, f"shape {shape} has {math.prod(shape)} elements, expected {total}")
    return shape


def contiguous_view(alloc: Allocation) -> NkiTensor:
    """The full row-major view of a fresh allocation."""
    t = NkiTensor(alloc, alloc.shape, _contiguous_strides(alloc.shape), 0)
    t._whole = True
    return t


__all__ = ["Allocation", "NkiTensor", "DynamicSlice", "Geometry", "contiguous_view"]
