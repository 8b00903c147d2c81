"""DMA: ``dma_copy`` (flat element-order copy between HBM and SBUF, dtype cast via fp32),
``dma_transpose`` (axis-permuting copy into SBUF) and ``dma_compute`` (an fp32 sum of several
sources, optionally a gather or scatter read-modify-write).

Source: aws-neuron-sdk nki/api/nki/isa/__init__.py (dma_copy, dma_transpose, dma_compute).
Imports memory, checks, dispatch.
"""
from __future__ import annotations

import numpy as np

from .. import dtypes as _dt
from .. import state
from ..checks import rules
from ..errors import ArgumentError, DtypeError, ShapeError, UnsupportedError
from ..memory.access import copy_deferred, held, hoisted, read_f32, read_raw, write
from ..memory.buffers import HBM, sbuf
from ..memory.indirect import IndirectTensor, valid_rows
from . import alu
from .dispatch import Passed, instruction
from .enums import as_enum, dge_mode as _dge_mode, engine as _engine, oob_mode as _oob

_DMA_BUFFERS = HBM | {sbuf}


def _dma_rules(ins, dst, src, priority, oob_mode, dge_mode, engine, name):
    """dma_copy's rules (see its docstring); for an indirect side, its static rules and
    (scatter, skip) for compute (the index values are read there)."""
    op, t = ins.op, ins.target
    _dma_engine(op, t, as_enum(_dge_mode, dge_mode, op), as_enum(_engine, engine, op))
    if type(dst) is IndirectTensor or type(src) is IndirectTensor:
        return Passed(_engine.dma, _indirect_rules(op, t, dst, src, oob_mode, dge_mode))
    _check_copy(op, t, dst, src, dge_mode, oob_mode)
    return Passed(_engine.dma)


def _dma_compute(ins, dst, src, priority, oob_mode, dge_mode, engine, name):
    if (getattr(dst, "oob", None) is not None or getattr(src, "oob", None) is not None) \
            and as_enum(_oob, oob_mode, ins.op) is _oob.skip:
        ins.note(skipped=True)          # a dynamic address out of bounds: "skip the DMA transfer"
        return
    store = held(src) if dst.buffer in HBM else None        # a store may be hoisted (capacity)
    if ins.info is not None:
        _copy_rows(ins, dst, src, *ins.info)
    elif not copy_deferred(dst, src):
        write(dst, read_raw(src) if src.dtype == dst.dtype else read_f32(src))
    hoisted(store)


@instruction(reads=("src",), writes=("dst",), rules=_dma_rules, compute=_dma_compute)
def dma_copy(dst, src, priority=None, oob_mode=_oob.error, dge_mode=_dge_mode.unknown,
             engine=_engine.unknown, name=None):
    """dst = src, element by element in flat (row-major view) order.

    Shapes: any; ``dst`` and ``src`` must hold the same number of elements.
    Buffers: HBM (private/shared) or SBUF for both; PSUM is not accepted (evacuate with tensor_copy).
    Dtypes: same dtype copies bits exactly; otherwise src -> fp32 -> dst (rounded once);
    ``dge_mode=hwdge`` requires equal dtypes and trn2 or newer ("Hardware based DGE is only
    supported for NeuronCore-v3 or newer"). ``oob_mode``/``dge_mode``/``engine`` accept raw ints.
    Engine: ``engine`` picks the HWDGE descriptor engine, sync or scalar, and is "Only valid when
    dge_mode=nisa.dge_mode.hwdge"; otherwise it must stay unknown (EngineError).
    Indirect (gather/scatter, SWDGE): ``src`` or ``dst`` (not both) may be an HBM
    ``t.ap(pattern, vector_offset=idx, indirect_dim=0)`` view with R rows; the other side must have
    R partitions (SBUF) or R rows (HBM dim 0), row w pairing with index ``idx[w]``.
    Dynamic address (``t.ap(scalar_offset=...)``, a dynamic ``select``): bounds are checked when the
    copy runs; out of bounds is a BoundsError with ``oob_mode=error`` and, with ``oob_mode=skip``,
    no transfer at all ("skip the DMA transfer for a given dynamic address ... out of bound"). An index outside
    the base's rows is a BoundsError with ``oob_mode=error`` and, with ``oob_mode=skip``, skips that
    row (its destination row is left untouched). ``dge_mode=hwdge`` and ``none`` are refused for indirect views ("When sw_dge is selected,
    nisa.dma_copy can also perform a gather or scatter"); a dynamic address needs swdge or hwdge
    (or unknown), not ``none`` ("When either sw_dge or hw_dge mode is used, the src and dst
    tensors can have a dynamic start address").
    The index values are runtime data: they are read, and checked, when the copy runs.
    Event: engine dma (``dge_mode`` and the descriptor ``engine`` are options); an indirect copy
    names the base tensor as its operand and notes ``indirect=True`` and ``rows`` (rows copied).
    Raises: ShapeError, MemorySpaceError, DtypeError, BoundsError, UnsupportedError, EngineError.
    Source: aws-neuron-sdk nki/api/nki/isa/__init__.py (dma_copy).
    """


