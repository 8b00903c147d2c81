"""Beta-1 ``nki.language`` (``neuronxcc.nki.language``): the Beta-2 tile functions (``tile``,
``creation``, ``misc``) with Beta-1 signatures -- ``mask=`` on every op (run inside
``indexing.masked``), keyword-only ``dtype=``, comparison/logical results ``bool`` by default,
``buffer=None`` meaning SBUF, ``nl.store`` of a PSUM tile (copied to SBUF first), the SPMD
program ids, grid specs, ``loop_reduce`` and ``static_cast``. Every instruction runs through the
Beta-2 pipeline (same checks, numerics, events). Never imports torch.

Source: aws-neuron-sdk 2.26 general/nki/api/nki/language/__init__.py; programming_model.rst.
"""
from __future__ import annotations

import builtins as _builtins
import linecache
import re
import sys

import numpy as np

from .. import dtypes as _d
from .. import state
from .. import errors as _errors
from ..errors import ArgumentError, UnsupportedError
from .. import isa as _nisa
from ..isa.dispatch import register_token_type
from ..memory import access as _access
from ..memory.buffers import psum, sbuf, shared_hbm
from ..memory.tensor import NkiTensor
from ..runtime import beta1 as _rt, loops as _loops
from . import assign_target as _targets
from . import beta1_isa as _beta1_isa, creation as _creation, misc as _misc, ops as _ops, tile as _tile
from .indexing import arange, masked, mgrid, par_dim

# ---- operator tokens that are also tile functions (``nl.add(x, y, mask=...)``, ``op=nl.add``) ----
_BOOL_RESULT = {"equal", "not_equal", "greater", "greater_equal", "less", "less_equal", "logical_and",
                "logical_or", "logical_xor", "logical_not", "all"}


def _all_integer(args) -> bool:
    """Both operands of ``x / y`` integer (tiles of an integer dtype, Python / NumPy ints).

    Decision: Beta-1 ``x / y`` (``nl.divide``) of two integer operands, no ``dtype=`` given, is
    true division into float32 (Python's and NumPy's ``/``; the Vector Engine divides in fp32),
    not the integer promotion of the type-promotion table: Beta-1 kernels floor it themselves
    (nki-samples' resize_nearest: ``nl.floor(iota / w, dtype=nl.int32)``, checked against a
    NumPy floor division), which an integer quotient rounded to nearest would break."""
    for a in args:
        if isinstance(a, NkiTensor):
            if _d.is_float(a.dtype) or a.dtype == _d.bool_:
                return False
        elif isinstance(a, (bool, np.bool_)) or not isinstance(a, (int, np.integer)):
            return False
    return True


class Beta1Op(_ops.Op):
    """A Beta-1 operator token: as ``op=`` it is ``nl.<name>``; called, the tile function with
    ``mask=`` and ``dtype=`` (comparisons and logical ops default to ``nl.bool_``)."""
    __slots__ = ()

    def __call__(self, *args, mask=None, dtype=None, **kwargs):
        if not _targets._ACTIVE.get():
            return _targets.call_at(sys._getframe(1), f"nl.{self.name}", self._call, args,
                                    dict(kwargs, mask=mask, dtype=dtype))
        return self._call(*args, mask=mask, dtype=dtype, **kwargs)

    def _call(self, *args, mask=None, dtype=None, **kwargs):
        if dtype is None and self.name in _BOOL_RESULT:
            dtype = _d.bool_
        elif dtype is None and self.name == "divide" and len(args) == 2 and _all_integer(args):
            dtype = _d.float32
        with masked(mask):
            if len(args) == 2 and self.name in _tile._BINARY:
                args = _partition_broadcast(*args)
            elif self.name in _REDUCTIONS and args:
                args, kwargs, shape = _any_axes(self.name, args, kwargs, mask)
                r = _tile.call(self.name, *args, dtype=dtype, **kwargs)
                return r if shape is None or r.shape == shape else r.reshape(shape)
            return _tile.call(self.name, *args, dtype=dtype, **kwargs)

    def __repr__(self):
        return f"nl.{self.name}"


