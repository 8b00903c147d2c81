"""LayerNorm: ``out = (x - mean) / sqrt(var + eps) * gamma + beta`` over each row, float32.

Shows: ``nisa.bn_stats`` on chunks of ``nl.tile_size.bn_stats_fmax`` elements and ``nisa.bn_aggr``
(mean and population variance per partition), ``nisa.activation`` (``rsqrt`` with a bias tile),
``nisa.tensor_scalar`` with two fused ops (subtract mean, multiply by rstd), ``nisa.tensor_tensor``.
"""
import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np

EPS = 1e-5
# fp32 throughout; only the mean/variance algorithm (chunked Welford vs two-pass) differs.
RTOL, ATOL = 1e-4, 1e-4


@nki.jit
def layernorm_kernel(x, gamma, beta, eps=EPS):
    """x: [rows, H], gamma, beta: [H] in HBM; out: [rows, H] in x's dtype."""
    rows, H = x.shape
    assert gamma.shape == (H,) and beta.shape == (H,), "gamma and beta must have shape (H,)"
    P = nl.tile_size.pmax
    FMAX = nl.tile_size.bn_stats_fmax          # bn_stats reads at most this many elements
    n_chunks = (H + FMAX - 1) // FMAX
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)

    gamma_sb = nl.ndarray((P, H), dtype=nl.float32, buffer=nl.sbuf)
    beta_sb = nl.ndarray((P, H), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=gamma_sb, src=gamma.ap(pattern=[[0, P], [1, H]], offset=0))
    nisa.dma_copy(dst=beta_sb, src=beta.ap(pattern=[[0, P], [1, H]], offset=0))
    eps_sb = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=eps_sb, value=eps)

    for i in nl.affine_range((rows + P - 1) // P):
        n = min(P, rows - i * P)
        x_sb = nl.ndarray((P, H), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=x_sb[0:n, :], src=x[nl.ds(i * P, n), :])

        # six statistics per chunk, then one aggregation into [mean, var]
        stats = nl.ndarray((P, 6 * n_chunks), dtype=nl.float32, buffer=nl.sbuf)
        for c in nl.affine_range(n_chunks):
            width = min(FMAX, H - c * FMAX)
            nisa.bn_stats(dst=stats[0:n, nl.ds(c * 6, 6)], data=x_sb[0:n, nl.ds(c * FMAX, width)])
        mean_var = nl.ndarray((P, 2), dtype=nl.float32, buffer=nl.sbuf)
        nisa.bn_aggr(dst=mean_var[0:n, :], data=stats[0:n, :])

        rstd = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation(dst=rstd[0:n, :], op=nl.rsqrt, data=mean_var[0:n, 1:2], bias=eps_sb[0:n, :])

        y = nl.ndarray((P, H), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=y[0:n, :], data=x_sb[0:n, :], op0=nl.subtract,
                           operand0=mean_var[0:n, 0:1], op1=nl.multiply, operand1=rstd[0:n, :])
        nisa.tensor_tensor(dst=y[0:n, :], data1=y[0:n, :], data2=gamma_sb[0:n, :], op=nl.multiply)
        out_sb = nl.ndarray((P, H), dtype=x.dtype, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=out_sb[0:n, :], data1=y[0:n, :], data2=beta_sb[0:n, :], op=nl.add)
        nisa.dma_copy(dst=out[nl.ds(i * P, n), :], src=out_sb[0:n, :])
    return out


KERNEL = layernorm_kernel


def reference(x, gamma, beta):
    x = x.astype(np.float32)
    mean = x.mean(axis=1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=1, keepdims=True)
    return (x - mean) / np.sqrt(var + np.float32(EPS)) * gamma.astype(np.float32) + beta.astype(np.float32)


def make_inputs(rng, small=False):
    rows, H = (160, 1000) if small else (4096, 2048)     # small: a partial last chunk of 488
    x = rng.normal(1.0, 2.0, (rows, H)).astype(np.float32)
    gamma = rng.uniform(0.5, 1.5, H).astype(np.float32)
    beta = rng.standard_normal(H, dtype=np.float32)
    return x, gamma, beta