def _check_copy(op, t, dst, src, dge_mode, oob_mode):
    """dma_copy's rules for two plain tensors (see its docstring)."""
    rules.tensor(op, "dst", dst)
    rules.tensor(op, "src", src)
    rules.on_chip(op, "src", src, _DMA_BUFFERS)
    rules.on_chip(op, "dst", dst, _DMA_BUFFERS)
    rules.same_size(op, "dst", dst, "src", src)
    mode = as_enum(_dge_mode, dge_mode, op)
    as_enum(_oob, oob_mode, op)
    if mode is _dge_mode.none and (dst.dynamic or src.dynamic):
        raise UnsupportedError(op, f"{'dst' if dst.dynamic else 'src'} has a dynamic (runtime) address, which "
                                   f"needs dge_mode swdge or hwdge (with dge_mode=none the descriptors are "
                                   f"made before execution)")
    if mode is _dge_mode.hwdge and dst.dtype != src.dtype:
        raise DtypeError(op, f"dge_mode=hwdge copies bytes and needs equal dtypes, got src "
                             f"{src.dtype} and dst {dst.dtype}")
    if src.on_chip:
        rules.partitions(op, "src", src, t)
    if dst.on_chip:
        rules.partitions(op, "dst", dst, t)


def _dma_engine(op, t, mode, eng):
    """dma_copy's engine and dge_mode rules (see its docstring)."""
    if eng is _engine.unknown and mode is not _dge_mode.hwdge:      # the common case
        return
    if mode is _dge_mode.hwdge:
        if t.nc_version < 3:
            raise UnsupportedError(op, f"dge_mode=hwdge needs trn2 or newer, not {t.name}")
        rules.engine_in(op, eng, (_engine.sync, _engine.scalar, _engine.unknown), t, "for dge_mode hwdge")
    else:
        rules.engine_in(op, eng, (_engine.unknown,), t, f"for dge_mode {mode.name}",
                        hint="(engine is only valid with dge_mode=hwdge)")