_REDUCTIONS = {"sum", "max", "min", "prod", "mean", "var", "all"}


def _partition_only(mask) -> bool:
    """``mask`` is a range of its first (partition) axis alone: no other axis restricted, no
    element-wise part (``memory.masks.Box``)."""
    from ..memory.masks import as_box
    box = as_box(mask)
    return box is not None and not box.empty and box.keep is None and _builtins.all(r is None for r in box.ranges[1:])


def _any_axes(name, args, kwargs, mask):
    """Beta-1 reductions over any free axes (``nl.sum(t, axis=[2, 4])``): the arguments for the
    Beta-2 reduction and the result shape to view its result as (None: as it comes).

    Decision (the 2.26 docs contradict the 2.26 tutorials: ``nl.sum``/``nl.max``/... say the axes
    "can only be the last contiguous dim(s) of the tile: [1], [1,2], [1,2,3], [1,2,3,4]", while
    the average-pool tutorial and the indexing guide's pooling example reduce ``axis=[2, 4]`` of
    a 5-D view): any set of free axes is accepted, with NumPy's meaning. The free dims are first
    permuted (a view, no instruction) so the reduced ones come last, then one trailing-axes
    reduction runs; ``keepdims=True`` puts the size-1 dims back where the reduced axes were (a
    view of the result). The partition dim 0 still cannot be reduced (ShapeError). A ``mask=``
    with non-trailing axes raises UnsupportedError (the mask's axes are the tile's, not the
    permuted view's), unless it restricts the partition dim only (nki-samples' maxpooling:
    ``mask=(i_h < h)``), which the permutation keeps first. ``nl.var`` (Beta 1, no ``keepdims``): the result has the reduced axes
    removed, as the 2.26 docs say ("the input tile's shape with the specified axes removed";
    Beta 2's ``nl.var`` keeps them).
    """
    x, rest = args[0], args[1:]
    axis = kwargs.get("axis", rest[0] if rest else None)
    if not isinstance(x, NkiTensor) or axis is None:
        return args, kwargs, None
    n = x.ndim
    try:
        axes = sorted({int(a) % n for a in (axis if isinstance(axis, (tuple, list)) else (axis,))})
    except (TypeError, ValueError, ZeroDivisionError):
        return args, kwargs, None                       # the Beta-2 reduction names the bad axis
    if 0 in axes:
        return args, kwargs, None
    keep = [d for d in range(n) if d not in axes]
    removed = tuple(x.shape[d] for d in keep)
    keepdims = bool(kwargs.get("keepdims")) and name != "var"
    want = tuple(1 if d in axes else x.shape[d] for d in range(n)) if keepdims else removed
    if axes == list(range(n - len(axes), n)):
        return args, kwargs, want if name == "var" or keepdims else None
    if mask is not None and mask is not True and not _partition_only(mask):
        raise UnsupportedError(f"nl.{name}", f"a mask with reduction axes {list(axes)} that are not the "
                                             f"trailing free dims of a {n}-D tile; reduce trailing axes "
                                             f"(permute the tile's index expressions) or drop the mask")
    kwargs = {k: v for k, v in kwargs.items() if k != "axis"}
    new_axis = list(range(len(keep), n))
    return (x.permute(tuple(keep + axes)), new_axis) + tuple(rest[1:]), kwargs, want


