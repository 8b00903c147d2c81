"""Allocation, and the only two ways an op touches storage: ``read_f32``/``read_raw`` and ``write``.

``write`` is the single rounding step (``dtypes.round_into``) and the single place that marks
allocations written and sets the PSUM matmul flags and never-written marks (``unwritten``). The
race and uninitialised-read checks are reached through ``hooks`` (registered by ``checks``);
errors name the running instruction and operand by ``hooks.accessor``. Imports numpy, dtypes, errors, state and memory only.
"""
from __future__ import annotations

import functools
import math
import threading
import weakref

import numpy as np

from .. import dtypes as _dt
from .. import state
from ..state import current as _current
from ..errors import (ArgumentError, CapacityError, DtypeError, MemorySpaceError, NkiError, ShapeError,
                      UnsupportedError, kernel_location)
from . import hooks as _hooks
from .buffers import ON_CHIP, MemoryRegion, as_buffer, psum, shared_hbm
from .capacity import CoreMemory, staggered
from .tensor import Allocation, Geometry, NkiTensor, _contiguous_strides, contiguous_view

F32 = np.dtype(np.float32)
_TF32 = _dt.tfloat32


_DTYPE_OK: dict = {}     # (dtype as given, target name) -> canonical dtype, for dtypes that passed


def check_dtype(op: str, what: str, dtype, target) -> np.dtype:
    """The canonical NKI dtype, or DtypeError naming ``what`` and the target."""
    try:
        return _DTYPE_OK[(dtype, target.name)]
    except (KeyError, TypeError):
        pass
    d = _check_dtype(op, what, dtype, target)
    try:
        _DTYPE_OK[(dtype, target.name)] = d
    except TypeError:
        pass
    return d


def _check_dtype(op: str, what: str, dtype, target) -> np.dtype:
    d = _dt.as_dtype(dtype)
    if d is None:
        raise DtypeError(op, f"{what} dtype {getattr(dtype, 'name', dtype)!r} is not an NKI dtype "
                             f"(float32, bfloat16, float16, float8_*, int8..uint32, bool)")
    if _dt.name(d) not in target.dtypes:
        raise DtypeError(op, f"{what} dtype {_dt.name(d)} is not supported on {target.name}")
    return d


_LAYOUT: dict = {}   # (shape, dtype, buffer, target, precise) as given -> checked _Layout


class _Layout:
    """What ``allocate`` derives from its arguments once per distinct (shape, dtype, buffer,
    target, precision): the checked shape, dtype and buffer, the storage dtype, the element
    count, the row-major strides and the bytes per partition (on-chip)."""
    __slots__ = ("shape", "dtype", "buffer", "sdt", "n", "strides", "per_part", "on_chip", "geo")

    def __init__(self, shape, dtype, buffer, precise):
        self.shape, self.dtype, self.buffer = shape, dtype, buffer
        self.sdt = _dt.storage_dtype(dtype, precise)
        self.n = math.prod(shape)
        self.strides = _contiguous_strides(shape)
        self.on_chip = buffer in ON_CHIP
        self.per_part = math.prod(shape[1:]) * dtype.itemsize
        self.geo = Geometry(self.shape, self.strides, 0)     # the whole view of such an allocation


def _layout(op, shape, dtype, buffer, target, precise) -> _Layout:
    """The checked layout of a new allocation (memoised: the rules depend on these values only).

    Raises: ShapeError, DtypeError, CapacityError, ValueError (unknown buffer)."""
    key = (shape, dtype, buffer, target, precise) if _plain_key(shape, buffer) else None
    try:
        if key is not None:
            return _LAYOUT[key]
    except KeyError:
        pass
    except TypeError:       # an unhashable dtype: check it, do not remember it
        key = None
    buf = _creation_buffer(op, buffer)
    shape = _int_shape(op, shape)
    # NkiTensor: "shape: tuple of positive integers"; Decision: an HBM tensor may be 0-d (the
    # twin of a 0-d argument)
    if any(s < 1 for s in shape) or (not shape and buf in ON_CHIP):
        raise ShapeError(op, f"shape {shape} must have at least one dim, each a positive integer")
    dt = check_dtype(op, "tensor", dtype, target)
    lay = _Layout(shape, dt, buf, precise)
    if lay.on_chip:
        if shape[0] > target.pmax:
            raise ShapeError(op, f"partition dim {shape[0]} of {buf} tensor {{name}} exceeds "
                                 f"{target.pmax} on {target.name}")
        limit = target.psum_partition_bytes if buf is psum else target.sbuf_usable_bytes
        if lay.per_part > limit:
            raise CapacityError(op, f"{buf} tensor {{name}} needs {lay.per_part} bytes per partition, "
                                    f"exceeds {limit} bytes per partition on {target.name}")
    if not lay.on_chip:     # an HBM tensor larger than the device's HBM, before any host memory
        check_hbm_size(op, f"{buf} tensor {{name}}", lay.n * dt.itemsize, target)
    if key is not None:
        if len(_LAYOUT) > 4096:
            _LAYOUT.clear()
        _LAYOUT[key] = lay
    return lay


def _int_shape(op, shape) -> tuple:
    """``shape`` as a tuple of Python ints: ints and NumPy integers only (a float such as 128.5,
    128.0 or ``np.float32(4)``, or a bool, raises ShapeError instead of being truncated)."""
    dims = (shape,) if isinstance(shape, (int, np.integer)) else shape
    try:
        dims = tuple(dims)
    except TypeError:
        raise ShapeError(op, f"shape must be a tuple of ints, got {shape!r}") from None
    out = []
    for s in dims:
        if isinstance(s, (bool, np.bool_)) or not isinstance(s, (int, np.integer)):
            raise ShapeError(op, f"shape {shape!r} must hold integers; dim {len(out)} is "
                                 f"{type(s).__name__} {s if isinstance(s, np.generic) else repr(s)}")
        out.append(int(s))
    return tuple(out)