def _indirect_rules(op, t, dst, src, oob_mode, dge_mode):
    """dma_copy's static rules with one IndirectTensor side (a row gather from src, a row scatter
    into dst); returns (scatter, skip)."""
    if isinstance(dst, IndirectTensor) and isinstance(src, IndirectTensor):
        raise UnsupportedError(op, "only one of src and dst may be an indirect (vector_offset) view")
    mode = as_enum(_dge_mode, dge_mode, op)
    skip = as_enum(_oob, oob_mode, op) is _oob.skip
    if mode is _dge_mode.hwdge or mode is _dge_mode.none:
        raise UnsupportedError(op, f"indirect (vector_offset) DMA needs the software DGE, not "
                                   f"dge_mode={mode.name}")
    scatter = isinstance(dst, IndirectTensor)
    ind, plain, pname = (dst, src, "src") if scatter else (src, dst, "dst")
    rules.tensor(op, pname, plain)
    rules.on_chip(op, pname, plain, _DMA_BUFFERS)
    if plain.on_chip:
        rules.partitions(op, pname, plain, t)
    rules.same_size(op, "dst", dst, "src", src)
    rows = ind.shape[0]
    if plain.shape[0] != rows:
        raise ShapeError(op, f"{pname} dim 0 is {plain.shape[0]}; the indirect view has {rows} rows "
                             f"and row w pairs with {pname}[w]")
    return scatter, skip


def _copy_rows(ins, dst, src, scatter, skip):
    """The indirect copy: row w of the plain side pairs with base row idx[w] (index values are
    runtime data: out-of-bounds rows raise or are skipped per ``oob_mode``)."""
    op = ins.op
    ind, plain = (dst, src) if scatter else (src, dst)
    ok = valid_rows(ind, op, skip)
    idx = ind.row_indices()
    same = dst.dtype == src.dtype
    if not scatter and same and plain.on_chip and _can_gather_at_once(ins, ind):
        _gather_runs(ind, plain, ok, idx, op)
    else:
        _rows_one_by_one(ind, plain, ok, idx, scatter, same, op)
    ins.note(indirect=True, rows=int(ok.sum()))


def _rows_one_by_one(ind, plain, ok, idx, scatter, same, op):
    core = state.current.get()
    keep = None if core is None else core.keep
    grid = None if keep is None else np.broadcast_to(keep, ind.shape)
    try:
        for w in np.flatnonzero(ok):
            part = plain[w:w + 1]
            base_row = ind.row_view(int(idx[w]), op)
            if grid is not None:        # a non-range Beta-1 mask: row w keeps its own elements
                core.keep = grid[w].reshape(base_row.shape) if scatter else grid[w:w + 1]
            if scatter:
                write(base_row, read_raw(part) if same else read_f32(part))
            else:
                write(part, read_raw(base_row) if same else read_f32(base_row))
    finally:
        if grid is not None:
            core.keep = keep


def _can_gather_at_once(ins, ind) -> bool:
    """A same-dtype gather into an on-chip tile (which cannot overlap the HBM base) may read
    every row in one NumPy indexing and write each run of consecutive destination rows at once
    (fast path): the base has no pending fill, deferred
    copy or dynamic offset, and no access hook but the LNC2 shared-HBM turn (no race detection,
    no strict uninitialised reads)."""
    core = ins.core
    if not core.fast or core.keep is not None:      # a non-range mask: row by row
        return False
    s = core.settings
    if s.detect_races or s.uninitialized_reads == "raise":
        return False
    base = ind.base
    ba = base.alloc
    return (not ba.pending and ba.lazy is None and ba.init is None and not base.dynamic
            and base.oob is None)


def _gather_runs(ind, plain, ok, idx, op):
    """``_rows_one_by_one`` for a gather, bit-identically: the same values in the same rows
    (raw copies), each run of consecutive valid rows written with one ``write`` (the same
    elements in the same flat order), the base's access hook called once, at the first read."""
    rows = np.flatnonzero(ok)
    if not rows.size:
        return
    base = ind.base
    watch = base.alloc.watch
    if watch is not None:           # the LNC2 shared-HBM turn (race detection is off)
        watch(ind.row_view(int(idx[rows[0]]), op), "r", False)
    inner = np.zeros(1, np.int64)
    for n, step in zip(ind.shape[1:] or (1,), ind.steps[1:] or (1,)):
        inner = (inner[:, None] + np.arange(n, dtype=np.int64) * step).reshape(-1)
    starts = ind.offset + idx[rows] * ind.row_step
    values = base.storage[starts[:, None] + inner[None, :]]
    cuts = np.flatnonzero(np.diff(rows) != 1) + 1
    for i, j in zip((0, *cuts.tolist()), (*cuts.tolist(), rows.size)):
        a = int(rows[i])
        write(plain[a:a + (j - i)], values[i:j])


