"""Race detection (``detect_races=True``, env NKISIM_DETECT_RACES=1).

What the docs say. The current pages define ``affine_range`` (like ``sequential_range`` and
``static_range``) as a deprecated alias of Python's ``range()``: a loop unrolled at
specialization time whose iterations run in program order (nki/api/nki/language/__init__.py
``affine_range``; nki/get-started/about/index.rst "behave as aliases of range()";
nki/deep-dives/nki-dynamic-loops.rst: affine_range was "formerly for parallel iterations with no
loop-carried dependency"). One core's instructions are ordered by their data dependencies, so no
access pattern inside one core is a race. Even the older, parallel affine_range docstring (up to
release 2.27, Dec 2025, same file) said "associative reductions are not considered loop carried
dependencies", e.g. "multiple nl.matmul or nisa.nc_matmul calls accumulating into the same output
buffer defined outside of this loop level" (``+=`` in the matmul tutorial); the fused-Mamba
tutorial (nki/guides/tutorials/fused_mamba.rst) accumulates into an SBUF tile the same way,
``tensor_tensor(dst=acc, data1=acc, data2=x, op=add)`` across affine_range iterations.

Decision (what is checked). (1) LNC2: the two cores of a launch really run at once. For
``shared_hbm`` tensors each element remembers, per core, the sync epoch (number of
``core_barrier``/``sendrecv`` points passed) of its last write and read; a core touching an
element the other core wrote (or writing one it read) in the same epoch raises RaceError: there
was no barrier between the two accesses. (2) affine_range: reads of what an earlier iteration
wrote are legal (loop-carried state such as a scan, in-place updates, accumulation into SBUF or
PSUM: nc_matmul, ``+=``, ``tensor_tensor`` with dst also an input), and so is any use of on-chip
tiles (SBUF, PSUM) declared outside the loop: reusing a scratch tile, resetting a carried state,
discarding an unused result are ordinary in-order code. What stays an error is an iteration
*overwriting HBM elements another iteration wrote that nothing has read since* (a lost write):
under the former parallel meaning that was a write-write race, under the current one the earlier
iteration's results never reach the caller — the signature of an output tile index that does
not depend on the loop variable, or of overlapping output tiles. Accumulating writes consume the
old values, so they are never lost writes; any read (by any iteration) makes values consumed.
Writes before the loop and tensors allocated inside an iteration (private to it) are not looked
at; nested affine loops are checked each at its own level. ``sequential_range``,
``static_range`` and ``nl.range`` declare that order matters (the last write may be meant to
win): not checked.

Cost: per allocation (per loop, or per launch for LNC2) a summary keeps the storage-offset
intervals (each access's [first, last] element) written by the other iterations (touched by the
other core in the same epoch) and, in loops, the columns they wrote (storage cut in rows of the
allocation's last dims). A plain write whose span misses that summary overwrites nothing of
another iteration: it is only logged; so are reads that meet what the loop wrote, and
accumulating writes (in loops these never raise). The per-element marks (int32 views with the
tensor view's strides) are built, from the log in order, only when an access's span does meet
one (or the log grows long), so the per-element check then sees exactly the state it would have
seen had every access been applied at once: the same findings, the same messages. Kernel inputs
only read and outputs written tile by tile (column blocks included) never reach the per-element
path.
Decision: iterations are marked by their position in the loop, not their value, so a negative
``affine_range`` start cannot collide with the "none" mark.
Operands are named by the running instruction (``memory.hooks.accessor``). Imports errors,
dtypes, state, memory.buffers, memory.hooks; registered with memory by ``checks/__init__``.
"""
from __future__ import annotations

import math
import threading
from bisect import bisect_left, bisect_right

import numpy as np

from .. import dtypes as _dt
from .. import state
from ..errors import RaceError, kernel_location
from ..memory.buffers import HBM
from ..memory.hooks import accessor

_NONE = -1
_MARK = np.int32               # iteration positions / epochs
_LOG_MAX = 512                 # logged accesses per allocation before they are applied
_MAX_INTERVALS = 4096          # past this an interval summary collapses to its hull
PROGRAM_POS = "program_pos"    # core.extras key: the running Beta-1 program's position in its grid