def _partition_broadcast(x, y):
    """Beta-1 binary ops broadcast a 1-partition tile along the partition dim too (the docs'
    ``nl.add`` example: (128, 512) + (1, 512)): that operand is first copied to the other's
    partition count with ``nl.broadcast_to`` (one instruction); free dims broadcast as in Beta 2."""
    if isinstance(x, NkiTensor) and isinstance(y, NkiTensor) and x.ndim != y.ndim and _builtins.min(x.ndim, y.ndim) >= 1:
        # Decision: a tile's first dim is its partition dim, so tiles of different rank align on
        # it (a (128,) reduction result times a (128, 512) tile), the shorter one viewed with
        # trailing size-1 free dims
        n = _builtins.max(x.ndim, y.ndim)
        x = x.reshape(tuple(x.shape) + (1,) * (n - x.ndim)) if x.ndim < n else x
        y = y.reshape(tuple(y.shape) + (1,) * (n - y.ndim)) if y.ndim < n else y
    if isinstance(x, NkiTensor) and isinstance(y, NkiTensor) and x.ndim == y.ndim and x.ndim >= 1:
        px, py = x.shape[0], y.shape[0]
        if px == 1 and py > 1:
            x = _tile.broadcast_to(x, shape=(py,) + tuple(x.shape[1:]))
        elif py == 1 and px > 1:
            y = _tile.broadcast_to(y, shape=(px,) + tuple(y.shape[1:]))
    return x, y


register_token_type(Beta1Op)
TOKENS = {n: Beta1Op(n) for n in _ops.NAMES if n in _tile._FUNCS}
globals().update(TOKENS)


def _masked(fn, api):
    """``fn`` (a Beta-2 tile function) with a keyword-only ``mask=`` (None: no mask); its result
    may be the statement's assignment target (``assign_target``)."""
    @_targets.assignable(api)
    def beta1(*args, mask=None, **kwargs):
        with masked(mask):
            return fn(*args, **kwargs)
    beta1.__name__ = beta1.__qualname__ = api.split(".")[-1]
    beta1.__doc__ = f"Beta-1 ``{api}(..., mask=None)``: {fn.__doc__ or ''}"
    beta1.__wrapped__ = fn
    return beta1


load = _masked(_tile.load, "nl.load")
load_transpose2d = _masked(_tile.load_transpose2d, "nl.load_transpose2d")


@_targets.assignable("nl.matmul", sums=True)
def matmul(x, y, *, transpose_x=False, mask=None):
    """``nl.matmul(x, y, *, transpose_x=False, mask=None)``: Beta 2's nl.matmul (a new fp32 PSUM
    tile; ``psum[...] = nl.matmul(...)`` overwrites psum, ``psum += nl.matmul(...)`` accumulates
    into it: one matmul, ``assign_target``). Decision: an operand in PSUM (e.g. an ``nl.transpose`` result, which the SDK's
    attention tutorial multiplies) is first copied to SBUF (nisa.tensor_copy), as the Tensor
    Engine reads SBUF only."""
    with masked(mask):
        x, y = _to_sbuf(x), _to_sbuf(y)
        return _tile.matmul(x, y, transpose_x=transpose_x)


def _to_sbuf(t):
    if isinstance(t, NkiTensor) and t.buffer is psum:
        staged = _creation.ndarray(t.shape, t.dtype, buffer=sbuf)
        _nisa.tensor_copy(staged, t)
        return staged
    return t


transpose = _masked(_tile.transpose, "nl.transpose")
softmax = _masked(_tile.softmax, "nl.softmax")
@_targets.assignable("nl.rms_norm")
def rms_norm(x, w, axis, n, epsilon=1e-06, *, dtype=None, compute_dtype=None, mask=None):
    """``nl.rms_norm(x, w, axis, n, epsilon=1e-06, *, dtype, compute_dtype, mask)``: Beta 2's
    ``x / RMS(x) * w``. Decision (the docs say only "w: weight tile"): a one-partition ``w`` of x's
    rank ((1, F) with x (P, F)) is broadcast along the partition dim, as every Beta-1 binary op
    broadcasts one (``nl.broadcast_to``, one instruction)."""
    with masked(mask):
        if isinstance(x, NkiTensor) and isinstance(w, NkiTensor) and x.ndim == w.ndim:
            _, w = _partition_broadcast(x, w)
        return _tile.rms_norm(x, w, axis, n, epsilon, dtype=dtype, compute_dtype=compute_dtype)
