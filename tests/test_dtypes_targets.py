"""Dtype storage and rounding (NKI_PRECISE_FP), and per-generation target facts."""
import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, strategies as st

import nkisim.nki as nki
import nkisim.nki.isa as nisa
import nkisim.nki.language as nl
from nkisim import dtypes as _dt
from nkisim.errors import DtypeError


def cast_kernel(dtype):
    def kernel(x):
        t = nl.ndarray(x.shape, dtype=dtype, buffer=nl.sbuf)
        nisa.tensor_copy(dst=t, src=_load(x))
        out = nl.ndarray(x.shape, dtype=dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=t)
        return out
    return kernel


def _load(x):
    t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    return t


def test_float_to_int_rounds_half_even_and_saturates():
    x = np.array([[0.5, 1.5, 2.5, -0.5, -1.5, 127.4, 300.0, -300.0, np.nan]], np.float32)
    got = nki.simulate(cast_kernel(nl.int8))(x)
    np.testing.assert_array_equal(got, [[0, 2, 2, 0, -2, 127, 127, -128, 0]])
    got = nki.simulate(cast_kernel(nl.uint8))(x)
    np.testing.assert_array_equal(got, [[0, 2, 2, 0, 0, 127, 255, 0, 0]])


@given(st.lists(st.floats(-1e4, 1e4, width=32), min_size=1, max_size=64))
def test_bf16_and_fp8_round_once_to_nearest_even(values):
    x = np.array([values], np.float32)
    for nl_dt, ml_dt in ((nl.bfloat16, ml_dtypes.bfloat16), (nl.float8_e4m3, ml_dtypes.float8_e4m3),
                         (nl.float16, np.float16)):
        got = nki.simulate(cast_kernel(nl_dt))(x)
        assert got.dtype == ml_dt
        np.testing.assert_array_equal(got.view(np.uint8), x.astype(ml_dt).view(np.uint8))


def test_tfloat32_keeps_ten_mantissa_bits():
    x = np.array([[1 + 2.0 ** -10, 1 + 2.0 ** -11, 1 + 3 * 2.0 ** -11, 1 + 2.0 ** -12]], np.float32)
    got = nki.simulate(cast_kernel(nl.tfloat32))(x)
    np.testing.assert_array_equal(got, [[1 + 2.0 ** -10, 1.0, 1 + 2 * 2.0 ** -10, 1.0]])


def test_precise_fp_off_stores_low_precision_as_float32(monkeypatch):
    x = np.array([[1 + 2.0 ** -12]], np.float32)           # not representable in bf16
    monkeypatch.setenv("NKI_PRECISE_FP", "0")
    seen = {}

    def kernel(x):
        t = nl.ndarray(x.shape, dtype=nl.bfloat16, buffer=nl.sbuf)
        nisa.tensor_copy(dst=t, src=_load(x))
        seen["storage"] = t.np().dtype
        back = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=back, src=t)
        out = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=back)
        return out
    assert nki.simulate(kernel)(x)[0, 0] == np.float32(1 + 2.0 ** -12)
    assert seen["storage"] == np.float32
    monkeypatch.setenv("NKI_PRECISE_FP", "1")
    assert nki.simulate(kernel)(x)[0, 0] == np.float32(1.0)
    assert seen["storage"] == ml_dtypes.bfloat16


@pytest.mark.parametrize("env, name, version, sbuf", [
    ("trn1", "trn1", 2, 180224), ("gen2", "trn1", 2, 180224), ("inf2", "trn1", 2, 180224),
    ("trn2", "trn2", 3, 212984), ("gen3", "trn2", 3, 212984),
    ("trn3", "trn3", 4, 245752), ("gen4", "trn3", 4, 245752), (None, "trn3", 4, 245752),
])
def test_target_override_selects_generation(monkeypatch, env, name, version, sbuf):
    if env is None:
        monkeypatch.delenv("NEURON_PLATFORM_TARGET_OVERRIDE", raising=False)
    else:
        monkeypatch.setenv("NEURON_PLATFORM_TARGET_OVERRIDE", env)
    seen = {}

    def kernel(x):
        seen.update(v=nisa.get_nc_version(), pmax=nl.tile_size.pmax, sbuf=nl.tile_size.total_available_sbuf_size,
                    psum=nl.tile_size.psum_fmax, moving=nl.tile_size.gemm_moving_fmax,
                    stationary=nl.tile_size.gemm_stationary_fmax, banks=nl.tile_size.psum_num_banks)
        return x
    nki.simulate(kernel)(np.zeros((1, 1), np.float32))
    assert seen == dict(v=version, pmax=128, sbuf=sbuf, psum=512, moving=512, stationary=128, banks=8)
    assert seen["v"] >= nisa.nc_version.gen2


def test_unknown_target_is_rejected(monkeypatch):
    monkeypatch.setenv("NEURON_PLATFORM_TARGET_OVERRIDE", "trn9")
    with pytest.raises(ValueError, match="unknown target 'trn9'"):
        nki.simulate(cast_kernel(nl.int8))(np.zeros((1, 1), np.float32))


def test_e4m3fn_is_trn3_only():
    x = np.zeros((1, 4), np.float32)
    nki.simulate(cast_kernel(nl.float8_e4m3fn), target="trn3")(x)
    with pytest.raises(DtypeError, match=r"^nl\.ndarray: tensor dtype float8_e4m3fn is not supported on trn2 "
                                         r"\(test_dtypes_targets\.py:\d+\)$"):
        nki.simulate(cast_kernel(nl.float8_e4m3fn), target="trn2")(x)


@pytest.mark.parametrize("precise", [True, False])
@pytest.mark.parametrize("dt", _dt.NKI_DTYPES, ids=str)
def test_fill_sentinel_writes_the_bits_of_the_plain_assignment(dt, precise):
    """The fast fill (an unsigned-integer view) leaves the bits NumPy's own assignment of the
    documented sentinel leaves: NaN for floats, 4 for ints, True for bool, the x4 fill words."""
    sd = _dt.storage_dtype(dt, precise)
    want = np.zeros(37, sd)
    value = {_dt.float8_e4m3fn_x4: 0x7F7F7F7F, _dt.float8_e5m2_x4: 0x7F7F7F7F,
             _dt.float4_e2m1fn_x4: 0x7777}.get(dt, True if dt == np.bool_ else
                                              4 if np.dtype(dt).kind in "iu" else np.nan)
    want[...] = value
    got = np.zeros(37, sd)
    _dt.fill_sentinel(got, dt)
    assert got.tobytes() == want.tobytes()
    strided = np.zeros(74, sd)[::2]          # not contiguous: the plain assignment
    _dt.fill_sentinel(strided, dt)
    assert strided.tobytes() == want.tobytes()
