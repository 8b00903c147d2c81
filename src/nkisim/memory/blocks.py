"""Beta-1 block tensors: ``nl.ndarray((B1, B2, nl.par_dim(P), F...), buffer=nl.sbuf)``.

Block dimensions are "a pure software concept" (nki_block_dimension_migration_guide.rst): each
block is its own (P, F...) tile, placed by the compiler, so here each block is its own
allocation, made when the block is first indexed; the capacity check sees each block's own
lifetime and bytes per partition. Imports errors and memory only.
"""
from __future__ import annotations

import math
import operator

import numpy as np

from ..errors import BoundsError, UnsupportedError


class BlockTensor:
    """An SBUF/PSUM tensor with block dims: ``t[i, j]`` (one int per block dim) is block (i, j),
    a (P, F...) tile; ``t[i, j, <key>]`` indexes that tile; ``t[i]`` of a 2-block-dim tensor is
    the blocks ``(i, *)``. Block indices are ints (negative ones count from the end); slices or
    index expressions over block dims raise UnsupportedError (they span several allocations).
    Not a tile itself: pass ``t[i, ...]`` to instructions. ``shape`` is the full shape.
    """
    __slots__ = ("blocks", "tile_shape", "dtype", "buffer", "name", "_tiles", "_prefix", "_make")

    def __init__(self, blocks, tile_shape, dtype, buffer, name, make, tiles=None, prefix=()):
        self.blocks = tuple(blocks)             # the remaining block dims
        self.tile_shape = tuple(tile_shape)
        self.dtype, self.buffer, self.name = dtype, buffer, name
        self._make = make                       # callable(label) -> a new (P, F...) NkiTensor
        self._tiles = {} if tiles is None else tiles    # full block index -> its tile
        self._prefix = prefix

    @property
    def shape(self) -> tuple:
        return self.blocks + self.tile_shape

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def __len__(self):
        return self.shape[0]

    def __repr__(self):
        return (f"BlockTensor(blocks={self.blocks}, tile={self.tile_shape}, buffer={self.buffer}"
                + (f", name={self.name!r}" if self.name else "") + ")")

    def _split(self, key):
        op = "block tensor indexing"
        if type(key) is not tuple:
            key = tuple(key) if isinstance(key, tuple) else (key,)
        nb = len(self.blocks)
        idx = []
        for d, k in enumerate(key[:nb]):
            if k is Ellipsis or type(k) is slice or not isinstance(k, (int, np.integer)) \
                    or isinstance(k, (bool, np.bool_)):
                raise UnsupportedError(op, f"block dim {d} of {self._label()} takes an integer index, got "
                                           f"{k!r}: a block is its own tile, so one index cannot span blocks")
            k, n = operator.index(k), self.blocks[d]
            if -n <= k < 0:
                k += n
            if not 0 <= k < n:
                raise BoundsError(op, f"block index {k} on dim {d} of {self._label()} is outside 0:{n}")
            idx.append(k)
        return tuple(idx), key[nb:]

    def _label(self):
        return f"block tensor {self.name!r} {self.shape}" if self.name else f"block tensor {self.shape}"

    def block(self, idx: tuple):
        """The tile of block ``idx`` (made on first use)."""
        full = self._prefix + idx
        t = self._tiles.get(full)
        if t is None:
            label = f"{self.name}[{', '.join(map(str, full))}]" if self.name else ""
            t = self._tiles[full] = self._make(label)
        return t

    def __getitem__(self, key):
        idx, rest = self._split(key)
        if len(idx) < len(self.blocks):
            if rest:
                raise UnsupportedError("block tensor indexing", f"index every block dim of {self._label()} "
                                                                f"before the tile's dims")
            return BlockTensor(self.blocks[len(idx):], self.tile_shape, self.dtype, self.buffer, self.name,
                               self._make, self._tiles, self._prefix + idx)
        t = self.block(idx)
        return t[rest] if rest else t

    def __setitem__(self, key, value):
        idx, rest = self._split(key)
        if len(idx) < len(self.blocks):
            raise UnsupportedError("block tensor assignment", f"assign to one block of {self._label()} at a time")
        self.block(idx)[rest if rest else ...] = value

    @property
    def size(self) -> int:
        return math.prod(self.shape)


__all__ = ["BlockTensor"]
