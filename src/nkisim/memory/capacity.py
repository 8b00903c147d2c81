"""On-chip capacity: live SBUF and PSUM allocations of one core, in bytes per partition.

Lifetime model (Decision, as the compiler's liveness analysis sees it): an SBUF/PSUM allocation is
live from the first instruction that reads or writes it (through any view) until the last one;
creating it (``nl.ndarray`` or any creation function) only names it. A tile created in a loop
body and last used in that iteration is dead before the next iteration uses its successor, so it
costs one tile, not one per iteration; a tile used again after the loop stays live until then; a
tile made up front and first written later (an output buffer) costs nothing until then; a tile
never used occupies nothing. Decision (the compiler schedules, so the check allows two legal reorderings and rejects only
what neither fits): the writes into a tile before its first read (a DMA from HBM, a memset, a chain
of accumulating matmuls, a transpose ...) can be sunk until just before that read when each of
their on-chip sources is not written again after the write read it and is still live at the
read, so the tile is born at its first read (a DMA from HBM or a memset has no on-chip source:
always); a tile only written (and stored) occupies one instant, its last access; and a DMA store
to HBM reads a tile whose values are final after its last other access, so it can be hoisted
there: it neither extends the tile's life nor counts as its first read. nki-library's kernels rely
on both: output_projection_tkg loads every head's weights into separate tiles up front "to give the
compiler finer control over pre-fetching" (more than SBUF holds at once), bwmm_shard_on_I keeps 12
PSUM accumulators over its contraction loop (8 banks hold them one chain at a time). Decision
(a second schedule, tried only when the first does not fit): a PSUM chain whose SBUF sources are
unchanged but dead before the tile's first read (their last use is a later chain's write, as when
the last chain of a contraction loop is the weights' last reader) is sunk too, and each such
source is kept live until that read (its life stretched to the latest read it was sunk to, and
checked so); the check passes when either schedule fits, and the error names what the first (no
stretching) did not fit. Only PSUM chains with SBUF sources are stretched (trading the scarce
PSUM for SBUF): an SBUF copy of an accumulator first read much later would otherwise keep its
PSUM source live until then. bwmm_shard_on_I's 12 accumulators per projection are such chains:
their 24 weight tiles' last reader is the twelfth chain, one instruction before the first
accumulator is read. An instruction's sources are the on-chip tiles it reads, before or after
its write is recorded (a fast path takes its destination's view first). Not told
apart: a write to a load's HBM source between the load and the read, and an instruction writing
two tiles read at different times (a kernel can pass and still fail the compiler, never the other
way round). Time is counted in instructions (``clock``, ticked by the dispatcher
before each one): the operands of one instruction are live together, and an allocation last used
by instruction k is dead for one first used by instruction k + 1. The check runs when the
core's kernel body returns (before any result reaches the caller) by sweeping the allocations in
order of first use, and the error names the allocation that did not fit (its kernel line) and the
largest allocations live at that moment.

SBUF is two-dimensional: an allocation of P partitions (its partition dim) and B bytes per
partition (free size x itemsize) occupies a P x B rectangle the allocator may put at any partition
offset (``nl.ndarray(address=(partition, byte))`` names such a place), so tiles of fewer than 128
partitions sit side by side. Decision: the check is the bound no placement can beat, never a
placement of our own (which would reject kernels the compiler fits): B must fit
``target.sbuf_usable_bytes`` (U); the live rectangles' total area (sum of P x B) must fit
``pmax x U``; the live tiles of more than pmax / 2 partitions, which all cover the middle two
partitions wherever they sit, must fit U together; and the live tiles of more than U / 2 bytes,
no two of which can share a partition, must fit pmax partitions together. A kernel can pass it and still fail the compiler's allocator
(fragmentation, the compiler's own scratch space), never the other way round.

Placed tensors (``nl.ndarray(address=...)``): their address was checked when made
(``access.check_address``); here a placed tensor must not overlap another placed tensor live at
that point (CapacityError naming both); automatically placed tensors go around them. Decision: a
placed tensor is live from its first access (not its creation) to its last: making a tensor at
an address only names memory, so circular buffers made up front (several tensors at one address,
used in turn, as nki-library's ModularAllocator makes them) are legal as long as one's uses end
before the next one's begin; a placed tensor never accessed occupies nothing.

PSUM: 8 banks of 2 KiB per partition. A tensor of at most one bank is placed first-fit inside a
single bank (never straddling two); a larger one takes whole consecutive banks, starting on a
bank boundary. So a matmul destination inside a tensor of at most one bank never crosses a bank,
and for larger tensors the crossing can be judged from the tensor's own start (``nc_matmul``).
Hardware numbers come from the target (``arch``); the page and aliasing numbers of
``staggered`` are the host CPU's. Imports arch, errors and dtypes only.
"""
from __future__ import annotations

