"""Attention: causal flash attention for prefill (GQA) and paged-attention decode, each as an NKI
kernel, a PyTorch fallback and a functional op (``flash_attention``, ``paged_attention_decode``)
that picks one per call.

Imports torch, nkisim.torch, nkisim.kernels.kvcache and the ``nkisim.nki`` faces; never isa/checks.
"""
from __future__ import annotations

import torch

import nkisim.nki as nki
import nkisim.nki.isa as nisa
import nkisim.nki.language as nl

from .lnc import core_share
from .contract import check_grouped_heads, check_shapes
from nkisim.torch import routes, wrap_nki

from .kvcache import scatter_rows

MAX_D = 128               # head dim: the contraction (partition) dim of Q.K^T
MAX_S = 4096              # prefill: K^T [D, S] and V [128, S/128, D] stay in SBUF per kv head
MAX_DECODE_BYTES = 160 * 1024   # decode: SBUF bytes per partition of one sequence's working set
_DTYPES = (torch.float32, torch.bfloat16)
_NEG = nl.fp32.min        # the mask fill (finite, as nki-library's kernels use)


# ---------------------------------------------------------------------------------------------
# Prefill: causal flash attention


@nki.jit
def flash_attention_kernel(q, k, v, scale, causal=True):
    """out[s, h] = softmax_j(scale * q[s, h] . k[j, h // R] (+ causal mask j <= s)) @ v[j, h // R].

    q [S, Hq, D], k and v [S, Hkv, D] in HBM (R = Hq // Hkv); out [S, Hq, D] in q's dtype.
    Per kv head, K^T [D, S] (a strided DMA: D on the partitions) and V [128, S/128, D] (keys on
    the partitions) stay in SBUF for its R query heads. Per query tile of 128 rows (the last one
    partial): Q^T [D, rows]; key blocks of up to 512 columns (one PSUM bank), blocks past the
    tile's last query skipped; scores = Q.K^T by nc_matmul into PSUM, scaled while leaving PSUM;
    the diagonal block masked with affine_select; online softmax in fp32 (running max m, running
    sum l, exp with bias -m and the row sum fused into the same activation); P^T per 128 keys by
    nc_transpose; P.V by nc_matmul accumulated in PSUM; acc = acc * exp(m_old - m_new) + P.V.
    P is rounded to the input dtype for the TensorE (bf16 stays bf16, as production kernels do).
    LNC2: each core takes a contiguous share of the query heads (so each loads K/V of its
    own kv heads only).
    Raises ValueError, before any instruction, when the arguments' shapes disagree with the
    ones above (``contract.check_shapes``).
    """
    dims = check_shapes("flash_attention_kernel", q=(q, "S Hq D"), k=(k, "S Hkv D"), v=(v, "S Hkv D"))
    check_grouped_heads("flash_attention_kernel", dims)
    S, Hq, D = q.shape
    Hkv = k.shape[1]
    R = Hq // Hkv
    P = nl.tile_size.pmax
    F = nl.tile_size.gemm_moving_fmax
    dt = q.dtype
    out = nl.ndarray((S, Hq, D), dtype=q.dtype, buffer=nl.shared_hbm)
    h_start, h_count = core_share(Hq)
    h_stop = h_start + h_count
    n_kt = -(-S // P)

    loaded_g = None
    kT = v_sb = None
    for h in range(h_start, h_stop):
        g = h // R
        if g != loaded_g:                       # K^T and V of kv head g, reused by its R q heads
            kT = nl.ndarray((D, S), dtype=dt, buffer=nl.sbuf)
            nisa.dma_copy(dst=kT, src=k.ap([[1, D], [Hkv * D, S]], offset=g * D))
            v_sb = nl.ndarray((P, n_kt, D), dtype=dt, buffer=nl.sbuf)
            for kt in nl.affine_range(n_kt):
                kn = min(P, S - kt * P)
                nisa.dma_copy(dst=v_sb[0:kn, kt, :], src=v[nl.ds(kt * P, kn), g, :])
            loaded_g = g

        for i in nl.affine_range(-(-S // P)):
            q0 = i * P
            rows = min(P, S - q0)
            qT = nl.ndarray((D, P), dtype=dt, buffer=nl.sbuf)
            nisa.dma_copy(dst=qT[:, 0:rows], src=q.ap([[1, D], [Hq * D, rows]], offset=q0 * Hq * D + h * D))

            m = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)       # running max
            l_sum = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)   # running row sum
            acc = nl.ndarray((P, D), dtype=nl.float32, buffer=nl.sbuf)     # running P.V
            nisa.memset(dst=m[0:rows, :], value=_NEG)
            nisa.memset(dst=l_sum[0:rows, :], value=0.0)
            nisa.memset(dst=acc[0:rows, :], value=0.0)

            kv_len = q0 + rows if causal else S          # keys after the tile's last query: skipped
            for c in nl.sequential_range(-(-kv_len // F)):
                c0 = c * F
                w = min(F, kv_len - c0)
                s_psum = nl.ndarray((P, F), dtype=nl.float32, buffer=nl.psum)
                nisa.nc_matmul(dst=s_psum[0:rows, 0:w], stationary=qT[:, 0:rows], moving=kT[:, nl.ds(c0, w)])
                s_sb = nl.ndarray((P, F), dtype=nl.float32, buffer=nl.sbuf)
                nisa.tensor_scalar(dst=s_sb[0:rows, 0:w], data=s_psum[0:rows, 0:w], op0=nl.multiply,
                                   operand0=scale)
                if causal and c0 + w - 1 > q0:
                    # query q0 + p sees key c0 + f only if (q0 - c0) + p - f >= 0
                    blk = s_sb[0:rows, 0:w]
                    nisa.affine_select(dst=blk, pattern=[[-1, w]], channel_multiplier=1, on_true_tile=blk,
                                       on_false_value=_NEG, cmp_op=nl.greater_equal, offset=q0 - c0)

                m_new = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
                nisa.tensor_reduce(dst=m_new[0:rows, :], op=nl.maximum, data=s_sb[0:rows, 0:w], axis=1)
                nisa.tensor_tensor(dst=m_new[0:rows, :], data1=m_new[0:rows, :], data2=m[0:rows, :],
                                   op=nl.maximum)
                neg_m = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
                nisa.tensor_scalar(dst=neg_m[0:rows, :], data=m_new[0:rows, :], op0=nl.multiply,
                                   operand0=-1.0)
                alpha = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)   # exp(m_old - m_new)
                nisa.activation(dst=alpha[0:rows, :], op=nl.exp, data=m[0:rows, :], bias=neg_m[0:rows, :])
                p_sb = nl.ndarray((P, F), dtype=dt, buffer=nl.sbuf)
                b_sum = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
                nisa.activation(dst=p_sb[0:rows, 0:w], op=nl.exp, data=s_sb[0:rows, 0:w],
                                bias=neg_m[0:rows, :], reduce_op=nl.add, reduce_res=b_sum[0:rows, :],
                                reduce_cmd=nisa.reduce_cmd.reset_reduce)
                nisa.scalar_tensor_tensor(dst=l_sum[0:rows, :], data=l_sum[0:rows, :], op0=nl.multiply,
                                          operand0=alpha[0:rows, :], op1=nl.add, operand1=b_sum[0:rows, :])

                # P.V: keys back on the partitions, 128 at a time, accumulated in one PSUM tile
                pv_psum = nl.ndarray((P, D), dtype=nl.float32, buffer=nl.psum)
                for sub in nl.affine_range(-(-w // P)):
                    k0 = c0 + sub * P
                    kw = min(P, c0 + w - k0)
                    pT_psum = nl.ndarray((P, P), dtype=dt, buffer=nl.psum)
                    nisa.nc_transpose(dst=pT_psum[0:kw, 0:rows], data=p_sb[0:rows, nl.ds(sub * P, kw)])
                    pT = nl.ndarray((P, P), dtype=dt, buffer=nl.sbuf)
                    nisa.tensor_copy(dst=pT[0:kw, 0:rows], src=pT_psum[0:kw, 0:rows])
                    nisa.nc_matmul(dst=pv_psum[0:rows, :], stationary=pT[0:kw, 0:rows],
                                   moving=v_sb[0:kw, k0 // P, :])
                nisa.scalar_tensor_tensor(dst=acc[0:rows, :], data=acc[0:rows, :], op0=nl.multiply,
                                          operand0=alpha[0:rows, :], op1=nl.add, operand1=pv_psum[0:rows, :])
                nisa.tensor_copy(dst=m[0:rows, :], src=m_new[0:rows, :])

            out_sb = nl.ndarray((P, D), dtype=q.dtype, buffer=nl.sbuf)
            nisa.tensor_scalar(dst=out_sb[0:rows, :], data=acc[0:rows, :], op0=nl.divide,
                               operand0=l_sum[0:rows, :])
            nisa.dma_copy(dst=out[nl.ds(q0, rows), h, :], src=out_sb[0:rows, :])
    return out


def _psum_matmul(p: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Batched fp32 ``p @ v`` over the keys (p [..., M, N], v [..., N, D]) summed like the
    kernels' PSUM: one matmul per 128 keys, partial products added in order."""
    step = nl.tile_size.pmax
    acc = p[..., 0:step] @ v[..., 0:step, :]
    for k0 in range(step, p.shape[-1], step):
        acc = acc + p[..., k0:k0 + step] @ v[..., k0:k0 + step, :]
    return acc


def flash_attention_fallback(q, k, v, scale: float, causal: bool = True) -> torch.Tensor:
    """PyTorch attention with the kernel's rounding points: fp32 scores, GQA via repeat_interleave,
    causal mask; P = exp(s - m) where m is the running max the kernel has when it reaches the key's
    512-wide block (the row max over keys up to that block's end), P rounded to q's dtype before
    P.V (fp32 accumulation), the row sum taken over the unrounded fp32 P, each block rescaled by
    exp(m_block - m_final), the result rounded once into q's dtype. Within a few fp32 ulps of the
    kernel before that last rounding (sum orders differ), so bf16 outputs agree to an ulp."""
    S, Hq, _ = q.shape
    rep = Hq // k.shape[1]
    qf = q.float().transpose(0, 1)                                   # [Hq, S, D]
    kf = k.float().repeat_interleave(rep, dim=1).transpose(0, 1)
    vf = v.float().repeat_interleave(rep, dim=1).transpose(0, 1)
    scores = torch.matmul(qf, kf.transpose(1, 2)) * scale            # [Hq, S, S]
    if causal:
        keep = torch.ones(S, S, dtype=torch.bool, device=q.device).tril()
        scores = scores.masked_fill(~keep, float("-inf"))
    # the running max at the end of each key's block (kernel: blocks of gemm_moving_fmax keys)
    F = nl.tile_size.gemm_moving_fmax
    j = torch.arange(S, device=q.device)
    blk_end = torch.clamp((j // F) * F + (F - 1), max=S - 1)
    m_blk = scores.cummax(dim=-1).values.index_select(-1, blk_end)    # [Hq, S, S]
    m_fin = m_blk[..., -1:]
    p = torch.exp(scores - m_blk)                                     # masked keys: exp(-inf) = 0
    w = torch.exp(m_blk - m_fin)                                      # 1 for the last block
    l_sum = (p * w).sum(dim=-1, keepdim=True)
    p_r = p.to(q.dtype).float() * w                                  # P as the TensorE sees it
    out = _psum_matmul(p_r, vf) / l_sum
    return out.transpose(0, 1).to(q.dtype)


def _flash_spec(q, k, v, scale, causal=True):
    return tuple(q.shape), q.dtype


_flash = wrap_nki(flash_attention_kernel, output_spec=_flash_spec)[2]
_flash_dispatch = routes.dispatch(_flash, flash_attention_fallback)


def flash_fits(q, k, v) -> bool:
    """The kernel's limits: q [S, Hq, D], k/v [S, Hkv, D], 1 <= S <= MAX_S, D <= MAX_D,
    Hq % Hkv == 0, one dtype (fp32 or bf16) for all three."""
    return (q.dim() == 3 and k.dim() == 3 and v.shape == k.shape and k.shape[0] == q.shape[0]
            and k.shape[2] == q.shape[2] and 1 <= q.shape[0] <= MAX_S and 1 <= q.shape[2] <= MAX_D
            and k.shape[1] >= 1 and q.shape[1] % k.shape[1] == 0
            and q.dtype in _DTYPES and k.dtype == q.dtype and v.dtype == q.dtype)


def flash_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float,
                    causal: bool = True) -> torch.Tensor:
    """Prefill attention of one sequence: ``softmax(scale * q k^T + mask) v`` per query head.

    Shapes: q [S, Hq, D]; k, v [S, Hkv, D] -> [S, Hq, D]; query head h reads kv head
    h // (Hq // Hkv) (GQA). Dtypes: float32 or bfloat16 (all alike; the output's dtype); softmax
    in fp32. ``causal``: key j is visible to query i iff j <= i.
    Route: the NKI kernel (LNC2, simulator) when ``can_run_kernel(q)`` and ``flash_fits``
    (S <= 4096, D <= 128, Hq % Hkv == 0); otherwise the PyTorch fallback. Both counted under
    ``nkisim.kernels.attention.flash_attention_kernel``.
    Raises: ValueError (before routing, so both routes alike) when q, k, v are not 3-D with equal
    S and D, k and v differ in shape, or Hq is not a multiple of Hkv.
    """
    if q.dim() != 3 or k.dim() != 3 or v.shape != k.shape or k.shape[0] != q.shape[0] \
            or k.shape[2] != q.shape[2]:
        raise ValueError(f"flash_attention: q must be [S, Hq, D] and k, v [S, Hkv, D], got "
                         f"{list(q.shape)}, {list(k.shape)}, {list(v.shape)}")
    if k.shape[1] < 1 or q.shape[1] % k.shape[1]:
        raise ValueError(f"flash_attention: Hq = {q.shape[1]} must be a multiple of Hkv = {k.shape[1]}")
    if not flash_fits(q, k, v):
        if not torch.compiler.is_compiling():
            routes.count(_flash.kernel_name, "fallback")
        return flash_attention_fallback(q, k, v, scale, causal)
    return _flash_dispatch(q.contiguous(), k.contiguous(), v.contiguous(), float(scale), bool(causal))


# ---------------------------------------------------------------------------------------------
# Decode: paged attention over a block table


@nki.jit
def paged_attention_decode_kernel(q, k_new, v_new, k_cache, v_cache, block_table, context_lens, scale):
    """Write each sequence's new K/V at position context_lens[b] - 1 of its paged cache, then
    out[b, h] = softmax_j(scale * q[b, h] . K_b[j]) @ V_b[j] over j < context_lens[b].

    q [B, Hq, D]; k_new, v_new [B, Hkv, D]; caches [NB, bs, Hkv, D] (written in place);
    block_table [B, MB] int32 (-1 = unused); context_lens [B] int32; out [B, Hq, D].
    Per sequence, positions go on the partitions in chunks of 128 (128 % bs == 0): the block id of
    every position comes from one DMA of the block-table row (each entry repeated bs times), and
    slot = block * bs + position % bs is formed on VectorE. The new token is one row scatter
    (``cache.reshape((NB*bs, Hkv*D)).ap(vector_offset=...)``, oob_mode=skip) whose index is the
    slot only at position context_lens[b] - 1 and -1 elsewhere; K and V rows are then gathered
    the same way with index -1 at positions >= context_lens[b], so an unused (-1) block and stale
    slots are never read (their rows stay zero). Per kv head: K^T by nc_transpose, scores
    [R, positions] by nc_matmul, positions >= context_lens[b] masked by affine_select (runtime
    offset = context length), softmax in fp32 (fused exp + row sum), P^T by nc_transpose, P.V by
    nc_matmul accumulated in PSUM. LNC2: each core takes a contiguous share of the batch.
    Raises ValueError, before any instruction, when the arguments' shapes disagree with the
    ones above (``contract.check_shapes``).
    """
    dims = check_shapes("paged_attention_decode_kernel", q=(q, "B Hq D"), k_new=(k_new, "B Hkv D"),
                        v_new=(v_new, "B Hkv D"), k_cache=(k_cache, "NB bs Hkv D"),
                        v_cache=(v_cache, "NB bs Hkv D"), block_table=(block_table, "B MB"),
                        context_lens=(context_lens, "B"))
    check_grouped_heads("paged_attention_decode_kernel", dims)
    B, Hq, D = q.shape
    NB, bs, Hkv = k_cache.shape[0], k_cache.shape[1], k_cache.shape[2]
    MB = block_table.shape[1]
    R = Hq // Hkv
    HD = Hkv * D
    P = nl.tile_size.pmax
    F = nl.tile_size.gemm_moving_fmax
    N = MB * bs                           # positions the block table can address
    n_ch = -(-N // P)
    dt = q.dtype
    out = nl.ndarray((B, Hq, D), dtype=q.dtype, buffer=nl.shared_hbm)
    k_flat = k_cache.reshape((NB * bs, HD))
    v_flat = v_cache.reshape((NB * bs, HD))
    b_start, b_count = core_share(B)
    b_stop = b_start + b_count

    # position within its block, per partition (chunks start on block boundaries)
    in_blk = nl.ndarray((P, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.iota(dst=in_blk, pattern=[[0, 1]], offset=0, channel_multiplier=1)
    nisa.tensor_scalar(dst=in_blk, data=in_blk, op0=nl.mod, operand0=bs)

    for b in nl.affine_range(b_stop - b_start):
        b = b_start + b
        ctx = nl.ndarray((P, 1), dtype=nl.int32, buffer=nl.sbuf)     # context length, every partition
        nisa.dma_copy(dst=ctx, src=context_lens.ap([[0, P], [1, 1]], offset=b))
        new_rows = []
        for src in (k_new, v_new):                                   # the new token on every partition
            t = nl.ndarray((P, HD), dtype=dt, buffer=nl.sbuf)
            nisa.dma_copy(dst=t, src=src.ap([[0, P], [1, HD]], offset=b * HD))
            new_rows.append(t)
        k_rows = nl.ndarray((P, n_ch, HD), dtype=dt, buffer=nl.sbuf)
        v_rows = nl.ndarray((P, n_ch, HD), dtype=dt, buffer=nl.sbuf)
        nisa.memset(dst=k_rows, value=0.0)
        nisa.memset(dst=v_rows, value=0.0)

        for c in nl.sequential_range(n_ch):
            pc = min(P, N - c * P)
            blk = nl.ndarray((P, 1), dtype=nl.int32, buffer=nl.sbuf)
            nisa.dma_copy(dst=blk[0:pc, :], src=block_table.ap([[1, pc // bs], [0, bs], [1, 1]],
                                                              offset=b * MB + c * P // bs))
            slot = nl.ndarray((P, 1), dtype=nl.int32, buffer=nl.sbuf)   # slot + 1 (0 = nowhere)
            nisa.scalar_tensor_tensor(dst=slot[0:pc, :], data=blk[0:pc, :], op0=nl.multiply, operand0=bs,
                                      op1=nl.add, operand1=in_blk[0:pc, :])
            nisa.tensor_scalar(dst=slot[0:pc, :], data=slot[0:pc, :], op0=nl.add, operand0=1)
            pos1 = nl.ndarray((P, 1), dtype=nl.int32, buffer=nl.sbuf)   # position + 1
            nisa.iota(dst=pos1[0:pc, :], pattern=[[0, 1]], offset=c * P + 1, channel_multiplier=1)

            # the new token: index = slot where position + 1 == context length, else -1
            is_new = nl.ndarray((P, 1), dtype=nl.int32, buffer=nl.sbuf)
            nisa.tensor_tensor(dst=is_new[0:pc, :], data1=pos1[0:pc, :], data2=ctx[0:pc, :], op=nl.equal)
            w_idx = nl.ndarray((P, 1), dtype=nl.int32, buffer=nl.sbuf)
            nisa.tensor_tensor(dst=w_idx[0:pc, :], data1=slot[0:pc, :], data2=is_new[0:pc, :], op=nl.multiply)
            nisa.tensor_scalar(dst=w_idx[0:pc, :], data=w_idx[0:pc, :], op0=nl.subtract, operand0=1)
            # the context: index = slot where position + 1 <= context length, else -1
            live = nl.ndarray((P, 1), dtype=nl.int32, buffer=nl.sbuf)
            nisa.tensor_tensor(dst=live[0:pc, :], data1=pos1[0:pc, :], data2=ctx[0:pc, :], op=nl.less_equal)
            r_idx = nl.ndarray((P, 1), dtype=nl.int32, buffer=nl.sbuf)
            nisa.tensor_tensor(dst=r_idx[0:pc, :], data1=slot[0:pc, :], data2=live[0:pc, :], op=nl.multiply)
            nisa.tensor_scalar(dst=r_idx[0:pc, :], data=r_idx[0:pc, :], op0=nl.subtract, operand0=1)

            for flat, new, rows_sb in ((k_flat, new_rows[0], k_rows), (v_flat, new_rows[1], v_rows)):
                nisa.dma_copy(dst=flat.ap([[HD, pc], [1, HD]], offset=0, vector_offset=w_idx[0:pc, :],
                                          indirect_dim=0),
                              src=new[0:pc, :], oob_mode=nisa.oob_mode.skip)
                nisa.dma_copy(dst=rows_sb[0:pc, c, :],
                              src=flat.ap([[HD, pc], [1, HD]], offset=0, vector_offset=r_idx[0:pc, :],
                                          indirect_dim=0),
                              oob_mode=nisa.oob_mode.skip)

        for g in nl.affine_range(Hkv):
            kT = nl.ndarray((D, N), dtype=dt, buffer=nl.sbuf)
            for c in nl.affine_range(n_ch):
                pc = min(P, N - c * P)
                kT_psum = nl.ndarray((D, P), dtype=dt, buffer=nl.psum)
                nisa.nc_transpose(dst=kT_psum[:, 0:pc], data=k_rows[0:pc, c, nl.ds(g * D, D)])
                nisa.tensor_copy(dst=kT[:, nl.ds(c * P, pc)], src=kT_psum[:, 0:pc])
            qT = nl.ndarray((D, R), dtype=dt, buffer=nl.sbuf)
            nisa.dma_copy(dst=qT, src=q.ap([[1, D], [D, R]], offset=b * Hq * D + g * R * D))

            s_sb = nl.ndarray((R, N), dtype=nl.float32, buffer=nl.sbuf)
            for c in nl.affine_range(-(-N // F)):
                w = min(F, N - c * F)
                s_psum = nl.ndarray((R, F), dtype=nl.float32, buffer=nl.psum)
                nisa.nc_matmul(dst=s_psum[:, 0:w], stationary=qT, moving=kT[:, nl.ds(c * F, w)])
                nisa.tensor_scalar(dst=s_sb[:, nl.ds(c * F, w)], data=s_psum[:, 0:w], op0=nl.multiply,
                                   operand0=scale)
            # position f is visible iff context_len - f > 0 (runtime offset)
            nisa.affine_select(dst=s_sb, pattern=[[-1, N]], channel_multiplier=0, on_true_tile=s_sb,
                               on_false_value=_NEG, cmp_op=nl.greater, offset=ctx[0:1, 0:1])
            neg_max = nl.ndarray((R, 1), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_reduce(dst=neg_max, op=nl.maximum, data=s_sb, axis=1, negate=True)
            p_sb = nl.ndarray((R, N), dtype=dt, buffer=nl.sbuf)
            row_sum = nl.ndarray((R, 1), dtype=nl.float32, buffer=nl.sbuf)
            nisa.activation(dst=p_sb, op=nl.exp, data=s_sb, bias=neg_max, reduce_op=nl.add,
                            reduce_res=row_sum, reduce_cmd=nisa.reduce_cmd.reset_reduce)

            o_psum = nl.ndarray((R, D), dtype=nl.float32, buffer=nl.psum)
            for c in nl.affine_range(n_ch):
                pc = min(P, N - c * P)
                pT_psum = nl.ndarray((P, R), dtype=dt, buffer=nl.psum)
                nisa.nc_transpose(dst=pT_psum[0:pc, :], data=p_sb[:, nl.ds(c * P, pc)])
                pT = nl.ndarray((P, R), dtype=dt, buffer=nl.sbuf)
                nisa.tensor_copy(dst=pT[0:pc, :], src=pT_psum[0:pc, :])
                nisa.nc_matmul(dst=o_psum, stationary=pT[0:pc, :], moving=v_rows[0:pc, c, nl.ds(g * D, D)])
            o_sb = nl.ndarray((R, D), dtype=q.dtype, buffer=nl.sbuf)
            nisa.tensor_scalar(dst=o_sb, data=o_psum, op0=nl.divide, operand0=row_sum)
            nisa.dma_copy(dst=out[b, nl.ds(g * R, R), :], src=o_sb)
    return out


def paged_attention_decode_fallback(q, k_new, v_new, k_cache, v_cache, block_table, context_lens,
                                    scale: float) -> torch.Tensor:
    """PyTorch paged decode: write the new K/V (in place), gather each sequence's context through
    the block table (never reading a -1 entry's block), fp32 scores, GQA via repeat_interleave;
    softmax with the kernel's rounding points (P rounded to q's dtype before P.V, the row sum over
    the fp32 P), so bf16 results match the kernel's to an ulp."""
    B, Hq, D = q.shape
    bs, Hkv = k_cache.shape[1], k_cache.shape[2]
    N = block_table.shape[1] * bs
    ctx = context_lens.to(torch.int64)
    table = block_table.to(torch.int64)
    last = (ctx - 1).clamp(0, N - 1)
    blk_new = table.gather(1, (last // bs).unsqueeze(1)).squeeze(1)
    new_ok = (blk_new >= 0) & (ctx >= 1) & (ctx <= N)
    slot_new = torch.where(new_ok, blk_new * bs + last % bs, torch.full_like(blk_new, -1))
    scatter_rows(k_cache, k_new, slot_new)
    scatter_rows(v_cache, v_new, slot_new)

    pos = torch.arange(N, device=q.device)
    blk = table[:, pos // bs]                                          # [B, N]
    valid = (blk >= 0) & (pos.unsqueeze(0) < ctx.unsqueeze(1))
    slots = torch.where(valid, blk * bs + pos % bs, torch.zeros_like(blk))
    kf = k_cache.reshape(-1, Hkv, D)[slots].float()                   # [B, N, Hkv, D]
    vf = v_cache.reshape(-1, Hkv, D)[slots].float()
    kf = torch.where(valid[..., None, None], kf, 0.0).repeat_interleave(Hq // Hkv, dim=2)
    vf = torch.where(valid[..., None, None], vf, 0.0).repeat_interleave(Hq // Hkv, dim=2)
    scores = torch.einsum("bhd,bnhd->bhn", q.float(), kf) * scale
    scores = scores.masked_fill(~valid.unsqueeze(1), float("-inf"))
    # the kernel's rounding points: P = exp(s - max) rounded to q's dtype for P.V, row sum over
    # the unrounded fp32 P, one division, one rounding into q's dtype
    p = torch.exp(scores - scores.amax(dim=-1, keepdim=True))
    p_r = p.to(q.dtype).float()
    out = _psum_matmul(p_r.unsqueeze(-2), vf.permute(0, 2, 1, 3)).squeeze(-2)      # [B, Hq, D]
    out = out / p.sum(dim=-1).unsqueeze(-1)
    return out.to(q.dtype)


def _decode_spec(q, k_new, v_new, k_cache, v_cache, block_table, context_lens, scale):
    return tuple(q.shape), q.dtype


_decode = wrap_nki(paged_attention_decode_kernel, output_spec=_decode_spec,
                   mutates_args=("k_cache", "v_cache"))[2]
_decode_dispatch = routes.dispatch(_decode, paged_attention_decode_fallback)


def decode_fits(q, k_new, v_new, k_cache, v_cache, block_table, context_lens) -> bool:
    """The kernel's limits: shapes as documented, D <= 128, Hq % Hkv == 0, Hq // Hkv <= 128,
    block_size dividing 128, int32 block table and context lengths, one dtype (fp32/bf16), caches
    contiguous, and one sequence's working set <= MAX_DECODE_BYTES per partition."""
    if not (q.dim() == 3 and k_cache.dim() == 4 and block_table.dim() == 2 and context_lens.dim() == 1):
        return False
    B, Hq, D = q.shape
    NB, bs, Hkv, Dc = k_cache.shape
    if not (B >= 1 and Dc == D and 1 <= D <= MAX_D and Hkv >= 1 and Hq % Hkv == 0
            and Hq // Hkv <= 128 and 1 <= bs <= 128 and 128 % bs == 0
            and tuple(k_new.shape) == (B, Hkv, D) and v_new.shape == k_new.shape
            and v_cache.shape == k_cache.shape and tuple(block_table.shape[:1]) == (B,)
            and block_table.shape[1] >= 1 and tuple(context_lens.shape) == (B,)
            and block_table.dtype == torch.int32 and context_lens.dtype == torch.int32
            and q.dtype in _DTYPES and {k_new.dtype, v_new.dtype, k_cache.dtype, v_cache.dtype} == {q.dtype}
            and k_cache.is_contiguous() and v_cache.is_contiguous()):
        return False
    n = block_table.shape[1] * bs
    n_ch = -(-n // 128)
    isz = q.element_size()
    need = (4 * n_ch + 2) * Hkv * D * isz + n * (2 * isz + 4)   # rows, new token, K^T, P, scores
    return need <= MAX_DECODE_BYTES


def check_decode_metadata(block_table: torch.Tensor, context_lens: torch.Tensor, num_blocks: int,
                          block_size: int) -> None:
    """Raise ValueError naming the first problem of a decode step's cache metadata: context_lens
    outside 1 .. max_blocks * block_size, a block id outside -1 .. num_blocks - 1, a -1 entry
    inside a sequence's context, or a block written this step (the one holding position
    context_lens[b] - 1) that another sequence's context also uses. Host-side (reads the values)."""
    if block_table.dim() != 2 or context_lens.dim() != 1 or context_lens.shape[0] != block_table.shape[0]:
        raise ValueError(f"paged_attention_decode: block_table must be [B, max_blocks] and context_lens "
                         f"[B], got {list(block_table.shape)} and {list(context_lens.shape)}")
    B, MB = block_table.shape
    cap = MB * block_size
    table = block_table.to(torch.int64).cpu()
    ctx = context_lens.to(torch.int64).cpu()
    bad = ((ctx < 1) | (ctx > cap)).nonzero()
    if bad.numel():
        b = bad[0, 0].item()
        raise ValueError(f"paged_attention_decode: context_lens[{b}] = {ctx[b].item()} outside 1 .. {cap} "
                         f"(max_blocks {MB} * block_size {block_size})")
    bad = ((table < -1) | (table >= num_blocks)).nonzero()
    if bad.numel():
        b, j = bad[0].tolist()
        raise ValueError(f"paged_attention_decode: block_table[{b}, {j}] = {table[b, j].item()} outside "
                         f"-1 .. {num_blocks - 1} (num_blocks {num_blocks})")
    live = torch.arange(MB).unsqueeze(0) < ((ctx + block_size - 1) // block_size).unsqueeze(1)   # [B, MB]
    bad = (live & (table < 0)).nonzero()
    if bad.numel():
        b, j = bad[0].tolist()
        raise ValueError(f"paged_attention_decode: block_table[{b}, {j}] = -1 inside the context of "
                         f"sequence {b} (context_lens {ctx[b].item()}, block_size {block_size})")
    written = table.gather(1, ((ctx - 1) // block_size).unsqueeze(1))                          # [B, 1]
    shared = live.unsqueeze(0) & (table.unsqueeze(0) == written.view(B, 1, 1))                 # [b, b2, MB]
    shared &= ~torch.eye(B, dtype=torch.bool).unsqueeze(-1)
    bad = shared.nonzero()
    if bad.numel():
        b, b2, j = bad[0].tolist()
        raise ValueError(f"paged_attention_decode: sequence {b} writes block {written[b, 0].item()}, which "
                         f"sequence {b2} also uses (block_table[{b2}, {j}]); a written block must not "
                         f"be shared")


def paged_attention_decode(q: torch.Tensor, k_new: torch.Tensor, v_new: torch.Tensor,
                           k_cache: torch.Tensor, v_cache: torch.Tensor, block_table: torch.Tensor,
                           context_lens: torch.Tensor, scale: float) -> torch.Tensor:
    """One decode step over a paged KV cache.

    First writes k_new[b] / v_new[b] at position ``context_lens[b] - 1`` of sequence b (block
    ``block_table[b, pos // block_size]``, offset ``pos % block_size``), in place; then attends
    q[b] over the first ``context_lens[b]`` positions. Shapes: q [B, Hq, D]; k_new, v_new
    [B, Hkv, D]; k_cache, v_cache [num_blocks, block_size, Hkv, D]; block_table [B, max_blocks]
    int32 (-1 = unused; never dereferenced); context_lens [B] int32 (INCLUDING the new token,
    1 <= context_lens[b] <= max_blocks * block_size) -> out [B, Hq, D] in q's dtype. Dtypes:
    float32 or bfloat16 (all alike); softmax in fp32. GQA: query head h uses kv head
    h // (Hq // Hkv). Route: the NKI kernel (LNC2, simulator) when ``can_run_kernel(q)`` and
    ``decode_fits`` (D <= 128, Hq % Hkv == 0, 128 % block_size == 0, SBUF working set
    <= 160 KiB per partition); else the fallback. The caches are declared mutated arguments of
    the kernel (``wrap_nki(..., mutates_args=("k_cache", "v_cache"))``), so the in-place write
    survives torch.compile.
    Decision: in eager mode (not while torch.compile traces) the metadata are validated before
    routing, so both routes refuse the same calls (``check_decode_metadata``). Raises:
    ValueError for context_lens outside 1 .. max_blocks * block_size, a block id outside
    -1 .. num_blocks - 1, a -1 entry inside a context, or a written block shared with another
    sequence's context (read-only prefix sharing of other blocks is allowed). Compiled graphs
    skip the check: there, invalid metadata give unspecified results.
    """
    if not torch.compiler.is_compiling() and k_cache.dim() == 4:
        check_decode_metadata(block_table, context_lens, k_cache.shape[0], k_cache.shape[1])
    if not decode_fits(q, k_new, v_new, k_cache, v_cache, block_table, context_lens):
        if not torch.compiler.is_compiling():
            routes.count(_decode.kernel_name, "fallback")
        return paged_attention_decode_fallback(q, k_new, v_new, k_cache, v_cache, block_table,
                                               context_lens, scale)
    return _decode_dispatch(q.contiguous(), k_new.contiguous(), v_new.contiguous(), k_cache, v_cache,
                            block_table.contiguous(), context_lens.contiguous(), float(scale))


__all__ = ["flash_attention", "flash_attention_kernel", "flash_attention_fallback", "flash_fits",
           "paged_attention_decode", "paged_attention_decode_kernel", "paged_attention_decode_fallback",
           "decode_fits", "check_decode_metadata", "MAX_D", "MAX_S", "MAX_DECODE_BYTES"]
