"""On-chip capacity: live SBUF and PSUM allocations of one core, in bytes per partition.

Lifetime model (Decision): an SBUF/PSUM allocation counts from ``nl.ndarray`` (or any creation
function) until the kernel can no longer reach it — i.e. until the last Python reference to the
tensor or any of its views is gone (CPython frees it at once). A tile created in a loop body and
rebound each iteration therefore costs one tile, not one per iteration; tiles kept in a list stay
live, as they would on hardware. Everything a core allocated is released when the kernel returns.

SBUF: every allocation reserves its bytes per partition (free size x itemsize) on all partitions
(Decision: the allocator gives each tensor the same free-byte range on every partition); the sum
over live allocations must fit ``target.sbuf_usable_bytes``.

PSUM: 8 banks of 2 KiB per partition. A tensor of at most one bank is placed first-fit inside a
single bank (never straddling two); a larger one takes whole consecutive banks. Its placement
(``alloc.psum_offset``, bytes within the partition) lets ``nc_matmul`` check that a destination
lies within one bank.
Imports errors and dtypes only.
"""
from __future__ import annotations

import weakref

from .. import dtypes as _dt
from ..errors import CapacityError


class CoreMemory:
    """Live on-chip allocations of one core."""

    def __init__(self, target):
        self.target = target
        self.sbuf_used = 0
        self.sbuf_live: dict[int, tuple] = {}      # id(alloc) -> (weakref, bytes, describe)
        self.psum_used: list[tuple[int, int]] = []  # sorted (start, end) byte ranges per partition
        self.psum_live: dict[int, tuple] = {}

    # ---- SBUF ---------------------------------------------------------------------------------
    def reserve_sbuf(self, alloc, nbytes: int, op: str) -> None:
        limit = self.target.sbuf_usable_bytes
        if self.sbuf_used + nbytes > limit:
            raise CapacityError(op, f"sbuf allocation {_describe(alloc)} needs {nbytes} bytes per "
                                    f"partition but {self.sbuf_used} of {limit} bytes per partition are "
                                    f"live on {self.target.name}; largest live: {self._largest(self.sbuf_live)}")
        self.sbuf_used += nbytes
        key = id(alloc)
        self.sbuf_live[key] = (weakref.ref(alloc, lambda _r, k=key: self._free_sbuf(k)), nbytes,
                               _describe(alloc))

    def _free_sbuf(self, key):
        entry = self.sbuf_live.pop(key, None)
        if entry is not None:
            self.sbuf_used -= entry[1]

    # ---- PSUM ---------------------------------------------------------------------------------
    def reserve_psum(self, alloc, nbytes: int, op: str) -> int:
        t = self.target
        bank = t.psum_bank_bytes
        nbytes = max(4, -(-nbytes // 4) * 4)                 # psum_min_align
        start = self._place(nbytes, bank, t.psum_partition_bytes)
        if start is None:
            used = sum(e - s for s, e in self.psum_used)
            raise CapacityError(op, f"psum allocation {_describe(alloc)} needs {nbytes} bytes per partition "
                                    f"({-(-nbytes // bank)} bank(s)) but {used} of {t.psum_partition_bytes} "
                                    f"bytes per partition ({t.psum_num_banks} banks of {bank}) are live or "
                                    f"fragmented on {t.name}; largest live: {self._largest(self.psum_live)}")
        rng = (start, start + nbytes)
        self.psum_used.append(rng)
        self.psum_used.sort()
        key = id(alloc)
        self.psum_live[key] = (weakref.ref(alloc, lambda _r, k=key, r=rng: self._free_psum(k, r)), nbytes,
                               _describe(alloc))
        return start

    def _place(self, nbytes, bank, total):
        """First fit: small tensors inside one bank, larger ones on bank boundaries."""
        if nbytes > bank:
            candidates = range(0, total, bank)
        else:
            candidates = sorted({0} | {e for _, e in self.psum_used} | set(range(0, total, bank)))
        for start in candidates:
            end = start + nbytes
            if end > total or (nbytes <= bank and start // bank != (end - 1) // bank):
                continue
            if all(end <= s or start >= e for s, e in self.psum_used):
                return start
        return None

    def _free_psum(self, key, rng):
        if self.psum_live.pop(key, None) is not None:
            try:
                self.psum_used.remove(rng)
            except ValueError:
                pass

    @staticmethod
    def _largest(live, n=3):
        items = sorted(live.values(), key=lambda e: -e[1])[:n]
        return ", ".join(f"{d} {b} B" for _, b, d in items) or "none"


def _describe(alloc) -> str:
    name = f"'{alloc.name}' " if alloc.name else ""
    return f"{name}{alloc.shape} {_dt.name(alloc.dtype)} ({alloc.where})"


__all__ = ["CoreMemory"]
