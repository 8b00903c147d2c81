"""Zero-copy torch <-> NumPy conversion and torch tensors through nki.simulate / plain jit calls."""
import pytest

torch = pytest.importorskip("torch")

import ml_dtypes  # noqa: E402
import numpy as np  # noqa: E402

import nkisim.nki as nki  # noqa: E402
import nkisim.nki.language as nl  # noqa: E402
from nkisim.errors import ShapeError  # noqa: E402
from nkisim.torch import from_numpy, to_numpy  # noqa: E402
from nki_torch_kernels import clean_env, copy, scale_inplace  # noqa: E402,F401

# torch dtype -> (expected NumPy dtype of the view, same-width int dtype for bit comparison)
DTYPES = {
    torch.float32: (np.float32, torch.int32), torch.float16: (np.float16, torch.int16),
    torch.bfloat16: (ml_dtypes.bfloat16, torch.int16),
    torch.float8_e4m3fn: (ml_dtypes.float8_e4m3fn, torch.uint8),
    torch.float8_e5m2: (ml_dtypes.float8_e5m2, torch.uint8),
    torch.int8: (np.int8, torch.int8), torch.int16: (np.int16, torch.int16),
    torch.int32: (np.int32, torch.int32), torch.uint8: (np.uint8, torch.uint8),
    torch.uint16: (np.uint16, torch.uint16), torch.uint32: (np.uint32, torch.uint32),
    torch.bool: (np.bool_, torch.bool),
}


def _sample(dtype, shape=(4, 6)):
    g = torch.Generator().manual_seed(0)
    if dtype.is_floating_point:
        return (torch.randn(shape, generator=g) * 3).to(dtype)
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=g).bool()
    return torch.randint(0, 100, shape, generator=g).to(dtype)


def _bits(t):
    return t.view(DTYPES[t.dtype][1]) if t.dtype != torch.bool else t


@pytest.mark.parametrize("dtype", list(DTYPES), ids=str)
def test_to_numpy_shares_memory_for_every_dtype(dtype):
    t = _sample(dtype)
    a = to_numpy(t)
    assert a.dtype == np.dtype(DTYPES[dtype][0])
    assert a.shape == tuple(t.shape)
    assert a.ctypes.data == t.data_ptr()
    a[0, 0] = a[1, 1]                                   # a write through the view reaches t
    assert _bits(t)[0, 0].item() == _bits(t)[1, 1].item()


def test_to_numpy_keeps_strides_and_storage_offset():
    base = torch.arange(40, dtype=torch.float32).reshape(5, 8)
    view = base[1:, ::2]
    a = to_numpy(view)
    assert a.strides == (32, 8) and a.ctypes.data == view.data_ptr()
    np.testing.assert_array_equal(a, view.numpy())


@pytest.mark.parametrize("dtype", list(DTYPES), ids=str)
def test_from_numpy_gives_the_torch_dtype_bit_exact(dtype):
    t = _sample(dtype)
    back = from_numpy(np.array(to_numpy(t)))
    assert back.dtype == dtype
    assert torch.equal(_bits(back), _bits(t))


def test_from_numpy_float8_e4m3_comes_back_as_e4m3fn_bits():
    a = np.array([[1.5, -240.0, 0.0]], dtype=ml_dtypes.float8_e4m3)
    t = from_numpy(a)
    assert t.dtype == torch.float8_e4m3fn
    assert t.view(torch.uint8).tolist() == a.view(np.uint8).tolist()


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float8_e4m3fn, torch.float8_e5m2], ids=str)
def test_low_precision_round_trips_bit_exactly_through_a_copy_kernel(dtype):
    x = _sample(dtype, (8, 16))
    y = nki.simulate(copy)(x)
    assert isinstance(y, torch.Tensor) and y.dtype == dtype
    assert torch.equal(_bits(y), _bits(x))


