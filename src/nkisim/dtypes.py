"""NKI dtypes as NumPy dtype objects, their storage dtypes, and the single rounding step.

Only ``round_into`` converts computed values into a tensor's dtype. Imports numpy and ml_dtypes only.
Sources: aws-neuron-sdk nki/api/nki.api.shared.rst (data types); nki/deep-dives simulator notes
(NKI_PRECISE_FP); nki/api/nki/isa/__init__.py (fp32 -> int: round half to even, saturate);
nki/api/nki/language/__init__.py and nki/deep-dives/mxfp-matmul.rst (the MX x4 packed dtypes).
"""
from __future__ import annotations

import ml_dtypes
import numpy as np

float32 = np.dtype(np.float32)
float16 = np.dtype(np.float16)
bfloat16 = np.dtype(ml_dtypes.bfloat16)
# Decision: tfloat32 has no NumPy type; like NKI Beta 1 it is the 4-byte void dtype. It is stored
# as float32 with the mantissa rounded to 10 bits (round to nearest even) on every write.
tfloat32 = np.dtype("V4")
float8_e4m3 = np.dtype(ml_dtypes.float8_e4m3)
float8_e4m3fn = np.dtype(ml_dtypes.float8_e4m3fn)
float8_e5m2 = np.dtype(ml_dtypes.float8_e5m2)
float8_e8m0fnu = np.dtype(ml_dtypes.float8_e8m0fnu)  # MX scale: 2**(bits - 127), 0xFF is NaN
int8, int16, int32 = np.dtype(np.int8), np.dtype(np.int16), np.dtype(np.int32)
uint8, uint16, uint32 = np.dtype(np.uint8), np.dtype(np.uint16), np.dtype(np.uint32)
bool_ = np.dtype(np.bool_)

# The MX "x4" dtypes: one stored element packs 4 narrow elements ("The float8_*_x4 types are
# 32-bits wide and physically contain four float8 elements. The float4_*_x4 type is 16-bits wide",
# mxfp-matmul.rst). Decision: NumPy has no such types, so each is a one-field structured dtype
# of that width (distinct from uint32 / tfloat32; ``a.view(np.uint32)`` gives the raw words,
# ``np.zeros(shape, nl.float8_e4m3fn_x4)`` works on the host). Packing is little-endian: element
# q of a word is byte q (fp8) or nibble q (fp4), so ``fp8_array.view(np.uint32)`` and the
# low-nibble-first uint8 pairs of the MX tutorial's host code are already x4 words.
float8_e4m3fn_x4 = np.dtype([("float8_e4m3fn_x4", "<u4")])
float8_e5m2_x4 = np.dtype([("float8_e5m2_x4", "<u4")])
float4_e2m1fn_x4 = np.dtype([("float4_e2m1fn_x4", "<u2")])
X4 = 4                                   # narrow elements per packed element
# packed dtype -> (element dtype, bits per element, raw word dtype)
PACKED = {float8_e4m3fn_x4: (np.dtype(ml_dtypes.float8_e4m3fn), 8, np.dtype(np.uint32)),
          float8_e5m2_x4: (np.dtype(ml_dtypes.float8_e5m2), 8, np.dtype(np.uint32)),
          float4_e2m1fn_x4: (np.dtype(ml_dtypes.float4_e2m1fn), 4, np.dtype(np.uint16))}

_BY_NAME = {
    "float32": float32, "fp32": float32, "float16": float16, "fp16": float16,
    "bfloat16": bfloat16, "bf16": bfloat16, "tfloat32": tfloat32, "tf32": tfloat32,
    "float8_e4m3": float8_e4m3, "float8e4": float8_e4m3, "float8_e4m3fn": float8_e4m3fn,
    "float8_e5m2": float8_e5m2, "float8e5": float8_e5m2,
    "int8": int8, "int16": int16, "int32": int32, "uint8": uint8, "uint16": uint16,
    "uint32": uint32, "bool": bool_, "bool_": bool_, "float8_e8m0fnu": float8_e8m0fnu,
    "float8_e4m3fn_x4": float8_e4m3fn_x4, "float8_e5m2_x4": float8_e5m2_x4,
    "float4_e2m1fn_x4": float4_e2m1fn_x4,
}
NKI_DTYPES = (float32, float16, bfloat16, tfloat32, float8_e4m3, float8_e4m3fn, float8_e5m2,
              int8, int16, int32, uint8, uint16, uint32, bool_, float8_e8m0fnu, float8_e4m3fn_x4,
              float8_e5m2_x4, float4_e2m1fn_x4)