def span(t) -> tuple[int, int] | None:
    """(first, last) storage element offset the view touches; None for an empty view."""
    lo = hi = t.offset
    for n, s in zip(t.shape, t.strides):
        if n == 0:
            return None
        if s > 0:
            hi += (n - 1) * s
        else:
            lo += (n - 1) * s
    return lo, hi


def marks_view(marks: np.ndarray, t) -> np.ndarray:
    """The elements of the flat array ``marks`` (one per storage element) that view ``t`` covers,
    as a writable NumPy view with ``t``'s shape (repeated elements where ``t`` repeats them)."""
    isz = marks.itemsize
    strides = tuple([s * isz for s in t.strides])
    if strides and min(strides) < 0:
        return np.lib.stride_tricks.as_strided(marks[t.offset:], t.shape, strides)
    return np.ndarray(t.shape, marks.dtype, marks, t.offset * isz, strides)


class Intervals:
    """A set of storage offsets kept as sorted, disjoint, closed intervals (merged when they
    touch); past _MAX_INTERVALS it collapses to its hull, a coarser summary that stays safe."""
    __slots__ = ("lo", "hi")

    def __init__(self):
        self.lo: list = []
        self.hi: list = []

    def __bool__(self):
        return bool(self.lo)

    def add(self, lo: int, hi: int) -> None:
        los, his = self.lo, self.hi
        i = bisect_left(his, lo - 1)
        j = bisect_right(los, hi + 1, i)
        if i < j:
            lo, hi = min(lo, los[i]), max(hi, his[j - 1])
        los[i:j] = [lo]
        his[i:j] = [hi]
        if len(los) > _MAX_INTERVALS:
            self.lo, self.hi = [los[0]], [his[-1]]

    def merge(self, other: "Intervals") -> None:
        for lo, hi in zip(other.lo, other.hi):
            self.add(lo, hi)

    def meets(self, lo: int, hi: int) -> bool:
        j = bisect_right(self.lo, hi)
        return j > 0 and self.hi[j - 1] >= lo


def columns(t, row: int) -> tuple[int, int]:
    """(first, last) column the view touches when storage is cut in rows of ``row`` elements
    (dims whose stride is a multiple of ``row`` only change the row); (0, row - 1) when the view
    wraps across a row boundary."""
    lo = hi = t.offset % row
    for n, s in zip(t.shape, t.strides):
        if s % row:
            if s > 0:
                hi += (n - 1) * s
            else:
                lo += (n - 1) * s
    return (lo, hi) if lo >= 0 and hi < row else (0, row - 1)


class _Track:
    """One allocation in one affine loop: the offsets and columns written by the running iteration
    (``cur``) and by every other one (``past``), the pending log, the per-element marks (``writer``:
    the position of the iteration that last wrote an element in this loop; ``fresh``: nothing has
    read it since).

    A plain write misses ``past`` when its offset span misses the offsets or, for a multi-dim
    allocation, its column span misses the columns (a column block of an SBUF tile spans nearly
    every offset but few columns): either proves it overwrites nothing another iteration wrote."""
    __slots__ = ("alloc", "row", "pos", "cur", "past", "log", "writer", "fresh")

    def __init__(self, alloc):
        self.alloc = alloc
        shape = alloc.shape
        self.row = math.prod(shape[1:]) if len(shape) > 1 else 0     # 0: no column summary
        self.pos = None                               # the iteration ``cur`` belongs to
        self.cur, self.past = (Intervals(), Intervals()), (Intervals(), Intervals())
        self.log: list = []                           # (pos, kind, view) not yet applied
        self.writer = self.fresh = None               # per-element marks, built on first need

    def enter(self, pos: int) -> None:
        if pos != self.pos:
            cur = self.cur
            if cur[0]:
                if self.past[0]:
                    self.past[0].merge(cur[0])
                    self.past[1].merge(cur[1])
                else:
                    self.past = cur
                self.cur = (Intervals(), Intervals())
            self.pos = pos

    @staticmethod
    def hits(summary, sp, cols) -> bool:
        offs, col = summary
        return offs.meets(*sp) and (cols is None or col.meets(*cols))

    def note(self, sp, cols) -> None:
        offs, col = self.cur
        offs.add(*sp)
        if cols is not None:
            col.add(*cols)

    def flush(self) -> None:
        if self.writer is None:
            n = self.alloc.storage.size
            self.writer, self.fresh = np.full(n, _NONE, _MARK), np.zeros(n, np.bool_)
        for pos, kind, t in self.log:
            self.apply(pos, kind, t)
        self.log.clear()

    def apply(self, pos, kind, t) -> None:
        if kind == "w":
            marks_view(self.writer, t)[...] = pos
            marks_view(self.fresh, t)[...] = True
        else:
            marks_view(self.fresh, t)[...] = False