def _dynamic(t) -> bool:
    """``t`` has a runtime (dynamic) start address: made by ``.ap(scalar_offset=...)`` or a
    dynamic ``select`` (``NkiTensor.is_indirect``)."""
    return getattr(t, "dynamic", False)


# i-th dst axis = src axis axes[i]; the only permutation per rank (docs: "Supported axes").
_TRANSPOSE_AXES = {2: (1, 0), 3: (2, 1, 0), 4: (3, 1, 2, 0)}


def _dt_rules(ins, dst, src, axes, priority, dge_mode, oob_mode, name):
    """dma_transpose's rules (see its docstring): the permutation."""
    op, t = ins.op, ins.target
    rules.tensor(op, "dst", dst)
    mode = as_enum(_dge_mode, dge_mode, op)
    oob = as_enum(_oob, oob_mode, op)
    if type(src) is IndirectTensor:
        return _indirect_transpose_rules(op, t, dst, src, axes, priority, mode, oob)
    rules.tensor(op, "src", src)
    if mode is _dge_mode.swdge:
        raise UnsupportedError(op, "dge_mode=swdge is the indirect (gather) transpose: src must be "
                                   "src.ap(..., vector_offset=indices); a direct transpose takes "
                                   "unknown or hwdge")
    if mode is _dge_mode.hwdge and t.nc_version < 3:
        raise UnsupportedError(op, f"dge_mode=hwdge needs trn2 or newer, not {t.name}")
    if oob is _oob.skip and not _dynamic(src):
        raise UnsupportedError(op, "oob_mode=skip is only valid for an indirect src "
                                   "(src.ap(scalar_offset=...) or a dynamic select)")
    _priority(op, priority)
    rules.sbuf_only(op, "dst", dst)
    rules.hbm_or_sbuf(op, "src", src)
    rules.partitions(op, "dst", dst, t)
    if src.on_chip:
        rules.partitions(op, "src", src, t)
    perm = _transpose_perm(op, dst, src, axes)
    if mode is _dge_mode.hwdge:
        _hwdge_transpose_rules(op, t, src)
    return Passed(_engine.dma, perm)


def _priority(op, priority):
    if priority is not None and (not isinstance(priority, (int, np.integer)) or not 0 <= priority <= 3):
        raise ShapeError(op, f"priority must be None or an int in 0..3, got {priority!r}")


def _transpose_perm(op, dst, src, axes) -> tuple:
    """The permutation of a dma_transpose (direct or indirect): same dtypes, the rank's only axes,
    dst shaped as the permuted src."""
    if dst.dtype != src.dtype:
        raise DtypeError(op, f"dst dtype {_dt.name(dst.dtype)} must equal src dtype {_dt.name(src.dtype)}")
    want = _TRANSPOSE_AXES.get(src.ndim)
    if want is None:
        raise ShapeError(op, f"src has {src.ndim} dims; dma_transpose takes 2, 3 or 4")
    perm = want if axes is None else tuple(int(a) for a in axes)
    if perm != want:
        raise ShapeError(op, f"axes {perm} is not supported for a {src.ndim}-D src; expected {want}")
    shape = tuple(src.shape[a] for a in perm)
    if dst.shape != shape:
        raise ShapeError(op, f"dst shape {dst.shape} must equal the transposed src shape {shape}")
    return perm