_NAME = {float32: "float32", float16: "float16", bfloat16: "bfloat16", tfloat32: "tfloat32",
         float8_e4m3: "float8_e4m3", float8_e4m3fn: "float8_e4m3fn", float8_e5m2: "float8_e5m2",
         int8: "int8", int16: "int16", int32: "int32", uint8: "uint8", uint16: "uint16",
         uint32: "uint32", bool_: "bool", float8_e8m0fnu: "float8_e8m0fnu",
         float8_e4m3fn_x4: "float8_e4m3fn_x4", float8_e5m2_x4: "float8_e5m2_x4",
         float4_e2m1fn_x4: "float4_e2m1fn_x4"}
_LOW_FP = (float16, bfloat16, float8_e4m3, float8_e4m3fn, float8_e5m2, tfloat32, float8_e8m0fnu)
_FLOATS = frozenset((float32,) + _LOW_FP)
_INTS = frozenset((int8, int16, int32, uint8, uint16, uint32))


def as_dtype(dt) -> np.dtype | None:
    """The canonical NKI dtype for an ``nl`` dtype, NumPy type/dtype or name; None if not an NKI dtype."""
    if isinstance(dt, str):
        return _BY_NAME.get(dt)
    try:
        d = np.dtype(dt)
    except TypeError:
        return None
    return d if d in _NAME else None


def name(dt) -> str:
    """The NKI name of a dtype (``bfloat16``, ``tfloat32``, ...); falls back to NumPy's name."""
    n = _NAME.get(dt)
    if n is None:
        d = np.dtype(dt)
        n = _NAME.get(d) or d.name
    return n


def is_float(dt) -> bool:
    return np.dtype(dt) in _FLOATS


def is_int(dt) -> bool:
    return np.dtype(dt) in _INTS


def is_packed(dt) -> bool:
    """True for the MX x4 dtypes (several narrow elements per stored element)."""
    return dt in PACKED


def itemsize(dt) -> int:
    """Bytes per stored element (4 for float8_*_x4, 2 for float4_e2m1fn_x4)."""
    return np.dtype(dt).itemsize