where = _masked(_tile.where, "nl.where")
gather_flattened = _masked(_tile.gather_flattened, "nl.gather_flattened")
dropout = _masked(_misc.dropout, "nl.dropout")
device_print = _masked(_misc.device_print, "nl.device_print")


def broadcast_to(src, shape, **kwargs):
    """``nl.broadcast_to(src, shape=...)``: Beta 2's, with a lower-rank tile first viewed with
    trailing size-1 free dims (a tile's first dim is its partition dim: (128,) -> (128, 1))."""
    return _tile.broadcast_to(_rank_aligned(src, len(shape)), shape=tuple(shape), **kwargs)


def _rank_aligned(t, ndim):
    if isinstance(t, NkiTensor) and t.on_chip and 1 <= t.ndim < ndim:
        return t.reshape(tuple(t.shape) + (1,) * (ndim - t.ndim))
    return t

expand_dims = _tile.expand_dims
ds, random_seed, no_reorder = _misc.ds, _misc.random_seed, _misc.no_reorder
fp32, bfp16 = _misc.fp32, _misc.bfp16
shared_constant = _creation.shared_constant


def shared_identity_matrix(n, dtype=_d.uint8, **kwargs):
    """``nl.shared_identity_matrix(n, dtype=nl.uint8)``: an n x n identity in shared HBM, like
    ``shared_constant`` (Beta 1: "the same behavior to nki.language.shared_constant"; its kernels
    ``nl.load`` it), issuing no instruction. Beta 2's returns an SBUF tile."""
    return _creation.shared_constant(np.eye(int(n), dtype=np.float32), dtype=dtype, **kwargs)


def store(dst, value, *, mask=None):
    """``nl.store(dst, value, *, mask=None)``: dst (HBM) = value. A PSUM ``value`` is first copied
    to a new SBUF tile (nisa.tensor_copy), as the Beta-1 docs say ("an extra copy will be
    performed to move the tile to SBUF first"); a scalar fills dst."""
    with masked(mask):
        if not isinstance(value, NkiTensor):            # "store scalar into out_tensor (a memset)"
            value = _creation.full(dst.shape, value, dst.dtype, buffer=sbuf)
        value = _to_sbuf(value)
        return _tile.store(dst, value)


def rand(shape, dtype=_d.float32, **kwargs):
    """``nl.rand(shape, dtype=nl.float32)``: a new SBUF tile of uniform [0, 1) values."""
    return _misc.rand(shape, dtype, **kwargs)


def static_cast(input_data, dtype):
    """``nl.static_cast(x, dtype)``: a new SBUF tile, x cast into ``dtype`` (one nisa.tensor_copy).
    Decision: on a host array (the SDK's attention tutorial casts its NumPy inputs) it is
    ``numpy.asarray(x).astype(dtype)``, no instruction."""
    if not isinstance(input_data, NkiTensor):
        return np.asarray(input_data).astype(dtype)
    return _tile.copy(input_data, dtype=dtype)


# ---- creation (buffer=None is SBUF; shared_hbm is one tensor per launch across SPMD programs) --
def _alloc(make, shape, dtype, buffer):
    if buffer is shared_hbm:
        return _rt.shared_allocation(make, tuple(int(s) for s in shape), dtype)
    return make()


def ndarray(shape, dtype, *, buffer=None, name="", **kwargs):
    """``nl.ndarray(shape, dtype, *, buffer=None, name='')``: an uninitialised tensor (SBUF by
    default). Decision: the k-th ``shared_hbm`` tensor of every SPMD program is one tensor."""
    buffer = sbuf if buffer is None else buffer
    return _alloc(lambda: _creation.ndarray(shape, dtype, buffer=buffer, name=name, **kwargs), shape, dtype, buffer)