def test_kernel_writing_a_bf16_input_is_seen_by_the_caller():
    x = (torch.arange(24, dtype=torch.float32).reshape(4, 6) / 7).to(torch.bfloat16)
    want = (x.float().numpy() * 2).astype(ml_dtypes.bfloat16)
    out = nki.simulate(scale_inplace)(x)
    assert out is x
    assert x.view(torch.int16).numpy().tolist() == want.view(np.int16).tolist()


def test_kernel_writes_through_a_non_contiguous_offset_view():
    base = torch.arange(40, dtype=torch.float32).reshape(5, 8)
    before = base.clone()
    view = base[1:4, 1::3]
    nki.simulate(scale_inplace)(view)
    want = before.clone()
    want[1:4, 1::3] *= 2
    assert torch.equal(base, want)


def test_fp8_input_written_in_place():
    x = torch.tensor([[0.5, -1.0, 2.0, 3.5]]).to(torch.float8_e4m3fn)
    want = (x.float().numpy() * 2).astype(ml_dtypes.float8_e4m3fn)
    nki.simulate(scale_inplace)(x)
    assert x.view(torch.uint8).numpy().tolist() == want.view(np.uint8).tolist()


def test_plain_jit_call_on_torch_tensors_simulates_when_flag_is_set(monkeypatch):
    monkeypatch.setenv("NKI_SIMULATOR", "1")
    x = torch.ones(2, 3)
    y = copy(x)
    assert isinstance(y, torch.Tensor) and torch.equal(y, x) and y.data_ptr() != x.data_ptr()


def test_simulate_kernel_accepts_torch_tensors():
    x = torch.full((2, 2), 3.0)
    assert nki.simulator.simulate_kernel(scale_inplace, (), {"x": x, "factor": 0.5}) is x
    assert torch.equal(x, torch.full((2, 2), 1.5))


def test_requires_grad_tensor_is_rejected_with_grad_mode_on():
    x = torch.ones(2, 2, requires_grad=True)
    with pytest.raises(ValueError, match=r"^nkisim\.torch: kernel argument requires grad; .*detach\(\)"):
        nki.simulate(copy)(x)


def test_requires_grad_tensor_is_accepted_under_no_grad():
    x = torch.ones(2, 2, requires_grad=True)
    with torch.no_grad():
        nki.simulate(scale_inplace)(x)
    assert torch.equal(x.detach(), torch.full((2, 2), 2.0))


def test_meta_tensor_is_rejected():
    with pytest.raises(ValueError, match=r"^nkisim\.torch: kernel argument is on device meta; .*\.cpu\(\)"):
        to_numpy(torch.empty(2, 2, device="meta"))


def test_unsupported_dtype_is_rejected():
    with pytest.raises(TypeError, match=r"^nkisim\.torch: tensor dtype torch\.complex64 has no NKI twin"):
        to_numpy(torch.zeros(2, dtype=torch.complex64))


def test_failed_kernel_leaves_tensor_untouched():
    def write_then_fail(x):
        scale_inplace.func(x)
        nl.ndarray((129, 1), dtype=nl.float32, buffer=nl.sbuf)

    x = torch.ones(2, 2)
    with pytest.raises(ShapeError, match="partition dim 129"):
        nki.simulate(write_then_fail)(x)
    assert torch.equal(x, torch.ones(2, 2))


# --- every entry point agrees on dtypes; bit-exact copies in both precision modes ---------------

def _entry_points():
    from nkisim.torch import simulate_nki_kernel, wrap_nki
    return {
        "simulate": lambda k, x: nki.simulate(k)(x),
        "jit call": lambda k, x: k(x),
        "simulate_kernel": lambda k, x: nki.simulator.simulate_kernel(k, (), {"x": x}),
        "simulate_nki_kernel": lambda k, x: simulate_nki_kernel(k, 1, {"x": x}),
        "wrap_nki": lambda k, x: wrap_nki(k)(x),
    }