def _creation_buffer(op, buffer) -> MemoryRegion:
    """The buffer of a creation op: a buffer object (``nl.sbuf``, ``nl.psum``, ``nl.hbm``,
    ``nl.private_hbm``, ``nl.shared_hbm``). A string such as ``'sbuf'`` raises ArgumentError:
    "nl.ndarray, nl.zeros, and other creation ops no longer accept strings for the buffer
    parameter" (aws-neuron-sdk nki/migration/index.rst, NKI 0.3.0)."""
    if type(buffer) is MemoryRegion:
        return buffer
    if isinstance(buffer, str):
        try:
            obj = as_buffer(buffer)
        except ValueError:
            obj = None
        hint = f"; use nl.{'hbm' if buffer == 'hbm' else obj.value}" if obj is not None else ""
        raise ArgumentError(op, f"buffer {buffer!r} is a string; creation ops take a buffer object "
                                f"(nl.sbuf, nl.psum, nl.hbm, nl.private_hbm, nl.shared_hbm){hint}")
    raise ArgumentError(op, f"buffer {buffer!r} is not a buffer; expected nl.sbuf, nl.psum, nl.hbm, "
                            f"nl.private_hbm or nl.shared_hbm")


def _plain_key(shape, buffer) -> bool:
    """True when ``(shape, buffer)`` may key the layout memo as given: Python ints and a buffer
    object (128.0 == 128 and 'sbuf' == nl.sbuf hash alike, so they must not find a checked entry)."""
    if type(buffer) is not MemoryRegion:
        return False
    if type(shape) is tuple:
        for s in shape:
            if type(s) is not int:
                return False
        return True
    return type(shape) is int


def check_hbm_size(op: str, what: str, nbytes: int, target) -> None:
    """CapacityError when one tensor needs more bytes than the NeuronDevice's HBM holds (checked
    before any host memory is taken, so a huge tensor never ends in NumPy's MemoryError).
    Source: the architecture guides (trn1 32 GiB, trn2 96 GiB, trn3 144 GiB of device memory)."""
    if nbytes > target.hbm_bytes:
        raise CapacityError(op, f"{what} needs {nbytes} bytes, exceeds the {target.hbm_bytes} bytes "
                                f"({target.hbm_bytes / 2**30:g} GiB) of HBM on {target.name}")


def _layout_named(op, shape, dtype, buffer, target, precise, name) -> _Layout:
    """``_layout``, with the tensor's name (or shape) in the error messages."""
    try:
        return _layout(op, shape, dtype, buffer, target, precise)
    except NkiError as exc:             # name the tensor in the message (the layout is shared)
        if "{name}" in exc.what:
            shp = _int_shape(op, shape)
            named = type(exc)(exc.op, exc.what.replace("{name}", str(name or shp)), exc.where)
            named.__dict__.update(exc._fields())        # operand, limit, path
            raise named from None
        raise


def allocate(shape, dtype, buffer, name: str = "", op: str = "nl.ndarray", fill=True,
             address=None) -> NkiTensor:
    """A new tensor of ``shape``/``dtype`` in ``buffer``, filled with NaN (floats) / 4 (ints).

    On SBUF/PSUM dim 0 is the partition dim (<= target.pmax); one allocation's bytes per partition
    must fit the target's usable SBUF (or PSUM) per partition. Under LNC2 the k-th ``shared_hbm``
    allocation of every core is one tensor (both cores see the same memory). ``shape`` holds
    integers (ShapeError otherwise); ``buffer`` is a buffer object (ArgumentError for a string).
    ``address`` = (partition_offset, free_offset in bytes) places an SBUF/PSUM tensor by hand
    (see ``check_address``; overlaps with other live placed tensors are found by the capacity
    check at kernel end).
    Raises: ShapeError, DtypeError, CapacityError, ArgumentError.
    """
    core = _current.get()
    if core is None:
        core = state.core(op)       # raises: no kernel is being simulated
    launch = core.launch
    settings = launch.settings
    lay = None
    if type(buffer) is MemoryRegion and type(shape) is tuple:
        for s in shape:
            if type(s) is not int:
                break
        else:
            try:
                lay = _LAYOUT.get((shape, dtype, buffer, launch.target, settings.precise_fp))
            except TypeError:       # an unhashable dtype: _layout_named checks it
                pass
    if lay is None:
        lay = _layout_named(op, shape, dtype, buffer, launch.target, settings.precise_fp, name)
    if address is not None:
        address = check_address(op, address, lay, launch.target, name)
    buf = lay.buffer
    if buf is shared_hbm and launch.lnc > 1:
        shape, dt = lay.shape, lay.dtype
        with launch.lock:
            k = core.shared_count
            core.shared_count += 1
            if k < len(launch.shared_allocs):
                alloc = launch.shared_allocs[k]
                if alloc.shape != shape or alloc.dtype != dt:
                    raise ShapeError(op, f"shared_hbm allocation #{k} differs between cores: "
                                         f"{alloc.shape} {_dt.name(alloc.dtype)} vs {shape} {_dt.name(dt)}")
                return _whole_view(alloc, lay)
            alloc = _new_alloc(lay, name, None, settings, fill, core)
            alloc.id = f"shared{k}"
            launch.shared_allocs.append(alloc)
            return _whole_view(alloc, lay)
    if lay.on_chip:
        mem = core.memory
        if mem is None:
            mem = core.memory = CoreMemory(launch.target, deferrable=launch.lnc == 1 and core.fast,
                                           pooled=core.fast)
        alloc = _new_alloc(lay, name, core.core_id, settings, fill, core, mem)
        alloc.address = address
        alloc.rec = mem.add(alloc, lay.per_part)     # checked at kernel end
        if core.mask is not None:                    # a Beta-1 call's result under mask=
            _masked_results(core)[alloc] = core.mask
    else:
        alloc = _new_alloc(lay, name, None if buf is shared_hbm else core.core_id, settings, fill, core)
        if buf is shared_hbm:          # LNC1: the same id the k-th shared allocation has under LNC2
            alloc.id = f"shared{core.shared_count}"
            core.shared_count += 1
    return _whole_view(alloc, lay)


