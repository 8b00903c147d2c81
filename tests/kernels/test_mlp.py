"""swiglu_mlp: kernel vs fallback vs a float64 NumPy formula; the LNC2 weight split (decode)
against the token-split kernel it replaced; routes; gate refusals."""
import ml_dtypes
import numpy as np
import pytest

torch = pytest.importorskip("torch")

import nkisim.isa.matmul  # noqa: E402
import nkisim.nki as nki  # noqa: E402
import nkisim.nki.isa as nisa  # noqa: E402
import nkisim.nki.language as nl  # noqa: E402
import nkisim.trace  # noqa: E402
from nkisim.kernels import swiglu_mlp  # noqa: E402
from nkisim.kernels.linear import load_transposed  # noqa: E402
from nkisim.kernels.lnc import core_share  # noqa: E402
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


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("T, H, I", [(1, 64, 96), (2, 256, 768), (3, 200, 300), (64, 136, 260),
                                     (128, 300, 130), (128, 1100, 200)])
def test_weight_split_matches_numpy_formula(T, H, I, dtype):
    """The LNC2 weight split (T <= 128) against the float64 formula, H and I not multiples of 128
    (and H > 1024: two 512-column output tiles per core)."""
    args = inputs(T, H, I, dtype, seed=T)
    got = simulate_nki_kernel(swiglu_mlp_kernel, 2, dict(zip(("x", "w_gate", "w_up", "w_down"), args)))
    want = numpy_mlp(*args, dtype)
    assert got.dtype == dtype and got.shape == (T, H)
    torch.testing.assert_close(got.float(), want, **tol(dtype, want))


# ---- the weight split against the token split it replaced -----------------------------------

