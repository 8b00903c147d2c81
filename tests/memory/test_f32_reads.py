"""Reads of non-fp32 tiles as float32 (memory.access.read_f32) after writes: a bf16/fp8/fp16/int
tile read many times, changed by one write path, read again, compared with NumPy on the values the
kernel wrote (ml_dtypes casts as the reference), with the fast paths on and off. (These tests
guarded the kept-upcast mechanism, removed as measured slower; they stay as value tests of every
write path followed by reads, deferred copies and aliased arguments.)"""
import ml_dtypes
import numpy as np
import pytest

import nkisim.nki as nki
import nkisim.nki.isa as nisa
import nkisim.nki.language as nl
from nkisim.memory import access

F32 = np.float32


BF16 = ml_dtypes.bfloat16
DTYPES = {"bfloat16": (nl.bfloat16, BF16), "float8_e4m3": (nl.float8_e4m3, ml_dtypes.float8_e4m3),
          "float16": (nl.float16, np.float16), "int8": (nl.int8, np.int8)}
WRITES = ["tensor_scalar", "memset", "dma_copy", "tensor_copy", "iota", "activation", "operator"]


def _out(shape):
    return nl.ndarray(shape, dtype=nl.float32, buffer=nl.shared_hbm)


def _read(t, shape):
    """One instruction reading ``t`` (as fp32: tensor_scalar * 1) into a new fp32 HBM output."""
    s = nl.ndarray(shape, dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_scalar(dst=s, data=t, op0=nl.multiply, operand0=1.0)
    o = _out(shape)
    nisa.dma_copy(dst=o, src=s)
    return o


@pytest.mark.parametrize("fast", [True, False])
@pytest.mark.parametrize("how", WRITES)
@pytest.mark.parametrize("dtype", list(DTYPES))
def test_reads_after_a_partial_write_see_the_new_values(dtype, how, fast):
    nl_dt, np_dt = DTYPES[dtype]
    rng = np.random.default_rng(3)
    x = (rng.standard_normal((8, 16)) * 4).astype(np_dt)

    def kernel(x):
        t = nl.ndarray((8, 16), dtype=nl_dt, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x)
        before = [_read(t[:, 4:12], (8, 8))] + [_read(t, (8, 16)) for _ in range(3)]
        part = t[2:6, 0:8]
        if how == "tensor_scalar":
            nisa.tensor_scalar(dst=part, data=part, op0=nl.add, operand0=2.0)
        elif how == "memset":
            nisa.memset(dst=part, value=3.0)
        elif how == "dma_copy":
            nisa.dma_copy(dst=part, src=x[0:4, 8:16])
        elif how == "tensor_copy":
            src = nl.ndarray((4, 8), dtype=nl_dt, buffer=nl.sbuf)
            nisa.dma_copy(dst=src, src=x[4:8, 8:16])
            nisa.tensor_copy(dst=part, src=src)
        elif how == "iota":
            nisa.iota(dst=part, pattern=[[1, 8]])
        elif how == "activation":
            nisa.activation(dst=part, op=nl.copy, data=t[0:4, 8:16], scale=-1.0)
        else:
            part += 1
        after = [_read(t, (8, 16)) for _ in range(2)] + [_read(t[2:6, 0:8], (4, 8))]
        return tuple(before + after)

    got = nki.simulate(kernel, fast_paths=fast)(x)
    xf = x.astype(F32)
    for g, w in zip(got[:4], [xf[:, 4:12], xf, xf, xf]):
        np.testing.assert_array_equal(g, w)
    want = xf.copy()
    p = want[2:6, 0:8]
    new = {"tensor_scalar": p + F32(2), "memset": np.full_like(p, 3), "dma_copy": xf[0:4, 8:16],
           "tensor_copy": xf[4:8, 8:16], "iota": np.broadcast_to(np.arange(8, dtype=F32), (4, 8)),
           "activation": -xf[0:4, 8:16], "operator": p + F32(1)}[how]
    want[2:6, 0:8] = new.astype(np_dt).astype(F32)      # rounded once into the tile's dtype
    for g in got[4:6]:
        np.testing.assert_array_equal(g, want)
    np.testing.assert_array_equal(got[6], want[2:6, 0:8])


def test_deferred_copies_of_a_source_keep_old_values_after_a_write():
    """Tiles made by dma_copy of the same HBM region read as fp32; a write to the source after
    the copies leaves them with the old values, and a later copy sees the new."""
    rng = np.random.default_rng(4)
    x = rng.standard_normal((8, 16)).astype(BF16)
    y = rng.standard_normal((8, 16)).astype(BF16)

    def kernel(x, y):
        tiles = []
        for _ in range(4):
            t = nl.ndarray((8, 16), dtype=nl.bfloat16, buffer=nl.sbuf)
            nisa.dma_copy(dst=t, src=x[:, :])
            tiles.append(t)
        outs = [_read(t, (8, 16)) for t in tiles[:3]]
        yt = nl.ndarray((8, 16), dtype=nl.bfloat16, buffer=nl.sbuf)
        nisa.dma_copy(dst=yt, src=y)
        nisa.dma_copy(dst=x[:, :], src=yt)          # the source changes
        outs.append(_read(tiles[3], (8, 16)))       # a copy made before: old values
        late = nl.ndarray((8, 16), dtype=nl.bfloat16, buffer=nl.sbuf)
        nisa.dma_copy(dst=late, src=x[:, :])
        outs += [_read(late, (8, 16)) for _ in range(2)]
        return tuple(outs)
    xs = x.copy()
    got = nki.simulate(kernel)(xs, y)
    for g in got[:4]:
        np.testing.assert_array_equal(g, x.astype(F32))
    for g in got[4:]:
        np.testing.assert_array_equal(g, y.astype(F32))


def test_arguments_overlapping_with_another_dtype_see_each_others_writes():
    """A bf16 array and a uint16 view of it passed as two arguments are two allocations over one
    memory (runtime.launch._alias_plan): reads of the bf16 one after a write through the uint16
    one see the new bits (nothing stale)."""
    a = np.arange(64, dtype=F32).reshape(4, 16).astype(BF16)
    bits = a.view(np.uint16)
    new = np.full((4, 16), 0x3F80, np.uint16)            # bf16 1.0

    def kernel(x, u, w):
        before = []
        for _ in range(3):
            s = nl.ndarray((4, 16), dtype=nl.float32, buffer=nl.sbuf)
            nisa.dma_copy(dst=s, src=x)                 # an upcasting DMA: reads x as fp32
            o = _out((4, 16))
            nisa.dma_copy(dst=o, src=s)
            before.append(o)
        wt = nl.ndarray((4, 16), dtype=nl.uint16, buffer=nl.sbuf)
        nisa.dma_copy(dst=wt, src=w)
        nisa.dma_copy(dst=u, src=wt)                    # writes x's memory through u
        s = nl.ndarray((4, 16), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=s, src=x)
        o = _out((4, 16))
        nisa.dma_copy(dst=o, src=s)
        return tuple(before) + (o,)
    want = a.astype(F32)
    got = nki.simulate(kernel)(a, bits, new)
    for g in got[:3]:
        np.testing.assert_array_equal(g, want)
    np.testing.assert_array_equal(got[3], np.ones((4, 16), F32))


@pytest.mark.parametrize("lnc", [1, 2])
def test_shared_hbm_tensor_written_by_one_core_read_by_both(lnc):
    """LNC2: a shared_hbm bf16 tensor read by both cores, then rewritten by core 0 between two
    barriers; the reads after the second barrier see the new values on both cores."""
    x = np.arange(128, dtype=F32).reshape(8, 16).astype(BF16)

    def kernel(x):
        core = nl.program_id(0)
        sh = nl.ndarray((8, 16), dtype=nl.bfloat16, buffer=nl.shared_hbm)
        if core == 0:
            nisa.dma_copy(dst=sh, src=x)
        nisa.core_barrier(sh, (0, 1)) if lnc == 2 else None
        outs = []
        for _ in range(3):
            s = nl.ndarray((8, 16), dtype=nl.float32, buffer=nl.sbuf)
            nisa.dma_copy(dst=s, src=sh)
            outs.append(s)
        nisa.core_barrier(sh, (0, 1)) if lnc == 2 else None
        if core == 0:
            t = nl.ndarray((8, 16), dtype=nl.bfloat16, buffer=nl.sbuf)
            nisa.memset(dst=t, value=-2.0)
            nisa.dma_copy(dst=sh, src=t)
        nisa.core_barrier(sh, (0, 1)) if lnc == 2 else None
        s = nl.ndarray((8, 16), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=s, src=sh)
        res = nl.ndarray((lnc, 2, 8, 16), dtype=nl.float32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=res[core, 0], src=outs[2])
        nisa.dma_copy(dst=res[core, 1], src=s)
        return res
    k = nki.simulate(kernel)
    got = (k[2] if lnc == 2 else k)(x)
    for c in range(lnc):
        np.testing.assert_array_equal(got[c, 0], x.astype(F32))
        np.testing.assert_array_equal(got[c, 1], np.full((8, 16), -2, F32))


@pytest.mark.parametrize("dtype", ["float8_e4m3", "float8_e4m3fn", "float8_e5m2", "float8_e8m0fnu"])
def test_one_byte_float_upcast_is_bit_identical_to_ml_dtypes(dtype):
    d = np.dtype(getattr(ml_dtypes, dtype))
    every = np.arange(256, dtype=np.uint8).view(d)
    want = every.astype(F32)
    np.testing.assert_array_equal(access.to_f32(every).view(np.uint32), want.view(np.uint32))
    strided = np.arange(512, dtype=np.uint8).astype(np.uint8).view(d).reshape(16, 32)[:, ::3]
    np.testing.assert_array_equal(access.to_f32(strided).view(np.uint32),
                                  strided.astype(F32).view(np.uint32))


def test_bfloat16_upcast_is_bit_identical_to_ml_dtypes():
    # every bf16 bit pattern (NaN payloads, infinities, subnormals, -0), against ml_dtypes' cast
    bf16 = np.dtype(ml_dtypes.bfloat16)
    every = np.arange(65536, dtype=np.uint16).view(bf16)
    got = access.to_f32(every)
    assert got.dtype == F32 and got.shape == every.shape
    with np.errstate(invalid="ignore"):
        np.testing.assert_array_equal(got.view(np.uint32), every.astype(F32).view(np.uint32))
    # views: strided, reversed, 0-d; the result is a new array, not the storage
    grid = every.reshape(256, 256)
    for view in (grid[::3, 1::5], grid[::-2, ::-7], grid.T, grid[7, 9]):
        with np.errstate(invalid="ignore"):
            want = np.asarray(view).astype(F32)
        got = access.to_f32(np.asarray(view))
        assert got.shape == want.shape
        np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))
        assert not np.shares_memory(got, grid)


def test_bfloat16_upcast_keeps_the_layout_of_astype():
    # a transposed view upcasts to the same memory order as NumPy's astype (order="K")
    t = np.arange(12, dtype=np.float32).astype(ml_dtypes.bfloat16).reshape(3, 4).T
    got, want = access.to_f32(t), t.astype(F32)
    assert got.strides == want.strides and got.flags.f_contiguous
    np.testing.assert_array_equal(got, np.arange(12, dtype=np.float32).reshape(3, 4).T)