def _whole_view(alloc, lay) -> NkiTensor:
    """The whole row-major view of a new allocation of layout ``lay`` (with the layout's
    Geometry record: memory.tensor.Geometry)."""
    t = NkiTensor(alloc, lay.shape, lay.strides, 0)
    t._whole = t._order = True
    geo = t._geo = lay.geo
    t._sig = geo.sig
    return t


def check_address(op, address, lay, target, name="") -> tuple:
    """An explicit allocation address ``(partition_offset, free_offset)``, checked for ``lay``.

    The free offset is in bytes within each partition (Decision: the docs disagree -- the
    migration guide calls it "the element offset within each partition" but all its examples
    and the SbufManager page compute byte addresses, e.g. ``bank_id * 2048`` for a PSUM bank and
    ``sca + i * n_k * 2`` for bfloat16). Rules:
    - SBUF/PSUM only (ArgumentError for an HBM tensor: HBM has no partitions);
    - two non-negative integers (ArgumentError);
    - the tensor lies inside the partitions: partition_offset + shape[0] <= pmax (ShapeError),
      and its start partition follows the hardware's start-partition rule -- more than 64
      partitions start at 0, 33..64 at 0 or 64, 1..32 at 0, 32, 64 or 96 (ShapeError;
      nki/guides/architecture/trainium_inferentia2_arch.rst, "Accessing SBUF/PSUM tensors");
    - free_offset + bytes per partition <= the usable SBUF bytes per partition
      (``nl.tile_size.total_available_sbuf_size``) or the PSUM bytes per partition (CapacityError);
    - PSUM: the tensor starts at the beginning of a bank ("The allocation for PSUM tensors must
      start at the beginning of each bank", nki/migration/index.rst) (ShapeError).
    """
    label = f"{lay.buffer} tensor {name or lay.shape}"
    if not lay.on_chip:
        raise ArgumentError(op, f"address={address!r} given for {label}; only SBUF and PSUM tensors "
                                f"take an address (partition_offset, free_offset)")
    try:
        part, free = address
    except (TypeError, ValueError):
        raise ArgumentError(op, f"address must be (partition_offset, free_offset), got {address!r}") from None
    for what, v in (("partition_offset", part), ("free_offset", free)):
        if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)) or v < 0:
            raise ArgumentError(op, f"address {what} must be a non-negative integer, got {v!r}")
    part, free = int(part), int(free)
    n = lay.shape[0]
    if part + n > target.pmax:
        raise ShapeError(op, f"{label} at partition_offset {part} with {n} partitions reaches partition "
                             f"{part + n - 1}, beyond the {target.pmax} partitions on {target.name}")
    quad = target.pmax // 4
    step = target.pmax if n > 2 * quad else 2 * quad if n > quad else quad
    if part % step:
        starts = ", ".join(str(k) for k in range(0, target.pmax, step))
        raise ShapeError(op, f"{label} spans {n} partitions and must start at partition {starts}; got "
                             f"partition_offset {part} on {target.name}")
    limit = target.psum_partition_bytes if lay.buffer is psum else target.sbuf_usable_bytes
    if free + lay.per_part > limit:
        raise CapacityError(op, f"{label} at free_offset {free} needs {lay.per_part} bytes per partition, "
                                f"ending at byte {free + lay.per_part}, beyond the {limit} bytes per "
                                f"partition of {lay.buffer} on {target.name}")
    if lay.buffer is psum and free % target.psum_bank_bytes:
        raise ShapeError(op, f"{label} at free_offset {free} does not start at a PSUM bank boundary "
                             f"(a multiple of {target.psum_bank_bytes} bytes) on {target.name}")
    return part, free


def _new_alloc(lay, name, core_id, settings, fill, core, mem=None):
    pool = mem.pool if mem is not None else None
    if pool is not None:
        storage = pool.take(lay.n, lay.sdt)
        if storage is None:
            storage = staggered(lay.n, lay.sdt)
        elif core.events is not None:
            core.launch.count("storage_pool")
    else:
        storage = staggered(lay.n, lay.sdt)
    alloc = Allocation(storage, lay.buffer, lay.shape, lay.dtype, name, core_id, kernel_location(3),
                       settings.precise_fp)
    alloc.pending = fill        # the NaN / 4 sentinel is written on first use, unless a first
    #                             write covers the whole allocation (see write / NkiTensor.np)
    if core_id is not None and core.fast:
        alloc.parts = ()        # partial writes may postpone the fill (Allocation.wrote_part)
        if lay.buffer is psum:
            alloc.mm_view = _NO_VIEW    # the matmul flags' last marked view is kept (set_matmul_flags)
    alloc.pool = pool           # on-chip storage is recycled when the allocation dies
    core.serial += 1
    alloc.serial = core.serial
    if core_id is not None:     # a shared_hbm allocation is named shared<k> by the caller
        core.local_count += 1
        alloc.local = core.local_count
        alloc._id = None            # c<core_id>.<local>, named when first read (Allocation.id)
    if settings.uninitialized_reads == "raise":
        alloc.init = np.zeros(lay.n, np.bool_)
    if core_id is None and core.launch.shared_watch is not None:
        alloc.watch = core.launch.shared_watch      # LNC2 shared_hbm: the cores' turns (and races)
    elif settings.detect_races:
        alloc.watch = _hooks.watch_access
    return alloc


