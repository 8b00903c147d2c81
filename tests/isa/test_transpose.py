"""nisa.nc_transpose on the Tensor and Vector engines: bit exactness, engine choice, every rule."""
import re

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import nkisim.nki.isa as nisa
import nkisim.nki.language as nl
from nkisim.errors import DtypeError, EngineError, MemorySpaceError, ShapeError
from conftest import simulate
from _events import line, record, roles

BF16 = ml_dtypes.bfloat16


def err(what):
    return rf"^nisa\.nc_transpose: {re.escape(what)} \(test_transpose\.py:\d+\)$"


def transpose_kernel(dst_shape, engine=nisa.engine.unknown, data_buf=nl.sbuf, dst_buf=nl.psum,
                     dst_dtype=None):
    """HBM x -> SBUF (-> PSUM) -> nc_transpose -> SBUF -> HBM."""
    def kernel(x):
        d = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=d, src=x)
        if data_buf is nl.psum:
            p = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.psum)
            nisa.tensor_copy(dst=p, src=d)
            d = p
        t = nl.ndarray(dst_shape, dtype=dst_dtype or x.dtype, buffer=dst_buf)
        nisa.nc_transpose(dst=t, data=d, engine=engine)
        s = nl.ndarray(dst_shape, dtype=t.dtype, buffer=nl.sbuf)
        nisa.tensor_copy(dst=s, src=t)
        out = nl.ndarray(dst_shape, dtype=t.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=s)
        return out
    return kernel


def run(x, dst_shape, engine=nisa.engine.unknown, data_buf=nl.sbuf, dst_buf=nl.psum, dst_dtype=None,
        target="trn2"):
    return simulate(transpose_kernel(dst_shape, engine, data_buf, dst_buf, dst_dtype), x, target=target)


def special_f32(shape, rng):
    x = rng.standard_normal(shape).astype(np.float32)
    flat = x.reshape(-1)
    flat[:4] = [np.nan, -0.0, np.inf, -np.inf]
    flat.view(np.uint32)[0] = 0x7FC01234          # a NaN payload
    return x


@pytest.mark.parametrize("target", ["trn2", "trn3"])
def test_tensor_engine_transpose_bit_exact_128x128(rng, target):
    bits = rng.integers(0, 2**16, (128, 128), dtype=np.uint16)
    bits[0, :3] = [0x7F81, 0xFFC0, 0x8000]
    got = run(bits.view(BF16), (128, 128), target=target)
    assert got.view(np.uint16).tolist() == bits.T.tolist()


def test_free_dims_are_flattened(rng):
    x = special_f32((4, 2, 3), rng)
    got = run(x, (6, 4))
    assert got.view(np.uint32).tolist() == x.reshape(4, 6).T.view(np.uint32).tolist()


@pytest.mark.parametrize("data_buf, dst_buf", [(nl.sbuf, nl.sbuf), (nl.psum, nl.sbuf), (nl.psum, nl.psum),
                                               (nl.sbuf, nl.psum)])
def test_vector_engine_any_buffers_32x32(rng, data_buf, dst_buf):
    x = special_f32((32, 32), rng)
    got = run(x, (32, 32), nisa.engine.vector, data_buf, dst_buf)
    assert got.view(np.uint32).tolist() == x.T.view(np.uint32).tolist()


def test_vector_engine_limits():
    with pytest.raises(ShapeError, match=err("data partition dim 33 exceeds 32 on trn2 (vector engine transpose)")):
        run(np.zeros((33, 4), np.float32), (4, 33), nisa.engine.vector)
    with pytest.raises(ShapeError, match=err("data free size 33 exceeds 32 on trn2 (vector engine transpose)")):
        run(np.zeros((4, 33), np.float32), (33, 4), nisa.engine.vector)


def test_tensor_engine_free_size_limit():
    # (a dst with 129 partitions cannot exist; the free-size rule is checked before dst's shape)
    with pytest.raises(ShapeError, match=err("data free size 129 exceeds 128 on trn2 (tensor engine transpose)")):
        run(np.zeros((4, 129), np.float32), (4, 129), nisa.engine.tensor)


def test_tensor_engine_buffers():
    with pytest.raises(MemorySpaceError, match=err("data is in psum; must be in sbuf")):
        run(np.zeros((4, 4), np.float32), (4, 4), nisa.engine.tensor, data_buf=nl.psum)
    with pytest.raises(MemorySpaceError, match=err("dst is in sbuf; must be in psum")):
        run(np.zeros((4, 4), np.float32), (4, 4), nisa.engine.tensor, dst_buf=nl.sbuf)


def test_default_engine_is_vector_unless_sbuf_to_psum(rng):
    x = rng.standard_normal((64, 8)).astype(np.float32)
    np.testing.assert_array_equal(run(x, (8, 64)), x.T)            # SBUF -> PSUM: TensorE, 64 ok
    with pytest.raises(ShapeError, match=err("data partition dim 64 exceeds 32 on trn2 (vector engine transpose)")):
        run(x, (8, 64), dst_buf=nl.sbuf)                           # SBUF -> SBUF: VectorE