def zeros(shape, dtype, *, buffer=None, name="", lazy_initialization=None, **kwargs):
    """``nl.zeros(shape, dtype, *, buffer=None, name='')`` (``lazy_initialization=``: see ``full``).

    Decision: ``t = nl.zeros(..., nl.float32, buffer=nl.psum)`` whose next use is ``t +=
    <matmul>`` or ``t[...] += <matmul>`` (the whole tile; ``assign_target.folds_zeros``: the Beta-1 tutorials'
    accumulation pattern) issues no memset: the first such matmul covering the tile overwrites it
    (its event: accumulate=False), later ones accumulate, as the docs describe the pattern: "the
    first nki.isa.nc_matmul instruction overwrites the destination PSUM bank with the instruction
    output. The second instruction accumulates ..." (aws-neuron-sdk v2.26.0 nki/arch/
    trainium_inferentia2_arch.rst, "Near-memory accumulation in PSUM"). The tile holds +0.0 from
    the start, so any other first use sees zeros; when that ``+=`` turns out not to be a matmul
    the tile takes (a transpose, a result of another shape: the plain path) the memset is issued
    late, at its in-place add (``inplace``), after that matmul; when it is never reached (a loop
    of no iterations, an early exit) no memset is issued. Elsewhere (any other next use, a partial
    ``t[key] +=``, other dtypes or buffers) the memset is issued here, as before.
    """
    buffer = sbuf if buffer is None else buffer
    if buffer is psum and not kwargs and _targets.folds_zeros(sys._getframe(1)):
        t = _creation.zeros_folded(shape, dtype, buffer, name)
        if t is not None:
            return t
    return _alloc(lambda: _creation.zeros(shape, dtype, buffer=buffer, name=name, **kwargs), shape, dtype, buffer)


def ones(shape, dtype, *, buffer=None, name="", lazy_initialization=None, **kwargs):
    """``nl.ones(shape, dtype, *, buffer=None, name='')`` (``lazy_initialization=``: see ``full``)."""
    buffer = sbuf if buffer is None else buffer
    return _alloc(lambda: _creation.ones(shape, dtype, buffer=buffer, name=name, **kwargs), shape, dtype, buffer)


def full(shape, fill_value, dtype, *, buffer=None, name="", lazy_initialization=None, **kwargs):
    """``nl.full(shape, fill_value, dtype, *, buffer=None, name='')``.
    Decision: ``lazy_initialization=`` (undocumented; nki-samples' flash attention passes it to
    nl.full / nl.zeros) only tells the compiler when it may issue the fill; the tensor holds the
    fill value either way, so it is accepted and the fill is issued at once."""
    buffer = sbuf if buffer is None else buffer
    return _alloc(lambda: _creation.full(shape, fill_value, dtype, buffer=buffer, name=name, **kwargs),
                  shape, dtype, buffer)


def _like(fn):
    def like(a, dtype=None, *, buffer=None, name="", **kwargs):
        buf = buffer if buffer is not None else (a.buffer if isinstance(a, NkiTensor) else sbuf)
        dt = dtype if dtype is not None else a.dtype
        return _alloc(lambda: fn(a, dtype=dtype, buffer=buf, name=name, **kwargs), a.shape, dt, buf)
    like.__name__ = like.__qualname__ = fn.__name__
    like.__doc__ = f"``nl.{fn.__name__}(a, dtype=None, *, buffer=None, name='')``: {fn.__doc__ or ''}"
    return like


empty_like, zeros_like = _like(_creation.empty_like), _like(_creation.zeros_like)
ones_like, full_like = _like(_creation.ones_like), None
del full_like


