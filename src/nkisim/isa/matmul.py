"""Tensor Engine: ``nc_matmul`` (stationary.T @ moving into PSUM, with accumulation).

Source: aws-neuron-sdk nki/api/nki/isa/__init__.py (nc_matmul), nki/guides/architecture
(PSUM banks, fp32 accumulation). Imports memory, checks, dispatch.
"""
from __future__ import annotations

import math
import threading

import numpy as np

from .. import dtypes as _dt
from ..checks import rules, uninit
from ..errors import DtypeError, ShapeError, UnsupportedError
from ..memory.access import matmul_flags, matmul_out, read_f32, read_raw, unwritten, write
from ..memory.capacity import staggered
from .dispatch import Passed, instruction
from .enums import as_enum, engine as _engine, matmul_perf_mode as _perf

_FP32ISH = ("float32", "tfloat32")
_FP8 = ("float8_e4m3", "float8_e5m2", "float8_e4m3fn")


_PLAIN, _DOUBLE_ROW, _TRANSPOSE = "plain", "double_row", "transpose"     # what compute does


def _mm_rules(ins, dst, stationary, moving, is_stationary_onezero, is_moving_onezero, is_transpose,
              accumulate, tile_position, tile_size, perf_mode, name):
    """nc_matmul's rules (see its docstring): (k, m, n, mode), mode one of plain, double_row
    (the fp8 pair contraction) or transpose (trn2+ ``is_transpose``: a bit-exact copy)."""
    op, t = ins.op, ins.target
    for nm, x in (("dst", dst), ("stationary", stationary), ("moving", moving)):
        rules.tensor(op, nm, x)
    rules.sbuf_only(op, "stationary", stationary)
    rules.sbuf_only(op, "moving", moving)
    rules.psum_only(op, "dst", dst)
    k = rules.partitions(op, "stationary", stationary, t)
    if moving.shape[0] != k:
        raise ShapeError(op, f"moving partition dim {moving.shape[0]} does not match stationary "
                             f"partition dim {k} (the contraction dim)")
    sd, md, dd = _dt.name(stationary.dtype), _dt.name(moving.dtype), _dt.name(dst.dtype)
    for nm, d in (("stationary", sd), ("moving", md)):
        if d not in t.matmul_input_dtypes:
            raise DtypeError(op, f"{nm} dtype {d} is not a TensorE input dtype on {t.name}; expected "
                                 f"one of {', '.join(t.matmul_input_dtypes)}")
    if (sd in _FP32ISH) != (md in _FP32ISH):
        raise DtypeError(op, f"stationary {sd} and moving {md}: fp32/tf32 pair only with fp32/tf32")
    if {sd, md} == {"float8_e4m3", "float8_e4m3fn"}:
        raise DtypeError(op, "float8_e4m3fn cannot be mixed with float8_e4m3")
    if bool(tile_position) != bool(tile_size):
        raise ShapeError(op, "tile_position and tile_size must be given together")
    for v in tuple(tile_size or ()):
        if v not in (32, 64, 128):
            raise ShapeError(op, f"tile_size {tuple(tile_size)} must use sizes 32, 64 or 128")
    perf = as_enum(_perf, perf_mode or "none", op)
    rows, cols = _tiling(op, tile_position, tile_size, perf, t)
    if k > rows:
        raise ShapeError(op, f"contraction (partition) dim {k} exceeds the row tile size {rows} on {t.name}")

    if is_transpose and t.nc_version >= 3:
        m, n = stationary.free_size, moving.free_size
        rules.at_most(op, "stationary free size", m, min(cols, t.gemm_stationary_fmax), t)
        if n != k:
            raise ShapeError(op, f"is_transpose: moving must be a {k} x {k} identity, got {moving.shape}")
        if dst.dtype != stationary.dtype:
            raise DtypeError(op, f"is_transpose: dst dtype {dd} must equal stationary dtype {sd}")
        _check_dst(op, dst, m, n, t, check_dtype=False)
        return Passed(_engine.tensor, (k, m, n, _TRANSPOSE))

    if perf is _perf.double_row:
        if t.nc_version < 3:
            raise UnsupportedError(op, f"perf_mode=double_row needs trn2 or newer, not {t.name}")
        if sd not in _FP8 or md not in _FP8:
            raise DtypeError(op, f"perf_mode=double_row needs fp8 operands, got {sd} and {md}")
        if stationary.ndim != 3 or moving.ndim != 3 or stationary.shape[1] != 2 or moving.shape[1] != 2:
            raise ShapeError(op, f"perf_mode=double_row needs stationary (K, 2, M) and moving (K, 2, N), "
                                 f"got {stationary.shape} and {moving.shape}")
        m, n, mode = stationary.shape[2], moving.shape[2], _DOUBLE_ROW
    else:
        m, n, mode = stationary.free_size, moving.free_size, _PLAIN
    rules.at_most(op, "stationary free size", m, min(cols, t.gemm_stationary_fmax), t)
    nmax = t.matmul_moving_fmax_bf16 if dd == "bfloat16" else t.matmul_moving_fmax_fp32
    rules.at_most(op, "moving free size", n, nmax, t)
    _check_dst(op, dst, m, n, t)
    return Passed(_engine.tensor, (k, m, n, mode))


