"""Causal single-head attention: ``out = softmax(q @ k.T / sqrt(d) + causal_mask) @ v``, float32.

Shows: ``nisa.iota`` (an identity matrix from ``f - p``), TensorE transposes as ``nc_matmul``
against that identity, ``nc_matmul`` into 128 x 512 PSUM score tiles and accumulation of
``probs @ v`` over key blocks, ``nisa.affine_select`` (the causal mask on the diagonal block),
``nisa.tensor_reduce`` (row max), ``nisa.activation`` (scaled ``exp`` with a fused row sum),
``nisa.tensor_scalar`` (divide by the row sum while leaving PSUM). Key blocks after the diagonal
are skipped entirely.
"""
import math

import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np

# fp32 throughout; matmul and row-sum summation orders differ from NumPy's.
RTOL, ATOL = 1e-4, 1e-5


@nki.jit
def causal_attention_kernel(q, k, v):
    """q, k, v: [seq, d] in HBM, seq a multiple of 128, d <= 128; out: [seq, d]."""
    seq, d = q.shape
    assert k.shape == (seq, d) and v.shape == (seq, d), "q, k and v must have the same shape"
    P = nl.tile_size.pmax                      # query rows per tile and keys per block
    F = nl.tile_size.gemm_moving_fmax          # score columns per matmul (one PSUM bank)
    assert seq % P == 0 and d <= P, f"seq {seq} must be a multiple of {P}, d {d} at most {P}"
    n_blocks = seq // P
    scale = 1.0 / math.sqrt(d)
    out = nl.ndarray((seq, d), dtype=q.dtype, buffer=nl.shared_hbm)

    # identity[p, f] = 1 where f - p == 0
    f_minus_p = nl.ndarray((P, P), dtype=nl.int32, buffer=nl.sbuf)
    nisa.iota(dst=f_minus_p, pattern=[[1, P]], offset=0, channel_multiplier=-1)
    identity = nl.ndarray((P, P), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_scalar(dst=identity, data=f_minus_p, op0=nl.equal, operand0=0.0)

    # k.T [d, seq] and v [P, block, d] stay in SBUF for every query tile
    kT = nl.ndarray((d, seq), dtype=nl.float32, buffer=nl.sbuf)
    v_sb = nl.ndarray((P, n_blocks, d), dtype=nl.float32, buffer=nl.sbuf)
    for b in nl.affine_range(n_blocks):
        k_sb = nl.ndarray((P, d), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=k_sb, src=k[nl.ds(b * P, P), :])
        kT_psum = nl.ndarray((d, P), dtype=nl.float32, buffer=nl.psum)
        nisa.nc_matmul(dst=kT_psum, stationary=k_sb, moving=identity)     # k_sb.T @ I
        nisa.tensor_copy(dst=kT[:, nl.ds(b * P, P)], src=kT_psum)
        nisa.dma_copy(dst=v_sb[:, b, :], src=v[nl.ds(b * P, P), :])

    for i in nl.affine_range(n_blocks):
        q_sb = nl.ndarray((P, d), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=q_sb, src=q[nl.ds(i * P, P), :])
        qT_psum = nl.ndarray((d, P), dtype=nl.float32, buffer=nl.psum)
        nisa.nc_matmul(dst=qT_psum, stationary=q_sb, moving=identity)
        qT = nl.ndarray((d, P), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=qT, src=qT_psum)

        # raw scores against keys 0 .. kv_len - 1; later keys are all masked for this tile
        kv_len = (i + 1) * P
        scores = nl.ndarray((P, seq), dtype=nl.float32, buffer=nl.sbuf)
        for c in nl.affine_range((kv_len + F - 1) // F):
            width = min(F, kv_len - c * F)
            s_psum = nl.ndarray((P, F), dtype=nl.float32, buffer=nl.psum)
            nisa.nc_matmul(dst=s_psum[:, 0:width], stationary=qT, moving=kT[:, nl.ds(c * F, width)])
            nisa.tensor_copy(dst=scores[:, nl.ds(c * F, width)], src=s_psum[:, 0:width])

        # diagonal block: query i*P + p sees key i*P + f only if p - f >= 0
        diag = scores[:, nl.ds(i * P, P)]
        nisa.affine_select(dst=diag, pattern=[[-1, P]], channel_multiplier=1, on_true_tile=diag,
                           on_false_value=nl.fp32.min, cmp_op=nl.greater_equal, offset=0)

        # probs = exp(scale * s - scale * max(s)), row sums fused into the same instruction
        neg_max = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_reduce(dst=neg_max, op=nl.maximum, data=scores[:, 0:kv_len], axis=1,
                           negate=True)
        nisa.tensor_scalar(dst=neg_max, data=neg_max, op0=nl.multiply, operand0=scale)
        probs = nl.ndarray((P, seq), dtype=nl.float32, buffer=nl.sbuf)
        row_sum = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation(dst=probs[:, 0:kv_len], op=nl.exp, data=scores[:, 0:kv_len],
                        bias=neg_max, scale=scale, reduce_op=nl.add, reduce_res=row_sum,
                        reduce_cmd=nisa.reduce_cmd.reset_reduce)

        # out_tile = probs @ v: transpose each probs block so the keys sit on the partitions
        out_psum = nl.ndarray((P, d), dtype=nl.float32, buffer=nl.psum)
        for b in nl.affine_range(i + 1):
            pT_psum = nl.ndarray((P, P), dtype=nl.float32, buffer=nl.psum)
            nisa.nc_matmul(dst=pT_psum, stationary=probs[:, nl.ds(b * P, P)], moving=identity)
            pT = nl.ndarray((P, P), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_copy(dst=pT, src=pT_psum)
            nisa.nc_matmul(dst=out_psum, stationary=pT, moving=v_sb[:, b, :])

        out_sb = nl.ndarray((P, d), dtype=q.dtype, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=out_sb, data=out_psum, op0=nl.divide, operand0=row_sum)
        nisa.dma_copy(dst=out[nl.ds(i * P, P), :], src=out_sb)
    return out


KERNEL = causal_attention_kernel


def reference(q, k, v):
    q, k, v = (a.astype(np.float32) for a in (q, k, v))
    seq, d = q.shape
    s = (q @ k.T) / np.float32(math.sqrt(d))
    s = np.where(np.tril(np.ones((seq, seq), dtype=bool)), s, -np.inf)
    p = np.exp(s - s.max(axis=1, keepdims=True))
    return (p / p.sum(axis=1, keepdims=True)) @ v


def make_inputs(rng, small=False):
    seq, d = (256, 64) if small else (1024, 128)
    return tuple(rng.standard_normal((seq, d), dtype=np.float32) for _ in range(3))
