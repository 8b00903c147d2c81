"""paged_attention_decode: kernel vs fallback vs per-sequence SDPA over the gathered context; the
new token's K/V land in the caller's caches; -1 blocks and stale slots are never read; routes;
gate refusals; torch.compile keeps the in-place cache write."""
import math

import pytest

torch = pytest.importorskip("torch")
F = pytest.importorskip("torch.nn.functional")

from nkisim.kernels import attention, paged_attention_decode  # noqa: E402
from nkisim.torch import reset_route_stats, route_stats  # noqa: E402
from _fixtures import clean_env, cpu, sim  # noqa: E402,F401

NAME = "nkisim.kernels.attention.paged_attention_decode_kernel"
# Tolerances as in test_attention: fp32 summation-order ulps of outputs < 4 (atol 1e-5); bf16: P
# rounded to bf16 for the TensorE plus the final bf16 rounding, one or two bf16 ulps (2**-6).
TOL = {torch.float32: dict(rtol=1e-5, atol=1e-5), torch.bfloat16: dict(rtol=2**-6, atol=2**-6)}


def setup(ctx, Hq, Hkv, D, bs, dtype, max_blocks, num_blocks=None, seed=0, stale=float("nan")):
    """Caches whose unused blocks and slots past each context hold ``stale``; a block table with
    gaps (blocks from a random permutation, one unused block between sequences) and -1 padding."""
    g = torch.Generator().manual_seed(seed)
    B = len(ctx)
    need = [math.ceil(c / bs) for c in ctx]
    NB = num_blocks or 2 * sum(need) + 2
    perm = torch.randperm(NB, generator=g)
    table = torch.full((B, max_blocks), -1, dtype=torch.int32)
    kc = torch.full((NB, bs, Hkv, D), stale)
    vc = torch.full((NB, bs, Hkv, D), stale)
    used = 0
    for b, (c, n) in enumerate(zip(ctx, need)):
        table[b, :n] = perm[used:used + n].to(torch.int32)
        used += n + 1                                          # leave a gap
        for j in range(n):
            live = min(bs, c - 1 - j * bs)                     # the new token is not there yet
            if live > 0:
                kc[table[b, j], :live] = torch.randn(live, Hkv, D, generator=g)
                vc[table[b, j], :live] = torch.randn(live, Hkv, D, generator=g)
    q = torch.randn(B, Hq, D, generator=g).to(dtype)
    kn, vn = (torch.randn(B, Hkv, D, generator=g).to(dtype) for _ in range(2))
    return q, kn, vn, kc.to(dtype), vc.to(dtype), table, torch.tensor(ctx, dtype=torch.int32)


