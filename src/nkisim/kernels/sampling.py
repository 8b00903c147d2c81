"""Greedy sampling (argmax over the vocabulary): the NKI kernel, its PyTorch fallback and the
functional op ``greedy_sample``.

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

CHUNK = 8192            # vocabulary elements searched per max8 (the ISA allows 8..16384)
MAX_V = 1 << 24         # indices travel as fp32, exact below 2**24
_SEARCH_MIN = 8         # max8 / nc_find_index8 need at least 8 elements per partition
_DTYPES = (torch.float32, torch.bfloat16)


@nki.jit
def greedy_sample_kernel(logits):
    """out[b] = the lowest v with logits[b, v] == max(logits[b, :]) (int32), like torch.argmax.

    logits [B, V] (fp32/bf16) in HBM; out [B] int32 in shared HBM. Rows on the partitions in
    tiles of pmax (last tile partial); under LNC2 each core takes a contiguous share of the rows.
    V is split into near-equal chunks of at most CHUNK; per chunk VectorE's ``max8`` gives the
    chunk maximum and ``nc_find_index8`` its first position. The chunk winners are combined with
    ``tensor_reduce`` max, a compare that adds 2**30 to every chunk below the global max, and
    ``tensor_reduce`` min over the (chunk start + position) indices: ties go to the lowest index.
    A chunk narrower than 8 is padded with -inf after its last element (found only after it).
    Decision: NaN logits are not supported — max8 ranks NaN below every number, torch.argmax
    returns the NaN's index.
    Raises ValueError, before any instruction, when the arguments' shapes disagree with the
    ones above (``contract.check_shapes``).
    """
    check_shapes("greedy_sample_kernel", logits=(logits, "B V"))
    B, V = logits.shape
    P = nl.tile_size.pmax
    out = nl.ndarray((B,), dtype=nl.int32, buffer=nl.shared_hbm)
    start, rows = core_share(B)
    n_chunks = -(-V // CHUNK)
    width = -(-V // n_chunks)                      # near-equal chunks: no tiny last chunk

    for i in nl.affine_range(-(-rows // P)):
        b0 = start + i * P
        n = min(P, start + rows - b0)
        best_val = nl.ndarray((P, n_chunks), dtype=nl.float32, buffer=nl.sbuf)
        best_idx = nl.ndarray((P, n_chunks), dtype=nl.float32, buffer=nl.sbuf)
        for c in nl.affine_range(n_chunks):
            v0 = c * width
            vn = min(width, V - v0)
            w = max(vn, _SEARCH_MIN)
            chunk = nl.ndarray((P, max(width, _SEARCH_MIN)), dtype=logits.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=chunk[0:n, 0:vn], src=logits[nl.ds(b0, n), nl.ds(v0, vn)])
            if vn < w:
                nisa.memset(dst=chunk[0:n, vn:w], value=float("-inf"))
            top8 = nl.ndarray((P, 8), dtype=nl.float32, buffer=nl.sbuf)
            pos8 = nl.ndarray((P, 8), dtype=nl.uint32, buffer=nl.sbuf)
            nisa.max8(dst=top8[0:n], src=chunk[0:n, 0:w])
            nisa.nc_find_index8(dst=pos8[0:n], data=chunk[0:n, 0:w], vals=top8[0:n])
            nisa.tensor_copy(dst=best_val[0:n, c:c + 1], src=top8[0:n, 0:1])
            nisa.tensor_scalar(dst=best_idx[0:n, c:c + 1], data=pos8[0:n, 0:1], op0=nl.add,
                               operand0=float(v0))

        # lowest index among the chunks that hold the global maximum
        gmax = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_reduce(dst=gmax[0:n], op=nl.maximum, data=best_val[0:n], axis=1)
        cand = nl.ndarray((P, n_chunks), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=cand[0:n], data=best_val[0:n], op0=nl.less, operand0=gmax[0:n],
                           op1=nl.multiply, operand1=float(1 << 30))
        nisa.tensor_tensor(dst=cand[0:n], data1=cand[0:n], data2=best_idx[0:n], op=nl.add)
        best = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_reduce(dst=best[0:n], op=nl.minimum, data=cand[0:n], axis=1)
        res = nl.ndarray((P, 1), dtype=nl.int32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=res[0:n], src=best[0:n])
        nisa.dma_copy(dst=out[nl.ds(b0, n)], src=res[0:n])
    return out


def greedy_sample_fallback(logits: torch.Tensor) -> torch.Tensor:
    """PyTorch greedy sampling: ``argmax`` over the last dim (fp32), int64."""
    return torch.argmax(logits.float(), dim=-1)


def _output_spec(logits):
    return (logits.shape[0],), torch.int32


_kernel = wrap_nki(greedy_sample_kernel, output_spec=_output_spec)[2]
_dispatch = routes.dispatch(_kernel, lambda logits: greedy_sample_fallback(logits).to(torch.int32))


def kernel_fits(logits: torch.Tensor) -> bool:
    """The kernel's limits: logits [B >= 1, 1 <= V <= MAX_V] float32 or bfloat16."""
    return (logits.dim() == 2 and logits.shape[0] >= 1 and 1 <= logits.shape[1] <= MAX_V
            and logits.dtype in _DTYPES)


def greedy_sample(logits: torch.Tensor) -> torch.Tensor:
    """The index of each row's largest logit; ties go to the lowest index (like torch.argmax).

    Shapes: logits [B, V] -> [B]. Dtypes: logits float32 or bfloat16; the result int64.
    Route: the NKI kernel (LNC2) when ``can_run_kernel(logits)`` and the kernel fits (V <= 2**24);
    else the fallback; counted under ``nkisim.kernels.sampling.greedy_sample_kernel``.
    Decision: NaN logits are unsupported (the two routes may disagree on them).
    Raises: ValueError when logits is not 2-D (both routes).
    """
    if logits.dim() != 2:
        raise ValueError(f"greedy_sample: logits must be [B, V], got shape {list(logits.shape)}")
    if not kernel_fits(logits):
        if not torch.compiler.is_compiling():
            routes.count(_kernel.kernel_name, "fallback")
        return greedy_sample_fallback(logits)
    return _dispatch(logits.contiguous()).to(torch.int64)


__all__ = ["greedy_sample", "greedy_sample_kernel", "greedy_sample_fallback", "kernel_fits", "CHUNK",
           "MAX_V"]
