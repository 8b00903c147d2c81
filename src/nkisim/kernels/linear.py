"""Dense projection ``x @ weight``: the NKI kernel, its PyTorch fallback, the functional op
``linear`` and ``qkv_proj`` built on it (QKV, output projection and LM head all call ``linear``).

Imports torch, nkisim.torch and the ``nkisim.nki`` faces; never isa/checks internals.
"""
from __future__ import annotations

import torch

import nkisim.nki as nki
import nkisim.nki.isa as nisa
import nkisim.nki.language as nl

from .lnc import core_share
from .contract import check_shapes
from nkisim.torch import routes, wrap_nki

MAX_K = 16384           # contraction size: x rows and x.T blocks stay in SBUF (<= 128 KiB/partition)
_DTYPES = (torch.float32, torch.bfloat16)


def load_transposed(x, t0, tn, K, x_dtype):
    """x[t0:t0+tn, :K] as x.T blocks in SBUF: a (pmax, ceil(K / pmax), gemm_stationary_fmax) tile
    whose [:kn, k, :tn] is x[t0:t0+tn, k*pmax : k*pmax+kn].T, ready to be a matmul stationary.

    Decision: rows are read with one contiguous DMA (tokens on the partitions) and each <= 128 x 128
    block is transposed on TensorE (``nc_transpose`` into PSUM, ``tensor_copy`` back), which works
    for fp32 and bf16 alike; ``dma_transpose`` is 2-byte only and an element-strided transposing
    DMA is the slowest way to move data on hardware.
    """
    P, TM = nl.tile_size.pmax, nl.tile_size.gemm_stationary_fmax
    n_kt = -(-K // P)
    x_sb = nl.ndarray((TM, K), dtype=x_dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=x_sb[0:tn, :], src=x[nl.ds(t0, tn), 0:K])
    xT = nl.ndarray((P, n_kt, TM), dtype=x_dtype, buffer=nl.sbuf)
    for k in nl.affine_range(n_kt):
        kn = min(P, K - k * P)
        xT_psum = nl.ndarray((P, TM), dtype=x_dtype, buffer=nl.psum)
        nisa.nc_transpose(dst=xT_psum[0:kn, 0:tn], data=x_sb[0:tn, nl.ds(k * P, kn)])
        nisa.tensor_copy(dst=xT[0:kn, k, 0:tn], src=xT_psum[0:kn, 0:tn])
    return xT


@nki.jit
def linear_kernel(x, weight):
    """out[T, N] = x[T, K] @ weight[K, N], accumulated in fp32 PSUM, rounded once into x's dtype.

    x and weight in HBM with the same dtype (fp32 or bf16: TensorE pairs fp32 only with fp32);
    out in shared HBM. Per tile of <= 128 tokens: x.T blocks (see ``load_transposed``) are the
    stationary operand (<= 128 x 128), weight tiles (<= 128 x 512) the moving one; each
    [tokens, 512] output tile accumulates over the K tiles in one PSUM bank, then ``tensor_copy``
    evacuates it. Partial last tiles in T, K and N are sliced, never padded. Under LNC2 each core
    computes a contiguous half of the output columns (all tokens), which also helps decode (T = 1).
    Raises ValueError, before any instruction, when the arguments' shapes disagree with the
    ones above (``contract.check_shapes``).
    """
    check_shapes("linear_kernel", x=(x, "T K"), weight=(weight, "K N"))
    T, K = x.shape
    N = weight.shape[1]
    P = nl.tile_size.pmax
    TM = nl.tile_size.gemm_stationary_fmax
    TN = nl.tile_size.gemm_moving_fmax
    out = nl.ndarray((T, N), dtype=x.dtype, buffer=nl.shared_hbm)
    c_start, cols = core_share(N)
    n_kt = -(-K // P)

    for tt in nl.affine_range(-(-T // TM) if cols else 0):
        t0 = tt * TM
        tn = min(TM, T - t0)
        xT = load_transposed(x, t0, tn, K, x.dtype)
        for j in nl.affine_range(-(-cols // TN)):
            c0 = c_start + j * TN
            cn = min(TN, c_start + cols - c0)
            acc = nl.ndarray((TM, TN), dtype=nl.float32, buffer=nl.psum)
            for k in nl.affine_range(n_kt):
                kn = min(P, K - k * P)
                w_sb = nl.ndarray((P, TN), dtype=weight.dtype, buffer=nl.sbuf)
                nisa.dma_copy(dst=w_sb[0:kn, 0:cn], src=weight[nl.ds(k * P, kn), nl.ds(c0, cn)])
                nisa.nc_matmul(dst=acc[0:tn, 0:cn], stationary=xT[0:kn, k, 0:tn],
                               moving=w_sb[0:kn, 0:cn])
            res = nl.ndarray((TM, TN), dtype=x.dtype, buffer=nl.sbuf)
            nisa.tensor_copy(dst=res[0:tn, 0:cn], src=acc[0:tn, 0:cn])
            nisa.dma_copy(dst=out[nl.ds(t0, tn), nl.ds(c0, cn)], src=res[0:tn, 0:cn])
    return out


def chunked_matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """fp32 ``a @ b`` summed like the kernels' PSUM: one matmul per pmax (128) rows of the
    contraction dim, the partial products added in order in fp32. Matches the simulator's
    accumulation order, so bf16 results round the same way (plain BLAS over all of K reorders the
    sum and flips a bf16 rounding now and then)."""
    a, b = a.float(), b.float()
    K, step = a.shape[-1], nl.tile_size.pmax
    acc = a[..., 0:step] @ b[0:step]
    for k0 in range(step, K, step):
        acc = acc + a[..., k0:k0 + step] @ b[k0:k0 + step]
    return acc


def linear_fallback(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """PyTorch ``x @ weight``: fp32 math summed per 128 rows of K like the kernel's PSUM
    (``chunked_matmul``), cast back to x's dtype."""
    return chunked_matmul(x, weight).to(x.dtype)


def _output_spec(x, weight):
    return (x.shape[0], weight.shape[1]), x.dtype


_kernel = wrap_nki(linear_kernel, output_spec=_output_spec)[2]
_dispatch = routes.dispatch(_kernel, linear_fallback)


def kernel_fits(x: torch.Tensor, weight: torch.Tensor) -> bool:
    """The kernel's limits: x [T >= 1, K] and weight [K, N >= 1], same dtype (fp32 or bf16),
    1 <= K <= MAX_K."""
    return (x.dim() == 2 and weight.dim() == 2 and x.shape[0] >= 1 and 1 <= x.shape[1] <= MAX_K
            and weight.shape[0] == x.shape[1] and weight.shape[1] >= 1
            and x.dtype in _DTYPES and weight.dtype == x.dtype)


def linear(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """``x @ weight`` (weight stored [in, out], not nn.Linear's [out, in]).

    Shapes: x [T, K], weight [K, N] -> [T, N]. Dtypes: float32 or bfloat16 (the output has x's
    dtype); products summed in fp32, rounded once. Used with the fused QKV weight [H,
    (Hq + 2 Hkv) D], the output projection [Hq D, H] and the LM head [H, V].
    Route: the NKI kernel (LNC2) when ``can_run_kernel(x)`` and the kernel fits (same dtypes,
    K <= MAX_K = 16384); else the fallback; counted under ``nkisim.kernels.linear.linear_kernel``.
    """
    if not kernel_fits(x, weight):
        if not torch.compiler.is_compiling():
            routes.count(_kernel.kernel_name, "fallback")
        return linear_fallback(x, weight)
    return _dispatch(x.contiguous(), weight.contiguous())


def qkv_proj(x: torch.Tensor, w_qkv: torch.Tensor, n_q_heads: int, n_kv_heads: int, head_dim: int):
    """The fused QKV projection: ``linear(x, w_qkv)`` split into heads.

    Shapes: x [T, H], w_qkv [H, (n_q_heads + 2 n_kv_heads) * head_dim] with the columns ordered
    q heads, k heads, v heads -> (q [T, Hq, D], k [T, Hkv, D], v [T, Hkv, D]), views of one
    [T, (Hq + 2 Hkv) D] result. Dtypes and route as ``linear`` (counted as linear_kernel).
    Raises: ValueError when w_qkv's width is not (Hq + 2 Hkv) * D.
    """
    hq, hkv, d = int(n_q_heads), int(n_kv_heads), int(head_dim)
    width = (hq + 2 * hkv) * d
    if w_qkv.dim() != 2 or w_qkv.shape[1] != width:
        raise ValueError(f"qkv_proj: w_qkv shape {tuple(w_qkv.shape)} must be [H, {width}] for "
                         f"{hq} q heads, {hkv} kv heads of size {d}")
    y = linear(x, w_qkv)
    T = y.shape[0]
    q = y[:, :hq * d].reshape(T, hq, d)
    k = y[:, hq * d:(hq + hkv) * d].reshape(T, hkv, d)
    v = y[:, (hq + hkv) * d:].reshape(T, hkv, d)
    return q, k, v


__all__ = ["linear", "qkv_proj", "linear_kernel", "linear_fallback", "load_transposed", "chunked_matmul", "kernel_fits",
           "MAX_K"]