def wrap_array(array: np.ndarray, buffer, name: str, precise: bool, target) -> NkiTensor:
    """An HBM tensor over a caller's array. A C-contiguous, writeable array already in its storage
    dtype is used in place (no copy; its values are copied aside on the kernel's first write to it,
    so ``restore`` can undo a failed kernel); any other array is copied, and ``copy_back`` returns
    the kernel's writes. Raises DtypeError for dtypes NKI lacks (e.g. float64, int64)."""
    dt = _dt.as_dtype(array.dtype)
    if dt is None or _dt.name(dt) not in target.dtypes:
        hint = " (convert with .astype(np.float32))" if array.dtype.kind == "f" else \
            " (convert with .astype(np.int32))" if array.dtype.kind in "iu" else ""
        raise DtypeError("kernel argument", f"{name}: dtype {_dt.name(dt) if dt is not None else array.dtype} "
                                            f"is not an NKI dtype on "
                                            f"{target.name}{hint}")
    sdt = _dt.storage_dtype(dt, precise)
    in_place = array.dtype == sdt and array.flags.c_contiguous and array.flags.writeable
    storage = array.reshape(-1) if in_place else _dt.to_storage(array, sdt).reshape(-1)
    alloc = Allocation(storage, as_buffer(buffer), array.shape or (1,), dt, name, None, "argument", precise)
    alloc.id = f"arg:{name}"
    if in_place:
        alloc.snapshot = _NOT_TAKEN
    elif not array.flags.writeable:
        alloc.snapshot = _READ_ONLY
    t = contiguous_view(alloc)
    key = (alloc.shape, dt, alloc.buffer, storage.size, storage.dtype)
    geo = _ARG_GEO.get(key)
    if geo is None:
        if len(_ARG_GEO) >= 4096:
            _ARG_GEO.clear()
        geo = _ARG_GEO[key] = Geometry(t.shape, t.strides, 0)
    t._geo = geo                # the argument's views share records with the last call's
    t._sig = geo.sig
    return t


# (shape, dtype, buffer, storage size, storage dtype) -> the Geometry of an argument's whole view
_ARG_GEO: dict = {}


_NOT_TAKEN = object()


class NoWrites:
    """An argument allocation's ``snapshot`` marker: the kernel may read it, and its first write
    raises MemorySpaceError ending with ``why`` (set by ``runtime.launch``)."""
    __slots__ = ("why",)

    def __init__(self, why: str):
        self.why = why


_READ_ONLY = NoWrites("a read-only array of the caller; the kernel cannot write it (pass a writeable array)")


def is_in_place(t: NkiTensor) -> bool:
    """True when the tensor's storage is the caller's own array."""
    return t.alloc.snapshot is not None


def restore(t: NkiTensor) -> None:
    """Undo a failed kernel's writes to a caller's array used in place."""
    snap = t.alloc.snapshot
    if isinstance(snap, np.ndarray):
        if t.alloc.dependents:
            t.alloc.release_dependents()
        t.alloc.storage[...] = snap


def copy_back(t: NkiTensor, array: np.ndarray) -> None:
    """After success, store a copied argument's final values into the caller's array."""
    if t.alloc.written and t.alloc.snapshot is None:
        array[...] = to_numpy(t).reshape(array.shape).astype(array.dtype, copy=False)


_SNAPSHOT_LOCK = threading.Lock()


def _first_write(t: NkiTensor) -> None:
    """Before the first write to ``t``'s allocation: copy a caller's array used in place aside
    (for ``restore``); a read-only caller array raises MemorySpaceError naming the instruction
    and the written operand (``dst`` when the written view is not exactly one of its operands)."""
    alloc = t.alloc
    if alloc.snapshot is _NOT_TAKEN:
        with _SNAPSHOT_LOCK:        # LNC2: the other core waits until the copy is complete
            if alloc.snapshot is _NOT_TAKEN:
                alloc.snapshot = alloc.storage.copy()
    elif isinstance(alloc.snapshot, NoWrites):
        op, role = _hooks.accessor(t, "w")
        raise MemorySpaceError(op, f"{'dst' if role == 'operand' else role} is {alloc.name}, "
                                   f"{alloc.snapshot.why}")
    alloc.written = True


def to_numpy(t: NkiTensor, own: bool = False) -> np.ndarray:
    """The view's elements as a NumPy array in its NKI dtype (tfloat32 comes back as float32).

    ``own=True`` (a kernel output after the launch ended) may hand out the storage itself when the
    view covers the whole allocation in order; otherwise the result is a fresh copy.
    """
    out_dt = F32 if t.dtype == _dt.tfloat32 else t.dtype
    a = t.np()
    if own and a.dtype == out_dt and t.offset == 0 and t.size == t.storage.size and a.flags.c_contiguous:
        return a
    return _dt.from_storage(a, out_dt)


def _on_read(t: NkiTensor) -> None:
    alloc = t.alloc
    if alloc.watch is not None:       # a race explains an uninitialised read: record it first
        alloc.watch(t, "r", False)
    if alloc.init is not None:
        _hooks.check_read(t)


def read_raw(t: NkiTensor, hooks: bool = True) -> np.ndarray:
    """The view's elements as stored (no conversion; shares memory — do not write into it).

    ``hooks=False`` skips the strict-uninitialised and race checks (for reads that are part of a
    documented accumulation, e.g. nc_matmul into PSUM)."""
    if hooks and (t.alloc.init is not None or t.alloc.watch is not None):
        _on_read(t)
    lazy = t.alloc.lazy
    if lazy is not None and _in_order(t):
        return _deferred(t, lazy)
    return t.np()


def read_f32(t, hooks: bool = True) -> np.ndarray:
    """The operand as float32, as the engines read it (shares memory when stored as float32).

    Never write into the result: it may be the storage itself (fp32). A non-fp32 view (bf16,
    fp8, fp16, integers) is converted on every read (``to_f32``). Decision (measured twice,
    issue 14): upcasts are not kept between reads. Keeping them cost more than it saved (the
    512^3 bf16 matmul 2 % slower, flash_attention bf16 at S=1024 5 % slower; at 2048^3 bf16 the
    conversions fell 99.7 -> 43.4 ms while the GEMMs on cold kept copies rose 186.6 -> 248.8 ms),
    so the mechanism was removed.
    """
    if isinstance(t, NkiTensor):
        alloc = t.alloc
        if hooks and (alloc.init is not None or alloc.watch is not None):
            _on_read(t)
        lazy = alloc.lazy
        if lazy is not None and _in_order(t):
            a = _deferred(t, lazy)
        else:
            a = t.np()
        if a.dtype == F32:
            return a
        if t.dtype in _dt.PACKED:       # an MX x4 dtype: packed words, not values
            _packed_error(t, "r")
        return to_f32(a)
    return np.asarray(t, dtype=F32)


_BF16 = _dt.bfloat16
_LUT: dict = {}     # one-byte float dtype -> float32 value of each of its 256 bit patterns