class LoopScope:
    """One running affine_range loop."""

    def __init__(self, start_serial: int, where: str):
        self.start_serial = start_serial
        self.where = where
        self._iteration = None
        self.pos = -1                   # position of the running iteration in the loop
        self.values: list = []          # position -> iteration value
        self.tracks: dict = {}          # id(alloc) -> _Track
        self.lines: dict = {}           # (id(alloc), iteration, kind) -> kernel line

    @property
    def iteration(self):
        return self._iteration

    @iteration.setter
    def iteration(self, value):
        self._iteration = value
        self.pos = len(self.values)
        self.values.append(value)

    def record(self, t, kind: str, accumulation: bool) -> None:
        """One read ("r") or write ("w"); ``accumulation``: the write adds to the old values
        (nc_matmul accumulating into PSUM, ``psum_tile += ...``), so it consumes them."""
        alloc = t.alloc
        if alloc.serial >= self.start_serial or t.storage is not alloc.storage or alloc.buffer not in HBM:
            return
        tr = self.tracks.get(id(alloc))      # (also keeps the allocation, so its id, alive)
        if tr is None:
            tr = self.tracks[id(alloc)] = _Track(alloc)
        sp = span(t)
        if sp is not None:
            pos = self.pos
            tr.enter(pos)
            cols = columns(t, tr.row) if tr.row else None
            if kind == "r":
                # a read matters only where this loop wrote: it makes those values consumed
                if tr.hits(tr.cur, sp, cols) or tr.hits(tr.past, sp, cols):
                    tr.log.append((pos, "r", t))
            elif accumulation or not tr.hits(tr.past, sp, cols):
                tr.log.append((pos, "w", t))
            else:
                tr.flush()
                self._check(tr, t)
                tr.apply(pos, "w", t)
            if len(tr.log) > _LOG_MAX:
                tr.flush()
            if kind == "w":
                tr.note(sp, cols)
        key = (id(alloc), self._iteration, kind)
        if key not in self.lines:
            self.lines[key] = kernel_location()

    def _check(self, tr, t) -> None:
        """The per-element test of one plain write against the marks (raises RaceError)."""
        pos = self.pos
        w = marks_view(tr.writer, t)
        lost = (w != _NONE) & (w != pos) & marks_view(tr.fresh, t)
        if lost.any():
            self._raise(t, int(w[lost][0]), lost)

    def _raise(self, t, j, mask):
        op, operand = accessor(t, "w")
        name = f"'{t.alloc.name}' " if t.alloc.name else ""
        j = self.values[j]
        other_line = self.lines.get((id(t.alloc), j, "w"), "?")
        raise RaceError(op, f"{operand} writes {int(mask.sum())} element(s) of {t.buffer} tensor {name}"
                            f"{t.alloc.shape} {_dt.name(t.dtype)} in affine_range iteration {self.iteration} "
                            f"that iteration {j} wrote ({other_line}) and nothing read since: its values are "
                            f"lost. affine_range iterations must not overwrite each other's unread HBM "
                            f"results (reading them in between is fine); give each iteration its own "
                            f"elements, or use sequential_range if the last write is meant to win "
                            f"(loop at {self.where})")


