"""Tensor Engine: ``nc_matmul`` (stationary.T @ moving into PSUM, with accumulation).

Source: aws-neuron-sdk nki/api/nki/isa/__init__.py (nc_matmul), nki/guides/architecture
(PSUM banks, fp32 accumulation). Imports memory, checks, alu-free.
"""
from __future__ import annotations

import numpy as np

from .. import dtypes as _dt
from .. import trace
from ..checks import rules
from ..errors import DtypeError, ShapeError, UnsupportedError
from ..memory.access import flags_view, read_f32, read_raw, write
from .enums import NkiInstruction, matmul_perf_mode as _perf
from .operands import target

_FP32ISH = ("float32", "tfloat32")
_FP8 = ("float8_e4m3", "float8_e5m2", "float8_e4m3fn")


def nc_matmul(dst, stationary, moving, is_stationary_onezero=False, is_moving_onezero=False,
              is_transpose=False, accumulate=None, tile_position=(), tile_size=(),
              perf_mode=_perf.none, name=None, **ignored):
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
    must equal stationary's. ``perf_mode="double_row"`` (trn2+, fp8): stationary (K, 2, M), moving
    (K, 2, N), contraction over K and the size-2 dim.
    Raises: ShapeError, MemorySpaceError, DtypeError, UnsupportedError.
    Source: aws-neuron-sdk nki/api/nki/isa/__init__.py (nc_matmul).
    """
    op = "nisa.nc_matmul"
    t = target(op)
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
    perf = _perf(getattr(perf_mode, "value", perf_mode) or "none")

    if is_transpose:
        if t.nc_version < 3:
            raise UnsupportedError(op, f"is_transpose needs trn2 or newer, not {t.name}")
        m, n = stationary.free_size, moving.free_size
        if n != k:
            raise ShapeError(op, f"is_transpose: moving must be a {k} x {k} identity, got {moving.shape}")
        if dst.dtype != stationary.dtype:
            raise DtypeError(op, f"is_transpose: dst dtype {dd} must equal stationary dtype {sd}")
        _check_dst(op, dst, m, n, t, check_dtype=False)
        write(dst, read_raw(stationary).reshape(k, m).T, matmul=True)
        flags_view(dst)[...] = True
        trace.emit(op, dst=dst, stationary=stationary, moving=moving, transpose=True)
        return NkiInstruction(op, name)

    if perf is _perf.double_row:
        if t.nc_version < 3:
            raise UnsupportedError(op, f"perf_mode=double_row needs trn2 or newer, not {t.name}")
        if sd not in _FP8 or md not in _FP8:
            raise DtypeError(op, f"perf_mode=double_row needs fp8 operands, got {sd} and {md}")
        if stationary.ndim != 3 or moving.ndim != 3 or stationary.shape[1] != 2 or moving.shape[1] != 2:
            raise ShapeError(op, f"perf_mode=double_row needs stationary (K, 2, M) and moving (K, 2, N), "
                                 f"got {stationary.shape} and {moving.shape}")
        m, n = stationary.shape[2], moving.shape[2]
        res = np.einsum("kjm,kjn->mn", read_f32(stationary), read_f32(moving), dtype=np.float32)
    else:
        m, n = stationary.free_size, moving.free_size
        res = None
    rules.at_most(op, "stationary free size", m, t.gemm_stationary_fmax, t)
    nmax = t.matmul_moving_fmax_bf16 if dd == "bfloat16" else t.matmul_moving_fmax_fp32
    rules.at_most(op, "moving free size", n, nmax, t)
    _check_dst(op, dst, m, n, t)
    if res is None:
        res = np.matmul(read_f32(stationary).reshape(k, m).T, read_f32(moving).reshape(k, n))
    flags = flags_view(dst)
    if accumulate is None:
        if flags.all():
            res += read_f32(dst).reshape(m, n)
        elif flags.any():
            old = read_f32(dst).reshape(m, n)
            res = np.where(flags.reshape(m, n), old + res, res)
    elif accumulate:
        res += read_f32(dst).reshape(m, n)
    write(dst, res, matmul=True)
    flags[...] = True
    trace.emit(op, dst=dst, stationary=stationary, moving=moving, k=k, m=m, n=n)
    return NkiInstruction(op, name)


def _check_dst(op, dst, m, n, t, check_dtype=True):
    dd = _dt.name(dst.dtype)
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