import heapq
import itertools
import sys

import numpy as np

from .. import arch
from .. import dtypes as _dt
from ..errors import CapacityError


class Rec:
    """One on-chip allocation's lifetime: first- and last-use instruction clocks, bytes per
    partition, and what the sinking rule needs (first read, last write, the on-chip sources of the
    writes before the first read)."""
    __slots__ = ("mem", "born", "last", "nbytes", "buffer", "name", "shape", "dtype", "where", "offset",
                 "address", "read_at", "last_write", "pend", "srcs", "sink_ok", "start", "end")

    def __init__(self, mem, nbytes, buffer, name, shape, dtype, where, address=None):
        self.mem, self.nbytes, self.buffer, self.where = mem, nbytes, buffer, where
        self.name, self.shape, self.dtype = name, shape, dtype
        self.last = mem.clock
        self.offset = None
        self.address = address      # (partition_offset, free_offset bytes) given by the kernel
        self.born = None            # live from its first access (use)
        self.read_at = None         # first read (not a write, not a hoisted store)
        self.last_write = -1
        self.pend = None            # [(clock, source recs)] of the writes before the first read
        self.srcs = ()
        self.sink_ok = True
        self.start = self.end = None    # live from / until in the schedule checked (check sets them)

    def use(self, write: bool = False) -> None:
        """The allocation is accessed by the current instruction: a read, or a write when
        ``write`` or its memory is ``writing`` (the lifetime, and the reads of this instruction so
        far)."""
        m = self.mem
        c = m.clock
        if self.born is None:
            self.born = c
        self.last = c
        if write or m.writing:
            self.last_write = c
            if self.read_at is None:
                if m.reads_clock != c:
                    srcs = []
                else:       # (a copy when this tile was not read: no comprehension frame per write)
                    reads = m.reads
                    srcs = reads.copy() if self not in reads else [r for r in reads if r is not self]
                if self.pend is None:
                    self.pend = [(c, srcs)]
                else:
                    self.pend.append((c, srcs))
                # the instruction's reads after this write are its sources too (a fast path
                # takes its destination's view before reading its operands)
                if m.wrote_clock != c:
                    m.wrote_clock, m.wrote = c, [(self, srcs)]
                else:
                    m.wrote.append((self, srcs))
            return
        if self.read_at is None:
            self._first_read(c)
        if m.reads_clock != c:
            m.reads_clock, m.reads = c, [self]
        else:
            m.reads.append(self)
        if m.wrote_clock == c:
            for w, srcs in m.wrote:
                if w is not self:
                    srcs.append(self)

    def _first_read(self, c) -> None:
        self.read_at = c
        pend = self.pend
        if pend:                    # sinkable if no source was written after the write read it
            ok, seen = True, set()
            for wc, srcs in pend:   # (loops, not generators: once per tile of every kernel)
                for s in srcs:
                    if s.last_write > wc:
                        ok = False
                    seen.add(s)
            self.sink_ok = ok
            self.srcs = tuple(seen)
            self.pend = None

    def birth(self, stretch: bool = False):
        """The instruction clock the allocation is live from (see the module's lifetime model);
        ``stretch``: a chain whose sources are dead at its first read is sunk too, and those
        sources' ``end`` is stretched to that read (every ``end`` starts as ``last``)."""
        if self.born is None:
            return None
        if self.read_at is None:        # only written (and stored): one instant, its last access
            return self.last
        if self.sink_ok:
            read_at = self.read_at
            dead = [s for s in self.srcs if s.last < read_at]
            if not dead:
                return read_at
            if not stretch or self.buffer != "psum" or any(s.buffer != "sbuf" for s in dead):
                return self.born
            for s in dead:
                if s.end < read_at:
                    s.end = read_at
            return read_at
        return self.born

    def overlaps(self, other) -> bool:
        """Both placed by address, and their partition and byte ranges intersect."""
        (p, f), (q, g) = self.address, other.address
        return (p < q + other.shape[0] and q < p + self.shape[0]
                and f < g + other.nbytes and g < f + self.nbytes)

    @property
    def label(self) -> str:
        name = f"'{self.name}' " if self.name else ""
        return f"{name}{self.shape} {_dt.name(self.dtype)}"


