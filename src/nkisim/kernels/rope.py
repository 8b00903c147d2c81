"""Rotary position embedding (rotate-half, Llama/NeoX): the NKI kernel, its PyTorch fallback and
the functional op ``rope``.

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

MAX_ROW = 8192          # n_heads * D elements per token the kernel accepts (SBUF per partition)
_DTYPES = (torch.float32, torch.bfloat16)
_CS_DTYPES = (torch.float32, torch.bfloat16, torch.float16)   # NKI float dtypes the DMA reads


@nki.jit
def rope_kernel(x, cos, sin):
    """out = cat(x1 * cos - x2 * sin, x2 * cos + x1 * sin) over the last dim, x1/x2 its halves.

    x [T, n_heads, D] (fp32/bf16), cos/sin [T, D // 2] (any float, read as fp32) in HBM; out
    [T, n_heads, D] in x's dtype, shared HBM. Tokens on the partitions in tiles of pmax (last tile
    partial), all heads of a token in its partition's free dims; under LNC2 each core takes a
    contiguous share of the tokens. cos/sin arrive already broadcast over the heads: the DMA reads
    them with a head step of 0. Each product is an fp32 VectorE ``tensor_tensor``; the final
    subtract/add rounds once into x's dtype.
    Raises ValueError, before any instruction, when the arguments' shapes disagree with the
    ones above (``contract.check_shapes``).
    """
    check_shapes("rope_kernel", x=(x, "T n_heads D"))
    T, NH, D = x.shape
    check_shapes("rope_kernel", cos=(cos, (T, D // 2)), sin=(sin, (T, D // 2)))
    half = D // 2
    P = nl.tile_size.pmax
    out = nl.ndarray((T, NH, D), dtype=x.dtype, buffer=nl.shared_hbm)
    start, rows = core_share(T)

    for i in nl.affine_range(-(-rows // P)):
        r0 = start + i * P
        n = min(P, start + rows - r0)
        x_sb = nl.ndarray((P, NH, D), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=x_sb[0:n], src=x[nl.ds(r0, n)])
        cos_sb = nl.ndarray((P, NH, half), dtype=nl.float32, buffer=nl.sbuf)
        sin_sb = nl.ndarray((P, NH, half), dtype=nl.float32, buffer=nl.sbuf)
        bcast = [[half, n], [0, NH], [1, half]]          # same cos row for every head
        nisa.dma_copy(dst=cos_sb[0:n], src=cos.ap(pattern=bcast, offset=r0 * half))
        nisa.dma_copy(dst=sin_sb[0:n], src=sin.ap(pattern=bcast, offset=r0 * half))

        x1, x2 = x_sb[0:n, :, 0:half], x_sb[0:n, :, half:D]
        a = nl.ndarray((P, NH, half), dtype=nl.float32, buffer=nl.sbuf)
        b = nl.ndarray((P, NH, half), dtype=nl.float32, buffer=nl.sbuf)
        out_sb = nl.ndarray((P, NH, D), dtype=x.dtype, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=a[0:n], data1=x1, data2=cos_sb[0:n], op=nl.multiply)
        nisa.tensor_tensor(dst=b[0:n], data1=x2, data2=sin_sb[0:n], op=nl.multiply)
        nisa.tensor_tensor(dst=out_sb[0:n, :, 0:half], data1=a[0:n], data2=b[0:n], op=nl.subtract)
        nisa.tensor_tensor(dst=a[0:n], data1=x2, data2=cos_sb[0:n], op=nl.multiply)
        nisa.tensor_tensor(dst=b[0:n], data1=x1, data2=sin_sb[0:n], op=nl.multiply)
        nisa.tensor_tensor(dst=out_sb[0:n, :, half:D], data1=a[0:n], data2=b[0:n], op=nl.add)
        nisa.dma_copy(dst=out[nl.ds(r0, n)], src=out_sb[0:n])
    return out


def rope_fallback(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """PyTorch rotate-half RoPE: fp32 math, cast back to x's dtype."""
    half = x.shape[-1] // 2
    xf = x.float()
    x1, x2 = xf[..., :half], xf[..., half:]
    c, s = cos.float().unsqueeze(1), sin.float().unsqueeze(1)
    return torch.cat((x1 * c - x2 * s, x2 * c + x1 * s), dim=-1).to(x.dtype)


def _output_spec(x, cos, sin):
    return tuple(x.shape), x.dtype


_kernel = wrap_nki(rope_kernel, output_spec=_output_spec)[2]
_dispatch = routes.dispatch(_kernel, rope_fallback)


def kernel_fits(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> bool:
    """The kernel's limits: x [T >= 1, n_heads, D] fp32/bf16 with D even and n_heads * D <=
    MAX_ROW; cos and sin [T, D // 2] fp32/bf16/fp16 (float64 is no NKI dtype)."""
    if x.dim() != 3 or cos.dim() != 2 or sin.dim() != 2 or x.dtype not in _DTYPES:
        return False
    T, nh, d = x.shape
    return (T >= 1 and d >= 2 and d % 2 == 0 and 1 <= nh * d <= MAX_ROW
            and tuple(cos.shape) == (T, d // 2) and tuple(sin.shape) == (T, d // 2)
            and cos.dtype in _CS_DTYPES and sin.dtype in _CS_DTYPES)


def rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotary embedding, rotate-half convention: with x1 = x[..., :D/2], x2 = x[..., D/2:],
    ``out = cat(x1 * cos - x2 * sin, x2 * cos + x1 * sin)``, cos/sin broadcast over the heads.

    Shapes: x [T, n_heads, D], cos/sin [T, D // 2] -> [T, n_heads, D]. Dtypes: x float32 or
    bfloat16 (the output's dtype), cos/sin float32; math in fp32, rounded once into x's dtype.
    Route: the NKI kernel (LNC2) when ``can_run_kernel(x)`` and the kernel fits (D even,
    n_heads * D <= MAX_ROW = 8192); else the fallback; counted under
    ``nkisim.kernels.rope.rope_kernel``.
    Raises: ValueError when x is not [T, n_heads, D] with D even or cos/sin are not [T, D // 2].
    """
    if x.dim() != 3 or x.shape[-1] % 2:
        raise ValueError(f"rope: x must be [T, n_heads, D] with D even, got {tuple(x.shape)}")
    want = (x.shape[0], x.shape[-1] // 2)
    if tuple(cos.shape) != want or tuple(sin.shape) != want:
        raise ValueError(f"rope: cos and sin must be {list(want)}, got {list(cos.shape)} and "
                         f"{list(sin.shape)}")
    if not kernel_fits(x, cos, sin):
        if not torch.compiler.is_compiling():
            routes.count(_kernel.kernel_name, "fallback")
        return rope_fallback(x, cos, sin)
    return _dispatch(x.contiguous(), cos.contiguous(), sin.contiguous())


__all__ = ["rope", "rope_kernel", "rope_fallback", "kernel_fits", "MAX_ROW"]