def _indirect_transpose_rules(op, t, dst, src, axes, priority, mode, oob):
    """dma_transpose's "DMA Indirect Transpose Constraints" (src an ``.ap(vector_offset=...)``
    view): info ("gather", perm, skip)."""
    if t.nc_version < 3:
        raise UnsupportedError(op, f"the indirect (gather) transpose needs trn2 or newer, not {t.name}")
    if mode is not _dge_mode.unknown and mode is not _dge_mode.swdge:
        raise UnsupportedError(op, f"the indirect (gather) transpose runs on the software DGE: "
                                   f"dge_mode must be unknown or swdge, not {mode.name}")
    _priority(op, priority)
    rules.sbuf_only(op, "dst", dst)
    rules.partitions(op, "dst", dst, t)
    if src.dtype.itemsize != t.dma_transpose_itemsize:
        raise DtypeError(op, f"src dtype {_dt.name(src.dtype)}: the indirect transpose needs a "
                             f"{t.dma_transpose_itemsize}-byte dtype")
    perm = _transpose_perm(op, dst, src, axes)
    if src.ndim == 4 and 1 not in (src.shape[1], src.shape[2]):
        raise ShapeError(op, f"a 4-D indirect src needs src.shape[1] or src.shape[2] == 1, got {src.shape}")
    if src.shape[-1] > t.dma_transpose_fmax:
        raise ShapeError(op, f"src.shape[-1] is {src.shape[-1]}; the indirect transpose takes at most "
                             f"{t.dma_transpose_fmax}")
    rows, idx = src.shape[0], src.index
    if rows % 16:
        raise ShapeError(op, f"src.shape[0] is {rows}; the indirect transpose needs a multiple of 16")
    if not (16 <= idx.shape[0] <= 128 and idx.shape[0] % 16 == 0):
        raise ShapeError(op, f"indices have {idx.shape[0]} partitions; the indirect transpose needs 16..128, "
                             f"a multiple of 16")
    if _dt.name(idx.dtype) != "uint32":
        raise DtypeError(op, f"indices dtype {_dt.name(idx.dtype)}: the indirect transpose needs uint32")
    return Passed(_engine.dma, ("gather", perm, oob is _oob.skip))


def _gather_transpose(ins, dst, src):
    """The indirect transpose: gathered[w] = base row indices[w] (out-of-bounds rows raise, or
    with oob_mode=skip leave dst's matching elements as they were); dst = gathered permuted."""
    _, perm, skip = ins.info
    ok = valid_rows(src, ins.op, skip)
    idx = src.row_indices()
    shape = tuple(src.shape)
    if ok.all():
        gathered = np.empty(shape, src.base.storage.dtype)   # every row gathered: dst not read
    else:                                   # skipped rows keep dst's values (in src's layout)
        gathered = np.transpose(read_raw(dst), np.argsort(perm)).copy()
    for w in np.flatnonzero(ok):
        gathered[w] = read_raw(src.row_view(int(idx[w]), ins.op)).reshape(gathered.shape[1:])
    write(dst, np.transpose(gathered, perm))
    ins.note(indirect=True, rows=int(ok.sum()))


def _hwdge_transpose_rules(op, t, src):
    """dma_transpose's "DMA Direct Transpose Constraints" for dge_mode=hwdge: a 2-byte dtype;
    2-D src.shape[0] == 16, 3-D/4-D src.shape[0] in {1, 2, 4, 8, 16} with
    (src.shape[0] * src.shape[-2]) % 16 == 0; src.shape[-1] <= 128."""
    if src.dtype.itemsize != t.dma_transpose_itemsize:
        raise DtypeError(op, f"src dtype {_dt.name(src.dtype)} is {src.dtype.itemsize} bytes; the "
                             f"dge_mode=hwdge transpose needs a {t.dma_transpose_itemsize}-byte dtype")
    rows, p = t.dma_transpose_hwdge_rows, src.shape[0]
    if src.ndim == 2:
        if p != rows:
            raise ShapeError(op, f"dge_mode=hwdge needs src.shape[0] == {rows} for a 2-D src, got {p} "
                                 f"on {t.name}")
    else:
        allowed = tuple(1 << k for k in range(rows.bit_length()) if 1 << k <= rows and rows % (1 << k) == 0)
        if p not in allowed:
            raise ShapeError(op, f"dge_mode=hwdge needs src.shape[0] in {{{', '.join(map(str, allowed))}}} "
                                 f"for a {src.ndim}-D src, got {p} on {t.name}")
        if (p * src.shape[-2]) % rows:
            raise ShapeError(op, f"dge_mode=hwdge needs src.shape[0] * src.shape[-2] to be a multiple of "
                                 f"{rows}, got {p} * {src.shape[-2]} on {t.name}")
    if src.shape[-1] > t.dma_transpose_fmax:
        raise ShapeError(op, f"dge_mode=hwdge needs src.shape[-1] <= {t.dma_transpose_fmax}, got "
                             f"{src.shape[-1]} on {t.name}")