# ---- ``psum += nisa.nc_matmul(...)`` ----------------------------------------------------------
def inplace(name, x, y):
    """``x op= y`` in a Beta-1 program: Beta 2's in-place op, except that ``psum_tile +=
    <matmul result in PSUM>`` takes x into the matmul's accumulation group first
    (``tile.start_sum``): never-written elements of x count as zero (as the first matmul of a
    hardware accumulation group overwrites), so accumulating into a fresh ``nl.ndarray(...,
    buffer=nl.psum)`` works as the Beta-1 tutorials expect; elements any instruction wrote keep
    their values (bias + product, the tensor_tensor add's bits); ``nl.zeros`` then ``+=`` gives
    the same values as the fold."""
    _creation.owe_zeros(x)        # ``t += <not a matmul into t>`` after a folded nl.zeros: its memset
    if (name == "add" and isinstance(x, NkiTensor) and isinstance(y, NkiTensor) and x.buffer is psum
            and y.buffer is psum and y.storage is y.alloc.storage and _access.matmul_flags(y) is True
            and x.storage is x.alloc.storage):
        _tile.start_sum(x)
    return _tile.inplace(name, x, y)


# ---- loops ------------------------------------------------------------------------------------
def _loop(fn):
    def loop(*args, directives=None, **kwargs):
        return fn(*args, **kwargs)
    loop.__name__ = loop.__qualname__ = fn.__name__
    loop.__doc__ = (f"Beta-1 ``nl.{fn.__name__}(..., directives=None)``: Beta 2's loop; ``directives`` "
                    f"(compiler scheduling hints such as ``nki.compiler.no_reorder()``) has no effect.")
    loop.__wrapped__ = fn
    return loop


affine_range, sequential_range, static_range = (_loop(f) for f in (_loops.affine_range, _loops.sequential_range,
                                                                    _loops.static_range))


# ---- Beta-1 tensor methods (``memory.hooks.tensor_method``) ------------------------------------
def tensor_method(name, t, *args):
    """``t.astype(dtype)``: a copy into a new tile of ``dtype`` (nl.copy: one instruction).
    ``t.broadcast_to(shape)``: Decision: an on-chip tile is copied to the broadcast shape
    (nl.broadcast_to, one instruction: Beta 2 has no stride-0 partition views on chip, and a
    view would alias); an HBM tensor gets a stride-0 view (no instruction)."""
    if name == "astype":
        return _tile.copy(t, dtype=args[0])
    shape = tuple(int(s) for s in args[0])
    if t.on_chip:
        return _tile.broadcast_to(_rank_aligned(t, len(shape)), shape=shape)
    if len(shape) < t.ndim:
        raise ArgumentError("NkiTensor.broadcast_to", f"shape {list(shape)} has fewer dims than {list(t.shape)}")
    v = t.reshape((1,) * (len(shape) - t.ndim) + tuple(t.shape)) if len(shape) > t.ndim else t
    for d, (have, want) in enumerate(zip(v.shape, shape)):
        if have != want:
            if have != 1:
                raise ArgumentError("NkiTensor.broadcast_to", f"cannot broadcast {list(t.shape)} to {list(shape)}")
            v = v.broadcast(d, want)
    return v


# ---- loop_reduce ---------------------------------------------------------------------------------
_TARGET = re.compile(r"^\s*([A-Za-z_]\w*)\s*(\[[^=]*\])?\s*=(?!=)")


def _assigned_value(frame):
    """The value the caller's statement ``name = nl.loop_reduce(...)`` (or ``name[key] = ...``)
    assigns over: ``name`` in the caller's locals (``name[key]``, the key evaluated in the
    caller's frame, when the statement assigns to a subscript), or None."""
    line = linecache.getline(frame.f_code.co_filename, frame.f_lineno)
    m = _TARGET.match(line)
    if not m:
        return None
    value = frame.f_locals.get(m.group(1))
    if m.group(2) and value is not None:
        try:
            return eval(m.group(1) + m.group(2), frame.f_globals, dict(frame.f_locals))   # noqa: S307
        except Exception:           # noqa: BLE001  (a key this line cannot rebuild: no reduction)
            return None
    return value