def to_f32(a: np.ndarray) -> np.ndarray:
    """A new float32 array of ``a``'s values (exact: every NKI dtype is a subset of float32 or an
    integer). One-byte floats (fp8) go through a 256-entry table of ``astype``'s own results,
    several times faster than ml_dtypes' element-wise cast and bit-identical to it. bfloat16 is
    the top half of a float32, so its bits shifted up 16 are the float32 (every one of the 65,536
    patterns, NaN payloads included, as ml_dtypes' cast gives them; measured 1.7-1.8x faster than
    the cast on a 128 x 512 tile, more on a strided view of a large tensor, issue 14)."""
    d = a.dtype
    if d is _BF16:
        u = a.view(np.uint16).astype(np.uint32)     # (the layout astype(F32) would give)
        u <<= 16
        return u.view(F32)
    if d.itemsize == 1 and d.kind not in "iub":
        lut = _LUT.get(d)
        if lut is None:
            lut = _LUT[d] = np.arange(256, dtype=np.uint8).view(d).astype(F32)
        return np.take(lut, a.view(np.uint8))
    return a.astype(F32)


def _packed_error(t: NkiTensor, kind: str):
    """A read as values of, or a value write into, an MX x4 tensor (only copies of the same dtype
    and the MX instructions handle packed data)."""
    op, role = _hooks.accessor(t, kind)
    raise DtypeError(op, f"{role} dtype {_dt.name(t.dtype)} is a packed MX type: only a copy to or "
                         f"from the same dtype, quantize_mx and nc_matmul_mx take it (view it as "
                         f"uint32/uint16 with .view() to handle the raw words)")


def write(t: NkiTensor, values, matmul: bool = False, add: bool = False, overwrite: bool = False,
          reduction: bool = False) -> None:
    """Round ``values`` once into ``t``'s dtype and store them through the view.

    ``values`` must have ``t``'s element count (any shape with the same partition-major order, or
    broadcastable to ``t.shape``). ``add=True`` stores ``t + values`` (the fp32 sum, rounded once;
    in place when ``t`` is stored as float32) — the PSUM accumulation of ``nc_matmul``; that read of
    ``t`` is part of the accumulation, so it is not reported as a race or uninitialised read.
    ``matmul=True`` marks the region as written by a matmul (PSUM auto-accumulate flags); any other
    write clears those flags. A matmul write counts as an accumulation for race detection unless
    ``overwrite=True`` (``accumulate=False``); so does a ``reduction=True`` write (``psum += ...``).
    """
    if _keeping and _keep_write(t, values, matmul, add, overwrite, reduction):
        return
    alloc = t.alloc
    if alloc.dependents or alloc.lazy is not None:
        _before_store(alloc, not add and _whole(t))
    if alloc.watch is not None:
        alloc.watch(t, "w", (matmul and not overwrite) or reduction)
    if alloc.pending:
        if add:
            alloc.fill(t)
        else:
            _settle(t)
    lazy = alloc.lazy
    if lazy is not None and add and _in_order(t) and t.dtype is F32 and t.storage.dtype is F32 \
            and lazy.strides[-1]:   # (a stride-0 fill is faster written out, then added to)
        alloc.lazy = None           # one pass below: dst = (deferred source) + values
    else:
        lazy = None
    dst = _written(t)
    if not alloc.written:
        _first_write(t)
    if add and dst.dtype == F32 and t.dtype == F32:
        values = np.asarray(values)
        if values.shape != dst.shape and values.size == dst.size:
            values = values.reshape(dst.shape)
        if lazy is None:
            dst += values
        else:
            np.add(lazy, values, out=dst)
    else:
        if add:
            values = dst.astype(F32) + np.asarray(values).reshape(dst.shape)
        if type(values) is np.ndarray and values.dtype is dst.dtype and t.dtype is not _TF32:
            arr = values            # already in the storage dtype: nothing to round
        elif t.dtype in _dt.PACKED and np.asarray(values).dtype != dst.dtype:
            _packed_error(t, "w")
        else:
            arr = _dt.round_into(values, t.dtype, alloc.precise)
        if arr.shape != dst.shape and arr.size == dst.size:
            arr = arr.reshape(dst.shape)
        dst[...] = arr
    if alloc.mm_flags is not None:
        set_matmul_flags(t, matmul)
    if alloc.init is not None:
        _hooks.mark_written(t)


_keeping = 0    # instructions running under a non-range mask (``keeping``): 0 on the plain path


def keeping(core, keep) -> None:
    """The dispatcher runs ``core``'s instruction under a non-range Beta-1 mask (``keep``: the bool
    grid of the elements kept, ``memory.masks.Box.keep``), or ends it (``None``): while it runs,
    ``write`` stores only kept elements and the write fast paths (``out_f32``, ``matmul_out``,
    deferred copies and fills) stand aside."""
    global _keeping
    if keep is None:
        if core.keep is not None:
            core.keep = None
            _keeping -= 1
    else:
        core.keep = keep
        _keeping += 1


def _keep_write(t: NkiTensor, values, matmul, add, overwrite, reduction) -> bool:
    """``write`` under a non-range mask: the write, then the dropped elements get their old
    values back (False when this core runs no such mask). Decision: the dropped elements count
    as written for the uninitialised-read check and the PSUM matmul flags and never-written marks."""
    core = state.current.get()
    keep = core.keep if core is not None else None
    if keep is None:
        return False
    try:
        kept = np.broadcast_to(keep, t.shape)
    except ValueError:
        op, role = _hooks.accessor(t, "w")
        raise UnsupportedError(op, f"{role} {t.shape} is not of the shape of the mask's grid {keep.shape}: a "
                                   f"mask that is not a range of each axis needs an element-wise "
                                   f"instruction") from None
    old = t.np().copy()
    core.keep = None
    try:
        write(t, values, matmul, add, overwrite, reduction)
    finally:
        core.keep = keep
    drop = ~kept
    t.np()[drop] = old[drop]
    return True