def _dt_compute(ins, dst, src, axes, priority, dge_mode, oob_mode, name):
    if type(src) is IndirectTensor:
        return _gather_transpose(ins, dst, src)
    if src.oob is not None and as_enum(_oob, oob_mode, ins.op) is _oob.skip:
        ins.note(skipped=True)          # a dynamic src address out of bounds: no transfer
        return
    write(dst, np.transpose(read_raw(src), ins.info))


@instruction(reads=("src",), writes=("dst",), rules=_dt_rules, compute=_dt_compute)
def dma_transpose(dst, src, axes=None, priority=None, dge_mode=_dge_mode.unknown, oob_mode=_oob.error,
                  name=None):
    """dst = src.transpose(axes): dst's i-th axis is src's axes[i]-th axis, copied bit-exactly.

    Shapes: src 2-D, 3-D or 4-D; ``axes`` (default by rank) must be (1, 0), (2, 1, 0) or
    (3, 1, 2, 0) for that rank; dst.shape must equal the permuted src.shape exactly.
    Buffers: dst in SBUF; src in HBM or SBUF. Dtypes: dst.dtype == src.dtype.
    ``dge_mode``: unknown or hwdge (trn2+), or none. Decision: the docs name only unknown and
    hwdge for a direct transpose, but AWS's kernel library passes none (no DGE: plain
    descriptors) in kernels that run on hardware (nki-library mlp_tkg_gate_up_projection,
    norm_tkg_utils), so none is accepted with unknown's rules. hwdge ("DMA Direct Transpose Constraints"): a 2-byte
    dtype; 2-D src.shape[0] == 16, 3-D/4-D src.shape[0] in {1, 2, 4, 8, 16} with
    (src.shape[0] * src.shape[-2]) % 16 == 0; src.shape[-1] <= 128. With dge_mode=unknown any
    dtype transposes (the docs put the 2-byte rule under hwdge and the indirect form only).
    The indirect (gather) transpose ("DMA Indirect Transpose Constraints"): src =
    ``hbm.ap(pattern, vector_offset=indices)``, gathered[w] = the pattern's row at base row
    indices[w], dst = gathered permuted as above; trn2+, dge_mode unknown or swdge, a 2-byte dtype,
    src.shape[-1] <= 128, src.shape[0] a multiple of 16, indices (16..128 partitions, a multiple of
    16, one per row) uint32 in SBUF, a 4-D src with src.shape[1] or src.shape[2] == 1.
    Decision: indices with more than one column (the docs' 2-D form) are not accepted (the view
    takes one index per row); an out-of-bounds index raises, or with oob_mode=skip its row is left
    as dst held it. ``priority`` 0-3 or None; ``oob_mode=skip`` needs an indirect src; with a
    dynamic src address (``src.ap(scalar_offset=...)``) out of bounds it skips the transfer.
    Raises: ShapeError, DtypeError, MemorySpaceError, UnsupportedError.
    Engine: dma (the event's engine; ``dge_mode`` is an option).
    Source: aws-neuron-sdk nki/api/nki/isa/__init__.py (dma_transpose).
    """