def loop_reduce(x, op, loop_indices, *, dtype=None, mask=None, **kwargs):
    """``b = nl.loop_reduce(x, op, loop_indices, *, dtype=None, mask=None)``: ``b = op(b, x)``
    where ``b`` is the tile the statement assigns to (the docs: "the destination tile is also the
    rhs input to op", ``b = nisa.tensor_tensor(data1=b, data2=x, op=op)``). One Vector engine
    tensor_tensor into a new SBUF tile (``dtype`` or x's dtype).
    Decision: ``b`` is found as the name the calling statement assigns (``b = ...`` /
    ``b[key] = ...``, read from the kernel's source line, the key evaluated in the caller's
    frame); x of b's partition count and element count but another shape (a (P,) reduction
    into a (P, 1) column) is viewed as b's shape; when there is no b (or it is not a tile of
    x's shape) the reduction starts from ``x`` (a copy of x), which is ``op(identity, x)``.
    ``loop_indices`` only tells the compiler which loops reduce; it is not used."""
    if kwargs:
        raise TypeError(f"nl.loop_reduce() got an unexpected keyword argument {next(iter(kwargs))!r}")
    prev = _assigned_value(sys._getframe(1))
    out_dtype = dtype if dtype is not None else x.dtype
    if (isinstance(prev, NkiTensor) and isinstance(x, NkiTensor) and tuple(prev.shape) != tuple(x.shape)
            and prev.size == x.size and prev.shape and x.shape and prev.shape[0] == x.shape[0]):
        x = x.reshape(tuple(prev.shape))   # a (P,) reduction result into a (P, 1) column: one view
    with masked(mask):
        if isinstance(prev, NkiTensor) and tuple(prev.shape) == tuple(x.shape):
            dst = _creation.ndarray(x.shape, out_dtype, buffer=sbuf)
            _nisa.tensor_tensor(dst, prev, x, _beta1_isa._tok(op))
            return dst
        return _tile.copy(x, dtype=out_dtype)


def atomic_rmw(dst, value, op, *, mask=None):
    """``nl.atomic_rmw(dst, value, op, *, mask=None)``: ``dst = op(dst, value)`` on HBM, atomically;
    ``op`` only np.add (nl.add), as documented (ArgumentError otherwise). ``dst``: an HBM view,
    typically with indirect indices (``t[idx_tile, i_f]``; Decision: a plain HBM view is accepted
    too, the same read-modify-write). ``value``: a tile of dst's element count or a scalar (filled
    into an SBUF tile of dst's shape and dtype first, one memset); a PSUM tile is copied to SBUF
    first. One Beta-2 ``nisa.dma_compute(dst, (value, dst), nl.add)``; an index tile that repeats a
    row adds every duplicate (see ``beta1_isa.rmw_add``). Programs of an SPMD launch run one after
    another, so their updates never interleave.
    Source: aws-neuron-sdk 2.26 general/nki/api/nki/language/__init__.py (atomic_rmw)."""
    opn = "nl.atomic_rmw"
    if getattr(dst, "buffer", None) is None or getattr(dst, "on_chip", True):
        raise _errors.MemorySpaceError(opn, f"dst must be an HBM tensor (with subscripts), got "
                                            f"{getattr(dst, 'buffer', type(dst).__name__)}")
    with masked(mask):
        if not isinstance(value, NkiTensor):
            value = _creation.full(dst.shape, value, dst.dtype, buffer=sbuf)
        value = _to_sbuf(value)
    _beta1_isa.rmw_add(opn, dst, value, op, _beta1_isa._oob(0, opn), mask)


# ---- what Beta 1 documents but nkisim does not run ------------------------------------------------
_MISSING = {"gemm_grid": None, "gemm_stationary_grid": None}