@nki.jit
def token_split_kernel(x, w_gate, w_up, w_down):
    """A copy of swiglu_mlp_kernel's body before the LNC2 weight split (each core a contiguous
    share of the tokens, every core loading all weights): the reference for bit-identity."""
    T, H = x.shape
    I = w_gate.shape[1]
    P = nl.tile_size.pmax
    TM = nl.tile_size.gemm_stationary_fmax
    TN = nl.tile_size.gemm_moving_fmax
    out = nl.ndarray((T, H), dtype=x.dtype, buffer=nl.shared_hbm)
    start, rows = core_share(T)
    n_ht, n_it = -(-H // P), -(-I // P)

    for tt in nl.affine_range(-(-rows // TM)):
        t0 = start + tt * TM
        tn = min(TM, start + rows - t0)
        xT = load_transposed(x, t0, tn, H, x.dtype)

        # h.T[i, t] = silu(gate.T) * up.T, one 128-row block of I at a time
        hT = nl.ndarray((P, n_it, TM), dtype=x.dtype, buffer=nl.sbuf)
        for i in nl.affine_range(n_it):
            i0, inn = i * P, min(P, I - i * P)
            gate_psum = nl.ndarray((P, TM), dtype=nl.float32, buffer=nl.psum)
            up_psum = nl.ndarray((P, TM), dtype=nl.float32, buffer=nl.psum)
            for k in nl.affine_range(n_ht):
                kn = min(P, H - k * P)
                wg = nl.ndarray((P, P), dtype=w_gate.dtype, buffer=nl.sbuf)
                wu = nl.ndarray((P, P), dtype=w_up.dtype, buffer=nl.sbuf)
                nisa.dma_copy(dst=wg[0:kn, 0:inn], src=w_gate[nl.ds(k * P, kn), nl.ds(i0, inn)])
                nisa.dma_copy(dst=wu[0:kn, 0:inn], src=w_up[nl.ds(k * P, kn), nl.ds(i0, inn)])
                nisa.nc_matmul(dst=gate_psum[0:inn, 0:tn], stationary=wg[0:kn, 0:inn],
                               moving=xT[0:kn, k, 0:tn])
                nisa.nc_matmul(dst=up_psum[0:inn, 0:tn], stationary=wu[0:kn, 0:inn],
                               moving=xT[0:kn, k, 0:tn])
            act = nl.ndarray((P, TM), dtype=nl.float32, buffer=nl.sbuf)
            nisa.activation(dst=act[0:inn, 0:tn], op=nl.silu, data=gate_psum[0:inn, 0:tn])
            nisa.tensor_tensor(dst=hT[0:inn, i, 0:tn], data1=act[0:inn, 0:tn],
                               data2=up_psum[0:inn, 0:tn], op=nl.multiply)

        # out[t, :] = h[t, :] @ w_down, [tokens, 512] PSUM tiles accumulated over I
        for j in nl.affine_range(-(-H // TN)):
            c0, cn = j * TN, min(TN, H - j * TN)
            acc = nl.ndarray((TM, TN), dtype=nl.float32, buffer=nl.psum)
            for i in nl.affine_range(n_it):
                i0, inn = i * P, min(P, I - i * P)
                wd = nl.ndarray((P, TN), dtype=w_down.dtype, buffer=nl.sbuf)
                nisa.dma_copy(dst=wd[0:inn, 0:cn], src=w_down[nl.ds(i0, inn), nl.ds(c0, cn)])
                nisa.nc_matmul(dst=acc[0:tn, 0:cn], stationary=hT[0:inn, i, 0:tn],
                               moving=wd[0:inn, 0:cn])
            res = nl.ndarray((TM, TN), dtype=x.dtype, buffer=nl.sbuf)
            nisa.tensor_copy(dst=res[0:tn, 0:cn], src=acc[0:tn, 0:cn])
            nisa.dma_copy(dst=out[nl.ds(t0, tn), nl.ds(c0, cn)], src=res[0:tn, 0:cn])
    return out


@pytest.fixture
def in_order_products(monkeypatch):
    """nc_matmul's product summed over the contraction in order, one fp32 rounding per product
    and per addition, the same for every element whatever the operands' shapes. The simulator's
    np.matmul (OpenBLAS) sums each element's <= 128 products in an order that depends on the
    instruction's m x n shape (gemv for one column or row, small-matrix kernels), so the same
    kernel arithmetic issued as differently shaped instructions can differ by an fp32 ulp: the
    token split's own LNC2 and LNC1 launches already differ that way (fp32, T = 2). With this
    product, equal outputs mean the kernels add the same products in the same PSUM order."""
    def product(stationary, moving, k, m, n, out=None):
        s = nkisim.isa.matmul.read_f32(stationary).reshape(k, m)
        mv = nkisim.isa.matmul.read_f32(moving).reshape(k, n)
        acc = np.zeros((m, n), np.float32) if out is None else out
        acc[...] = 0.0
        for kk in range(k):
            acc += np.multiply.outer(s[kk], mv[kk])
        return acc
    monkeypatch.setattr(nkisim.isa.matmul, "_product", product)


# (2, 256, 768): the tiny Llama's decode; (5, 1100, 140): 550 columns per core, two output tiles,
# w_down not prefetched; (130, ...): the token split (T > 128)
SHAPES = [(1, 64, 96), (2, 256, 768), (3, 200, 300), (7, 130, 260), (64, 136, 140), (128, 300, 130),
          (5, 1100, 140), (130, 136, 260)]


def _run(kernel, lnc, args):
    return simulate_nki_kernel(kernel, lnc, dict(zip(("x", "w_gate", "w_up", "w_down"), args)))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("T, H, I", SHAPES)
def test_splits_are_bit_identical_to_token_split(in_order_products, T, H, I, dtype):
    """Every launch (weight split for T <= 128 under LNC2, token split otherwise and under LNC1)
    gives the token-split kernel's bits, LNC1 and LNC2."""
    args = inputs(T, H, I, dtype, seed=T + 1)
    want = _run(token_split_kernel, 1, args)
    assert torch.equal(_run(token_split_kernel, 2, args), want)
    assert torch.equal(_run(swiglu_mlp_kernel, 1, args), want)
    assert torch.equal(_run(swiglu_mlp_kernel, 2, args), want)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("T, H, I", SHAPES)
def test_lnc1_is_the_token_split(T, H, I, dtype):
    """Under LNC1 the kernel is the token split, instruction for instruction, with np.matmul."""
    args = inputs(T, H, I, dtype, seed=T + 2)
    with nkisim.trace.record() as ev:
        want = _run(token_split_kernel, 1, args)
    with nkisim.trace.record() as got_ev:
        got = _run(swiglu_mlp_kernel, 1, args)
    assert torch.equal(got, want)
    assert [(e.op, e.engine) for e in got_ev] == [(e.op, e.engine) for e in ev]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_decode_weight_split_equals_lnc1_with_np_matmul(dtype):
    """The tiny Llama's decode shape (T = 2, H = 256, I = 768) with the simulator's own products:
    the LNC2 weight split issues the LNC1 launch's gate/up instructions (m = 128, n = 2) and
    narrower down-projection ones (n = 128 instead of 256). Whether np.matmul sums those alike
    depends on the host BLAS (on this project's machines it does, bit for bit), so the check is
    within a few fp32 ulps of the output scale (bf16: one bf16 ulp); bit-identity of the kernels'
    arithmetic is pinned by test_splits_are_bit_identical_to_token_split."""
    args = inputs(2, 256, 768, dtype, seed=3)
    got, want = _run(swiglu_mlp_kernel, 2, args), _run(swiglu_mlp_kernel, 1, args)
    scale = float(want.float().abs().max())
    if dtype == torch.float32:
        torch.testing.assert_close(got, want, rtol=0, atol=4 * 2**-23 * scale)
    else:
        torch.testing.assert_close(got.float(), want.float(), rtol=2**-8, atol=2**-8 * scale)


@pytest.mark.parametrize("T, H, I, reads", [
    (2, 256, 768, 1), (128, 200, 300, 1),    # weight split: each weight element read once
    (129, 200, 300, 2),                      # token split: each core reads every weight
])
def test_lnc2_weight_traffic(T, H, I, reads):
    """HBM bytes the two cores read from each weight: once in all under the weight split."""
    args = inputs(T, H, I, torch.bfloat16)
    with nkisim.trace.record() as ev:
        _run(swiglu_mlp_kernel, 2, args)
    for name, size in (("w_gate", H * I), ("w_up", H * I), ("w_down", I * H)):
        got = sum(o.nbytes for e in ev for o in e.reads if o.alloc == f"arg:{name}")
        assert got == reads * size * 2, name
    assert sum(e.op == "core_barrier" for e in ev) == (2 if reads == 1 else 0)


@pytest.mark.parametrize("T, H, I", [(2, 256, 768), (5, 1200, 140), (1, 64, 96)])
def test_weight_split_passes_race_and_uninitialised_checks(monkeypatch, T, H, I):
    """The exchange is ordered by the barrier (race detection on), reads only written h.T rows
    (strict uninitialised reads), whichever core runs first (shuffled iteration order);
    (5, 1200, 140): two 512-column output tiles per core, no w_down prefetch, 2 I blocks;
    (1, 64, 96): one I block, so core 1 computes no h.T and only meets the barrier."""
    monkeypatch.setenv("NKISIM_DETECT_RACES", "1")
    monkeypatch.setenv("NKISIM_STRICT_UNINIT", "1")
    monkeypatch.setenv("NKISIM_SHUFFLE", "1")
    args = inputs(T, H, I, torch.bfloat16)
    want = numpy_mlp(*args, torch.bfloat16)
    got = _run(swiglu_mlp_kernel, 2, args)
    torch.testing.assert_close(got.float(), want, **tol(torch.bfloat16, want))


@pytest.mark.parametrize("T, want", [(2, 104), (1, 104)])
def test_decode_instructions_per_launch(T, want):
    """The tiny Llama's MLP in decode: 104 instructions per LNC2 launch (158 with the token split)."""
    args = inputs(T, 256, 768, torch.bfloat16)
    with nkisim.trace.record() as ev:
        _run(swiglu_mlp_kernel, 2, args)
    assert len(ev) == want


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