def _mm_compute(ins, dst, stationary, moving, is_stationary_onezero, is_moving_onezero, is_transpose,
                accumulate, tile_position, tile_size, perf_mode, name):
    """The product, then the PSUM write: overwrite, accumulate, or per element by the PSUM matmul
    flags (runtime state, read here). The event notes ``accumulate`` as applied: True, False or
    "mixed" (some elements accumulated, others overwritten)."""
    k, m, n, mode = ins.info
    if mode is not _TRANSPOSE and timing_only(ins, dst, (stationary, moving), accumulate, m, n):
        return
    if mode is _TRANSPOSE:
        write(dst, read_raw(stationary).reshape(k, m).T, matmul=True)
        ins.note(accumulate=False)
        return
    if mode is _DOUBLE_ROW:
        res = np.einsum("kjm,kjn->mn", read_f32(stationary), read_f32(moving), dtype=np.float32)
    else:
        if (ins.core.fast and (accumulate is False or (accumulate is None and dst.alloc.mm_flags is False))
                and (out := matmul_out(dst, accumulate is False)) is not None):
            # an overwrite of a whole fp32 tile (a fresh accumulator, nl.matmul's result): the
            # product goes straight into PSUM (saves copying it there from the scratch array)
            _product(stationary, moving, k, m, n, out.reshape(m, n))
            ins.note(accumulate=False)
            return
        res = _product(stationary, moving, k, m, n)
    write_psum_result(ins, dst, res, accumulate, m, n)


def timing_only(ins, dst, operands, accumulate, m: int, n: int) -> bool:
    """When this launch skips TensorE arithmetic (``nkisim.profile(compute=False)``): read the
    operands (lifetime, hooks) without multiplying, write zeros into PSUM ``dst`` as the product
    would be written, and return True; else False (compute the product). Shared by nc_matmul and
    nc_matmul_mx."""
    rec = ins.core.launch.recording
    if rec is None or not rec.timing_only:
        return False
    for t in operands:
        read_raw(t)
    write_psum_result(ins, dst, np.zeros((m, n), np.float32), accumulate, m, n)
    return True


def write_psum_result(ins, dst, res, accumulate, m: int, n: int) -> None:
    """Write a matmul's (m, n) fp32 result ``res`` into PSUM ``dst``: overwrite or accumulate as
    ``accumulate`` says (None: the PSUM flags decide, per element). Reads of dst here are the
    documented PSUM accumulation: no race / uninitialised-read hooks, except that accumulate=True
    onto never-written PSUM is undefined (strict mode reports it), and onto PSUM last written by
    a non-matmul instruction is not supported on NeuronCore-v2/v3 (``onto_values``). Shared by
    nc_matmul and nc_matmul_mx."""
    add = matmul_flags(dst) if accumulate is None else bool(accumulate)
    if accumulate and dst.alloc.init is not None:
        uninit.check_read(dst)
    if add is True and not ins.target.matmul_accumulates_onto_values:
        onto_values(ins, dst)
    if add is True or add is False:
        write(dst, res, matmul=True, add=add, overwrite=accumulate is False)
        ins.note(accumulate=add)
    else:
        old = read_f32(dst, hooks=False).reshape(m, n)
        write(dst, np.where(add.reshape(m, n), old + res, res), matmul=True)
        ins.note(accumulate="mixed")


