"""MX (microscaling) instructions: ``quantize_mx`` (Vector engine: bf16/fp16 -> MXFP8 data + e8m0
scales) and ``nc_matmul_mx`` (Tensor engine: MXFP8/MXFP4 matmul with the block scales applied).

Source: aws-neuron-sdk nki/api/nki/isa/__init__.py (quantize_mx, nc_matmul_mx),
nki/deep-dives/mxfp-matmul.rst (layout, scale tiles, scale packing), nki/guides/architecture/
trainium3_arch.rst (Quad-MXFP8/MXFP4 matmul, MX quantization). Imports memory, checks, dispatch.
"""
from __future__ import annotations

import ml_dtypes
import numpy as np

from .. import dtypes as _dt
from ..checks import rules
from ..errors import DtypeError, ShapeError, UnsupportedError
from ..memory.access import read_f32, read_raw, write
from ..memory.indirect import IndirectTensor
from .dispatch import Passed, instruction
from .matmul import timing_only, write_psum_result
from .enums import engine as _engine

_F32 = np.float32
_SCALE_DTYPES = ("float8_e8m0fnu", "uint8")
_QUANTIZE_SRC = ("float16", "bfloat16")
_QUANTIZE_DST = ("float8_e4m3fn_x4", "float8_e5m2_x4")
_MATMUL_IN = ("float8_e4m3fn_x4", "float8_e5m2_x4", "float4_e2m1fn_x4")
_E8M0_BIAS, _E8M0_NAN, _E8M0_MAX = 127, 255, 254       # OCP MX: 2**(bits - 127); 0xFF is NaN


def _mx_target(op, t):
    if not t.mx_ops:
        raise UnsupportedError(op, f"needs NeuronCore-v4 (trn3) or newer, not {t.name} "
                                   f"(NeuronCore-v{t.nc_version})")


def _no_indirect(op, **operands):
    for nm, x in operands.items():
        if isinstance(x, IndirectTensor):
            raise UnsupportedError(op, f"{nm} is an indirect view; tensor indirection of MX operands "
                                       f"is not simulated")
        rules.tensor(op, nm, x)


def _start_partition(op, name, x) -> int:
    """The SBUF partition an on-chip view starts at (its allocation's partition offset included);
    ShapeError when its partition dim is strided."""
    alloc = x.alloc
    per_part = x.storage.size // alloc.shape[0]
    if x.shape[0] > 1 and x.strides[0] != per_part:
        raise ShapeError(op, f"{name} steps {x.strides[0]} elements between partitions; MX operands "
                             f"must take consecutive partitions ({per_part} per partition)")
    addr = alloc.address
    return x.offset // per_part + (int(addr[0]) if addr else 0)


def _data_partitions(op, name, x, t) -> int:
    """An MX data operand's partition count: a multiple of 32, at most pmax, starting on a
    quadrant boundary (its scaling groups are quadrant-aligned)."""
    p = x.shape[0]
    q = t.mx_quadrant_partitions
    if p % q or p > t.pmax:
        raise ShapeError(op, f"{name} partition dim {p} must be a multiple of {q} and at most "
                             f"{t.pmax} on {t.name}")
    start = _start_partition(op, name, x)
    if start % q:
        raise ShapeError(op, f"{name} starts at partition {start}; MX data must start on a "
                             f"{q}-partition quadrant boundary")
    return p


