"""rms_norm: kernel vs fallback vs a float64 NumPy formula; routes; gate refusals."""
import ml_dtypes
import numpy as np
import pytest

torch = pytest.importorskip("torch")

from nkisim.kernels import norm  # noqa: E402
from nkisim.kernels import rms_norm  # noqa: E402
from nkisim.torch import reset_route_stats, route_stats, simulate_nki_kernel  # noqa: E402
from _fixtures import clean_env, cpu, sim  # noqa: E402,F401

NAME = "nkisim.kernels.norm.rms_norm_kernel"
# Tolerances. fp32: kernel and fallback sum the H squares in different orders and scale by 1/H
# vs divide by H: a few fp32 ulps (<= 1e-5 relative). bf16: the fp32 results then round to
# bf16 (8 significant bits) and may land one ulp apart: 2**-7 relative.
TOL = {torch.float32: dict(rtol=1e-5, atol=1e-6), torch.bfloat16: dict(rtol=2**-7, atol=1e-6)}
EPS = 1e-5


def inputs(T, H, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = (torch.randn(T, H, generator=g) * 2).to(dtype)
    w = (torch.rand(H, generator=g) + 0.5).to(dtype)
    return x, w


def numpy_rms_norm(x, w, eps, dtype):
    """The formula in float64 NumPy, rounded once into the output dtype."""
    x64 = x.float().numpy().astype(np.float64)
    w64 = w.float().numpy().astype(np.float64)
    y = x64 / np.sqrt((x64 ** 2).mean(axis=1, keepdims=True) + eps) * w64
    np_dt = ml_dtypes.bfloat16 if dtype == torch.bfloat16 else np.float32
    return torch.from_numpy(y.astype(np_dt).astype(np.float32))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("T, H", [(1, 64), (7, 200), (130, 96), (300, 40)])
@pytest.mark.parametrize("lnc", [1, 2])
def test_kernel_matches_fallback(T, H, dtype, lnc):
    x, w = inputs(T, H, dtype)
    got = simulate_nki_kernel(norm.rms_norm_kernel, lnc, dict(x=x, weight=w, eps=EPS))
    want = norm.rms_norm_fallback(x, w, EPS)
    assert got.dtype == dtype and got.shape == (T, H)
    torch.testing.assert_close(got, want, **TOL[dtype])


@pytest.mark.parametrize("target", ["trn2", "trn3"])
def test_kernel_runs_on_each_target(monkeypatch, target):
    monkeypatch.setenv("NEURON_PLATFORM_TARGET_OVERRIDE", target)
    x, w = inputs(9, 130, torch.bfloat16)
    got = simulate_nki_kernel(norm.rms_norm_kernel, 2, dict(x=x, weight=w, eps=EPS))
    torch.testing.assert_close(got, norm.rms_norm_fallback(x, w, EPS), **TOL[torch.bfloat16])


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_fallback_matches_float64_formula(dtype):
    x, w = inputs(7, 200, dtype)
    got = norm.rms_norm_fallback(x, w, EPS)
    # fp32: float32 vs float64 math, a few ulps; bf16: both rounded once to bf16, so at most one
    # bf16 ulp apart (the fp32 value may sit on the other side of a rounding boundary).
    torch.testing.assert_close(got.float(), numpy_rms_norm(x, w, EPS, dtype), **TOL[dtype])


def test_fallback_matches_torch_rms_norm():
    x, w = inputs(5, 64, torch.float32)
    want = torch.nn.functional.rms_norm(x, (64,), w, EPS)
    torch.testing.assert_close(norm.rms_norm_fallback(x, w, EPS), want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_op_takes_kernel_in_simulator(sim, dtype):
    x, w = inputs(7, 200, dtype)
    got = rms_norm(x, w, EPS)
    assert route_stats()[NAME] == {"kernel": 1, "fallback": 0}
    torch.testing.assert_close(got, norm.rms_norm_fallback(x, w, EPS), **TOL[dtype])


def test_op_takes_fallback_in_cpu_mode(cpu):
    x, w = inputs(7, 200, torch.bfloat16)
    got = rms_norm(x, w, EPS)
    assert route_stats()[NAME] == {"kernel": 0, "fallback": 1}
    assert torch.equal(got, norm.rms_norm_fallback(x, w, EPS))


def test_op_weight_may_be_fp32_for_bf16_x(sim):
    x, _ = inputs(3, 64, torch.bfloat16)
    w = torch.rand(64) + 0.5
    got = rms_norm(x, w, EPS)
    assert got.dtype == torch.bfloat16 and route_stats()[NAME]["kernel"] == 1
    torch.testing.assert_close(got, norm.rms_norm_fallback(x, w, EPS), **TOL[torch.bfloat16])


@pytest.mark.parametrize("x, w", [
    (torch.zeros(1, norm.MAX_H + 1), torch.ones(norm.MAX_H + 1)),        # H past the limit
    (torch.zeros(2, 8, dtype=torch.float16), torch.ones(8)),              # dtype not fp32/bf16
    (torch.zeros(2, 3, 8), torch.ones(8)),                                 # not 2-D
    (torch.randn(2, 8), torch.randn(8, dtype=torch.float64)),              # float64 weight: no NKI dtype
    (torch.zeros(0, 8), torch.ones(8)),                                    # no tokens
])
def test_gate_refuses_to_fallback(sim, x, w):
    got = rms_norm(x, w, EPS)
    assert route_stats()[NAME] == {"kernel": 0, "fallback": 1}
    assert torch.equal(got, norm.rms_norm_fallback(x, w, EPS))


def test_gate_limits():
    assert norm.kernel_fits(torch.zeros(1, norm.MAX_H), torch.ones(norm.MAX_H))
    assert not norm.kernel_fits(torch.zeros(1, norm.MAX_H + 1), torch.ones(norm.MAX_H + 1))
    assert not norm.kernel_fits(torch.zeros(4, 8), torch.ones(9))


def test_gate_checks_the_weight_dtype():
    x = torch.zeros(2, 8)
    assert not norm.kernel_fits(x, torch.ones(8, dtype=torch.float64))
    assert not norm.kernel_fits(x, torch.ones(8, dtype=torch.int32))
    assert all(norm.kernel_fits(x, torch.ones(8, dtype=dt))
               for dt in (torch.float32, torch.bfloat16, torch.float16))


def test_float16_weight_runs_in_the_kernel(sim):
    x, w = torch.randn(3, 16), torch.randn(16).half()
    got = rms_norm(x, w, EPS)
    assert route_stats()[NAME] == {"kernel": 1, "fallback": 0}
    torch.testing.assert_close(got, norm.rms_norm_fallback(x, w, EPS), rtol=1e-6, atol=1e-6)