def _dc_rules(ins, dst, srcs, reduce_op, scales, unique_indices, oob_mode, name):
    """dma_compute's rules (see its docstring): None (element-wise), or ("gather"|"scatter", k)
    with k the position in ``srcs`` of the indirect (gather) or the plain SBUF (scatter) source."""
    op, t = ins.op, ins.target
    if alu.op_name(reduce_op, op, "reduce_op") != "add":
        raise ArgumentError(op, f"reduce_op must be nl.add (the only one supported), got "
                                f"{alu.op_name(reduce_op, op, 'reduce_op')}")
    as_enum(_oob, oob_mode, op)
    if not isinstance(srcs, (list, tuple)) or not srcs:
        raise ShapeError(op, f"srcs must be a non-empty list of tensors, got {srcs!r}"[:200])
    rules.at_most(op, "number of srcs", len(srcs), t.dma_compute_srcs_max, t)
    if scales is not None:
        if not isinstance(scales, (list, tuple)) or len(scales) != len(srcs):
            raise ShapeError(op, f"scales must be None or one scale per source ({len(srcs)}), got {scales!r}")
        if any(float(v) != 1.0 for v in scales):
            raise ArgumentError(op, f"scales must all be 1.0 (the only value supported), got {list(scales)}")
    indirect = [k for k, x in enumerate(srcs) if type(x) is IndirectTensor]
    for k, x in enumerate(srcs):
        if type(x) is not IndirectTensor:
            rules.tensor(op, f"srcs[{k}]", x)
            rules.on_chip(op, f"srcs[{k}]", x, _DMA_BUFFERS)
            if x.on_chip:
                rules.partitions(op, f"srcs[{k}]", x, t)
    if type(dst) is not IndirectTensor:
        rules.tensor(op, "dst", dst)
        rules.on_chip(op, "dst", dst, _DMA_BUFFERS)
        if dst.on_chip:
            rules.partitions(op, "dst", dst, t)
    for k, x in enumerate(srcs):
        rules.same_size(op, "dst", dst, f"srcs[{k}]", x)
    if not indirect and type(dst) is not IndirectTensor:
        return Passed(_engine.dma)
    if not unique_indices:
        raise UnsupportedError(op, "unique_indices=False (non-unique indices) is not supported for a "
                                   "read-modify-write with vector_offset")
    if len(srcs) != 2:
        raise UnsupportedError(op, f"a read-modify-write with vector_offset takes exactly 2 srcs, got {len(srcs)}")
    if type(dst) is IndirectTensor:          # scatter RMW: dst(HBM)[idx] += src(SB)
        same = [k for k, x in enumerate(srcs) if _same_indirect(x, dst)]
        other = [k for k in range(2) if k not in same[:1]]
        if not same or type(srcs[other[0]]) is IndirectTensor or srcs[other[0]].buffer is not sbuf:
            raise UnsupportedError(op, "a scatter read-modify-write needs one source equal to dst (the "
                                       "indirect HBM view) and the other in SBUF")
        return Passed(_engine.dma, ("scatter", other[0]))
    if len(indirect) != 1 or dst.buffer is not sbuf:
        raise UnsupportedError(op, "a gather read-modify-write needs dst in SBUF, one source an indirect "
                                   "HBM view (vector_offset) and the other equal to dst")
    k = indirect[0]
    plain = srcs[1 - k]
    if not (plain.alloc is dst.alloc and plain.offset == dst.offset and plain.shape == dst.shape
            and plain.strides == dst.strides):
        raise UnsupportedError(op, "a gather read-modify-write needs the non-indirect source to be dst itself")
    rows = srcs[k].shape[0]
    if dst.shape[0] != rows:
        raise ShapeError(op, f"dst dim 0 is {dst.shape[0]}; the indirect view has {rows} rows and row w "
                             f"pairs with dst[w]")
    return Passed(_engine.dma, ("gather", k))


