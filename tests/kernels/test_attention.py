"""flash_attention: kernel vs fallback vs torch SDPA; routes; gate refusals; LNC1 and LNC2."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")
F = pytest.importorskip("torch.nn.functional")

import nkisim.nki as nki  # noqa: E402
from nkisim.kernels import attention, flash_attention  # noqa: E402
from nkisim.torch import reset_route_stats, route_stats  # noqa: E402
from _fixtures import clean_env, cpu, sim  # noqa: E402,F401

NAME = "nkisim.kernels.attention.flash_attention_kernel"
# Tolerances (outputs are convex combinations of N(0, 1) values, |out| < 4).
# fp32: kernel (online softmax over 512-key blocks, PSUM sums) and fallback (one softmax, BLAS)
# sum in different orders: a few fp32 ulps of values < 4 -> atol 1e-5.
# bf16: the kernel rounds P to bf16 before P.V (relative 2**-9 per weight, averaging out) and both
# round the fp32 result once to bf16 (half an ulp = 2**-8 relative); outputs may land one or two
# bf16 ulps apart: atol = rtol = 2**-6.
TOL = {torch.float32: dict(rtol=1e-5, atol=1e-5), torch.bfloat16: dict(rtol=2**-6, atol=2**-6)}
SHAPES = [(1, 8, 2, 16), (7, 8, 2, 32), (130, 4, 4, 64), (257, 8, 2, 64)]


def qkv(S, Hq, Hkv, D, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    return tuple(torch.randn(S, h, D, generator=g).to(dtype) for h in (Hq, Hkv, Hkv))


def sdpa(q, k, v, scale, causal=True):
    """Independent formula: torch SDPA (fp32, GQA by explicit repeat), [S, H, D] layout."""
    rep = q.shape[1] // k.shape[1]
    qh, kh, vh = (t.float().transpose(0, 1) for t in (q, k, v))
    kh, vh = kh.repeat_interleave(rep, dim=0), vh.repeat_interleave(rep, dim=0)
    out = F.scaled_dot_product_attention(qh, kh, vh, is_causal=causal, scale=scale)
    return out.transpose(0, 1)


@pytest.mark.parametrize("S,Hq,Hkv,D", SHAPES)
@pytest.mark.parametrize("causal", [True, False])
def test_fallback_matches_sdpa(S, Hq, Hkv, D, causal):
    q, k, v = qkv(S, Hq, Hkv, D, torch.float32)
    got = attention.flash_attention_fallback(q, k, v, D ** -0.5, causal)
    torch.testing.assert_close(got, sdpa(q, k, v, D ** -0.5, causal), rtol=1e-5, atol=1e-5)


def test_fallback_gqa_matches_sdpa_enable_gqa():
    q, k, v = qkv(9, 8, 2, 16, torch.float32, seed=3)
    want = F.scaled_dot_product_attention(q.transpose(0, 1), k.transpose(0, 1), v.transpose(0, 1),
                                          is_causal=True, scale=0.3, enable_gqa=True).transpose(0, 1)
    torch.testing.assert_close(attention.flash_attention_fallback(q, k, v, 0.3), want,
                               rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("S,Hq,Hkv,D", SHAPES)
def test_kernel_matches_fallback_and_sdpa(sim, S, Hq, Hkv, D, dtype):
    q, k, v = qkv(S, Hq, Hkv, D, dtype, seed=S)
    got = flash_attention(q, k, v, D ** -0.5)
    assert got.dtype == dtype and got.shape == (S, Hq, D)
    want = attention.flash_attention_fallback(q, k, v, D ** -0.5)
    torch.testing.assert_close(got.float(), want.float(), **TOL[dtype])
    torch.testing.assert_close(got.float(), sdpa(q, k, v, D ** -0.5).to(dtype).float(), **TOL[dtype])
    assert route_stats()[NAME] == {"kernel": 1, "fallback": 0}


def test_kernel_non_causal_two_key_blocks(sim):
    """S = 600 spans two 512-wide key blocks: the online-softmax rescale is exercised."""
    q, k, v = qkv(600, 2, 1, 32, torch.float32, seed=5)
    got = flash_attention(q * 3, k, v, 0.2, causal=False)
    torch.testing.assert_close(got, sdpa(q * 3, k, v, 0.2, causal=False), **TOL[torch.float32])


def test_kernel_runs_on_one_core_too():
    """The kernel launched with LNC1 on NumPy arrays gives the same answer (all heads on core 0)."""
    q, k, v = qkv(130, 4, 2, 32, torch.float32, seed=7)
    got = nki.simulate(attention.flash_attention_kernel)(q.numpy(), k.numpy(), v.numpy(), 0.25, True)
    np.testing.assert_allclose(got, sdpa(q, k, v, 0.25).numpy(), rtol=1e-5, atol=1e-5)


def test_simulator_off_takes_the_fallback(cpu):
    q, k, v = qkv(7, 4, 2, 16, torch.float32)
    got = flash_attention(q, k, v, 0.25)
    torch.testing.assert_close(got, sdpa(q, k, v, 0.25), rtol=1e-5, atol=1e-5)
    assert route_stats()[NAME] == {"kernel": 0, "fallback": 1}


@pytest.mark.parametrize("case", ["head_dim_160", "mixed_dtypes", "kv_len_differs"])
def test_gate_refuses_shapes_the_kernel_cannot_take(sim, case):
    if case == "head_dim_160":
        q, k, v = qkv(5, 2, 1, 160, torch.float32)
    elif case == "mixed_dtypes":
        q, k, v = qkv(5, 2, 1, 16, torch.float32)
        k = k.to(torch.bfloat16)
    else:
        q, _, _ = qkv(5, 2, 1, 16, torch.float32)
        _, k, v = qkv(6, 2, 1, 16, torch.float32)
    assert not attention.flash_fits(q, k, v)
    if case != "kv_len_differs":          # the fallback is defined for these; it computes them
        got = flash_attention(q, k, v, 0.1)
        torch.testing.assert_close(got, sdpa(q, k.float(), v, 0.1), rtol=1e-5, atol=1e-5)
        assert route_stats()[NAME] == {"kernel": 0, "fallback": 1}


def test_gate_limits():
    q, k, v = qkv(3, 6, 4, 8, torch.float32)
    assert not attention.flash_fits(q, k, v)              # Hq % Hkv != 0
    q, k, v = qkv(3, 6, 3, 128, torch.float32)
    assert attention.flash_fits(q, k, v)                  # D = 128 is the limit
    big = torch.empty(attention.MAX_S + 1, 1, 8)
    assert not attention.flash_fits(big, big, big)


def bf16_ulp(x):
    x = x.float().abs().clamp_min(2.0**-126)
    return torch.finfo(torch.bfloat16).eps * torch.exp2(torch.floor(torch.log2(x)))


@pytest.mark.parametrize("S,Hq,Hkv,D,causal", [(45, 8, 2, 32, True), (200, 4, 1, 64, True),
                                               (130, 2, 2, 16, False)])
def test_bf16_fallback_rounds_p_like_the_kernel(sim, S, Hq, Hkv, D, causal):
    """The fallback rounds P to bf16 before P.V like the kernel: the routes agree to one bf16 ulp,
    in all but < 0.1% of outputs exactly (only fp32 row-sum order differs); an fp32-P softmax
    differs in > 5% of them (checked)."""
    q, k, v = qkv(S, Hq, Hkv, D, torch.bfloat16, seed=5)
    got = flash_attention(q, k, v, D ** -0.5, causal)
    assert route_stats()[NAME] == {"kernel": 1, "fallback": 0}
    want = attention.flash_attention_fallback(q, k, v, D ** -0.5, causal)
    assert (got != want).float().mean() < 1e-3
    assert ((got.float() - want.float()).abs() <= bf16_ulp(want)).all()
    if S <= 64:
        assert torch.equal(got, want)
    unrounded = sdpa(q, k, v, D ** -0.5, causal).to(torch.bfloat16)
    assert (unrounded != got).float().mean() > 0.05


def test_bf16_two_key_blocks_within_one_ulp(sim):
    """Past 512 keys the fallback rescales per key, the kernel per block: at most one bf16 ulp."""
    q, k, v = qkv(700, 2, 1, 32, torch.bfloat16, seed=700)
    got = flash_attention(q * 3, k, v, 0.2).float()
    want = attention.flash_attention_fallback(q * 3, k, v, 0.2).float()
    assert ((got - want).abs() <= bf16_ulp(want)).all()


@pytest.mark.parametrize("env_fixture", ["sim", "cpu"])
def test_hq_not_a_multiple_of_hkv_raises_before_routing(request, env_fixture):
    request.getfixturevalue(env_fixture)
    q, k, v = torch.randn(9, 6, 32), torch.randn(9, 4, 32), torch.randn(9, 4, 32)
    with pytest.raises(ValueError, match=r"^flash_attention: Hq = 6 must be a multiple of Hkv = 4$"):
        flash_attention(q, k, v, 0.2)
    with pytest.raises(ValueError, match=r"^flash_attention: q must be \[S, Hq, D\] and k, v "
                                         r"\[S, Hkv, D\], got \[9, 2, 32\], \[8, 1, 32\], \[8, 1, 32\]$"):
        flash_attention(torch.randn(9, 2, 32), torch.randn(8, 1, 32), torch.randn(8, 1, 32), 0.2)
    assert route_stats() == {}
