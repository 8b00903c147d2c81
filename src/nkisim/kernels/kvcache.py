"""Paged KV cache writes: the NKI kernel, its PyTorch fallback and the functional op
``write_kv_cache`` that scatters prompt K/V into the cache through ``slot_mapping``.

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

MAX_ROW_BYTES = 64 * 1024     # one token's Hkv * D elements per SBUF partition
_DTYPES = (torch.float32, torch.bfloat16)


@nki.jit
def write_kv_cache_kernel(k, v, k_cache, v_cache, slot_mapping):
    """k_cache[slot // bs, slot % bs] = k[t] and likewise for v, for every token t with a slot
    inside the cache; tokens whose slot is -1 (or any slot outside 0 .. NB*bs-1) are skipped.

    k, v [T, Hkv, D]; caches [NB, bs, Hkv, D] (written in place; nothing returned);
    slot_mapping [T] int32. Tokens go on the partitions in tiles of pmax; each tile is one row
    scatter per cache: ``cache.reshape((NB*bs, Hkv*D)).ap(..., vector_offset=slots)`` with
    ``oob_mode=skip``, so a -1 slot is never dereferenced. Under LNC2 each core scatters a
    contiguous half of the tokens.
    Raises ValueError, before any instruction, when the arguments' shapes disagree with the
    ones above (``contract.check_shapes``).
    """
    check_shapes("write_kv_cache_kernel", k=(k, "T Hkv D"), v=(v, "T Hkv D"), k_cache=(k_cache, "NB bs Hkv D"),
                 v_cache=(v_cache, "NB bs Hkv D"), slot_mapping=(slot_mapping, "T"))
    T, Hkv, D = k.shape
    NB, bs = k_cache.shape[0], k_cache.shape[1]
    HD = Hkv * D
    P = nl.tile_size.pmax
    start, rows = core_share(T)
    caches = ((k, k_cache.reshape((NB * bs, HD))), (v, v_cache.reshape((NB * bs, HD))))
    for i in nl.affine_range(-(-rows // P)):
        t0 = start + i * P
        n = min(P, start + rows - t0)
        slots = nl.ndarray((P, 1), dtype=nl.int32, buffer=nl.sbuf)
        nisa.dma_copy(dst=slots[0:n, :], src=slot_mapping.ap([[1, n], [1, 1]], offset=t0))
        for src, flat in caches:
            rows_sb = nl.ndarray((P, HD), dtype=flat.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=rows_sb[0:n, :], src=src[nl.ds(t0, n)])
            nisa.dma_copy(dst=flat.ap([[HD, n], [1, HD]], offset=0, vector_offset=slots[0:n, :],
                                      indirect_dim=0),
                          src=rows_sb[0:n, :], oob_mode=nisa.oob_mode.skip)


def scatter_rows(cache: torch.Tensor, rows: torch.Tensor, slots: torch.Tensor) -> None:
    """cache.view(NB*bs, ...)[slot] = rows[t] for slots inside the cache; others skipped, in place.

    Static shapes (torch.compile friendly): a skipped token is redirected to the first valid
    token's slot with that token's values (or to slot 0 with slot 0's own values when none is
    valid), so duplicate indices always carry identical values and ``index_copy_`` stays
    deterministic.
    """
    flat = cache.view(cache.shape[0] * cache.shape[1], *cache.shape[2:])
    n = flat.shape[0]
    slots = slots.to(torch.int64)
    valid = (slots >= 0) & (slots < n)
    first = torch.argmax(valid.to(torch.int32))
    any_valid = valid.any()
    fill_slot = torch.where(any_valid, slots[first], torch.zeros_like(slots[first]))
    idx = torch.where(valid, slots, fill_slot)
    rows = rows.to(cache.dtype)
    fill_row = torch.where(any_valid, rows[first], flat[0])
    vals = torch.where(valid.view(-1, *([1] * (rows.dim() - 1))), rows, fill_row)
    flat.index_copy_(0, idx, vals)


def write_kv_cache_fallback(k, v, k_cache, v_cache, slot_mapping) -> None:
    """PyTorch KV-cache write (in place): token t goes to slot slot_mapping[t]; -1 is skipped."""
    scatter_rows(k_cache, k, slot_mapping)
    scatter_rows(v_cache, v, slot_mapping)


def _output_spec(k, v, k_cache, v_cache, slot_mapping):
    return None


_kernel = wrap_nki(write_kv_cache_kernel, output_spec=_output_spec,
                   mutates_args=("k_cache", "v_cache"))[2]
_dispatch = routes.dispatch(_kernel, write_kv_cache_fallback)


def kernel_fits(k, v, k_cache, v_cache, slot_mapping) -> bool:
    """The kernel's own limits: k, v [T, Hkv, D] and contiguous caches [NB, bs, Hkv, D] of one
    dtype (fp32/bf16), slot_mapping [T] int32, one token's Hkv*D row <= MAX_ROW_BYTES."""
    return (k.dim() == 3 and k_cache.dim() == 4 and v.shape == k.shape and k.shape[0] >= 1
            and v_cache.shape == k_cache.shape and tuple(k_cache.shape[2:]) == tuple(k.shape[1:])
            and k.dtype in _DTYPES and {v.dtype, k_cache.dtype, v_cache.dtype} == {k.dtype}
            and k_cache.is_contiguous() and v_cache.is_contiguous()
            and slot_mapping.dtype == torch.int32 and tuple(slot_mapping.shape) == (k.shape[0],)
            and k.shape[1] * k.shape[2] * k.element_size() <= MAX_ROW_BYTES)


def check_slot_mapping(slot_mapping: torch.Tensor, num_slots: int) -> None:
    """Raise ValueError naming the first problem of ``slot_mapping``: a slot outside
    -1 .. num_slots - 1, or a slot (other than -1) given to two tokens. Host-side."""
    if slot_mapping.dim() != 1:
        raise ValueError(f"write_kv_cache: slot_mapping must be [T], got {list(slot_mapping.shape)}")
    s = slot_mapping.to(torch.int64).cpu()
    bad = ((s < -1) | (s >= num_slots)).nonzero()
    if bad.numel():
        t = bad[0, 0].item()
        raise ValueError(f"write_kv_cache: slot_mapping[{t}] = {s[t].item()} outside -1 .. {num_slots - 1} "
                         f"(num_blocks * block_size = {num_slots})")
    used = s[s >= 0]
    uniq, counts = used.unique(return_counts=True)
    if (counts > 1).any():
        slot = uniq[counts > 1][0].item()
        t = (s == slot).nonzero()[:, 0].tolist()
        raise ValueError(f"write_kv_cache: slot {slot} is written by tokens {t[0]} and {t[1]}; slots must "
                         f"be distinct")


def write_kv_cache(k: torch.Tensor, v: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                   slot_mapping: torch.Tensor) -> None:
    """Scatter prompt K/V into the paged cache, in place: token t goes to block
    ``slot_mapping[t] // block_size``, offset ``slot_mapping[t] % block_size``.

    Shapes: k, v [T, Hkv, D]; k_cache, v_cache [num_blocks, block_size, Hkv, D]; slot_mapping [T]
    int32. Dtypes: float32 or bfloat16 (k, v and the caches alike). Slot -1 (padding) is skipped.
    Decision: in eager mode (not while torch.compile traces) slot_mapping is validated before
    routing (``check_slot_mapping``), both routes alike: ValueError for a slot outside
    -1 .. num_blocks*block_size - 1 or a slot given to two tokens. Compiled graphs skip the check;
    there an out-of-range slot is skipped by both routes (the kernel's oob_mode=skip) and for
    duplicate slots it is unspecified which token wins.
    Route: the NKI kernel (LNC2, simulator) when ``can_run_kernel(k)`` and ``kernel_fits`` (same
    dtype everywhere, contiguous caches, Hkv*D row <= 64 KiB); else the fallback. Returns None;
    the caches are declared as mutated arguments of the kernel, so compiled graphs keep the write.
    """
    if not torch.compiler.is_compiling() and k_cache.dim() == 4:
        check_slot_mapping(slot_mapping, k_cache.shape[0] * k_cache.shape[1])
    if not kernel_fits(k, v, k_cache, v_cache, slot_mapping):
        if not torch.compiler.is_compiling():
            routes.count(_kernel.kernel_name, "fallback")
        write_kv_cache_fallback(k, v, k_cache, v_cache, slot_mapping)
        return None
    _dispatch(k.contiguous(), v.contiguous(), k_cache, v_cache, slot_mapping.contiguous())
    return None


__all__ = ["write_kv_cache", "write_kv_cache_kernel", "write_kv_cache_fallback", "scatter_rows", "check_slot_mapping",
           "kernel_fits", "MAX_ROW_BYTES"]
