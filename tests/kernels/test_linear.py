"""linear / qkv_proj: kernel vs fallback vs a float64 NumPy formula; routes; gate refusals; one
torch.compile(fullgraph=True) run through the HOP."""
import ml_dtypes
import numpy as np
import pytest

torch = pytest.importorskip("torch")

from nkisim.kernels import linear, qkv_proj  # noqa: E402
from nkisim.kernels.linear import MAX_K, kernel_fits, linear_fallback, linear_kernel  # noqa: E402
from nkisim.torch import reset_route_stats, route_stats, simulate_nki_kernel  # noqa: E402
from _fixtures import clean_env, cpu, sim  # noqa: E402,F401

NAME = "nkisim.kernels.linear.linear_kernel"
# Tolerances (weights scaled by 1/sqrt(K): outputs are O(1)). fp32: the kernel sums each 128-long
# K tile, then the tiles, in PSUM; torch sums in its own order: a few ulps of O(1) sums, 1e-5.
# bf16: the fp32 sums (products of bf16 values are exact in fp32) round to bf16 and may land
# one bf16 ulp apart: 2**-7 relative.
TOL = {torch.float32: dict(rtol=1e-5, atol=1e-5), torch.bfloat16: dict(rtol=2**-7, atol=1e-5)}


def inputs(T, K, N, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(T, K, generator=g).to(dtype)
    w = (torch.randn(K, N, generator=g) / K ** 0.5).to(dtype)
    return x, w


def numpy_linear(x, w, dtype):
    y = x.float().numpy().astype(np.float64) @ w.float().numpy().astype(np.float64)
    np_dt = ml_dtypes.bfloat16 if dtype == torch.bfloat16 else np.float32
    return torch.from_numpy(y.astype(np_dt).astype(np.float32))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("T, K, N", [(1, 64, 96), (7, 200, 600), (130, 136, 520), (3, 5, 1)])
@pytest.mark.parametrize("lnc", [1, 2])
def test_kernel_matches_fallback(T, K, N, dtype, lnc):
    x, w = inputs(T, K, N, dtype)
    got = simulate_nki_kernel(linear_kernel, lnc, dict(x=x, weight=w))
    assert got.dtype == dtype and got.shape == (T, N)
    torch.testing.assert_close(got, linear_fallback(x, w), **TOL[dtype])


@pytest.mark.parametrize("target", ["trn2", "trn3"])
def test_kernel_runs_on_each_target(monkeypatch, target):
    monkeypatch.setenv("NEURON_PLATFORM_TARGET_OVERRIDE", target)
    x, w = inputs(9, 130, 70, torch.float32)
    got = simulate_nki_kernel(linear_kernel, 2, dict(x=x, weight=w))
    torch.testing.assert_close(got, linear_fallback(x, w), **TOL[torch.float32])


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_fallback_matches_float64_formula(dtype):
    x, w = inputs(7, 200, 60, dtype)
    torch.testing.assert_close(linear_fallback(x, w).float(), numpy_linear(x, w, dtype), **TOL[dtype])


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_op_takes_kernel_in_simulator(sim, dtype):
    x, w = inputs(7, 200, 600, dtype)
    got = linear(x, w)
    assert route_stats()[NAME] == {"kernel": 1, "fallback": 0}
    torch.testing.assert_close(got, linear_fallback(x, w), **TOL[dtype])


def test_op_takes_fallback_in_cpu_mode(cpu):
    x, w = inputs(7, 200, 60, torch.bfloat16)
    got = linear(x, w)
    assert route_stats()[NAME] == {"kernel": 0, "fallback": 1}
    assert torch.equal(got, linear_fallback(x, w))


@pytest.mark.parametrize("x, w", [
    (torch.zeros(1, MAX_K + 1), torch.zeros(MAX_K + 1, 1)),                 # K past the limit
    (torch.zeros(2, 8, dtype=torch.bfloat16), torch.zeros(8, 4)),           # mixed dtypes
    (torch.zeros(2, 8, dtype=torch.float16), torch.zeros(8, 4, dtype=torch.float16)),
])
def test_gate_refuses_to_fallback(sim, x, w):
    got = linear(x, w)
    assert route_stats()[NAME] == {"kernel": 0, "fallback": 1}
    assert torch.equal(got, linear_fallback(x, w))


def test_gate_limits():
    assert kernel_fits(torch.zeros(1, MAX_K), torch.zeros(MAX_K, 1))
    assert not kernel_fits(torch.zeros(1, MAX_K + 1), torch.zeros(MAX_K + 1, 1))
    assert not kernel_fits(torch.zeros(4, 8), torch.zeros(9, 2))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_qkv_proj_splits_heads(sim, dtype):
    T, H, hq, hkv, d = 7, 64, 4, 2, 16
    x, w = inputs(T, H, (hq + 2 * hkv) * d, dtype)
    q, k, v = qkv_proj(x, w, hq, hkv, d)
    assert (q.shape, k.shape, v.shape) == ((T, hq, d), (T, hkv, d), (T, hkv, d))
    assert route_stats()[NAME] == {"kernel": 1, "fallback": 0}
    y = linear_fallback(x, w)
    torch.testing.assert_close(q, y[:, :hq * d].reshape(T, hq, d), **TOL[dtype])
    torch.testing.assert_close(k, y[:, hq * d:(hq + hkv) * d].reshape(T, hkv, d), **TOL[dtype])
    torch.testing.assert_close(v, y[:, (hq + hkv) * d:].reshape(T, hkv, d), **TOL[dtype])


def test_qkv_proj_rejects_a_wrong_width():
    with pytest.raises(ValueError, match=r"^qkv_proj: w_qkv shape \(8, 30\) must be \[H, 32\] for "
                                         r"2 q heads, 1 kv heads of size 8$"):
        qkv_proj(torch.zeros(3, 8), torch.zeros(8, 30), 2, 1, 8)


def test_ops_under_torch_compile_fullgraph(sim):
    """The kernel route survives torch.compile(fullgraph=True): output_spec drives tracing and the
    compiled graph runs the simulator (counted once per compiled call)."""
    x, w = inputs(5, 40, 24, torch.float32)
    eager = linear(x, w)
    reset_route_stats()
    got = torch.compile(lambda a, b: linear(a, b) * 2, fullgraph=True)(x, w)
    assert route_stats()[NAME] == {"kernel": 1, "fallback": 0}
    torch.testing.assert_close(got, eager * 2, rtol=0, atol=0)


def test_bf16_fallback_sums_k_like_the_kernel_psum(monkeypatch):
    """K = 384 (three PSUM passes): the fallback adds per-128 partial products in order, so the
    bf16 results of the two routes are identical."""
    monkeypatch.setenv("VLLM_NEURON_CPU_MODE", "1")
    monkeypatch.setenv("NKI_SIMULATOR", "1")
    g = torch.Generator().manual_seed(4)
    x = torch.randn(130, 384, generator=g).bfloat16()
    w = (torch.randn(384, 600, generator=g) / 20).bfloat16()
    got = linear(x, w)
    assert torch.equal(got, linear_fallback(x, w))
    assert route_stats()[NAME] == {"kernel": 1, "fallback": 0}
    torch.testing.assert_close(got.float(), (x.double() @ w.double()).float(), rtol=2**-7, atol=2**-7)