def _same_indirect(x, dst) -> bool:
    return x is dst or (type(x) is IndirectTensor and x.base.alloc is dst.base.alloc and x.index is dst.index
                        and x.offset == dst.offset and x.shape == dst.shape and x.steps == dst.steps)


def _dc_compute(ins, dst, srcs, reduce_op, scales, unique_indices, oob_mode, name):
    if ins.info is None:
        acc = None
        for x in srcs:                               # fp32, left to right, read before dst is written
            v = read_f32(x).reshape(-1)
            acc = v.copy() if acc is None else acc + v
        write(dst, acc)
        return
    mode, k = ins.info
    skip = as_enum(_oob, oob_mode, ins.op) is _oob.skip
    ind = dst if mode == "scatter" else srcs[k]
    plain = srcs[k] if mode == "scatter" else dst
    ok = valid_rows(ind, ins.op, skip)
    idx = ind.row_indices()
    if mode == "scatter":                            # two updates of one row would race on hardware
        seen = {}
        for w in np.flatnonzero(ok):
            row = int(idx[w])
            if row in seen:
                raise ArgumentError(ins.op, f"unique_indices=True but the dst index names row {row} twice "
                                            f"(index rows {seen[row]} and {int(w)}): non-unique indices are "
                                            f"not supported (their updates race)")
            seen[row] = int(w)
    for w in np.flatnonzero(ok):
        part = plain[w:w + 1]
        base_row = ind.row_view(int(idx[w]), ins.op)
        if mode == "scatter":
            write(base_row, read_f32(base_row).reshape(-1) + read_f32(part).reshape(-1))
        else:
            write(part, read_f32(part).reshape(-1) + read_f32(base_row).reshape(-1))
    ins.note(indirect=mode, rows=int(ok.sum()))


@instruction(reads=("srcs",), writes=("dst",), rules=_dc_rules, compute=_dc_compute, memo=False)
def dma_compute(dst, srcs, reduce_op, scales=None, unique_indices=True, oob_mode=_oob.error, name=None):
    """dst = srcs[0] + srcs[1] + ... (element by element in flat order, fp32 inside the DMA
    engines, rounded once into dst.dtype).

    ``reduce_op`` must be nl.add and every ``scales`` entry 1.0 (or ``scales=None``): the only
    values the docs support (ArgumentError otherwise). Shapes: 1 to 16 sources, each with dst's
    element count. Buffers: HBM or SBUF for dst and every source (PSUM is not accepted, as for
    dma_copy). Dtypes: any; each source is read as fp32, the sum (left to right) is rounded once.
    Read-modify-write with ``vector_offset`` (exactly 2 srcs, ``unique_indices=True``, scales 1.0):
    gather -- dst in SBUF, one source an indirect HBM view ``t.ap(..., vector_offset=idx)``, the
    other dst itself: dst[w] = dst[w] + base row idx[w]; scatter -- dst an indirect HBM view, one
    source that same view, the other in SBUF: base row idx[w] += src[w]. An index outside the
    base's rows raises BoundsError with ``oob_mode=error``; with ``oob_mode=skip`` that row is left
    alone. A scatter whose index names one dst row twice raises ArgumentError (the docs: non-unique
    indices are not supported; on hardware the two read-modify-writes race); a gather may read a
    row twice. The srcs are all read before dst is written (dst may be a source).
    Event: engine dma; reads srcs[0], srcs[1], ...; an RMW notes ``indirect`` (gather/scatter)
    and ``rows``. Decision: not memoised (``srcs`` is a list of views; a tuple of views would key
    the memo by tensor identity), the rules run on every call.
    Raises: ShapeError, MemorySpaceError, ArgumentError, UnsupportedError, BoundsError.
    Source: aws-neuron-sdk nki/api/nki/isa/__init__.py (dma_compute); nki/migration/index.rst
    (dma_compute replaces dma_copy's accumulate forms).
    """


__all__ = ["dma_copy", "dma_transpose", "dma_compute"]