def out_f32(t: NkiTensor):
    """The writable NumPy view of a float32 tensor stored as float32 (where no rounding is due),
    after running every write hook (race record, caller snapshot, PSUM flags, initialised mask), so
    an op can compute straight into it with a ufunc's ``out=``; None for any other tensor (use
    ``write``). Read the op's inputs before calling it."""
    if t.dtype != F32 or t.storage.dtype != F32 or _keeping:
        return None
    core = state.current.get()
    if core is None or not core.fast:
        return None
    if core.events is not None:
        core.launch.count("out_f32")
    alloc = t.alloc
    _before_store(alloc, _whole(t))
    _write_hooks(t, alloc)
    return _written(t)


def matmul_out(t: NkiTensor, overwrite: bool):
    """The writable float32 NumPy view of a whole PSUM tile stored as float32 that an
    ``nc_matmul`` overwrites (its PSUM flags say no accumulation is due), after the write hooks
    (``overwrite``: accumulate=False, for race detection); None when ``t`` is not such a tile.
    Read the operands after calling it (a deferred copy of ``t`` is carried out first)."""
    if t.dtype is not F32 or t.storage.dtype is not F32 or not _whole(t) or _keeping:
        return None
    core = state.current.get()
    if core is None or not core.fast:
        return None
    if core.events is not None:
        core.launch.count("matmul_out")
    alloc = t.alloc
    _before_store(alloc, True)
    _write_hooks(t, alloc, matmul=True, accumulation=not overwrite)
    out = _written(t)
    return out if out.flags.c_contiguous else None


def _before_store(alloc, whole: bool) -> None:
    """Before anything is stored into ``alloc``: tiles still reading it through a deferred copy
    get their own copy; a ``whole`` overwrite makes the allocation's own deferred copy moot."""
    if alloc.dependents:
        alloc.release_dependents()
    if whole:
        alloc.lazy = None


def _write_hooks(t: NkiTensor, alloc, matmul: bool = False, accumulation: bool = False) -> None:
    """What every write of a whole result into ``t`` does besides storing the values (see
    ``write`` for ``matmul`` and ``accumulation``)."""
    if alloc.watch is not None:
        alloc.watch(t, "w", accumulation)
    if alloc.pending:
        _settle(t)
    if not alloc.written:
        _first_write(t)
    if alloc.mm_flags is not None:
        set_matmul_flags(t, matmul)
    if alloc.init is not None:
        _hooks.mark_written(t)


def _can_defer(t: NkiTensor) -> bool:
    """``t`` may take a deferred copy: the whole view of an on-chip allocation (``rec``) of an
    LNC1 launch, not deferred already and not itself the source of a deferred copy."""
    alloc = t.alloc
    rec = alloc.rec
    return (not _keeping and rec is not None and rec.mem.deferrable and alloc.lazy is None and _in_order(t)
            and not alloc.dependents)


def copy_deferred(dst: NkiTensor, src: NkiTensor) -> bool:
    """``dst = src`` bit-exactly without copying now, when it is safe; False when the caller must
    copy (``write(dst, read_raw(src))``).

    Decision (speed; no visible effect): a same-dtype copy of a whole view into a whole on-chip
    allocation records a NumPy view of ``src`` instead of copying. An op reading all of ``dst``
    reads the source directly (``read_raw``/``read_f32``); any other access to ``dst``
    (``NkiTensor.np``) makes the copy first, and so does any write to the source allocation
    first (``write``/``out_f32``/``restore`` call ``release_dependents``), so every read sees the
    values of the moment of the copy. Only for LNC1 launches and single-level (a deferred copy
    is never the source of another). Decision (measured, issue 14): not under LNC2, where a core
    waiting for its shared-HBM turn while holding a source view could see the other core's
    write, and deferring the decode weights there gained nothing (the matmul then reads the
    strided source). The hooks of the source read (race,
    uninitialised) and of the destination write run as for a real copy.
    """
    if dst._whole is False or not _in_order(dst):   # (_can_defer's test, first: a partial view never defers)
        return False
    da, sa = dst.alloc, src.alloc
    if (not _can_defer(dst) or da is sa or sa.lazy is not None or src.shape != dst.shape
            or src.dtype is not dst.dtype or src.storage is not sa.storage
            or dst.storage.dtype is not src.storage.dtype):
        return False
    view = read_raw(src)
    _write_hooks(dst, da)
    _used(da.rec, write=True)       # written now, for the lifetime model
    _count("deferred_copy")
    da.lazy = view
    sa.add_dependent(da)
    return True


def fill_deferred(t: NkiTensor, value) -> bool:
    """``t[...] = value`` (a scalar, rounded once into t's dtype) for a whole fresh on-chip tile,
    recorded as a deferred copy of a stride-0 view instead of written now (see
    ``copy_deferred``); False when the caller must write it."""
    alloc = t.alloc
    if not _can_defer(t) or t.storage is not alloc.storage:
        return False
    scalar = _dt.round_into(np.asarray(value), t.dtype, alloc.precise)
    if scalar.dtype is not t.storage.dtype:
        return False
    _write_hooks(t, alloc)
    _used(alloc.rec, write=True)
    _count("deferred_fill")
    alloc.lazy = np.broadcast_to(scalar, t.shape)
    return True


def _count(fast_path: str) -> None:
    core = state.current.get()
    if core is not None and core.events is not None:
        core.launch.count(fast_path)


def _deferred(t: NkiTensor, view: np.ndarray) -> np.ndarray:
    """The source view of a whole tile with a deferred copy (the tile counts as used now)."""
    _used(t.alloc.rec)
    return view


def held(t):
    """(record, last use, first read) of ``t``'s on-chip allocation, live before the DMA store
    about to read it, for ``hoisted``; None when ``t`` is not on-chip or not accessed yet (the
    store then births it: a tile only loaded and stored still occupies SBUF at that instant)."""
    alloc = getattr(t, "alloc", None)
    rec = getattr(alloc, "rec", None)
    if rec is None or rec.born is None:
        return None
    saved = (rec, rec.last, rec.read_at)
    if rec.read_at is None:
        rec.read_at = -1            # the store is not the tile's first read (see hoisted)
    return saved