def all_reduce(x, op, program_axes, *, dtype=None, mask=None, parallel_reduce=True, asynchronous=False,
               **kwargs):
    """``nl.all_reduce(x, op, program_axes, *, dtype=None, mask=None, parallel_reduce=True,
    asynchronous=False)``: "apply reduce operation over multiple SPMD programs" (x a tile, op a
    NumPy ALU operator, program_axes an axis or a tuple of grid axes). Always raises
    UnsupportedError.

    Decision: not simulated. The Beta-1 docs give only the signature and "the reduced resulting
    tile": not which programs receive it, when the programs meet (``asynchronous=True`` asks the
    caller to synchronise "e.g. using nki.sync_thread", which Beta 1 does not document either), nor
    what happens to programs on one core, which the Beta-1 programming model runs as independent
    instances (nkisim runs a core's programs one after another, so no program could wait for a
    later one). Its siblings (all_gather, reduce_scatter, all_to_all) are commented out of the same
    index: the feature was never documented for use. The Beta-2 equivalent is a collective across
    ranks: ``nki.collectives.all_reduce(srcs, dsts, replica_group, op)``, run with
    ``nkisim.simulate_ranks(kernel, ranks=N, ...)``.
    Source: aws-neuron-sdk 2.26 general/nki/api/nki/language/__init__.py (all_reduce),
    general/nki/api/nki.language.rst (collectives)."""
    raise UnsupportedError("nl.all_reduce", f"reducing a tile over the SPMD programs of grid axes "
                                            f"{program_axes!r} is a Beta 1 (neuronxcc.nki.language) "
                                            f"collective nkisim does not simulate (its programs run one "
                                            f"after another); in Beta 2 use nki.collectives.all_reduce("
                                            f"srcs, dsts, replica_group, op) across ranks, run with "
                                            f"nkisim.simulate_ranks")


def finfo(dtype):
    """``nl.finfo(dtype)``: the machine limits of a float dtype (``.min``, ``.max``, ``.eps``,
    ``.tiny``, ``.bits``), NKI's low-precision floats included (bfloat16, float8_e4m3, ...).
    Decision: the docs give only the signature; this is NumPy's ``finfo`` (ml_dtypes' for the
    dtypes NumPy lacks), a host-side constant as in NumPy. Raises ArgumentError for a dtype that
    is not an NKI float dtype, UnsupportedError for tfloat32."""
    import ml_dtypes
    dt = _d.as_dtype(dtype)
    if dt is None or not _d.is_float(dt):
        raise ArgumentError("nl.finfo", f"dtype {dtype!r} is not an NKI float dtype")
    if dt == _d.tfloat32:
        raise UnsupportedError("nl.finfo", "tfloat32 has no NumPy / ml_dtypes finfo; use nl.finfo(nl.float32) "
                                           "for its range")
    return ml_dtypes.finfo(dt)


def __getattr__(name):
    if name in _MISSING:
        alt = _MISSING[name]
        raise UnsupportedError(f"nl.{name}", "is a Beta 1 (neuronxcc.nki.language) function nkisim does not "
                                             "simulate" + (f"; in Beta 2 use {alt}" if alt else ""), where="?")
    raise AttributeError(f"module 'neuronxcc.nki.language' has no attribute {name!r}")


program_id, num_programs, program_ndim = _rt.program_id, _rt.num_programs, _rt.program_ndim
spmd_dim, nc = _rt.spmd_dim, _rt.nc

__all__ = sorted(set(TOKENS) | {
    "Beta1Op", "load", "store", "load_transpose2d", "matmul", "transpose", "softmax", "rms_norm", "where",
    "gather_flattened", "dropout", "device_print", "broadcast_to", "expand_dims", "ds", "rand",
    "random_seed", "no_reorder", "fp32", "bfp16", "shared_constant", "shared_identity_matrix",
    "static_cast", "ndarray", "zeros", "ones", "full", "empty_like", "zeros_like", "ones_like",
    "loop_reduce", "atomic_rmw", "program_id", "num_programs", "program_ndim", "spmd_dim", "nc", "arange", "mgrid",
    "par_dim", "masked", "affine_range", "sequential_range", "static_range", "all_reduce"})
__all__ = sorted(__all__ + ["finfo"])