@pytest.mark.parametrize("entry", list(_entry_points()))
def test_trn2_reads_float8_e4m3fn_tensors_as_e4m3_bits_at_every_entry_point(monkeypatch, entry):
    monkeypatch.setenv("NKI_SIMULATOR", "1")
    monkeypatch.setenv("NEURON_PLATFORM_TARGET_OVERRIDE", "trn2")
    vals = np.array([[0.5, -1.0, 200.0, 240.0]], np.float32)
    x = torch.from_numpy(vals.astype(ml_dtypes.float8_e4m3fn).view(np.uint8)).view(torch.float8_e4m3fn)
    e4m3 = x.view(torch.uint8).numpy().view(ml_dtypes.float8_e4m3)      # the same bits, as trn2 reads them
    want = (e4m3.astype(np.float32) * 2).astype(ml_dtypes.float8_e4m3).view(np.uint8)   # 400 -> inf
    out = _entry_points()[entry](scale_inplace, x)
    assert out is x and x.dtype == torch.float8_e4m3fn
    assert x.view(torch.uint8).numpy().tolist() == want.tolist()


def test_trn2_still_refuses_a_numpy_float8_e4m3fn_array():
    from nkisim.errors import DtypeError
    x = np.zeros((1, 2), ml_dtypes.float8_e4m3fn)
    with pytest.raises(DtypeError, match=r"^kernel argument: argument 0: dtype float8_e4m3fn is not an NKI "
                                         r"dtype on trn2 \(test_convert\.py:\d+\)$"):
        nki.simulate(copy, target="trn2")(x)


_ALL_BITS = {torch.float8_e4m3fn: torch.arange(256, dtype=torch.int32).to(torch.uint8),
             torch.float8_e5m2: torch.arange(256, dtype=torch.int32).to(torch.uint8),
             torch.bfloat16: torch.arange(-32768, 32768, dtype=torch.int32).to(torch.int16)}


@pytest.mark.parametrize("target", ["trn2", "trn3"])
@pytest.mark.parametrize("precise", ["1", "0"])
@pytest.mark.parametrize("dtype", list(_ALL_BITS))
def test_copy_kernel_is_bit_exact_for_every_pattern_in_both_precision_modes(monkeypatch, target, precise,
                                                                            dtype):
    from nkisim.torch import wrap_nki
    monkeypatch.setenv("NKI_SIMULATOR", "1")
    monkeypatch.setenv("NEURON_PLATFORM_TARGET_OVERRIDE", target)
    monkeypatch.setenv("NKI_PRECISE_FP", precise)
    bits = _ALL_BITS[dtype].reshape(128, -1)
    out = wrap_nki(copy)(bits.view(dtype))
    assert out.dtype == dtype and torch.equal(out.view(bits.dtype), bits)


def test_numpy_fp8_nan_patterns_survive_fp32_storage(monkeypatch):
    monkeypatch.setenv("NKI_PRECISE_FP", "0")
    x = np.arange(256, dtype=np.uint8).reshape(16, 16).view(ml_dtypes.float8_e4m3)
    out = nki.simulate(copy, target="trn2")(x)
    assert out.dtype == x.dtype and out.view(np.uint8).tolist() == x.view(np.uint8).tolist()


@pytest.mark.parametrize("dtype, hint", [(torch.float64, "float32"), (torch.int64, "int32")])
def test_wide_dtype_through_wrap_nki_names_the_call_site_and_the_torch_conversion(monkeypatch, dtype, hint):
    from nkisim.errors import DtypeError
    from nkisim.torch import wrap_nki
    monkeypatch.setenv("NKI_SIMULATOR", "1")
    with pytest.raises(DtypeError, match=rf"^kernel argument: argument 'x': dtype torch\.{dtype.__repr__()[6:]} "
                                         rf"is not an NKI dtype on trn3 \(convert with \.to\(torch\.{hint}\)\) "
                                         rf"\(test_convert\.py:\d+\)$"):
        wrap_nki(copy)(torch.zeros(2, 2, dtype=dtype))