class _SharedTrack:
    """One shared_hbm allocation under LNC2: per (core, kind) the intervals touched in each epoch,
    pending log, per-element epoch marks."""
    __slots__ = ("alloc", "epochs", "floor", "log", "w_ep", "r_ep")

    def __init__(self, alloc):
        self.alloc = alloc
        self.epochs = {(c, k): {} for c in (0, 1) for k in "wr"}   # epoch -> Intervals
        self.floor = dict.fromkeys(self.epochs, -1)   # epochs <= floor were dropped: unknown
        self.log: list = []                           # (core, kind, view, epoch)
        self.w_ep = self.r_ep = None

    def meets(self, core, kind, epoch, lo, hi) -> bool:
        if epoch <= self.floor[(core, kind)]:
            return True
        s = self.epochs[(core, kind)].get(epoch)
        return s is not None and s.meets(lo, hi)

    def note(self, core, kind, epoch, lo, hi) -> None:
        sets = self.epochs[(core, kind)]
        s = sets.get(epoch)
        if s is None:
            if len(sets) >= 4:      # keep the latest epochs; older ones answer "maybe"
                old = [e for e in sets if e < epoch - 1]
                for e in old:
                    del sets[e]
                if old:
                    self.floor[(core, kind)] = max(self.floor[(core, kind)], max(old))
            s = sets[epoch] = Intervals()
        s.add(lo, hi)

    def flush(self) -> None:
        if self.w_ep is None:
            n = self.alloc.storage.size
            self.w_ep, self.r_ep = np.full((2, n), -1, _MARK), np.full((2, n), -1, _MARK)
        for core, kind, t, epoch in self.log:
            marks_view((self.w_ep if kind == "w" else self.r_ep)[core], t)[...] = epoch
        self.log.clear()


class SharedRaces:
    """Per-launch LNC2 shared-HBM access epochs (thread-safe)."""

    def __init__(self):
        self.lock = threading.Lock()
        self.tracks: dict = {}          # id(alloc) -> _SharedTrack
        self.lines: dict = {}

    def record(self, t, kind: str, core_id: int, epoch: int):
        alloc = t.alloc
        if t.storage is not alloc.storage:
            return
        sp = span(t)
        other = 1 - core_id
        with self.lock:
            tr = self.tracks.get(id(alloc))  # (also keeps the allocation, so its id, alive)
            if tr is None:
                tr = self.tracks[id(alloc)] = _SharedTrack(alloc)
            if sp is not None:
                lo, hi = sp
                if tr.meets(other, "w", epoch, lo, hi) or (kind == "w"
                                                           and tr.meets(other, "r", epoch, lo, hi)):
                    tr.flush()
                    self._check(tr, t, kind, core_id, epoch)
                    marks_view((tr.w_ep if kind == "w" else tr.r_ep)[core_id], t)[...] = epoch
                else:
                    tr.log.append((core_id, kind, t, epoch))
                    if len(tr.log) > _LOG_MAX:
                        tr.flush()
                tr.note(core_id, kind, epoch, lo, hi)
            key = (id(alloc), core_id, kind)
            if key not in self.lines:
                self.lines[key] = kernel_location()

    def _check(self, tr, t, kind, core_id, epoch):
        alloc, other = t.alloc, 1 - core_id
        clash = marks_view(tr.w_ep[other], t) == epoch
        what = "wrote"
        if kind == "w" and not clash.any():
            clash = marks_view(tr.r_ep[other], t) == epoch
            what = "read"
        if clash.any():
            op, operand = accessor(t, kind)
            name = f"'{alloc.name}' " if alloc.name else ""
            line = self.lines.get((id(alloc), other, "w" if what == "wrote" else "r"), "?")
            raise RaceError(op, f"core {core_id} {'writes' if kind == 'w' else 'reads'} "
                                f"{int(clash.sum())} element(s) of shared_hbm tensor {name}{alloc.shape} "
                                f"that core {other} {what} ({line}) with no core_barrier between")


class _ProgramTrack:
    """One HBM allocation in a Beta-1 grid launch: per element the position of the program that
    last wrote it (``writer``) and whether nothing has read it since (``fresh``)."""
    __slots__ = ("alloc", "writer", "fresh")

    def __init__(self, alloc):
        n = alloc.storage.size
        self.alloc = alloc
        self.writer, self.fresh = np.full(n, _NONE, _MARK), np.zeros(n, np.bool_)