class StoragePool:
    """Storage arrays of dead on-chip allocations, reused by later allocations of the same size
    and dtype, in this launch and later ones (fresh memory costs a page fault per 4 KiB on first
    touch, which on a VM is as slow as the copy itself). An array is reused only when nothing
    else refers to it; at most ``per_key`` are kept per (size, dtype) and about ``max_bytes`` in
    all; when full, storage of the sizes given least recently makes room. Thread-safe without a lock: LNC2 cores allocate from their own threads and the garbage
    collector may return storage from any thread, and list append/insert/pop and dict setdefault
    are atomic (the byte count is a soft cap)."""
    __slots__ = ("free", "per_key", "max_bytes", "nbytes", "last")

    def __init__(self, per_key: int = 8, max_bytes: int = arch.LAUNCH_ON_CHIP_BYTES_MAX):
        self.free: dict = {}
        self.per_key, self.max_bytes, self.nbytes = per_key, max_bytes, 0
        self.last = (None, None)        # (key, list) given last: the last entry of ``free``

    def give(self, storage, cold: bool = False) -> None:
        """Keep ``storage`` for reuse; ``take`` hands out the most recently given first (likely
        still in cache), ``cold`` storage (not written lately) last."""
        key = (storage.size, storage.dtype)
        last_key, lst = self.last
        if last_key != key:     # (only give reorders ``free``; _evict never drops the last key)
            lst = self.free.pop(key, None)
            if lst is None:
                lst = []
            self.free[key] = lst        # most recently given key last (evicted last)
            self.last = (key, lst)
        if storage.nbytes > self.max_bytes:
            return
        if self.nbytes + storage.nbytes > self.max_bytes:
            self._evict(self.nbytes + storage.nbytes - self.max_bytes, key)
        if len(lst) < self.per_key and self.nbytes + storage.nbytes <= self.max_bytes:
            if cold:
                lst.insert(0, storage)
            else:
                lst.append(storage)
            self.nbytes += storage.nbytes

    def _evict(self, need: int, keep) -> None:
        """Drop at least ``need`` bytes of storage, coldest first from the key given least
        recently (never ``keep``): a process that runs kernels of many shapes keeps recycling
        the shapes it runs now instead of filling up with shapes it ran once."""
        for key in list(self.free):
            if need <= 0:
                return
            if key == keep:
                continue
            lst = self.free.get(key)
            while lst and need > 0:
                try:
                    arr = lst.pop(0)
                except IndexError:
                    break
                self.nbytes -= arr.nbytes
                need -= arr.nbytes
            if not lst:
                self.free.pop(key, None)

    def take(self, size, dtype):
        lst = self.free.get((size, dtype))
        while lst:
            try:
                arr = lst.pop()
            except IndexError:          # another thread took the last one
                return None
            self.nbytes -= arr.nbytes
            # Unused when only this local and the call's argument refer to it, and to the
            # buffer it views (``staggered``: views of views name that buffer as their base,
            # which ``arr`` holds once).
            if sys.getrefcount(arr) <= 2 and (arr.base is None or sys.getrefcount(arr.base) <= 2):
                return arr
        return None


