"""Race detection (``detect_races=True``, env NKISIM_DETECT_RACES=1).

affine_range: iterations must be independent. For every tensor allocated before the loop, each
element remembers the iteration that last wrote it and the iteration(s) that read it. An iteration
that reads what another wrote, or writes what another read or wrote, raises RaceError naming the
tensor, both iterations and both kernel lines. Exception (documented): ``nc_matmul`` accumulating
into PSUM across iterations. Nested affine loops are checked each at its own level; tensors
allocated inside an iteration are private to it.

LNC2: for ``shared_hbm`` tensors, each element remembers, per core, the sync epoch (number of
``core_barrier``/``sendrecv`` points passed) of its last write and read. A core touching an element
the other core wrote (or writing one it read) in the same epoch raises RaceError: there was no
barrier between the two accesses.

Cost: per allocation (per loop, or per launch for LNC2) a summary keeps the storage-offset
intervals (each access's [first, last] element) touched by the other iterations (by the other
core in the same epoch) and, in loops, the columns they touched (storage cut in rows of the
allocation's last dims). An access whose span misses every summary it could race with is safe:
it is only logged. The per-element marks (int32 views with the tensor view's strides) are built,
from the log in order, only when an access's span does meet one (or the log grows long), so the
per-element check then sees exactly the state it would have seen had every access been applied
at once: the same findings, the same messages. Kernel inputs only read, outputs written tile by
tile, column blocks of one tile and PSUM accumulators never reach the per-element path.
Decision: iterations are marked by their position in the loop, not their value, so a negative
``affine_range`` start cannot collide with the "none" / "several" marks.
Operands are named by the running instruction (``memory.hooks.accessor``). Imports errors,
dtypes, state, memory.hooks; registered with memory by ``checks/__init__``.
"""
from __future__ import annotations

import math
import threading
from bisect import bisect_left, bisect_right

import numpy as np

from .. import dtypes as _dt
from .. import state
from ..errors import RaceError, kernel_location
from ..memory.hooks import accessor

_NONE, _MANY = -1, -2
_MARK = np.int32               # iteration positions / epochs
_LOG_MAX = 512                 # logged accesses per allocation before they are applied
_MAX_INTERVALS = 4096          # past this an interval summary collapses to its hull


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


def _summaries():
    """Per kind (writes, non-matmul writes, reads): the storage offsets and the columns touched."""
    return [(Intervals(), Intervals()) for _ in range(3)]


_W, _NMW, _R = 0, 1, 2