class ProgramRaces:
    """Races between the SPMD programs of one Beta-1 launch (``kernel[g0, g1, ...]`` with
    ``detect_races``).

    Decision: the programs of a grid run in parallel on hardware, in no defined order (the
    Beta-1 programming model: "SPMD ... kernel instances"), while nkisim runs them one after
    another. A program that overwrites HBM elements another program wrote, that nothing has read
    since, with different values is a write-write race: which value survives depends on the
    order. Checked like the lost writes of affine_range iterations (``LoopScope``): any read
    consumes the values (a read-modify-write such as ``nl.atomic_rmw`` or ``dst_rmw_op`` reads
    first, so it never races), accumulating writes are not checked, and writing the value already
    there is benign. Values are compared when the writing program ends (a program's final value
    of an element is the one it wrote); the RaceError names the op, operand and line of the
    overwriting write and the line of the first program's write. Reads of another program's
    results are not reported (as in loops). Only HBM is tracked: on-chip tiles are per program.
    """

    def __init__(self, labels: list):
        self.labels = labels            # program position -> grid index (for messages)
        self.lock = threading.Lock()
        self.tracks: dict = {}          # id(alloc) -> _ProgramTrack
        self.lines: dict = {}           # (id(alloc), position) -> the program's first write line
        self.pending: dict = {}         # position -> [(view, candidates, old raw values, writers, op, operand, line)]

    def record(self, t, kind: str, accumulation: bool, pos) -> None:
        alloc = t.alloc
        if pos is None or alloc.buffer not in HBM or t.storage is not alloc.storage or span(t) is None:
            return
        with self.lock:
            tr = self.tracks.get(id(alloc))      # (also keeps the allocation, so its id, alive)
            if tr is None:
                if kind == "r":
                    return
                tr = self.tracks[id(alloc)] = _ProgramTrack(alloc)
            fresh = marks_view(tr.fresh, t)
            if kind == "r":
                fresh[...] = False
                return
            writer = marks_view(tr.writer, t)
            if not accumulation:
                cand = (writer != _NONE) & (writer != pos) & fresh
                if cand.any():
                    op, operand = accessor(t, "w")
                    self.pending.setdefault(pos, []).append(
                        (t, cand.copy(), np.array(t.np(), copy=True), writer.copy(), op, operand,
                         kernel_location()))
            writer[...] = pos
            fresh[...] = True
            key = (id(alloc), pos)
            if key not in self.lines:
                self.lines[key] = kernel_location()

    def end_program(self, pos) -> None:
        """Compare the values program ``pos`` left with those it overwrote (raises RaceError)."""
        with self.lock:
            checks = self.pending.pop(pos, ())
        for t, cand, old, writers, op, operand, line in checks:
            new = t.np()
            a = np.ascontiguousarray(old)
            b = np.ascontiguousarray(new)
            if a.dtype.itemsize in (1, 2, 4, 8):     # bit patterns: a NaN equals itself
                u = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[a.dtype.itemsize]
                a, b = a.view(u), b.view(u)
            differ = cand & (a != b)
            if differ.any():
                first = int(writers[differ][0])
                alloc = t.alloc
                name = f"'{alloc.name}' " if alloc.name else ""
                other_line = self.lines.get((id(alloc), first), "?")
                raise RaceError(op, f"{operand} writes {int(differ.sum())} element(s) of {t.buffer} tensor "
                                    f"{name}{alloc.shape} {_dt.name(t.dtype)} in SPMD program "
                                    f"{self.labels[pos]} that program {self.labels[first]} wrote "
                                    f"({other_line}) with different values, and nothing read them since: "
                                    f"the programs of a launch run in parallel, in no order, so which "
                                    f"value survives is undefined; give each program its own elements",
                                where=line)


def watch_access(t, kind: str, accumulation: bool) -> None:
    """The per-allocation hook: record one read ("r") or write ("w"; ``accumulation``: it adds to
    the old values) in every running affine loop of the calling core and, under LNC2, in the
    launch's shared-HBM epochs."""
    core = state.current.get()
    if core is None:
        return
    for scope in core.loops:
        scope.record(t, kind, accumulation)
    launch = core.launch
    programs = launch.program_races
    if programs is not None:
        programs.record(t, kind, accumulation, core.extras.get(PROGRAM_POS))
    if launch.lnc > 1 and str(t.alloc.buffer) == "shared_hbm":
        if launch.shared_races is None:
            with launch.lock:
                if launch.shared_races is None:
                    launch.shared_races = SharedRaces()
        launch.shared_races.record(t, kind, core.core_id, launch.sync.rounds[core.core_id])


__all__ = ["Intervals", "LoopScope", "SharedRaces", "ProgramRaces", "PROGRAM_POS", "columns", "marks_view", "span", "watch_access"]