def _scale_rows(op, name, scale, data_name, data, free, t) -> np.ndarray:
    """Check an MX scale operand against its data operand; the rows of ``scale`` (relative to
    its start) that hold the scales of the data's 8-partition groups, in group order."""
    rules.sbuf_only(op, name, scale)
    rules.dtype_in(op, name, scale, _SCALE_DTYPES, t)
    if scale.free_size != free:
        raise ShapeError(op, f"{name} has {scale.free_size} elements per partition; it needs one "
                             f"scale per {data_name} element per partition, {free}")
    q, g = t.mx_quadrant_partitions, t.mx_group_partitions
    per_quad = q // g
    p = data.shape[0]
    start, dstart = _start_partition(op, name, scale), _start_partition(op, data_name, data)
    if start % q not in t.mx_scale_offsets:
        raise ShapeError(op, f"{name} starts at partition {start}, offset {start % q} in its "
                             f"quadrant; scales start at offset "
                             f"{', '.join(map(str, t.mx_scale_offsets))} of a {q}-partition quadrant")
    if start // q != dstart // q:
        raise ShapeError(op, f"{name} starts in quadrant {start // q} (partition {start}) but "
                             f"{data_name} starts in quadrant {dstart // q} (partition {dstart}); "
                             f"scales sit in the quadrant of their scaling groups")
    rows = np.array([(k // per_quad) * q + k % per_quad for k in range(p // g)])
    need = int(rows[-1]) + 1
    if scale.shape[0] < need:
        raise ShapeError(op, f"{name} has {scale.shape[0]} partitions; the scales of {p} {data_name} "
                             f"partitions fill {per_quad} partitions of each of {p // q} quadrant(s), "
                             f"so it needs at least {need}")
    return rows


# ---- quantize_mx ---------------------------------------------------------------------------------

def _qmx_rules(ins, dst, src, dst_scale, name):
    """quantize_mx's rules (see its docstring); info: the dst_scale rows of the scaling groups."""
    op, t = ins.op, ins.target
    _mx_target(op, t)
    _no_indirect(op, dst=dst, src=src, dst_scale=dst_scale)
    for nm, x in (("src", src), ("dst", dst)):
        rules.sbuf_only(op, nm, x)
    rules.dtype_in(op, "src", src, _QUANTIZE_SRC, t)
    rules.dtype_in(op, "dst", dst, _QUANTIZE_DST, t)
    p = _data_partitions(op, "src", src, t)
    f = src.free_size
    if f % _dt.X4:
        raise ShapeError(op, f"src has {f} elements per partition; must be a multiple of {_dt.X4}")
    if dst.shape[0] != p or dst.free_size * _dt.X4 != f:
        raise ShapeError(op, f"dst shape {dst.shape} must have {p} partitions and {f // _dt.X4} "
                             f"elements per partition (src {src.shape}: {_dt.X4} values per "
                             f"{_dt.name(dst.dtype)} element)")
    if _start_partition(op, "dst", dst) != _start_partition(op, "src", src):
        raise ShapeError(op, "dst and src must start at the same partition (quantize_mx keeps the layout)")
    rows = _scale_rows(op, "dst_scale", dst_scale, "dst", dst, f // _dt.X4, t)
    return Passed(_engine.vector, rows)


def _qmx_compute(ins, dst, src, dst_scale, name):
    t = ins.target
    rows = ins.info
    elem = _dt.PACKED[dst.dtype][0]
    emax = ml_dtypes.finfo(elem).maxexp - 1         # largest unbiased exponent: 8 e4m3fn, 15 e5m2
    g = t.mx_group_partitions
    p, f = src.shape[0], src.free_size
    x = read_f32(src).reshape(p // g, g, f // _dt.X4, _dt.X4)
    amax = np.abs(x).max(axis=(1, 3))                            # (groups, f / 4)
    with np.errstate(invalid="ignore"):
        finite = np.isfinite(amax)
        _, e = np.frexp(np.where(finite, amax, 0))               # amax = m * 2**e, m in [0.5, 1)
    # NKI 0.5: X = 2**(floor(log2 amax) - (emax - 1)); before: X = 2**(floor(log2 amax) - emax)
    # (the OCP sample algorithm); floor(log2 amax) = e - 1
    ocp = ins.core.settings.nki_version < "0.5"
    biased = np.clip(e.astype(np.int32) - emax - ocp + _E8M0_BIAS, 0, _E8M0_MAX)
    biased = np.where(amax == 0, 0, biased)
    biased = np.where(finite, biased, _E8M0_NAN)
    shift = np.repeat(np.repeat(_E8M0_BIAS - biased, g, axis=0)[:, :, None], _dt.X4, axis=2)
    vals = np.ldexp(x.reshape(p, f // _dt.X4, _dt.X4), shift.reshape(p, f // _dt.X4, _dt.X4))
    nan_group = np.repeat(~finite, g, axis=0)[:, :, None]
    if ocp:                          # amax / X < 2**(Emax + 1): saturate to the largest finite
        top = float(ml_dtypes.finfo(elem).max)
        vals = np.clip(vals, -top, top)
    vals = np.where(nan_group, np.float32(np.nan), vals).astype(_F32)
    write(dst, _dt.pack_x4(vals.reshape(p, f), dst.dtype))
    scales = biased.astype(np.uint8)
    if dst_scale.dtype != _dt.uint8:
        scales = scales.view(ml_dtypes.float8_e8m0fnu).astype(_F32)
    per_quad = t.mx_quadrant_partitions // g
    for k in range(0, len(rows), per_quad):                      # one quadrant's scale rows
        r0 = int(rows[k])
        write(dst_scale[r0:r0 + per_quad], scales[k:k + per_quad])


@instruction(reads=("src",), writes=("dst", "dst_scale"), rules=_qmx_rules, compute=_qmx_compute)
def quantize_mx(dst, src, dst_scale, name=None):
    """dst, dst_scale = MXFP8 quantization of src: per group of 32 values, one shared power-of-two
    scale X (e8m0) and the values src / X rounded to the fp8 element type.

    Groups: 8 partitions x 4 consecutive elements per partition (free dims flattened row-major);
    the 4 values of a group row become one x4 element of dst. Scale (the docs' formula, "a block
    scale that is two times larger" than the OCP sample algorithm): with amax = max |v| over the
    group and Emax = 8 (float8_e4m3fn) or 15 (float8_e5m2),
    X = 2**(floor(log2(amax)) - (Emax - 1)); an all-zero group gets X = 2**-127 (bits 0).
    Releases before NKI 0.5 (``NKISIM_NKI_VERSION=0.3`` or ``0.4``; the 0.5.0 release notes: "now
    uses a block scale two times larger than the sample conversion algorithm") use the OCP sample
    algorithm their docs cite: X = 2**(floor(log2(amax)) - Emax), values beyond the element
    type's largest finite value saturated to it (OCP saturation) before rounding.
    Shapes: src (P, F...) with P a multiple of 32 and <= pmax, starting on a 32-partition quadrant,
    free size F a multiple of 4; dst P partitions, F / 4 elements per partition, same start
    partition; dst_scale F / 4 elements per partition, starting at offset 0, 4, 8 or 12 of the
    quadrant dst starts in. The scales of the data's quadrant j go to rows 32j .. 32j + 3 of
    dst_scale (group 4j + i to row 32j + i); the other rows are left untouched (so later calls can
    pack their scales at another offset), hence dst_scale needs at least 32 (P/32 - 1) + 4 rows.
    Dtypes: src float16 or bfloat16; dst float8_e4m3fn_x4 or float8_e5m2_x4 (float4_e2m1fn_x4 is
    not an output); dst_scale float8_e8m0fnu or uint8 (the biased exponent bits either way).
    Buffers: all SBUF. Engine: vector. Generations: trn3 (NeuronCore-v4) and newer.
    Decision: the docs give no rounding mode: values round to nearest even (ml_dtypes), after
    an exact power-of-two division (from NKI 0.5 they never exceed the fp8 range: amax / X < 2**Emax).
    Decision: a scale exponent below 2**-127 is clamped to bits 0 (2**-127). Decision: a group
    holding inf or NaN gets the NaN scale 0xFF and NaN data elements.
    Raises: UnsupportedError (before trn3; indirect views), MemorySpaceError, DtypeError, ShapeError.
    Source: aws-neuron-sdk nki/api/nki/isa/__init__.py (quantize_mx); nki/deep-dives/mxfp-matmul.rst.
    """


# ---- nc_matmul_mx --------------------------------------------------------------------------------

def _mmx_rules(ins, dst, stationary, moving, stationary_scale, moving_scale, tile_position, tile_size,
               accumulate, name):
    """nc_matmul_mx's rules (see its docstring); info: (k, m, n, stationary rows, moving rows)."""
    op, t = ins.op, ins.target
    _mx_target(op, t)
    _no_indirect(op, dst=dst, stationary=stationary, moving=moving, stationary_scale=stationary_scale,
                 moving_scale=moving_scale)
    rules.sbuf_only(op, "stationary", stationary)
    rules.sbuf_only(op, "moving", moving)
    rules.psum_only(op, "dst", dst)
    rules.dtype_in(op, "stationary", stationary, _MATMUL_IN, t)
    rules.dtype_in(op, "moving", moving, _MATMUL_IN, t)
    k = _data_partitions(op, "stationary", stationary, t)
    if moving.shape[0] != k:
        raise ShapeError(op, f"moving partition dim {moving.shape[0]} does not match stationary "
                             f"partition dim {k} (the contraction dim)")
    _data_partitions(op, "moving", moving, t)
    m, n = stationary.free_size, moving.free_size
    if m % 2:
        raise ShapeError(op, f"stationary free size {m} must be even")
    rules.at_most(op, "stationary free size", m, t.gemm_stationary_fmax, t)
    dd = _dt.name(dst.dtype)
    if dd not in t.psum_dst_dtypes:
        raise DtypeError(op, f"dst dtype {dd} is not supported on {t.name}; expected "
                             f"{' or '.join(t.psum_dst_dtypes)}")
    nmax = t.matmul_moving_fmax_bf16 if dd == "bfloat16" else t.matmul_moving_fmax_fp32
    rules.at_most(op, "moving free size", n, nmax, t, note=f"(dst {dd})")
    if dst.shape[0] != m or dst.free_size != n:
        raise ShapeError(op, f"dst shape {dst.shape} must have {m} partitions (stationary free size) "
                             f"and {n} elements per partition (moving free size)")
    rows = _tiling(op, tile_position, tile_size, t)
    if k > rows:
        raise ShapeError(op, f"contraction (partition) dim {k} exceeds the row tile size {rows}")
    s_rows = _scale_rows(op, "stationary_scale", stationary_scale, "stationary", stationary, m, t)
    m_rows = _scale_rows(op, "moving_scale", moving_scale, "moving", moving, n, t)
    return Passed(_engine.tensor, (k, m, n, s_rows, m_rows))


def _tiling(op, tile_position, tile_size, t) -> int:
    """The row tile size in use (pmax when tiling is off), after the row-tiling rules."""
    if tile_position is None and tile_size is None:
        return t.pmax
    if tile_position is None or tile_size is None:
        raise ShapeError(op, "tile_position and tile_size must be given together")
    if len(tuple(tile_size)) != 2 or len(tuple(tile_position)) != 2:
        raise ShapeError(op, f"tile_position {tuple(tile_position)} and tile_size {tuple(tile_size)} "
                             f"must be (row, column) pairs")
    rows, cols = (int(v) for v in tile_size)
    start_row, start_col = (int(v) for v in tile_position)
    if rows not in t.mx_tile_rows or cols != t.gemm_stationary_fmax:
        raise ShapeError(op, f"tile_size {(rows, cols)}: row size must be one of "
                             f"{', '.join(map(str, t.mx_tile_rows))} and column size "
                             f"{t.gemm_stationary_fmax} (row tiling only)")
    if start_col != 0 or start_row % rows or start_row + rows > t.pmax:
        raise ShapeError(op, f"tile_position {(start_row, start_col)}: start_row must be a multiple of "
                             f"{rows} with start_row + {rows} <= {t.pmax}, start_column 0")
    return rows


def _operand(x, scale, rows, k, free, t) -> np.ndarray:
    """An MX operand dequantized to float32, (k, free, 4): element value * 2**(scale - 127)."""
    vals = _dt.unpack_x4(read_raw(x).reshape(k, free)).astype(_F32).reshape(k, free, _dt.X4)
    g = t.mx_group_partitions
    per_quad = t.mx_quadrant_partitions // g
    s = np.concatenate([read_f32(scale[int(r):int(r) + per_quad]).reshape(per_quad, free)
                        for r in rows[::per_quad]])           # only the rows holding scales
    if scale.dtype == _dt.uint8:     # the biased exponent bits; 0xFF is NaN as in float8_e8m0fnu
        s = np.where(s == _E8M0_NAN, np.float32(np.nan), np.ldexp(_F32(1), (s - _E8M0_BIAS).astype(np.int32)))
    return vals * np.repeat(s.astype(_F32), g, axis=0)[:, :, None]


def _mmx_compute(ins, dst, stationary, moving, stationary_scale, moving_scale, tile_position, tile_size,
                 accumulate, name):
    k, m, n, s_rows, m_rows = ins.info
    if timing_only(ins, dst, (stationary, moving, stationary_scale, moving_scale), accumulate, m, n):
        return                      # nkisim.profile(compute=False): read, not multiplied
    a = _operand(stationary, stationary_scale, s_rows, k, m, ins.target)      # (k, m, 4)
    b = _operand(moving, moving_scale, m_rows, k, n, ins.target)              # (k, n, 4)
    res = np.matmul(a.transpose(1, 0, 2).reshape(m, k * _dt.X4), b.transpose(0, 2, 1).reshape(k * _dt.X4, n))
    write_psum_result(ins, dst, res, accumulate, m, n)


@instruction(reads=("stationary", "moving", "stationary_scale", "moving_scale"), writes=("dst",),
             rules=_mmx_rules, compute=_mmx_compute)
def nc_matmul_mx(dst, stationary, moving, stationary_scale, moving_scale, tile_position=None,
                 tile_size=None, accumulate=None, name=None):
    """dst[m, n] (+)= sum_{k, q} S[k, m, q] * 2**(ss[k // 8, m] - 127) * M[k, n, q] * 2**(ms[k // 8, n] - 127)

    where S[k, m, q] / M[k, n, q] is narrow element q of x4 element [k, m] / [k, n] of
    stationary / moving and ss / ms are the scales of 8-partition group k // 8 (a group of 32
    values: 8 partitions x the 4 packed elements), found in rows 32j + i of the scale tile for
    group 4j + i (the layout quantize_mx writes). The contraction runs over the partitions and
    the 4 elements packed in each x4 element (K = 4 x partitions, up to 512).
    Shapes: stationary (K, M...) and moving (K, N...) with the same K, a multiple of 32 and
    <= pmax, starting on a 32-partition quadrant; M (stationary free size) even, <= 128; N <= 4096
    (float32 dst) or 8192 (bfloat16 dst); dst M partitions x N elements per partition. Scale tiles
    have M / N elements per partition and start at offset 0, 4, 8 or 12 of their data's quadrant
    (at least 32 (K/32 - 1) + 4 partitions).
    Dtypes: stationary, moving float8_e4m3fn_x4, float8_e5m2_x4 or float4_e2m1fn_x4 (mixed freely);
    scales float8_e8m0fnu or uint8 (bits 0xFF: NaN); dst float32 or bfloat16 (rounded once).
    Buffers: data and scales in SBUF, dst in PSUM. Engine: tensor. Generations: trn3 and newer.
    ``accumulate``: as nc_matmul's (False overwrites, True adds, None by the PSUM matmul flags).
    Tiling: row tiling only, ``tile_size=(rows, 128)`` with rows 32, 64 or 128 and
    ``tile_position=(start_row, 0)``, start_row a multiple of rows, start_row + rows <= 128; both or
    neither; K <= rows; the math is unchanged.
    Decision: each operand is dequantized to float32 (exact: element x power of two) and the
    products are summed in float32 (the docs: fp32 accumulation); the summation order is NumPy's,
    so sums of inexact products may differ from hardware in the last bits.
    Decision: tensor indirection (``.indirect()`` operands) is not simulated (UnsupportedError).
    Raises: UnsupportedError (before trn3), MemorySpaceError, DtypeError, ShapeError.
    Source: aws-neuron-sdk nki/api/nki/isa/__init__.py (nc_matmul_mx); nki/deep-dives/mxfp-matmul.rst;
    nki/guides/architecture/trainium3_arch.rst.
    """


__all__ = ["quantize_mx", "nc_matmul_mx"]
