"""rope: kernel vs fallback vs a float64 NumPy formula; routes; gate refusals."""
import ml_dtypes
import numpy as np
import pytest

torch = pytest.importorskip("torch")

from nkisim.kernels import rope  # noqa: E402
from nkisim.kernels.rope import MAX_ROW, kernel_fits, rope_fallback, rope_kernel  # noqa: E402
from nkisim.torch import reset_route_stats, route_stats, simulate_nki_kernel  # noqa: E402
from _fixtures import clean_env, cpu, sim  # noqa: E402,F401

NAME = "nkisim.kernels.rope.rope_kernel"


def inputs(T, nh, D, dtype, seed=0):
    """x and the Llama cos/sin tables for positions 0..T-1 (base 10000)."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(T, nh, D, generator=g).to(dtype)
    inv = 1.0 / (10000.0 ** (torch.arange(0, D // 2, dtype=torch.float64) * 2 / D))
    ang = torch.arange(T, dtype=torch.float64)[:, None] * inv[None, :]
    return x, ang.cos().float(), ang.sin().float()


def numpy_rope(x, cos, sin, dtype):
    """cat(x1 cos - x2 sin, x2 cos + x1 sin) in float64 NumPy, rounded once into dtype."""
    x64 = x.float().numpy().astype(np.float64)
    c, s = cos.numpy().astype(np.float64)[:, None, :], sin.numpy().astype(np.float64)[:, None, :]
    half = x64.shape[-1] // 2
    x1, x2 = x64[..., :half], x64[..., half:]
    y = np.concatenate([x1 * c - x2 * s, x2 * c + x1 * s], axis=-1)
    np_dt = ml_dtypes.bfloat16 if dtype == torch.bfloat16 else np.float32
    return torch.from_numpy(y.astype(np_dt).astype(np.float32))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("T, nh, D", [(1, 4, 64), (7, 3, 32), (130, 2, 16), (300, 1, 8)])
@pytest.mark.parametrize("lnc", [1, 2])
def test_kernel_matches_fallback_bit_for_bit(T, nh, D, dtype, lnc):
    # Same fp32 products and the same subtract/add, rounded once into x's dtype: identical bits.
    x, cos, sin = inputs(T, nh, D, dtype)
    got = simulate_nki_kernel(rope_kernel, lnc, dict(x=x, cos=cos, sin=sin))
    assert got.dtype == dtype and got.shape == (T, nh, D)
    torch.testing.assert_close(got, rope_fallback(x, cos, sin), rtol=0, atol=0)


@pytest.mark.parametrize("target", ["trn2", "trn3"])
def test_kernel_runs_on_each_target(monkeypatch, target):
    monkeypatch.setenv("NEURON_PLATFORM_TARGET_OVERRIDE", target)
    x, cos, sin = inputs(9, 2, 64, torch.bfloat16)
    got = simulate_nki_kernel(rope_kernel, 2, dict(x=x, cos=cos, sin=sin))
    torch.testing.assert_close(got, rope_fallback(x, cos, sin), rtol=0, atol=0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_fallback_matches_float64_formula(dtype):
    x, cos, sin = inputs(7, 3, 64, dtype)
    # fp32: two rounded products and a rounded sum: <= 3 ulps of |x| (<= 4.5 here): 1e-5 absolute.
    # bf16: the same, then one rounding to bf16 (one ulp = 2**-7 relative at most).
    tol = dict(rtol=1e-6, atol=1e-5) if dtype == torch.float32 else dict(rtol=2**-7, atol=1e-5)
    torch.testing.assert_close(rope_fallback(x, cos, sin).float(), numpy_rope(x, cos, sin, dtype), **tol)


def test_position_zero_is_identity_and_rotation_keeps_norm():
    x, cos, sin = inputs(5, 2, 16, torch.float32)
    y = rope_fallback(x, cos, sin)
    assert torch.equal(y[0], x[0])                        # cos 1, sin 0 at position 0
    torch.testing.assert_close(y.norm(dim=-1), x.norm(dim=-1), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_op_takes_kernel_in_simulator(sim, dtype):
    x, cos, sin = inputs(7, 3, 32, dtype)
    got = rope(x, cos, sin)
    assert route_stats()[NAME] == {"kernel": 1, "fallback": 0}
    assert torch.equal(got, rope_fallback(x, cos, sin))


def test_op_accepts_a_non_contiguous_view(sim):
    x, cos, sin = inputs(5, 4, 16, torch.float32)
    view = x.reshape(5, 64)[:, :32].reshape(5, 2, 16)   # the q part of a fused projection, say
    got = rope(view, cos, sin)
    assert route_stats()[NAME]["kernel"] == 1
    assert torch.equal(got, rope_fallback(view.contiguous(), cos, sin))


def test_op_takes_fallback_in_cpu_mode(cpu):
    x, cos, sin = inputs(7, 3, 32, torch.bfloat16)
    got = rope(x, cos, sin)
    assert route_stats()[NAME] == {"kernel": 0, "fallback": 1}
    assert torch.equal(got, rope_fallback(x, cos, sin))


@pytest.mark.parametrize("T, nh, D, dtype", [
    (2, 65, 128, torch.float32),                           # n_heads * D past MAX_ROW
    (2, 2, 8, torch.float16),                              # dtype
])
def test_gate_refuses_to_fallback(sim, T, nh, D, dtype):
    x = torch.randn(T, nh, D).to(dtype)
    cos, sin = torch.ones(T, D // 2), torch.zeros(T, D // 2)
    got = rope(x, cos, sin)
    assert route_stats()[NAME] == {"kernel": 0, "fallback": 1}
    assert torch.equal(got, rope_fallback(x, cos, sin))


@pytest.mark.parametrize("shape, cs, msg", [
    ((2, 1, 7), (2, 3), r"^rope: x must be \[T, n_heads, D\] with D even, got \(2, 1, 7\)$"),
    ((2, 8), (2, 4), r"^rope: x must be \[T, n_heads, D\] with D even, got \(2, 8\)$"),
    ((2, 1, 8), (3, 4), r"^rope: cos and sin must be \[2, 4\], got \[3, 4\] and \[3, 4\]$"),
])
def test_bad_shapes_raise(sim, shape, cs, msg):
    with pytest.raises(ValueError, match=msg):
        rope(torch.zeros(shape), torch.zeros(cs), torch.zeros(cs))
    assert route_stats() == {}


def test_gate_limits():
    d = 128
    nh = MAX_ROW // d
    assert kernel_fits(torch.zeros(1, nh, d), torch.zeros(1, d // 2), torch.zeros(1, d // 2))
    assert not kernel_fits(torch.zeros(1, nh + 1, d), torch.zeros(1, d // 2), torch.zeros(1, d // 2))
    assert not kernel_fits(torch.zeros(3, 2, 8), torch.zeros(2, 4), torch.zeros(3, 4))


@pytest.mark.parametrize("cs_dtype", [torch.float64, torch.int32])
def test_gate_refuses_cos_sin_the_kernel_cannot_read(sim, cs_dtype):
    """float64 is no NKI dtype: the gate (not the simulator's DtypeError) sends it to the fallback."""
    x = torch.randn(3, 2, 8)
    ang = torch.randn(3, 4)
    cos, sin = torch.cos(ang).to(cs_dtype), torch.sin(ang).to(cs_dtype)
    assert not kernel_fits(x, cos, sin)
    got = rope(x, cos, sin)
    assert route_stats()[NAME] == {"kernel": 0, "fallback": 1}
    assert torch.equal(got, rope_fallback(x, cos, sin))


def test_bf16_cos_sin_run_in_the_kernel(sim):
    x, ang = torch.randn(3, 2, 8), torch.randn(3, 4)
    cos, sin = torch.cos(ang).bfloat16(), torch.sin(ang).bfloat16()
    assert kernel_fits(x, cos, sin)
    assert torch.equal(rope(x, cos, sin), rope_fallback(x, cos, sin))
    assert route_stats()[NAME] == {"kernel": 1, "fallback": 0}