def pack_x4(values, dt) -> np.ndarray:
    """Values (last dim 4n, any float dtype) rounded once to dt's element type (ml_dtypes: round
    to nearest even; fp4 saturates) and packed into an array of x4 dtype ``dt`` (last dim n)."""
    elem, bits, word = PACKED[dt]
    v = np.asarray(values)
    if v.shape[-1:] == () or v.shape[-1] % X4:
        raise ValueError(f"pack_x4: the last dim of {v.shape} is not a multiple of {X4}")
    if v.dtype != elem:
        v = v.astype(np.float32).astype(elem)
    raw = np.ascontiguousarray(v).view(np.uint8).astype(word)
    if bits == 4:
        raw &= word.type(0xF)
    raw = raw.reshape(v.shape[:-1] + (v.shape[-1] // X4, X4))
    shifts = np.arange(X4, dtype=word) * word.type(bits)
    out = (raw << shifts).sum(axis=-1, dtype=word)      # the fields are disjoint: sum == or
    return out.view(dt)


def unpack_x4(a: np.ndarray) -> np.ndarray:
    """The narrow elements of an x4 array (last dim n) as their ml_dtypes element type (last dim 4n)."""
    elem, bits, word = PACKED[a.dtype]
    w = np.ascontiguousarray(a).view(word)
    shifts = np.arange(X4, dtype=word) * word.type(bits)
    mask = word.type((1 << bits) - 1)
    parts = ((w[..., None] >> shifts) & mask).astype(np.uint8)
    return parts.reshape(a.shape[:-1] + (a.shape[-1] * X4,)).view(elem)


def storage_dtype(dt: np.dtype, precise: bool) -> np.dtype:
    """The dtype of the NumPy array holding a tensor of dtype ``dt``.

    ``precise`` (NKI_PRECISE_FP=1): the dtype itself (tfloat32 -> float32). Otherwise every
    low-precision float is stored as float32 and never rounded. The x4 dtypes are always stored
    as themselves (raw packed words: they are never computed on as values).
    """
    if dt == tfloat32 or (not precise and dt in _LOW_FP):
        return float32
    return dt


# Decision: a fresh x4 allocation holds NaN in every fp8 element (0x7F is NaN in both e4m3fn
# and e5m2); fp4 has no NaN, so each fp4 element is its largest value, 6.0 (0x7).
_PACKED_FILL = {float8_e4m3fn_x4: 0x7F7F7F7F, float8_e5m2_x4: 0x7F7F7F7F, float4_e2m1fn_x4: 0x7777}


def sentinel(dt) -> float | int:
    """Fill value of a new allocation: NaN for floats, 4 for integers, True for bool; for the x4
    dtypes the raw word of 4 NaN fp8 elements, or 4 fp4 elements of 6.0."""
    d = np.dtype(dt)
    if d in _PACKED_FILL:
        return _PACKED_FILL[d]
    if d in _FLOATS:
        return np.nan
    return True if d == bool_ else 4


_FILL_BITS: dict = {}       # (NKI dtype, storage dtype) -> the sentinel's bits as an unsigned int


def fill_sentinel(storage: np.ndarray, dt) -> None:
    """``storage[...] = sentinel(dt)``, bit for bit: the sentinel is converted into the storage
    dtype once (by that same assignment, into one element), then its bits are written through an
    unsigned-integer view of the storage (a C-contiguous array; any other is assigned as
    before). Speed: 5-10x faster on float32, bfloat16 and fp8 storage (NumPy's conversion per element
    is slow), the same bits (tests/test_dtypes_targets.py)."""
    sd = storage.dtype
    key = (dt, sd)
    bits = _FILL_BITS.get(key)
    if bits is None:
        one = np.empty(1, sd)
        one[...] = sentinel(dt)
        bits = _FILL_BITS[key] = one.view(f"u{sd.itemsize}")[0] if sd.itemsize in (1, 2, 4, 8) else False
    if bits is False or not storage.flags.c_contiguous:
        storage[...] = sentinel(dt)
    else:
        storage.view(bits.dtype).fill(bits)


def _round_tf32(x: np.ndarray) -> np.ndarray:
    x = np.ascontiguousarray(x, dtype=np.float32)
    bits = x.view(np.uint32)
    rounded = (bits + np.uint32(0x0FFF) + ((bits >> np.uint32(13)) & np.uint32(1))) \
        & np.uint32(0xFFFFE000)
    return np.where(np.isfinite(x), rounded.view(np.float32), x)


def round_into(values, dt: np.dtype, precise: bool = True) -> np.ndarray:
    """Round computed ``values`` (float32 or exact integers) once into dtype ``dt``'s storage.

    Floats: round to nearest even (ml_dtypes / NumPy casts); fp8 overflow follows ml_dtypes
    (inf for e4m3/e5m2, NaN for e4m3fn). Integers: round half to even, then saturate to the
    range; NaN becomes 0 (Decision: the hardware result is undocumented). Bool: nonzero is True.
    Returns an array in ``storage_dtype(dt, precise)`` (the input itself when no conversion is due).
    """
    values = np.asarray(values)
    if dt in PACKED:
        if values.dtype != dt:
            raise TypeError(f"round_into: {values.dtype} values cannot be stored as packed {_NAME[dt]} "
                            f"(use pack_x4)")
        return values
    if dt in _FLOATS:
        if dt == tfloat32 and precise:
            return _round_tf32(values)
        target = dt if precise and dt != tfloat32 else float32
        if values.dtype == target:
            return values
        if target != float32 and values.dtype != float32:
            values = values.astype(np.float32)
        return values.astype(target)
    if dt == bool_:
        return values != 0
    if values.dtype == dt:
        return values
    bounds = _INT_RANGE.get(dt)
    if bounds is None:
        info = np.iinfo(dt)
        bounds = (int(info.min), int(info.max))
    lo, hi = bounds
    # (ufuncs with out=, not np.nan_to_num / np.clip: the same values, without their Python
    # wrappers' cost on the small tiles integer arithmetic mostly runs on)
    if values.dtype.kind == "f" or values.dtype in _FLOATS:
        v = values.astype(np.float64)                   # a fresh array: rounded in place below
        np.rint(v, out=v)
        np.minimum(v, hi, out=v)                        # +inf -> max, -inf -> min; NaN stays NaN
        np.maximum(v, lo, out=v)
        np.copyto(v, 0.0, where=np.isnan(v))            # NaN -> 0
        return v.astype(dt)
    v = values.astype(np.int64)
    np.minimum(v, hi, out=v)
    np.maximum(v, lo, out=v)
    return v.astype(dt)


# integer dtype -> its (min, max) as Python ints (round_into's saturation bounds; 64-bit types,
# which no NKI tile holds, take np.iinfo each time)
_INT_RANGE = {np.dtype(t): (int(np.iinfo(t).min), int(np.iinfo(t).max))
              for t in (np.int8, np.int16, np.int32, np.uint8, np.uint16, np.uint32)}

_FP8 = (float8_e4m3, float8_e4m3fn, float8_e5m2)
_NAN_TAG = np.uint32(0x7FC0_0100)     # a float32 quiet NaN whose low 7 bits hold an fp8 NaN's bits


def to_storage(array: np.ndarray, sdt: np.dtype) -> np.ndarray:
    """A C-contiguous copy of a caller's ``array`` in storage dtype ``sdt``.

    Decision: an fp8 NaN stored as float32 (NKI_PRECISE_FP=0) keeps its bit pattern in the NaN
    payload, and ``from_storage`` restores it, so copying an fp8 or bf16 tensor is bit-exact in
    both precision modes (on trn2, torch float8_e4m3fn values 288..448 are e4m3 NaN patterns).
    """
    out = np.array(array, dtype=sdt, copy=True, order="C")
    if sdt == float32 and array.dtype in _FP8:
        nan = np.isnan(out)
        if nan.any():
            bits = np.ascontiguousarray(array).view(np.uint8)[nan].astype(np.uint32)
            out.view(np.uint32)[nan] = _NAN_TAG | ((bits & 0x80) << 24) | (bits & 0x7F)
    return out


def from_storage(a: np.ndarray, dt: np.dtype) -> np.ndarray:
    """A fresh copy of stored values ``a`` in dtype ``dt``; a float32 NaN tagged by ``to_storage``
    becomes its fp8 bit pattern again when that pattern is a NaN of ``dt``; a bfloat16 NaN (its
    float32 value has the bf16 bits on top, zeros below) gets its bits back, not the canonical NaN."""
    with np.errstate(invalid="ignore"):
        out = np.array(a, dtype=dt, copy=True)
    if a.dtype == float32 and dt == bfloat16:          # bf16 -> f32 kept the bits; undo exactly
        af = np.ascontiguousarray(a).reshape(-1)
        k = np.flatnonzero(np.isnan(af))
        if k.size:
            u = af.view(np.uint32)[k]
            exact = (u & np.uint32(0xFFFF)) == 0
            out.reshape(-1).view(np.uint16)[k[exact]] = (u[exact] >> 16).astype(np.uint16)
    elif a.dtype == float32 and dt in _FP8:
        af = np.ascontiguousarray(a).reshape(-1)
        k = np.flatnonzero(np.isnan(af))
        if k.size:
            u = af.view(np.uint32)[k]
            tagged = (u & np.uint32(0x7FFF_FF80)) == _NAN_TAG
            byte = (((u >> 24) & 0x80) | (u & 0x7F)).astype(np.uint8)
            keep = tagged & np.isnan(byte.view(dt).astype(np.float32))
            out.reshape(-1).view(np.uint8)[k[keep]] = byte[keep]
    return out


__all__ = ["as_dtype", "name", "is_float", "is_int", "is_packed", "pack_x4", "unpack_x4", "PACKED", "X4",
           "itemsize", "storage_dtype", "sentinel",
           "round_into", "to_storage", "from_storage", "NKI_DTYPES"] + [n for n in _NAME.values() if n != "bool"] + ["bool_"]