def hoisted(saved) -> None:
    """Undo the use a DMA store just gave a tile (from ``held``): the store reads a tile whose
    values are final after its last other access, so the compiler can hoist the store to right
    after that access; the tile is dead from there, and the store is not its first read
    (capacity's lifetime model)."""
    if saved is not None:
        rec, rec.last, rec.read_at = saved


def _used(rec, write: bool = False) -> None:
    """An on-chip allocation is accessed now, without a NumPy view (a deferred copy or fill):
    its lifetime (first and last use; a read or a write, for the sinking rule)."""
    if rec is not None:
        rec.use(write)


def _written(t: NkiTensor) -> np.ndarray:
    """``t.np()`` for a write: the lifetime model counts the access as a write."""
    rec = t.alloc.rec
    if rec is None:
        return t.np()
    m = rec.mem
    m.writing = True
    try:
        return t.np()
    finally:
        m.writing = False


def _settle(t: NkiTensor) -> None:
    """Before a write while the sentinel fill is pending: skip it when the write covers the whole
    allocation; else fill now or remember the view written (``Allocation.wrote_part``)."""
    if _whole(t):
        t.alloc.skip_fill()
    else:
        t.alloc.wrote_part(t)


def _whole(t: NkiTensor) -> bool:
    """True when the view covers its allocation's storage exactly (cached on the view, and per
    view geometry and storage size)."""
    w = t._whole
    if w is None:
        geo = t._geo        # (a view with a Geometry views its allocation's storage, of one size)
        if geo is not None and geo.whole is not None:
            w = geo.whole
        elif t.storage is not t.alloc.storage:
            w = False
        else:
            key = (t.shape, t.strides, t.offset, t.storage.size)
            w = _COVERS.get(key)
            if w is None:
                if len(_COVERS) >= 1 << 16:
                    _COVERS.clear()
                w = _COVERS[key] = t.covers_all()
            if geo is not None:
                geo.whole = w
        t._whole = w
    return w


_COVERS: dict = {}      # (shape, strides, offset, storage size) -> NkiTensor.covers_all()


def _in_order(t: NkiTensor) -> bool:
    """True when ``t`` is its allocation's whole row-major view: the allocation's shape, dtype and
    storage, offset 0, row-major strides -- every element where the allocation's own whole view
    has it (what a deferred copy's source view stands for; a view that covers every element in
    another order, e.g. a transposing ``.ap()``, is not one). Cached on the view."""
    w = t._order
    if w is None:
        alloc = t.alloc
        shape = t.shape
        w = t._order = (t.offset == 0 and shape == alloc.shape and t.storage is alloc.storage
                        and t.dtype is alloc.dtype and t.strides == _row_major(shape))
    return w


_row_major = functools.lru_cache(maxsize=4096)(_contiguous_strides)   # shape -> row-major strides


def matmul_flags(t: NkiTensor):
    """Whether each element of a PSUM view was last written by a matmul: a Python bool when the
    whole view agrees (the common case, O(1)), else a bool array of the view's shape."""
    alloc = t.alloc
    flags = alloc.mm_flags
    if isinstance(flags, bool):
        return flags
    if t.storage is not alloc.storage:
        raise UnsupportedError(_hooks.accessor(t, "w")[0], "PSUM destination viewed with another dtype is "
                                                          "not supported")
    last = alloc.mm_view
    if last and last[0] == t.offset and last[1] == t.shape and last[2] == t.strides:
        _count("matmul_flags_view")
        return last[3]          # every element of this view holds that value (set_matmul_flags)
    if flags is _ONE_VIEW:
        flags = _flags_array(alloc)
    view = np.ndarray(t.shape, np.bool_, buffer=flags, offset=t.offset, strides=t.strides)
    if view.all():
        return True
    return view if view.any() else False


_NO_VIEW = ()     # Allocation.mm_view of a fast-path PSUM tile with no view kept yet
# Allocation.mm_flags of a fast-path PSUM tile whose flags differ only in one view: the elements
# of ``mm_view`` hold its value, every other element the other value (no array made yet)
_ONE_VIEW = object()


def _flags_array(alloc) -> np.ndarray:
    """The flags array of a ``_ONE_VIEW`` tile, made now (and kept as ``alloc.mm_flags``)."""
    offset, shape, strides, value = alloc.mm_view
    flags = alloc.mm_flags = np.full(alloc.storage.shape, not value, np.bool_)
    np.ndarray(shape, np.bool_, buffer=flags, offset=offset, strides=strides)[...] = value
    return flags


def unwritten(t: NkiTensor):
    """Whether each element of a PSUM view was never written (by any instruction, since its
    allocation): a Python bool when the whole view agrees (O(1) once the whole tile is written),
    else a bool array of the view's shape. The NaN sentinel cannot tell this (a computed NaN looks
    the same); Beta 1's ``t += <matmul>`` (``language.tile.start_sum``) and nc_matmul's
    accumulation rules read it. A write through a view of another dtype counts as writing the
    whole allocation (``set_matmul_flags``)."""
    alloc = t.alloc
    blank = alloc.blank
    if isinstance(blank, bool):
        return blank
    if t.storage is not alloc.storage:
        return False
    if type(blank) is list:
        blank = _blank_array(alloc)
    view = np.ndarray(t.shape, np.bool_, buffer=blank, offset=t.offset, strides=t.strides)
    if view.all():
        return True
    return view if view.any() else False


_BLANK_VIEWS = 32    # partial writes kept as a list of views before the never-written array is made


def _blank_array(alloc) -> np.ndarray:
    """``alloc.blank`` as the bool array (True: never written), made from the list of views
    written so far."""
    arr = np.ones(alloc.storage.shape, np.bool_)
    for offset, shape, strides in alloc.blank:
        np.ndarray(shape, np.bool_, buffer=arr, offset=offset, strides=strides)[...] = False
    alloc.blank = arr
    return arr