def reference(q, kn, vn, kc, vc, table, ctx, scale):
    """Independent formula: per sequence, walk the block table in Python, put the new token at
    position ctx - 1, and run SDPA (enable_gqa) over the context in fp32."""
    bs = kc.shape[1]
    outs = []
    for b, c in enumerate(ctx.tolist()):
        ks, vs = [], []
        for p in range(c - 1):
            blk = int(table[b, p // bs])
            ks.append(kc[blk, p % bs])
            vs.append(vc[blk, p % bs])
        ks, vs = torch.stack(ks + [kn[b]]), torch.stack(vs + [vn[b]])      # [c, Hkv, D]
        o = F.scaled_dot_product_attention(q[b].float().unsqueeze(1), ks.float().transpose(0, 1),
                                           vs.float().transpose(0, 1), scale=scale, enable_gqa=True)
        outs.append(o.squeeze(1))
    return torch.stack(outs)


def check_new_token_written(kn, vn, kc, vc, table, ctx):
    bs = kc.shape[1]
    for b, c in enumerate(ctx.tolist()):
        blk = int(table[b, (c - 1) // bs])
        assert torch.equal(kc[blk, (c - 1) % bs], kn[b]) and torch.equal(vc[blk, (c - 1) % bs], vn[b])


CASES = [  # (context lengths, Hq, Hkv, D, block_size, max_blocks)
    ([200, 1, 17, 33], 8, 2, 64, 16, 14),       # batch of different lengths, partial last blocks
    ([1], 4, 4, 16, 16, 3),                     # a lone new token, Hq == Hkv
    ([129, 64], 8, 2, 32, 32, 6),               # context crossing a 128-position chunk
    ([7, 130], 2, 1, 128, 128, 2),              # block_size 128, D = 128
]


@pytest.mark.parametrize("ctx,Hq,Hkv,D,bs,mb", CASES)
def test_fallback_matches_reference(ctx, Hq, Hkv, D, bs, mb):
    q, kn, vn, kc, vc, table, lens = setup(ctx, Hq, Hkv, D, bs, torch.float32, mb)
    want = reference(q, kn, vn, kc, vc, table, lens, D ** -0.5)
    got = attention.paged_attention_decode_fallback(q, kn, vn, kc, vc, table, lens, D ** -0.5)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    check_new_token_written(kn, vn, kc, vc, table, lens)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("ctx,Hq,Hkv,D,bs,mb", CASES)
def test_kernel_matches_fallback_and_writes_caches_in_place(sim, ctx, Hq, Hkv, D, bs, mb, dtype):
    q, kn, vn, kc, vc, table, lens = setup(ctx, Hq, Hkv, D, bs, dtype, mb, seed=len(ctx) + D)
    kc2, vc2 = kc.clone(), vc.clone()
    want = attention.paged_attention_decode_fallback(q, kn, vn, kc2, vc2, table, lens, D ** -0.5)
    got = paged_attention_decode(q, kn, vn, kc, vc, table, lens, D ** -0.5)
    assert got.dtype == dtype and got.shape == q.shape
    assert torch.isfinite(got.float()).all()          # stale NaN slots and -1 blocks were never read
    torch.testing.assert_close(got.float(), want.float(), **TOL[dtype])
    check_new_token_written(kn, vn, kc, vc, table, lens)
    assert torch.equal(kc.nan_to_num(7.0), kc2.nan_to_num(7.0))   # nothing else was touched
    assert torch.equal(vc.nan_to_num(7.0), vc2.nan_to_num(7.0))
    assert route_stats()[NAME] == {"kernel": 1, "fallback": 0}


def test_simulator_off_takes_the_fallback(cpu):
    q, kn, vn, kc, vc, table, lens = setup([5, 20], 4, 2, 16, 16, torch.float32, 3)
    want = reference(q, kn, vn, kc, vc, table, lens, 0.25)
    got = paged_attention_decode(q, kn, vn, kc, vc, table, lens, 0.25)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    check_new_token_written(kn, vn, kc, vc, table, lens)
    assert route_stats()[NAME] == {"kernel": 0, "fallback": 1}


@pytest.mark.parametrize("case", ["block_size_48", "head_dim_160", "int64_table", "too_many_positions"])
def test_gate_refuses_and_the_fallback_runs(sim, case):
    bs, D, mb = (48 if case == "block_size_48" else 16), (160 if case == "head_dim_160" else 16), 3
    if case == "too_many_positions":
        mb = 1000                                  # 16000 positions: beyond the SBUF working set
    q, kn, vn, kc, vc, table, lens = setup([5, 20], 4, 2, D, bs, torch.float32, mb)
    if case == "int64_table":
        table = table.to(torch.int64)
    assert not attention.decode_fits(q, kn, vn, kc, vc, table, lens)
    want = reference(q, kn, vn, kc, vc, table, lens, 0.25)
    got = paged_attention_decode(q, kn, vn, kc, vc, table, lens, 0.25)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    check_new_token_written(kn, vn, kc, vc, table, lens)
    assert route_stats()[NAME] == {"kernel": 0, "fallback": 1}


def test_compiled_graph_keeps_the_in_place_cache_write(sim):
    """torch.compile(fullgraph=True): the kernel's declared mutated caches are written back."""
    q, kn, vn, kc, vc, table, lens = setup([9, 3], 4, 2, 16, 8, torch.float32, 2, stale=0.0)
    kc2, vc2 = kc.clone(), vc.clone()
    want = attention.paged_attention_decode_fallback(q, kn, vn, kc2, vc2, table, lens, 0.25)
    compiled = torch.compile(paged_attention_decode, fullgraph=True)
    got = compiled(q, kn, vn, kc, vc, table, lens, 0.25)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    assert torch.equal(kc, kc2) and torch.equal(vc, vc2)
    check_new_token_written(kn, vn, kc, vc, table, lens)
    assert route_stats()[NAME]["kernel"] >= 1


def test_bf16_fallback_rounds_p_like_the_kernel(sim):
    """P rounded to bf16 before P.V in both routes: bf16 outputs agree bit for bit."""
    q, kn, vn, kc, vc, table, lens = setup([5, 40, 100, 128], 8, 2, 32, 16, torch.bfloat16, 8,
                                           stale=0.0, seed=3)
    kc2, vc2 = kc.clone(), vc.clone()
    got = paged_attention_decode(q, kn, vn, kc, vc, table, lens, 32 ** -0.5)
    assert route_stats()[NAME] == {"kernel": 1, "fallback": 0}
    want = attention.paged_attention_decode_fallback(q, kn, vn, kc2, vc2, table, lens, 32 ** -0.5)
    assert torch.equal(got, want) and torch.equal(kc, kc2) and torch.equal(vc, vc2)


_META = [
    ("hole", [40], [[3, -1, 5, -1]],
     r"block_table\[0, 1\] = -1 inside the context of sequence 0 \(context_lens 40, block_size 16\)"),
    ("ctx0", [0], [[3, 4, 5, 6]], r"context_lens\[0\] = 0 outside 1 \.\. 64 \(max_blocks 4 \* block_size 16\)"),
    ("ctx_big", [70], [[3, 4, 5, 6]],
     r"context_lens\[0\] = 70 outside 1 \.\. 64 \(max_blocks 4 \* block_size 16\)"),
    ("block_big", [20], [[3, 16, -1, -1]], r"block_table\[0, 1\] = 16 outside -1 \.\. 15 \(num_blocks 16\)"),
    ("block_neg", [20], [[3, -5, -1, -1]], r"block_table\[0, 1\] = -5 outside -1 \.\. 15 \(num_blocks 16\)"),
    ("shared_write", [20, 18], [[3, 7, -1, -1], [3, 7, -1, -1]],
     r"sequence 0 writes block 7, which sequence 1 also uses \(block_table\[1, 1\]\); a written "
     r"block must not be shared"),
]


@pytest.mark.parametrize("route_env", ["sim", "cpu"])
@pytest.mark.parametrize("case,ctx,table,msg", _META, ids=[m[0] for m in _META])
def test_decision_invalid_metadata_raise_on_both_routes(request, route_env, case, ctx, table, msg):
    """Decision: eager calls validate block_table / context_lens before routing: same ValueError
    on both routes, caches untouched, nothing counted."""
    request.getfixturevalue(route_env)
    B, Hq, Hkv, D, bs, NB = len(ctx), 4, 2, 16, 16, 16
    g = torch.Generator().manual_seed(1)
    kc, vc = torch.randn(NB, bs, Hkv, D, generator=g), torch.randn(NB, bs, Hkv, D, generator=g)
    before = kc.clone(), vc.clone()
    q, kn, vn = torch.randn(B, Hq, D), torch.randn(B, Hkv, D), torch.randn(B, Hkv, D)
    with pytest.raises(ValueError, match=f"^paged_attention_decode: {msg}$"):
        paged_attention_decode(q, kn, vn, kc, vc, torch.tensor(table, dtype=torch.int32),
                               torch.tensor(ctx, dtype=torch.int32), 0.25)
    assert torch.equal(kc, before[0]) and torch.equal(vc, before[1])
    assert route_stats() == {}


def test_shared_read_only_prefix_blocks_are_allowed(sim):
    """Prefix sharing: both sequences read block 3; each writes its own second block."""
    B, Hq, Hkv, D, bs, NB = 2, 4, 2, 16, 16, 16
    g = torch.Generator().manual_seed(2)
    kc, vc = torch.randn(NB, bs, Hkv, D, generator=g), torch.randn(NB, bs, Hkv, D, generator=g)
    q, kn, vn = torch.randn(B, Hq, D), torch.randn(B, Hkv, D), torch.randn(B, Hkv, D)
    table = torch.tensor([[3, 7, -1], [3, 9, -1]], dtype=torch.int32)
    lens = torch.tensor([20, 18], dtype=torch.int32)
    want = reference(q, kn, vn, kc, vc, table, lens, 0.25)
    got = paged_attention_decode(q, kn, vn, kc, vc, table, lens, 0.25)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    assert route_stats()[NAME] == {"kernel": 1, "fallback": 0}
