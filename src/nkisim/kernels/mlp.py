"""SwiGLU MLP ``(silu(x @ w_gate) * (x @ w_up)) @ w_down``: the fused NKI kernel, its PyTorch
fallback and the functional op ``swiglu_mlp``.

Imports torch, nkisim.torch, the ``nkisim.nki`` faces and kernels.linear; never isa/checks internals.
"""
from __future__ import annotations

import torch

import nkisim.nki as nki
import nkisim.nki.isa as nisa
import nkisim.nki.language as nl

from .lnc import core_share
from .contract import check_shapes
from nkisim.torch import routes, wrap_nki

from .linear import chunked_matmul, load_transposed

MAX_H = 8192            # hidden size: x rows and x.T blocks stay in SBUF (<= 64 KiB/partition)
MAX_I = 16384           # intermediate size: h.T stays in SBUF (<= 64 KiB/partition)
PREFETCH_BYTES = 32768  # weight split: a core's w_down share is loaded before the exchange when it
                        # is one output tile and takes at most this many SBUF bytes per partition
_DTYPES = (torch.float32, torch.bfloat16)


@nki.jit
def swiglu_mlp_kernel(x, w_gate, w_up, w_down):
    """out[T, H] = (silu(x @ w_gate) * (x @ w_up)) @ w_down, fp32 PSUM accumulation.

    x [T, H], w_gate/w_up [H, I], w_down [I, H] in HBM, one dtype (fp32 or bf16); out [T, H] in
    x's dtype, shared HBM. Per tile of <= 128 tokens: x.T blocks in SBUF (``load_transposed``);
    gate and up are computed already transposed, [I tile, tokens] = w[:, I tile].T @ x.T, with the
    weight block (<= 128 x 128) stationary and x.T moving, accumulated over H in PSUM; ScalarE
    applies silu reading PSUM, VectorE multiplies by up, giving h.T tiles in SBUF — exactly the
    stationary operand of the down projection, which accumulates over I into [tokens, 512] PSUM
    tiles (``_gate_up_block`` and ``_down_tile``, shared by both splits below).
    Decision: h is rounded once into x's dtype before the down projection (TensorE pairs fp32
    only with fp32, so bf16 weights need a bf16 h); the fallback rounds h the same way.
    Decision (LNC2 split): with T > gemm_stationary_fmax (128) tokens, e.g. prefill, each core
    takes a contiguous share of the tokens (``core_share(T)``) and runs the whole MLP on it. With
    T <= 128 (all tokens fit one stationary tile, e.g. decode, T = 2) a token split would make
    each core load all of w_gate, w_up and w_down for a token or two: twice the weight traffic
    of the step, and decode is HBM-bound. There the cores split the weights instead:
    1. gate/up: each core computes h.T for its contiguous share of the 128-row I blocks
       (``core_share(ceil(I / 128))``), loading only those columns of w_gate / w_up;
    2. exchange: each core stores its h.T blocks into a shared-HBM scratch [128, ceil(I / 128),
       T] (laid out like the SBUF h.T tile, so each direction is one DMA, plus one for a partial
       last block: rows past I are never written nor read); both cores meet at
       ``nisa.core_barrier`` on the scratch, which orders every store before every load; then
       each core loads the other core's blocks into its h.T tile;
    3. down: each core computes its contiguous share of the output columns (``core_share(H)``),
       loading only those columns of w_down and accumulating over all I blocks in order. When
       that share is one output tile (<= 512 columns) taking <= PREFETCH_BYTES per partition,
       its w_down blocks are loaded before the barrier, one SBUF slice each: the loads need no
       h.T, and nothing of a core starts before the barrier releases it.
    So each weight element is read from HBM once per launch (was once per core), and each
    output element is the same arithmetic as under the token split: the same fp32 products
    summed per 128-row block, the blocks accumulated in PSUM in the same order (over H for
    gate/up, over I for down), h rounded once (the exchange copies h.T bit for bit). Only the
    instructions' shapes differ (all T tokens per gate/up matmul, a narrower column slice per
    down matmul); the simulator's ``nc_matmul`` sums one element's <= 128 products with
    np.matmul, whose order can depend on that shape, so fp32 results can differ from the token
    split's by an ulp, as the token split's own LNC1 and LNC2 launches already do (tests pin
    bit-identity with a shape-independent product).
    Under LNC1 (one core) the token split runs: it is the whole kernel, with no barrier.
    Raises ValueError, before any instruction, when the arguments' shapes disagree with the
    ones above (``contract.check_shapes``).
    """
    check_shapes("swiglu_mlp_kernel", x=(x, "T H"), w_gate=(w_gate, "H I"), w_up=(w_up, "H I"),
                 w_down=(w_down, "I H"))
    T, H = x.shape
    I = w_gate.shape[1]
    P = nl.tile_size.pmax
    TM = nl.tile_size.gemm_stationary_fmax
    TN = nl.tile_size.gemm_moving_fmax
    out = nl.ndarray((T, H), dtype=x.dtype, buffer=nl.shared_hbm)
    n_it = -(-I // P)

    if nl.num_programs(0) > 1 and T <= TM:
        # weight split: this core's I blocks of h.T, exchanged through shared HBM
        xT = load_transposed(x, 0, T, H, x.dtype)
        hT = nl.ndarray((P, n_it, T), dtype=x.dtype, buffer=nl.sbuf)   # [I block rows, block, token]
        b0, nb = core_share(n_it)
        for i in nl.affine_range(nb):
            _gate_up_block(xT, w_gate, w_up, hT, b0 + i, T)
        # this core's output columns: its w_down share, loaded now if it is small (nothing of a
        # core starts before the barrier's release, and these loads do not need it)
        c_start, cols = core_share(H)
        wd = None
        if 0 < cols <= TN and n_it * cols * w_down.itemsize <= PREFETCH_BYTES:
            wd = _load_down_blocks(w_down, c_start, cols)
        hT_hbm = nl.ndarray((P, n_it, T), dtype=x.dtype, buffer=nl.shared_hbm)
        _copy_blocks(hT_hbm, hT, b0, b0 + nb, I, T)
        nisa.core_barrier(hT_hbm, (0, 1))
        _copy_blocks(hT, hT_hbm, 0, b0, I, T)
        _copy_blocks(hT, hT_hbm, b0 + nb, n_it, I, T)
        # this core's output columns, accumulated over all I blocks
        for j in nl.affine_range(-(-cols // TN)):
            c0 = c_start + j * TN
            _down_tile(hT, w_down, out, 0, T, c0, min(TN, c_start + cols - c0), wd)
        return out

    start, rows = core_share(T)
    for tt in nl.affine_range(-(-rows // TM)):
        t0 = start + tt * TM
        tn = min(TM, start + rows - t0)
        xT = load_transposed(x, t0, tn, H, x.dtype)
        hT = nl.ndarray((P, n_it, TM), dtype=x.dtype, buffer=nl.sbuf)
        for i in nl.affine_range(n_it):
            _gate_up_block(xT, w_gate, w_up, hT, i, tn)
        for j in nl.affine_range(-(-H // TN)):
            _down_tile(hT, w_down, out, t0, tn, j * TN, min(TN, H - j * TN))
    return out


def _gate_up_block(xT, w_gate, w_up, hT, i, tn):
    """hT[:inn, i, :tn] = silu(gate.T) * up.T for the i-th 128-row block of I (inn rows): gate.T
    and up.T = w[:, block].T @ x.T accumulated over the H blocks in order in fp32 PSUM; silu on
    ScalarE reading PSUM, the product on VectorE, rounded once into hT's dtype."""
    P, TM = nl.tile_size.pmax, nl.tile_size.gemm_stationary_fmax
    H, I = w_gate.shape
    i0, inn = i * P, min(P, I - i * P)
    gate_psum = nl.ndarray((P, TM), dtype=nl.float32, buffer=nl.psum)
    up_psum = nl.ndarray((P, TM), dtype=nl.float32, buffer=nl.psum)
    for k in nl.affine_range(-(-H // P)):
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


def _down_tile(hT, w_down, out, t0, tn, c0, cn, wd_blocks=None):
    """out[t0:t0+tn, c0:c0+cn] = h @ w_down[:, c0:c0+cn] (cn <= 512): one [tokens, cn] PSUM tile
    accumulated over the I blocks in order (h.T blocks stationary, w_down tiles moving), rounded
    once into out's dtype and stored. ``wd_blocks``: these w_down columns already in SBUF
    (``_load_down_blocks``), else each block is loaded here."""
    P, TM, TN = nl.tile_size.pmax, nl.tile_size.gemm_stationary_fmax, nl.tile_size.gemm_moving_fmax
    I = w_down.shape[0]
    acc = nl.ndarray((TM, TN), dtype=nl.float32, buffer=nl.psum)
    for i in nl.affine_range(-(-I // P)):
        i0, inn = i * P, min(P, I - i * P)
        if wd_blocks is None:
            wd = nl.ndarray((P, TN), dtype=w_down.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=wd[0:inn, 0:cn], src=w_down[nl.ds(i0, inn), nl.ds(c0, cn)])
            moving = wd[0:inn, 0:cn]
        else:
            moving = wd_blocks[0:inn, i, 0:cn]
        nisa.nc_matmul(dst=acc[0:tn, 0:cn], stationary=hT[0:inn, i, 0:tn], moving=moving)
    res = nl.ndarray((TM, TN), dtype=out.dtype, buffer=nl.sbuf)
    nisa.tensor_copy(dst=res[0:tn, 0:cn], src=acc[0:tn, 0:cn])
    nisa.dma_copy(dst=out[nl.ds(t0, tn), nl.ds(c0, cn)], src=res[0:tn, 0:cn])


def _load_down_blocks(w_down, c0, cn):
    """w_down[:, c0:c0+cn] in SBUF as [128, I blocks, cn] (block i's rows on the partitions), one
    DMA per block into its own slice, so the loads need not wait for each other's readers."""
    P = nl.tile_size.pmax
    I = w_down.shape[0]
    n_it = -(-I // P)
    wd = nl.ndarray((P, n_it, cn), dtype=w_down.dtype, buffer=nl.sbuf)
    for i in nl.affine_range(n_it):
        i0, inn = i * P, min(P, I - i * P)
        nisa.dma_copy(dst=wd[0:inn, i, 0:cn], src=w_down[nl.ds(i0, inn), nl.ds(c0, cn)])
    return wd


def _copy_blocks(dst, src, b0, b1, I, T):
    """dst[:, b0:b1, :T] = src[:, b0:b1, :T] for h.T laid out [128, I blocks, tokens] (SBUF tile or
    shared-HBM scratch): the full 128-row blocks in one DMA, a partial last block (I % 128 rows)
    in another, so rows past I are never read."""
    P = nl.tile_size.pmax
    n_full = I // P
    if b0 < min(b1, n_full):
        nisa.dma_copy(dst=dst[0:P, b0:min(b1, n_full), 0:T], src=src[0:P, b0:min(b1, n_full), 0:T])
    if n_full < b1 and b0 <= n_full:
        nisa.dma_copy(dst=dst[0:I - n_full * P, n_full, 0:T], src=src[0:I - n_full * P, n_full, 0:T])


def swiglu_mlp_fallback(x: torch.Tensor, w_gate: torch.Tensor, w_up: torch.Tensor,
                        w_down: torch.Tensor) -> torch.Tensor:
    """PyTorch SwiGLU MLP: fp32 math summed per 128 rows of the contraction like the kernel's
    PSUM (``chunked_matmul``); h rounded into x's dtype like the kernel; cast back."""
    h = (torch.nn.functional.silu(chunked_matmul(x, w_gate)) * chunked_matmul(x, w_up)).to(x.dtype)
    return chunked_matmul(h, w_down).to(x.dtype)


def _output_spec(x, w_gate, w_up, w_down):
    return tuple(x.shape), x.dtype


_kernel = wrap_nki(swiglu_mlp_kernel, output_spec=_output_spec)[2]
_dispatch = routes.dispatch(_kernel, swiglu_mlp_fallback)


def kernel_fits(x, w_gate, w_up, w_down) -> bool:
    """The kernel's limits: x [T >= 1, H], w_gate/w_up [H, I], w_down [I, H], one dtype (fp32 or
    bf16), H <= MAX_H, I <= MAX_I."""
    if any(t.dim() != 2 for t in (x, w_gate, w_up, w_down)):
        return False
    T, H = x.shape
    I = w_gate.shape[1]
    return (T >= 1 and 1 <= H <= MAX_H and 1 <= I <= MAX_I and tuple(w_gate.shape) == (H, I)
            and tuple(w_up.shape) == (H, I) and tuple(w_down.shape) == (I, H)
            and x.dtype in _DTYPES and all(w.dtype == x.dtype for w in (w_gate, w_up, w_down)))


def swiglu_mlp(x: torch.Tensor, w_gate: torch.Tensor, w_up: torch.Tensor,
               w_down: torch.Tensor) -> torch.Tensor:
    """Llama's MLP: ``(silu(x @ w_gate) * (x @ w_up)) @ w_down``.

    Shapes: x [T, H], w_gate [H, I], w_up [H, I], w_down [I, H] -> [T, H]. Dtypes: float32 or
    bfloat16, all the same (output in x's dtype); matmuls accumulate in fp32; h = silu(g) * u is
    rounded once into x's dtype (Decision, see the kernel), the output once more.
    Route: the fused NKI kernel (LNC2) when ``can_run_kernel(x)`` and the kernel fits (H <= 8192,
    I <= 16384, one dtype); else the fallback; counted under ``nkisim.kernels.mlp.swiglu_mlp_kernel``.
    """
    if not kernel_fits(x, w_gate, w_up, w_down):
        if not torch.compiler.is_compiling():
            routes.count(_kernel.kernel_name, "fallback")
        return swiglu_mlp_fallback(x, w_gate, w_up, w_down)
    return _dispatch(x.contiguous(), w_gate.contiguous(), w_up.contiguous(), w_down.contiguous())


__all__ = ["swiglu_mlp", "swiglu_mlp_kernel", "swiglu_mlp_fallback", "kernel_fits", "MAX_H", "MAX_I"]