def _mark_written(t: NkiTensor, alloc, whole: bool) -> None:
    """The PSUM view ``t`` is written now: its elements are no longer ``unwritten``.
    Decision (speed; no visible effect): the views of the first partial writes are kept as a
    list (an array the size of the allocation is made only when ``unwritten`` asks, or after
    ``_BLANK_VIEWS`` distinct views), the same with and without fast paths."""
    if whole or t.storage is not alloc.storage:
        alloc.blank = False
        return
    blank = alloc.blank
    geo = (t.offset, t.shape, t.strides)
    if blank is True:
        alloc.blank = [geo]
    elif type(blank) is list:
        if blank[-1] != geo:
            blank.append(geo)
            if len(blank) > _BLANK_VIEWS:
                _blank_array(alloc)
    else:
        np.ndarray(t.shape, np.bool_, buffer=blank, offset=t.offset, strides=t.strides)[...] = False


def set_matmul_flags(t: NkiTensor, value: bool) -> None:
    """Mark the view's PSUM elements as written (True) or not written (False) by a matmul, and as
    written (``unwritten``); every write into PSUM calls this.

    Decision (speed; no visible effect): on the fast path the view last marked in a flags array
    is kept with its value (``Allocation.mm_view``); only this function changes a flags array, so
    until it marks another view every element of that one still holds the value: marking it
    again with the same value is skipped, and ``matmul_flags`` of it answers without reading
    the flags (an accumulating ``nc_matmul`` into the same part of a PSUM tile, K step after K
    step). A uniform tile whose first differing mark is one view keeps no array at all
    (``_ONE_VIEW``: that view holds its value, the rest the other one) until another view is
    marked or asked about (a matmul into ``psum[0:m, 0:n]`` of a larger tile, read back through
    the same view). A write of the whole tile forgets the kept view. Off with the other fast
    paths (``NKISIM_FAST_PATHS=0``)."""
    alloc = t.alloc
    whole = _whole(t)
    if alloc.blank is not False:
        _mark_written(t, alloc, whole)
    flags = alloc.mm_flags
    if whole:
        alloc.mm_flags = value
        if alloc.mm_view:           # (a kept view no longer describes the flags: fast path only)
            alloc.mm_view = _NO_VIEW
        return
    if isinstance(flags, bool):
        if flags == value:
            return
        if alloc.mm_view is not None and t.storage is alloc.storage:
            alloc.mm_flags = _ONE_VIEW
            alloc.mm_view = (t.offset, t.shape, t.strides, bool(value))
            return
        flags = alloc.mm_flags = np.full(alloc.storage.shape, flags, np.bool_)
    elif flags is _ONE_VIEW:
        last = alloc.mm_view
        if last[3] == value and last[0] == t.offset and last[1] == t.shape and last[2] == t.strides:
            return
        flags = _flags_array(alloc)
    if t.storage is not alloc.storage:
        flags[...] = value          # a reinterpreted view: be conservative, mark everything
        if alloc.mm_view is not None:
            alloc.mm_view = _NO_VIEW
        return
    last = alloc.mm_view
    if last and last[3] == value and last[0] == t.offset and last[1] == t.shape and last[2] == t.strides:
        return
    np.ndarray(t.shape, np.bool_, buffer=flags, offset=t.offset, strides=t.strides)[...] = value
    if alloc.mm_view is not None:
        alloc.mm_view = (t.offset, t.shape, t.strides, bool(value))


def _masked_results(core) -> "weakref.WeakKeyDictionary":
    """The on-chip allocations made while a Beta-1 mask was on (``core.mask``), with that mask."""
    table = core.extras.get("beta1_masked_results")
    if table is None:
        table = core.extras["beta1_masked_results"] = weakref.WeakKeyDictionary()
    return table


def _masked_assignment(dst: NkiTensor, value: NkiTensor):
    """``(dst, value)`` restricted to the mask ``value``'s tile was computed under, or None when
    that mask keeps nothing. Decision: Beta 1 writes ``t[...] = nl.exp(x, mask=m)`` as one
    instruction into ``t`` under ``m``, so the masked-off elements of ``t`` keep their values
    (nki-samples' flash attention assigns ``nisa.affine_select(..., mask=False)``); here the
    call's new tile is copied into ``t`` only where ``m`` kept it. A mask that is not a range of
    each axis, or a destination of another shape, copies the whole tile as before."""
    core = state.maybe_core()
    table = core.extras.get("beta1_masked_results") if core is not None else None
    box = table.get(value.alloc) if table else None
    if box is None:
        return dst, value
    if box.empty:
        return None
    if box.keep is not None or dst.shape != value.shape:
        return dst, value
    from . import affine, masks
    ranges = masks.axis_ranges(box, value.shape, None)
    if ranges is None:
        return dst, value
    return affine.restrict(dst, ranges), affine.restrict(value, ranges)


def assign(dst: NkiTensor, value) -> None:
    """``dst[...] = value`` for a tensor, NumPy array or scalar (values go through float32, exact
    for same-dtype tensors); a Beta-1 tile computed under ``mask=`` is copied only where the mask
    kept it (``_masked_assignment``)."""
    if isinstance(value, NkiTensor):
        if value.alloc.core_id is not None and value.buffer in ON_CHIP and value.size == dst.size:
            pair = _masked_assignment(dst, value)
            if pair is None:
                return
            dst, value = pair
        if value.size != dst.size:
            raise ShapeError("tensor assignment", f"source {value.shape} and destination {dst.shape} "
                                                  f"differ in element count")
        write(dst, read_raw(value) if value.dtype == dst.dtype else read_f32(value))
    else:
        arr = np.asarray(value)
        if arr.dtype.kind in "fc":
            arr = arr.astype(F32)
        write(dst, np.broadcast_to(arr, dst.shape) if arr.size != dst.size else arr)


def dynamic_index(value, op: str) -> int:
    """The integer held by a register or a 1-element integer tensor (a runtime index)."""
    if isinstance(value, NkiTensor):
        if value.size != 1:
            raise ShapeError(op, f"a runtime index tensor must hold one element, got {value.shape}")
        return int(value.np().reshape(-1)[0])
    if hasattr(value, "value"):
        return int(value.value)
    return int(value)


__all__ = ["allocate", "wrap_array", "to_numpy", "read_raw", "read_f32", "write", "assign",
           "matmul_flags", "set_matmul_flags", "unwritten", "out_f32", "dynamic_index", "check_dtype", "MemorySpaceError"]