class _Track:
    """One allocation in one affine loop: summaries of what the running iteration (``cur``) and
    every other one (``past``) touched, the pending log, the per-element marks.

    An access misses a summary when its offset span misses the offsets or, for a multi-dim
    allocation, its column span misses the columns (a column block of an SBUF tile spans
    nearly every offset but few columns): either proves no element is shared."""
    __slots__ = ("alloc", "row", "pos", "cur", "past", "log", "writer", "reader", "acc")

    def __init__(self, alloc):
        self.alloc = alloc
        shape = alloc.shape
        self.row = math.prod(shape[1:]) if len(shape) > 1 else 0     # 0: no column summary
        self.pos = None                               # the iteration ``cur`` belongs to
        self.cur, self.past = _summaries(), _summaries()
        self.log: list = []                           # (pos, kind, view, matmul) not yet applied
        self.writer = self.reader = self.acc = None   # per-element marks, built on first need

    def enter(self, pos: int) -> None:
        if pos != self.pos:
            past, cur = self.past, self.cur
            for k in range(3):
                if cur[k][0]:
                    if past[k][0]:
                        past[k][0].merge(cur[k][0])
                        past[k][1].merge(cur[k][1])
                    else:
                        past[k] = cur[k]
                    cur[k] = (Intervals(), Intervals())
            self.pos = pos

    def misses(self, kind: int, sp, cols) -> bool:
        offs, col = self.past[kind]
        return not offs.meets(*sp) or (cols is not None and not col.meets(*cols))

    def note(self, kind: int, sp, cols) -> None:
        offs, col = self.cur[kind]
        offs.add(*sp)
        if cols is not None:
            col.add(*cols)

    def flush(self) -> None:
        if self.writer is None:
            n = self.alloc.storage.size
            self.writer, self.reader = np.full(n, _NONE, _MARK), np.full(n, _NONE, _MARK)
            self.acc = np.zeros(n, np.bool_)
        for pos, kind, t, matmul in self.log:
            self.apply(pos, kind, t, matmul)
        self.log.clear()

    def apply(self, pos, kind, t, matmul) -> None:
        if kind == "w":
            marks_view(self.writer, t)[...] = pos
            marks_view(self.acc, t)[...] = matmul
        else:
            r = marks_view(self.reader, t)
            r[...] = np.where((r == _NONE) | (r == pos), pos, _MANY)


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

    def record(self, t, kind: str, matmul: bool) -> None:
        alloc = t.alloc
        if alloc.serial >= self.start_serial or t.storage is not alloc.storage:
            return
        tr = self.tracks.get(id(alloc))      # (also keeps the allocation, so its id, alive)
        if tr is None:
            tr = self.tracks[id(alloc)] = _Track(alloc)
        sp = span(t)
        if sp is not None:
            pos = self.pos
            tr.enter(pos)
            cols = columns(t, tr.row) if tr.row else None
            if kind == "w":
                safe = tr.misses(_NMW if matmul else _W, sp, cols) and tr.misses(_R, sp, cols)
            else:
                safe = tr.misses(_W, sp, cols)
            if safe:
                tr.log.append((pos, kind, t, matmul))
                if len(tr.log) > _LOG_MAX:
                    tr.flush()
            else:
                tr.flush()
                self._check(tr, t, kind, matmul)
                tr.apply(pos, kind, t, matmul)
            if kind == "w":
                tr.note(_W, sp, cols)
                if not matmul:
                    tr.note(_NMW, sp, cols)
            else:
                tr.note(_R, sp, cols)
        key = (id(alloc), self._iteration, kind)
        if key not in self.lines:
            self.lines[key] = kernel_location()

    def _check(self, tr, t, kind, matmul) -> None:
        """The per-element test of one access against the marks (raises RaceError)."""
        pos = self.pos
        w = marks_view(tr.writer, t)
        other_w = (w != _NONE) & (w != pos)
        if kind == "w":
            if matmul:
                other_w &= ~marks_view(tr.acc, t)
            r = marks_view(tr.reader, t)
            other_r = (r != _NONE) & (r != pos)
            if other_w.any():
                self._raise(t, "writes", "wrote", int(w[other_w][0]), "w", other_w)
            if other_r.any():
                self._raise(t, "writes", "read", int(r[other_r][0]), "r", other_r)
        elif other_w.any():
            self._raise(t, "reads", "wrote", int(w[other_w][0]), "w", other_w)

    def _raise(self, t, verb, other_verb, j, other_kind, mask):
        op, operand = accessor(t, "w" if verb == "writes" else "r")
        name = f"'{t.alloc.name}' " if t.alloc.name else ""
        if j >= 0:
            j = self.values[j]
            other_line = self.lines.get((id(t.alloc), j, other_kind), "?")
            other = f"iteration {j}"
        else:
            other_line, other = "?", "several other iterations"
        raise RaceError(op, f"{operand} {verb} {int(mask.sum())} element(s) of {t.buffer} tensor {name}"
                            f"{t.alloc.shape} {_dt.name(t.dtype)} in affine_range iteration {self.iteration} "
                            f"that {other} {other_verb} ({other_line}); affine_range iterations must be "
                            f"independent: use sequential_range for a loop-carried dependency "
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


def watch_access(t, kind: str, matmul: bool) -> None:
    """The per-allocation hook: record one read ("r") or write ("w") in every running affine loop
    of the calling core and, under LNC2, in the launch's shared-HBM epochs."""
    core = state.current.get()
    if core is None:
        return
    for scope in core.loops:
        scope.record(t, kind, matmul)
    launch = core.launch
    if launch.lnc > 1 and str(t.alloc.buffer) == "shared_hbm":
        if launch.shared_races is None:
            with launch.lock:
                if launch.shared_races is None:
                    launch.shared_races = SharedRaces()
        launch.shared_races.record(t, kind, core.core_id, launch.sync.rounds[core.core_id])


__all__ = ["Intervals", "LoopScope", "SharedRaces", "columns", "marks_view", "span", "watch_access"]
