"""swiglu_mlp: kernel vs fallback vs a float64 NumPy formula; routes; gate refusals."""
import ml_dtypes
import numpy as np
import pytest

torch = pytest.importorskip("torch")

from nkisim.kernels import swiglu_mlp  # noqa: E402
from nkisim.kernels.mlp import MAX_I, kernel_fits, swiglu_mlp_fallback, swiglu_mlp_kernel  # noqa: E402
from nkisim.torch import reset_route_stats, route_stats, simulate_nki_kernel  # noqa: E402
from _fixtures import clean_env, cpu, sim  # noqa: E402,F401

NAME = "nkisim.kernels.mlp.swiglu_mlp_kernel"


def tol(dtype, want):
    """fp32: three fp32 matmuls summed in other orders and silu's exp: 1e-5 relative to the
    output scale. bf16: gate/up sums differing by fp32 ulps can round h to neighbouring bf16
    values (2**-8 of one term of the down projection, far below the output scale), then the
    output rounds to bf16 and may land one ulp apart: 2**-7 relative, plus 2**-8 of the scale."""
    scale = float(want.float().abs().max())
    if dtype == torch.float32:
        return dict(rtol=1e-5, atol=1e-5 * scale)
    return dict(rtol=2**-7, atol=2**-8 * scale)


def inputs(T, H, I, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(T, H, generator=g).to(dtype)
    wg = (torch.randn(H, I, generator=g) / H ** 0.5).to(dtype)
    wu = (torch.randn(H, I, generator=g) / H ** 0.5).to(dtype)
    wd = (torch.randn(I, H, generator=g) / I ** 0.5).to(dtype)
    return x, wg, wu, wd


def numpy_mlp(x, wg, wu, wd, dtype):
    """The formula in float64 NumPy; h and the output rounded once into dtype (the contract's
    Decision: h is stored in x's dtype)."""
    np_dt = ml_dtypes.bfloat16 if dtype == torch.bfloat16 else np.float32
    f64 = [t.float().numpy().astype(np.float64) for t in (x, wg, wu, wd)]
    g, u = f64[0] @ f64[1], f64[0] @ f64[2]
    h = (g / (1.0 + np.exp(-g)) * u).astype(np_dt).astype(np.float64)
    return torch.from_numpy((h @ f64[3]).astype(np_dt).astype(np.float32))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("T, H, I", [(1, 64, 96), (7, 200, 300), (130, 136, 260)])
@pytest.mark.parametrize("lnc", [1, 2])
def test_kernel_matches_fallback(T, H, I, dtype, lnc):
    args = inputs(T, H, I, dtype)
    got = simulate_nki_kernel(swiglu_mlp_kernel, lnc, dict(zip(("x", "w_gate", "w_up", "w_down"), args)))
    want = swiglu_mlp_fallback(*args)
    assert got.dtype == dtype and got.shape == (T, H)
    torch.testing.assert_close(got, want, **tol(dtype, want))


@pytest.mark.parametrize("target", ["trn2", "trn3"])
def test_kernel_runs_on_each_target(monkeypatch, target):
    monkeypatch.setenv("NEURON_PLATFORM_TARGET_OVERRIDE", target)
    args = inputs(3, 130, 140, torch.bfloat16)
    got = simulate_nki_kernel(swiglu_mlp_kernel, 2, dict(zip(("x", "w_gate", "w_up", "w_down"), args)))
    want = swiglu_mlp_fallback(*args)
    torch.testing.assert_close(got, want, **tol(torch.bfloat16, want))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_fallback_matches_float64_formula(dtype):
    args = inputs(7, 64, 96, dtype)
    want = numpy_mlp(*args, dtype)
    torch.testing.assert_close(swiglu_mlp_fallback(*args).float(), want, **tol(dtype, want))


def test_fallback_matches_torch_functional_in_fp32():
    x, wg, wu, wd = inputs(5, 32, 48, torch.float32)
    F = torch.nn.functional
    want = F.linear(F.silu(F.linear(x, wg.T)) * F.linear(x, wu.T), wd.T)
    torch.testing.assert_close(swiglu_mlp_fallback(x, wg, wu, wd), want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_op_takes_kernel_in_simulator(sim, dtype):
    args = inputs(7, 200, 300, dtype)
    got = swiglu_mlp(*args)
    assert route_stats()[NAME] == {"kernel": 1, "fallback": 0}
    want = swiglu_mlp_fallback(*args)
    torch.testing.assert_close(got, want, **tol(dtype, want))


def test_op_takes_fallback_in_cpu_mode(cpu):
    args = inputs(7, 64, 96, torch.bfloat16)
    got = swiglu_mlp(*args)
    assert route_stats()[NAME] == {"kernel": 0, "fallback": 1}
    assert torch.equal(got, swiglu_mlp_fallback(*args))


@pytest.mark.parametrize("H, I, dtypes", [
    (2, MAX_I + 1, (torch.float32,) * 4),                                  # I past the limit
    (8, 16, (torch.bfloat16, torch.float32, torch.bfloat16, torch.bfloat16)),   # mixed dtypes
    (8, 16, (torch.float16,) * 4),                                         # dtype
])
def test_gate_refuses_to_fallback(sim, H, I, dtypes):
    x, wg, wu, wd = (torch.randn(s).to(d) for s, d in zip(((2, H), (H, I), (H, I), (I, H)), dtypes))
    got = swiglu_mlp(x, wg, wu, wd)
    assert route_stats()[NAME] == {"kernel": 0, "fallback": 1}
    assert torch.equal(got, swiglu_mlp_fallback(x, wg, wu, wd))


def test_gate_limits():
    z = torch.zeros
    assert kernel_fits(z(1, 2), z(2, MAX_I), z(2, MAX_I), z(MAX_I, 2))
    assert not kernel_fits(z(1, 2), z(2, MAX_I + 1), z(2, MAX_I + 1), z(MAX_I + 1, 2))
    assert not kernel_fits(z(1, 2), z(2, 4), z(2, 4), z(2, 4))              # w_down not [I, H]
