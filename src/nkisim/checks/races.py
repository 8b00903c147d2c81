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
Imports errors, dtypes, where.
"""
from __future__ import annotations

import threading

import numpy as np

from .. import dtypes as _dt
from .. import state
from ..errors import RaceError, kernel_location
from .where import current_op

_NONE, _MANY = -1, -2


def offsets(t) -> np.ndarray:
    """Flat storage element offsets of every element of the view (int64, view shape)."""
    off = np.full((), t.offset, np.int64)
    for d, (n, s) in enumerate(zip(t.shape, t.strides)):
        shape = [1] * len(t.shape)
        shape[d] = n
        off = off + (np.arange(n, dtype=np.int64) * s).reshape(shape)
    return np.broadcast_to(off, t.shape)


class LoopScope:
    """One running affine_range loop."""

    def __init__(self, start_serial: int, where: str):
        self.start_serial = start_serial
        self.where = where
        self.iteration = None
        self.marks: dict = {}           # id(alloc) -> [writer, reader, acc, alloc]
        self.lines: dict = {}           # (id(alloc), iteration, kind) -> kernel line

    def record(self, t, kind: str, matmul: bool):
        alloc = t.alloc
        if alloc.serial >= self.start_serial or t.storage is not alloc.storage:
            return
        m = self.marks.get(id(alloc))
        if m is None:
            n = alloc.storage.size
            m = self.marks[id(alloc)] = [np.full(n, _NONE, np.int64), np.full(n, _NONE, np.int64),
                                         np.zeros(n, np.bool_), alloc]
        writer, reader, acc, _ = m
        it = self.iteration
        offs = offsets(t).reshape(-1)
        w = writer[offs]
        other_w = (w != _NONE) & (w != it)
        if kind == "w":
            if matmul:
                other_w &= ~acc[offs]
            r = reader[offs]
            other_r = (r != _NONE) & (r != it)
            if other_w.any():
                self._raise(t, "writes", "wrote", int(w[other_w][0]), "w", offs, other_w)
            if other_r.any():
                j = int(r[other_r][0])
                self._raise(t, "writes", "read", j, "r", offs, other_r)
            writer[offs] = it
            acc[offs] = matmul
        else:
            if other_w.any():
                self._raise(t, "reads", "wrote", int(w[other_w][0]), "w", offs, other_w)
            r = reader[offs]
            reader[offs] = np.where((r == _NONE) | (r == it), it, _MANY)
        key = (id(alloc), it, kind)
        if key not in self.lines:
            self.lines[key] = kernel_location()

    def _raise(self, t, verb, other_verb, j, other_kind, offs, mask):
        op, operand = current_op(t, depth=4, kind="w" if verb == "writes" else "r")
        name = f"'{t.alloc.name}' " if t.alloc.name else ""
        other_line = self.lines.get((id(t.alloc), j, other_kind), "?") if j >= 0 else "?"
        other = f"iteration {j}" if j >= 0 else "several other iterations"
        raise RaceError(op, f"{operand} {verb} {int(mask.sum())} element(s) of {t.buffer} tensor {name}"
                            f"{t.alloc.shape} {_dt.name(t.dtype)} in affine_range iteration {self.iteration} "
                            f"that {other} {other_verb} ({other_line}); affine_range iterations must be "
                            f"independent: use sequential_range for a loop-carried dependency "
                            f"(loop at {self.where})")


class SharedRaces:
    """Per-launch LNC2 shared-HBM access epochs (thread-safe)."""

    def __init__(self):
        self.lock = threading.Lock()
        self.marks: dict = {}           # id(alloc) -> (w_epoch[2], r_epoch[2], alloc)
        self.lines: dict = {}

    def record(self, t, kind: str, core_id: int, epoch: int):
        alloc = t.alloc
        if t.storage is not alloc.storage:
            return
        offs = offsets(t).reshape(-1)
        other = 1 - core_id
        with self.lock:
            m = self.marks.get(id(alloc))
            if m is None:
                n = alloc.storage.size
                m = self.marks[id(alloc)] = (np.full((2, n), -1, np.int64), np.full((2, n), -1, np.int64), alloc)
            w_ep, r_ep, _ = m
            clash = w_ep[other, offs] == epoch
            what = "wrote"
            if kind == "w" and not clash.any():
                clash = r_ep[other, offs] == epoch
                what = "read"
            if clash.any():
                op, operand = current_op(t, depth=3, kind=kind)
                name = f"'{alloc.name}' " if alloc.name else ""
                line = self.lines.get((id(alloc), other, "w" if what == "wrote" else "r"), "?")
                raise RaceError(op, f"core {core_id} {'writes' if kind == 'w' else 'reads'} "
                                    f"{int(clash.sum())} element(s) of shared_hbm tensor {name}{alloc.shape} "
                                    f"that core {other} {what} ({line}) with no core_barrier between")
            (w_ep if kind == "w" else r_ep)[core_id, offs] = epoch
            self.lines.setdefault((id(alloc), core_id, kind), kernel_location())


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


__all__ = ["LoopScope", "SharedRaces", "offsets", "watch_access"]
