"""RMSNorm: the NKI kernel, its PyTorch fallback and the functional op ``rms_norm`` that picks one.

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

MAX_H = 8192            # hidden size the kernel accepts (x, out and gamma tiles: <= 40 KiB/partition)
_DTYPES = (torch.float32, torch.bfloat16)
_W_DTYPES = (torch.float32, torch.bfloat16, torch.float16)   # NKI float dtypes the DMA reads


@nki.jit
def rms_norm_kernel(x, weight, eps):
    """out[t, :] = x[t, :] / sqrt(mean(x[t, :]**2) + eps) * weight, fp32 math, x's dtype out.

    x [T, H] and weight [H] in HBM; out [T, H] in shared HBM. Tokens go on the partitions in
    tiles of pmax (the last tile partial); under LNC2 each core takes a contiguous half of the
    tokens (``nl.program_id(0)`` of ``nl.num_programs(0)``), so even T = 7 is split 4 + 3.
    ScalarE squares while summing in fp32 (``reduce_res``), then forms rsqrt(sum / H + eps) in
    one ``activation``; VectorE multiplies by rstd and gamma in one ``scalar_tensor_tensor``.
    Raises ValueError, before any instruction, when the arguments' shapes disagree with the
    ones above (``contract.check_shapes``).
    """
    check_shapes("rms_norm_kernel", x=(x, "T H"), weight=(weight, "H"))
    T, H = x.shape
    P = nl.tile_size.pmax
    out = nl.ndarray((T, H), dtype=x.dtype, buffer=nl.shared_hbm)
    start, rows = core_share(T)

    # gamma on every partition (a DMA whose partition step is 0), eps as a bias column
    gamma = nl.ndarray((P, H), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=gamma, src=weight.ap(pattern=[[0, P], [1, H]], offset=0))
    eps_col = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=eps_col, value=eps)

    for i in nl.affine_range(-(-rows // P)):
        r0 = start + i * P
        n = min(P, start + rows - r0)
        x_sb = nl.ndarray((P, H), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=x_sb[0:n, :], src=x[nl.ds(r0, n), :])

        # sum of squares in fp32; the squares themselves go to out_sb and are overwritten below
        out_sb = nl.ndarray((P, H), dtype=x.dtype, buffer=nl.sbuf)
        sum_sq = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation(dst=out_sb[0:n, :], op=nl.square, data=x_sb[0:n, :], reduce_op=nl.add,
                        reduce_res=sum_sq[0:n, :], reduce_cmd=nisa.reduce_cmd.reset_reduce)
        rstd = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation(dst=rstd[0:n, :], op=nl.rsqrt, data=sum_sq[0:n, :], scale=1.0 / H,
                        bias=eps_col[0:n, :])

        # out = (x * rstd) * gamma, rounded once into x's dtype
        nisa.scalar_tensor_tensor(dst=out_sb[0:n, :], data=x_sb[0:n, :], op0=nl.multiply,
                                  operand0=rstd[0:n, :], op1=nl.multiply, operand1=gamma[0:n, :])
        nisa.dma_copy(dst=out[nl.ds(r0, n), :], src=out_sb[0:n, :])
    return out


def rms_norm_fallback(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """PyTorch RMSNorm: fp32 math, cast back to x's dtype."""
    xf = x.float()
    rstd = torch.rsqrt(xf.pow(2).mean(dim=-1, keepdim=True) + eps)
    return (xf * rstd * weight.float()).to(x.dtype)


def _output_spec(x, weight, eps):
    return tuple(x.shape), x.dtype


_kernel = wrap_nki(rms_norm_kernel, output_spec=_output_spec)[2]
_dispatch = routes.dispatch(_kernel, rms_norm_fallback)


def kernel_fits(x: torch.Tensor, weight: torch.Tensor) -> bool:
    """The kernel's own limits: x [T, H] with 1 <= H <= MAX_H, T >= 1, fp32/bf16; weight [H]
    fp32/bf16/fp16 (float64 is no NKI dtype: the fallback takes it)."""
    return (x.dim() == 2 and weight.dim() == 1 and x.shape[0] >= 1 and 1 <= x.shape[1] <= MAX_H
            and weight.shape[0] == x.shape[1] and x.dtype in _DTYPES and weight.dtype in _W_DTYPES)


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """RMSNorm over the last dim: ``x / sqrt(mean(x**2, -1) + eps) * weight``.

    Shapes: x [T, H], weight [H] -> [T, H]. Dtypes: x float32 or bfloat16 (the output's dtype),
    weight any float dtype (float64 goes to the fallback); math in fp32, rounded once into x's dtype.
    Route: the NKI kernel (LNC2, simulator) when ``can_run_kernel(x)`` and the kernel fits
    (T >= 1, H <= MAX_H = 8192, x fp32/bf16); otherwise the PyTorch fallback. Both counted in
    ``nkisim.torch.route_stats()`` under ``nkisim.kernels.norm.rms_norm_kernel``.
    """
    if not kernel_fits(x, weight):
        if not torch.compiler.is_compiling():
            routes.count(_kernel.kernel_name, "fallback")
        return rms_norm_fallback(x, weight, eps)
    return _dispatch(x.contiguous(), weight.contiguous(), float(eps))


__all__ = ["rms_norm", "rms_norm_kernel", "rms_norm_fallback", "kernel_fits", "MAX_H"]