def test_dst_dtype_must_match():
    with pytest.raises(DtypeError, match=err("dst dtype bfloat16 must equal data dtype float32")):
        run(np.zeros((4, 4), np.float32), (4, 4), dst_dtype=nl.bfloat16)


def test_dst_shape_must_be_swapped():
    with pytest.raises(ShapeError, match=err("dst shape (4, 6) must have 6 partitions (data elements per "
                                             "partition) and 4 elements per partition (data partitions)")):
        run(np.zeros((4, 6), np.float32), (4, 6))


@pytest.mark.parametrize("engine", [nisa.engine.scalar, nisa.engine.gpsimd, nisa.engine.dma])
def test_other_engines_rejected(engine):
    with pytest.raises(EngineError, match=err(f"engine {engine.name} is not supported on trn2; expected tensor, "
                                              f"vector or unknown")):
        run(np.zeros((4, 4), np.float32), (4, 4), engine)


def test_trn1_tensor_engine_is_an_fp32_identity_matmul():
    x = np.array([[1.0, -0.0, np.nan],
                  [2.0, -0.0, 5.0],
                  [3.0, np.inf, 6.0]], np.float32)
    got = run(x, (3, 3), target="trn1")
    # column 0 finite: exact; column 1: -0 -> +0, the Inf keeps its place, the rest 0 * Inf = NaN;
    # column 2 holds a NaN: the whole dst row is NaN.
    assert got[0].tolist() == [1.0, 2.0, 3.0]
    assert np.isnan(got[1, :2]).all() and got[1, 2] == np.inf
    assert np.isnan(got[2]).all()
    y = np.array([[-0.0, 1.0], [2.0, -3.0]], np.float32)
    assert run(y, (2, 2), target="trn1").view(np.uint32).tolist() == \
        (y.T + np.float32(0)).view(np.uint32).tolist()
    exact = run(x, (3, 3), nisa.engine.vector, target="trn1")
    assert exact.view(np.uint32).tolist() == x.T.view(np.uint32).tolist()


def test_tensor_engine_transpose_counts_as_a_matmul_write():
    """Decision pinned: a following nc_matmul(accumulate=None) adds onto the transposed values."""
    def kernel(x):
        d = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=d, src=x)
        p = nl.ndarray((2, 2), dtype=nl.float32, buffer=nl.psum)
        nisa.nc_transpose(dst=p, data=d)
        nisa.nc_matmul(dst=p, stationary=d, moving=d)
        s = nl.ndarray((2, 2), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=s, src=p)
        out = nl.ndarray((2, 2), dtype=nl.float32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=s)
        return out
    x = np.array([[1, 2], [3, 4]], np.float32)
    np.testing.assert_array_equal(simulate(kernel, x, target="trn2"), x.T + x.T @ x)


@settings(max_examples=30, deadline=None)
@given(p=st.integers(1, 32), f=st.integers(1, 32), vector=st.booleans(), seed=st.integers(0, 2**16))
def test_transpose_is_bit_exact_for_legal_shapes(p, f, vector, seed):
    bits = np.random.default_rng(seed).integers(0, 2**16, (p, f), dtype=np.uint16)
    eng = nisa.engine.vector if vector else nisa.engine.tensor
    got = run(bits.view(np.float16), (f, p), eng)
    assert got.view(np.uint16).tolist() == bits.T.tolist()


# ---- the instruction: keywords and events ----------------------------------------------------

@pytest.mark.parametrize("dst_buf, engine, want", [(nl.psum, nisa.engine.unknown, "tensor"),
                                                   (nl.sbuf, nisa.engine.unknown, "vector"),
                                                   (nl.psum, nisa.engine.vector, "vector")])
@pytest.mark.parametrize("target", ["trn1", "trn2"])
def test_nc_transpose_event_names_the_engine_that_ran(rng, dst_buf, engine, want, target):
    x = rng.standard_normal((4, 6)).astype(np.float32)
    kernel = transpose_kernel((6, 4), engine, dst_buf=dst_buf)
    for fast in (True, False):
        out, ev = record(kernel, x, fast=fast, target=target)
        np.testing.assert_array_equal(out, x.T)
        e = ev[1]
        assert (e.op, e.api, e.engine, e.options["engine"]) == ("nc_transpose", "nisa.nc_transpose", want,
                                                                engine.name)
        assert roles(e.reads) == [("data", "sbuf", (4, 6), "float32", 96)]
        assert roles(e.writes) == [("dst", str(dst_buf), (6, 4), "float32", 96)]


def test_nc_transpose_misspelt_keyword_raises_type_error():
    def kernel(x):
        d = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
        t = nl.ndarray((6, 4), dtype=x.dtype, buffer=nl.psum)
        nisa.nc_transpose(dst=t, data=d, egnine=nisa.engine.vector)  # ev:kw
    want = ("nisa.nc_transpose() got an unexpected keyword argument 'egnine'; did you mean 'engine'? "
            f"({line(__file__, 'kw')})")
    with pytest.raises(TypeError, match="^" + re.escape(want) + "$"):
        simulate(kernel, np.ones((4, 6), np.float32), target="trn2")