def onto_values(ins, dst) -> None:
    """UnsupportedError when an accumulating matmul (accumulate=True) would add onto elements of
    PSUM ``dst`` whose last write was not a matmul (memset, tensor_copy, a DMA, any Vector /
    Scalar / GpSimd result), on a target without ``matmul_accumulates_onto_values``.
    Source: aws-neuron-sdk nki/api/nki/isa/__init__.py (nc_matmul, "Accumulation mode": "On
    NeuronCore-v2 and NeuronCore-v3, matmul accumulating into a PSUM location that was
    value-initialized by a non-matmul instruction (e.g., ``memset``, ``tensor_copy``) is not
    supported and is undefined behavior on hardware"). Decision: NeuronCore-v4 (trn3), which the
    note leaves out, adds onto the values (fp32 old + product, rounded once into dst's dtype);
    never-written elements are not this rule's (accumulate=True onto them is undefined on every
    target: strict mode's uninitialised read); accumulate=None overwrites such elements (no
    accumulation, no error); Beta 1's ``psum += matmul`` is the compiler's lowering, which takes
    the target into the accumulation group first (``language.tile.start_sum``), so it never
    meets this rule."""
    flags = matmul_flags(dst)
    if flags is True:
        return
    blank = unwritten(dst)
    if blank is True:
        return
    if flags is False:
        valued = True if blank is False else ~blank
    else:
        valued = ~flags if blank is False else ~flags & ~blank
    if valued is not True and not valued.any():
        return
    n = math.prod(dst.shape) if valued is True else int(valued.sum())
    first = (0,) * dst.ndim if valued is True else tuple(int(i) for i in np.argwhere(valued)[0])
    t = ins.target
    raise UnsupportedError(ins.op, f"dst: accumulate=True onto {n} PSUM element(s) last written by a non-matmul "
                                   f"instruction (first at view index {first}) is not supported on {t.name} "
                                   f"(NeuronCore-v{t.nc_version}); start the accumulation group with "
                                   f"accumulate=False and add the other values with nisa.tensor_tensor")


@instruction(reads=("stationary", "moving"), writes=("dst",), rules=_mm_rules, compute=_mm_compute)
def nc_matmul(dst, stationary, moving, is_stationary_onezero=False, is_moving_onezero=False,
              is_transpose=False, accumulate=None, tile_position=(), tile_size=(),
              perf_mode=_perf.none, name=None):
    """dst[m, n] (+)= sum_k stationary[k, m] * moving[k, n]  (dst = stationary.T @ moving).

    Shapes: K = partition dim of both operands (<= pmax); M = stationary elements per partition
    (<= gemm_stationary_fmax, 128); N = moving elements per partition (<= 512 on trn1/trn2, one
    PSUM bank; <= 4096 fp32 / 8192 bf16 on trn3); dst has M partitions and N elements each.
    Buffers: stationary and moving in SBUF, dst in PSUM. Dtypes: inputs fp8/bf16/fp16/tf32/fp32
    (fp32/tf32 pair only with fp32/tf32; float8_e4m3fn on trn3 only, not mixed with float8_e4m3);
    products accumulate in fp32; dst float32 (or bfloat16 on trn3), rounded once on write.
    ``accumulate``: False overwrites, True adds to dst, None (default) adds where the element's last
    write was a matmul and overwrites elsewhere (Decision: any non-matmul write clears the flag).
    ``is_transpose=True`` (trn2+): dst = stationary.T bit-exactly (moving must be K x K); dst dtype
    must equal stationary's. On trn1 it is only a profiler hint: an ordinary fp32 matmul.
    ``perf_mode="double_row"`` (trn2+, fp8): stationary (K, 2, M), moving (K, 2, N), contraction
    over K and the size-2 dim, no column tiling.
    ``tile_position=(start_row, start_column)`` with ``tile_size=(rows, columns)`` (32/64/128; 32
    needs trn2+): K <= rows, M <= columns, each start a multiple of its size inside the 128 x 128
    PE array; the math is unchanged.
    Engine: tensor. The event's ``accumulate`` option is the accumulation applied: True, False
    (also for ``is_transpose``, which overwrites) or "mixed" (auto mode over a dst whose elements
    disagree: some accumulated, others overwritten).
    Raises: ShapeError, MemorySpaceError, DtypeError, UnsupportedError.
    Source: aws-neuron-sdk nki/api/nki/isa/__init__.py (nc_matmul).
    """