_STAGGER = itertools.count()


def staggered(n: int, dtype) -> np.ndarray:
    """``np.empty(n, dtype)``, for arrays of 16 KiB or more starting at a varying offset within
    a 4 KiB page (cycling through 16 offsets 64-byte aligned). Large NumPy arrays all start at
    the same page offset, and a load from one array at the same page offset as a pending store
    to another stalls the CPU ("4K aliasing"); measured here: an fp32 add of two 256 KiB tiles
    into a third took 26-34 us when the offsets matched, 12-14 us when they did not."""
    dtype = np.dtype(dtype)
    nbytes = n * dtype.itemsize
    if nbytes < 16384:
        return np.empty(n, dtype)
    buf = np.empty(nbytes + 4096, np.uint8)
    want = (next(_STAGGER) % 16) * 1280 % 4096          # 0, 1280, 2560, 3840, 1024, ...
    start = (want - buf.ctypes.data) % 4096
    start -= start % max(dtype.alignment, 1)
    return buf[start:start + nbytes].view(dtype)


POOL = StoragePool()     # one per process: storage outlives the launch that made it


class CoreMemory:
    """On-chip allocations of one core, checked for capacity when the core's kernel body returns."""

    def __init__(self, target, deferrable: bool = False, pooled: bool = True):
        self.target = target
        self.deferrable = deferrable    # copies into this core's tiles may be deferred (LNC1)
        self.clock = 0
        self.writing = False            # the access being made is a write (access.write & co.)
        self.reads_clock, self.reads = -1, []   # on-chip reads of the instruction at reads_clock
        self.wrote_clock, self.wrote = -1, []   # (rec, its write's sources) written before any read
        self.recs: list[Rec] = []
        self.pool = POOL if pooled else None    # fast path: recycled storage (fast_paths=False: none)

    def add(self, alloc, nbytes: int) -> Rec:
        """Record a new SBUF/PSUM allocation (``alloc.rec`` then tracks its first and last use)."""
        rec = Rec(self, nbytes, alloc.buffer, alloc.name, alloc.shape, alloc.dtype, alloc.where,
                  alloc.address)
        self.recs.append(rec)
        return rec

    def check(self, record=None) -> None:
        """Sweep the allocations in order; raise (or pass to ``record``) a CapacityError for each
        allocation that does not fit beside the allocations live when it was made, unless the
        second schedule (dead sources stretched, see the module's Decisions) fits all of them."""
        first: list = []
        self._schedule(lambda e: first.append(e) or True, stretch=False)
        if not first:
            return
        second: list = []
        self._schedule(lambda e: second.append(e) or True, stretch=True)
        if not second:
            return
        for error in first:
            self._fail(error, record)

    def _schedule(self, record, stretch: bool) -> None:
        """One schedule's sweep: every error passed to ``record`` (which keeps it)."""
        t = self.target
        for r in self.recs:
            r.end = r.last
        for r in self.recs:
            r.start = r.birth(stretch)
        for buffer in ("sbuf", "psum"):        # in birth order; a placed tensor never used is none
            recs = [r for r in self.recs if r.buffer == buffer and r.start is not None]
            if not recs or (_sbuf_fits_at_once(recs, t) if buffer == "sbuf" else _psum_fits_at_once(recs, t)):
                continue
            recs.sort(key=_start)
            (self._sweep_sbuf if buffer == "sbuf" else self._sweep_psum)(recs, t, record)

    def _fail(self, error, record):
        if record is None or not record(error):
            raise error

    def _overlap(self, r, live, t, record) -> bool:
        """A tensor placed by address must not overlap another placed tensor live at that point
        (Decision: tensors the allocator places are put around the placed ones, so only placed
        pairs can collide). Reports the first overlap; True if there was one."""
        if r.address is None:
            return False
        for x in live:
            o = x[2]
            if o.address is not None and r.overlaps(o):
                self._fail(CapacityError(
                    "nl.ndarray", f"{r.buffer} allocation {r.label} at address {r.address} "
                                  f"({r.nbytes} bytes per partition) overlaps {o.label} at address "
                                  f"{o.address} ({o.nbytes} bytes per partition, allocated at {o.where}), "
                                  f"which is still live at that point on {t.name}", where=r.where),
                    record)
                return True
        return False

    def _sweep_sbuf(self, recs, t, record):
        limit, half = t.sbuf_usable_bytes, t.pmax // 2
        total, live = t.pmax * limit, []
        # live totals: area (partitions x bytes); bytes of the tiles wider than half the partitions
        # (every placement of one covers the middle partitions); partitions of the tiles longer
        # than half a partition (no two of them can share a partition)
        # (the helpers _area, _mid and _wide inlined: one pass per allocation of every kernel)
        used = mid = wide = 0
        pmax = t.pmax
        heappop, heappush = heapq.heappop, heapq.heappush
        for r in recs:
            born = r.start
            while live and live[0][0] < born:
                x = heappop(live)
                used, mid, wide = used - x[3], mid - x[4], wide - x[5]
            if r.address is not None and self._overlap(r, live, t, record):
                continue
            nbytes = r.nbytes
            if nbytes > limit:
                self._fail(CapacityError(
                    "nl.ndarray", f"sbuf allocation {r.label} needs {nbytes} bytes per partition but a "
                                  f"partition holds {limit} on {t.name}", where=r.where), record)
                continue
            parts = int(r.shape[0]) if r.shape else 1
            area = parts * nbytes
            r_mid = nbytes if parts > half else 0
            r_wide = parts if 2 * nbytes > limit else 0
            why = None
            if used + area > total:
                why = f"{used} of {total} bytes of SBUF ({pmax} partitions x {limit}) are live"
            elif r_mid and mid + nbytes > limit:
                why = (f"tiles of more than {half} partitions, which all cover partitions {pmax - half - 1} "
                       f"and {half}, already hold {mid} of the {limit} bytes there")
            elif r_wide and wide + parts > pmax:
                why = (f"tiles of more than {limit // 2} bytes per partition, which cannot share a "
                       f"partition, already take {wide} of the {pmax} partitions")
            if why is not None:
                self._fail(CapacityError(
                    "nl.ndarray", f"sbuf allocation {r.label} needs {parts} partitions x {nbytes} "
                                  f"bytes but {why} at that point on {t.name}, however placed; largest live: "
                                  f"{_largest(x[2] for x in live)}", where=r.where),
                    record)
                continue
            heappush(live, (r.end, id(r), r, area, r_mid, r_wide))
            used, mid, wide = used + area, mid + r_mid, wide + r_wide

    def _sweep_psum(self, recs, t, record):
        bank, total = t.psum_bank_bytes, t.psum_partition_bytes
        live: list = []                                  # (last, id, rec) heap; rec.offset placed
        for r in recs:
            while live and live[0][0] < r.start:
                heapq.heappop(live)
            if self._overlap(r, live, t, record):
                continue
            align = t.psum_min_align
            nbytes = max(align, -(-r.nbytes // align) * align)
            if r.address is not None:       # placed by the kernel (bounds checked at nl.ndarray)
                r.offset = r.address[1]
                heapq.heappush(live, (r.end, id(r), r))
                continue
            start = _place(nbytes, bank, total, [(x[2].offset, x[2].offset + x[2].nbytes) for x in live])
            if start is None:
                used = sum(x[2].nbytes for x in live)
                self._fail(CapacityError(
                    "nl.ndarray", f"psum allocation {r.label} needs {r.nbytes} bytes per partition "
                                  f"({-(-r.nbytes // bank)} bank(s)) but {used} of {total} bytes per partition "
                                  f"({t.psum_num_banks} banks of {bank}) are live or fragmented at that point "
                                  f"on {t.name}; largest live: {_largest(x[2] for x in live)}", where=r.where),
                    record)
                continue
            r.offset = start
            heapq.heappush(live, (r.end, id(r), r))


def _start(r):
    return r.start


def _sbuf_fits_at_once(recs, t) -> bool:
    """True when the SBUF allocations ``recs`` would pass ``_sweep_sbuf`` even if all were live at
    once: none placed by address, none wider than a partition, and the sums of the sweep's three
    live totals (area, middle-partition bytes, wide-tile partitions) over all of them within the
    limits. The sweep's live sets are subsets, so it could raise nothing (and it changes nothing
    else): a kernel whose tiles fit together skips it (speed; no visible effect)."""
    limit, half, pmax = t.sbuf_usable_bytes, t.pmax // 2, t.pmax
    used = mid = wide = 0
    for r in recs:
        nbytes = r.nbytes
        if r.address is not None or nbytes > limit:
            return False
        parts = int(r.shape[0]) if r.shape else 1
        used += parts * nbytes
        if parts > half:
            mid += nbytes
        if 2 * nbytes > limit:
            wide += parts
    return used <= pmax * limit and mid <= limit and wide <= pmax


def _psum_fits_at_once(recs, t) -> bool:
    """True when ``_sweep_psum`` could raise nothing for ``recs``: none placed by address, each
    within one bank, no more of them than banks (whatever else is live, a bank is then empty and
    first fit places the tile). The sweep's only other effect, ``Rec.offset``, is read by nothing
    but the sweep (speed; no visible effect)."""
    if len(recs) > t.psum_num_banks:
        return False
    bank, align = t.psum_bank_bytes, t.psum_min_align
    for r in recs:
        if r.address is not None or max(align, -(-r.nbytes // align) * align) > bank:
            return False
    return bank * t.psum_num_banks <= t.psum_partition_bytes


def _place(nbytes, bank, total, used):
    """First fit: tensors of at most one bank inside one bank; larger ones on bank boundaries."""
    if nbytes > bank:
        candidates = range(0, total, bank)
    else:
        candidates = sorted({0} | {e for _, e in used} | set(range(0, total, bank)))
    for start in candidates:
        end = start + nbytes
        if end > total or (nbytes <= bank and start // bank != (end - 1) // bank):
            continue
        if all(end <= s or start >= e for s, e in used):
            return start
    return None


def _partitions(r) -> int:
    return int(r.shape[0]) if r.shape else 1


def _area(r) -> int:
    """SBUF bytes an allocation occupies: partitions x bytes per partition."""
    return _partitions(r) * r.nbytes


def _mid(r, half) -> int:
    """Bytes a tile of more than ``half`` partitions holds on the middle partitions, whatever its
    partition offset (0 for a narrower tile)."""
    return r.nbytes if _partitions(r) > half else 0


def _wide(r, limit) -> int:
    """Partitions of a tile longer than half a partition (0 for a shorter one)."""
    return _partitions(r) if 2 * r.nbytes > limit else 0


def _largest(recs, n=3) -> str:
    items = sorted(recs, key=lambda r: -r.nbytes)[:n]
    return ", ".join(f"{r.label} ({r.where}) {r.nbytes} B" for r in items) or "none"


__all__ = ["CoreMemory", "Rec", "StoragePool"]
