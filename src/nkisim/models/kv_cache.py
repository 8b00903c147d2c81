"""The paged KV cache of the tiny Llama: per-layer K and V block pools, one block table per
sequence, and the host-side block allocator (which hands out blocks with gaps on purpose).

Imports torch only; the kernels read and write the pools through ``nkisim.kernels``.
"""
from __future__ import annotations

import torch


def allocation_order(num_blocks: int) -> list[int]:
    """The order free blocks are handed out: odd ids from the top, then even ids from the top.

    Decision: consecutive allocations are never adjacent blocks and block 0 comes last, so every
    block table the model builds is physically scattered (a kernel that assumed contiguous blocks
    would read the wrong rows), e.g. 8 blocks -> [7, 5, 3, 1, 6, 4, 2, 0].
    """
    top = num_blocks - 1
    return list(range(top, -1, -2)) + list(range(top - 1, -1, -2))


class PagedKVCache:
    """K and V pools ``[num_blocks, block_size, n_kv_heads, head_dim]`` per layer, and an int32
    block table ``[batch, max_blocks]`` (-1 for unused entries) padded to a fixed width, so a
    decode step always has the same shapes.

    Sequence b's position p lives in block ``block_table[b, p // block_size]`` at offset
    ``p % block_size``; its slot is ``block * block_size + offset``. Blocks are allocated on
    demand (``reserve``) from ``allocation_order``; sequences draw from one shared free list, so
    their blocks interleave. Raises: RuntimeError when the pool or a block table row is full.
    """

    def __init__(self, *, n_layers: int, num_blocks: int, block_size: int, n_kv_heads: int,
                 head_dim: int, batch: int, max_blocks: int, dtype: torch.dtype):
        shape = (num_blocks, block_size, n_kv_heads, head_dim)
        self.k = [torch.zeros(shape, dtype=dtype) for _ in range(n_layers)]
        self.v = [torch.zeros(shape, dtype=dtype) for _ in range(n_layers)]
        self.block_size = block_size
        self.max_blocks = max_blocks
        self.block_table = torch.full((batch, max_blocks), -1, dtype=torch.int32)
        self._free = allocation_order(num_blocks)
        self._owned = [[] for _ in range(batch)]

    @property
    def batch(self) -> int:
        return self.block_table.shape[0]

    @property
    def capacity(self) -> int:
        """Tokens one sequence can hold (the block table's width times the block size)."""
        return self.max_blocks * self.block_size

    def blocks_of(self, b: int) -> list[int]:
        """Sequence b's blocks, in position order."""
        return list(self._owned[b])

    def reserve(self, b: int, n_tokens: int) -> None:
        """Make sequence b able to hold ``n_tokens`` tokens (positions 0 .. n_tokens - 1)."""
        need = -(-n_tokens // self.block_size)
        if need > self.max_blocks:
            raise RuntimeError(f"PagedKVCache: sequence {b} needs {need} blocks, more than the "
                               f"block table's {self.max_blocks}")
        while len(self._owned[b]) < need:
            if not self._free:
                raise RuntimeError("PagedKVCache: no free block left")
            block = self._free.pop(0)
            self.block_table[b, len(self._owned[b])] = block
            self._owned[b].append(block)

    def slots(self, b: int, positions) -> list[int]:
        """The cache slot of each position of sequence b (its blocks must be reserved)."""
        bs, owned = self.block_size, self._owned[b]
        return [owned[p // bs] * bs + p % bs for p in positions]


__all__ = ["PagedKVCache", "allocation_order"]