_SCRATCH = threading.local()


def _product(stationary, moving, k, m, n, out=None):
    """stationary.T @ moving as float32 (m, n), into ``out`` or else a per-thread scratch array
    that is valid until the thread's next matmul (the caller writes it into PSUM at once).
    Reusing one array instead of a fresh result per instruction avoids the page faults of fresh
    memory (measured: 4 per instruction on a VM, each as slow as copying 16 KiB)."""
    if out is None:
        buf = getattr(_SCRATCH, "buf", None)
        if buf is None or buf.size < m * n:
            buf = _SCRATCH.buf = staggered(max(m * n, 128 * 512), np.float32)
        out = buf[:m * n].reshape(m, n)
    return np.matmul(read_f32(stationary).reshape(k, m).T, read_f32(moving).reshape(k, n), out=out)


def _tiling(op, tile_position, tile_size, perf, t):
    """(row_size, column_size) of the PE-array tile in use (the full pmax x gemm_stationary_fmax
    array when tiling is off), after checking the tiling rules."""
    if not tile_size:
        return t.pmax, t.gemm_stationary_fmax
    if len(tile_size) != 2 or len(tile_position) != 2:
        raise ShapeError(op, f"tile_position {tuple(tile_position)} and tile_size {tuple(tile_size)} "
                             f"must be (row, column) pairs")
    rows, cols = (int(v) for v in tile_size)
    if 32 in (rows, cols) and t.nc_version < 3:
        raise UnsupportedError(op, f"tile_size {(rows, cols)}: 32-wide tiles need trn2 or newer, not {t.name}")
    for what, start, size, full in (("start_row", tile_position[0], rows, t.pmax),
                                    ("start_column", tile_position[1], cols, t.gemm_stationary_fmax)):
        start = int(start)
        if start % size or start + size > full:
            raise ShapeError(op, f"tile_position {what} {start} must be a multiple of {size} with "
                                 f"{what} + {size} <= {full}")
    if perf is _perf.double_row and cols < t.gemm_stationary_fmax:
        raise ShapeError(op, "perf_mode=double_row cannot be combined with column tiling")
    return rows, cols


def _check_dst(op, dst, m, n, t, check_dtype=True):
    dd = _dt.name(dst.dtype)
    if t.nc_version < 4 and dst.storage is dst.alloc.storage:
        # A PSUM tensor of at most one bank never crosses a bank; a larger one starts on a bank
        # boundary (memory.capacity), so crossings are judged from the tensor's own start.
        per_part = dst.storage.size // max(1, dst.alloc.shape[0])
        isz = dst.dtype.itemsize
        bank = t.psum_bank_bytes
        if per_part * isz > bank:
            lo = dst.offset % per_part if per_part else 0
            hi = lo + sum((k - 1) * s for k, s in zip(dst.shape[1:], dst.strides[1:]) if s > 0)
            first, last = lo * isz, (hi + 1) * isz - 1
            if first // bank != last // bank:
                raise ShapeError(op, f"dst spans PSUM bytes {first}..{last} of its tensor, crossing a "
                                     f"{bank}-byte bank boundary; a matmul destination must lie within one "
                                     f"bank on {t.name}")
    if dst.shape[0] != m or dst.free_size != n:
        raise ShapeError(op, f"dst shape {dst.shape} must have {m} partitions (stationary free size) "
                             f"and {n} elements per partition (moving free size)")
    if check_dtype and dd not in t.psum_dst_dtypes:
        raise DtypeError(op, f"dst dtype {dd} is not supported on {t.name}; expected "
                             f"{' or '.join(t.psum_dst_dtypes)}")
    if n * dst.dtype.itemsize > t.psum_bank_bytes and t.nc_version < 4:
        raise ShapeError(op, f"dst needs {n * dst.dtype.itemsize} bytes per partition, exceeds one "
                             f"PSUM bank of {t.psum_bank_bytes} bytes on {t.name}")


__all__ = ["nc_matmul"]
