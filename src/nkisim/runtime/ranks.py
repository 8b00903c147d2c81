"""Multi-rank launches: N ranks of one kernel in one process, each with its own HBM, and the
rendezvous (``World``) where their ``nki.collectives`` instructions meet.

Each rank is one ordinary launch (``launch.run``) in a thread of its own (LNC2: its two cores
run cooperatively in that thread, ``cores``), given its own copies of the arguments, so ranks share nothing but the World. A rank
that fails stops every other rank at its next instruction or sync point; the caller's arrays are
written only after every rank succeeded. Imports state, errors, config, runtime.launch/cores.
"""
from __future__ import annotations

import contextvars
import threading
import time
from typing import Callable

import numpy as np

from .. import state, trace
from ..config import SIMULATE_OPTIONS, Settings
from ..errors import DeadlockError, KernelArgumentError, NkiError, RaceError, kernel_location
from .cores import CoreStopped, _CoreThread, run_threads
from . import launch as _launch

_POLL_S = 0.05      # longest sleep of a waiting rank between looks at the others' progress


class PerRank:
    """An argument that differs between ranks: ``values[r]`` (a sequence) or ``fn(r)`` (a callable)
    is rank r's value. Made by ``per_rank``."""
    __slots__ = ("source",)
    is_per_rank = True            # launch's argument walk: a plain launch refuses it by name

    def __init__(self, source):
        self.source = source

    def of(self, rank: int, num_ranks: int):
        if callable(self.source):
            return self.source(rank)
        if len(self.source) != num_ranks:
            raise ValueError(f"per_rank: {len(self.source)} values given for {num_ranks} ranks")
        return self.source[rank]


def per_rank(values) -> PerRank:
    """Mark a kernel argument of a multi-rank launch as rank-specific: ``per_rank([x0, x1])`` gives
    rank r ``values[r]``; ``per_rank(lambda r: x[r])`` gives rank r ``fn(r)``."""
    return PerRank(values)


class RankSeat:
    """One rank's place in a World: its rank id, its launch and (LNC1) its core."""

    def __init__(self, world: "World", rank: int):
        self.world, self.rank = world, rank
        self.launch = None
        self.core = None           # LNC1: the launch's only core (LNC2: launch.sync.cores)

    def attach(self, core) -> None:
        self.core = core
        if self.world.cancelled:
            _stop_core(core)

    def core_of(self, core_id: int):
        launch = self.launch
        if launch is None:
            return None
        if launch.sync is not None:
            return launch.sync.cores[core_id]
        return self.core

    def core_finished(self, core_id: int) -> None:
        w = self.world
        with w.cond:
            w.finished.add((self.rank, core_id))
            w.cond.notify_all()


def _stop_core(core) -> None:
    def stop(ins):
        raise CoreStopped
    core.before_ins = stop
    core.fast = False


def _who(p, lnc: int) -> str:
    return f"rank {p[0]}" if lnc == 1 else f"rank {p[0]} (core {p[1]})"


class World:
    """The ranks of one multi-rank launch and the meeting points of their collectives.

    ``meet(core, ...)`` posts this core's payload for the r-th collective it issues on
    ``channel`` (one channel per set of ranks) and returns every participant's payload once all
    have posted. Participants are every core of every rank in ``members`` (Decision: under LNC2
    a collective is an instruction of the logical core, so both cores of each rank issue it).
    A waiting core raises DeadlockError (never hangs) when the collective can never complete:
    once every participant of the launch either finished its kernel or waits, the waiters that
    can never leave (one they wait for finished, or waits for a collective that can never
    complete itself) are deadlocked, and the lowest of them reports (Decision: the report waits
    for that quiet state, so which rank reports and the message do not depend on timing); and
    after ``timeout`` seconds in which no rank issued an instruction or reached a collective (a
    rank still computing is progressing; a Python loop issuing nothing is not), the lowest
    waiting core reports."""

    def __init__(self, num_ranks: int, lnc: int, timeout: float):
        self.num_ranks, self.lnc, self.timeout = num_ranks, lnc, timeout
        self.cond = threading.Condition()
        self.seats = [RankSeat(self, r) for r in range(num_ranks)]
        self.rounds: dict = {}         # (participant, channel) -> calls posted so far
        self.posts: dict = {}          # (channel, round) -> {participant: payload}
        self.taken: dict = {}          # (channel, round) -> participants that took the result
        self.waiting: dict = {}        # participant -> (key, parts, op, where)
        self.finished: set = set()     # participants whose kernel body ended
        self.posted = 0                # posts so far (progress)
        self.cancelled = False

    def cancel(self) -> None:
        """Stop every rank at its next instruction or sync point."""
        with self.cond:
            self.cancelled = True
            self.cond.notify_all()
        for seat in self.seats:
            launch = seat.launch
            if launch is not None and launch.sync is not None:
                launch.sync.cancel()
            elif seat.core is not None:
                _stop_core(seat.core)

    def rank_finished(self, rank: int) -> None:
        with self.cond:
            self.finished.update((rank, c) for c in range(self.lnc))
            self.cond.notify_all()

    def meet(self, core, rank: int, op: str, channel, members, payload, where: str) -> dict:
        """Post ``payload`` for this core's next collective on ``channel`` among ``members``;
        return {(rank, core_id): payload} of every participant (see the class docstring)."""
        me = (rank, core.core_id)
        parts = [(m, c) for m in members for c in range(self.lnc)]
        sync = core.launch.sync
        with self.cond:
            if self.cancelled:
                raise CoreStopped
            r = self.rounds.get((me, channel), 0)
            self.rounds[(me, channel)] = r + 1
            key = (channel, r)
            box = self.posts.setdefault(key, {})
            if sync is not None:     # LNC2: the other core may take the shared-HBM turns meanwhile
                sync.leave(core.core_id, lambda: len(box) == len(parts), op, where,
                           lambda c: (rank, c) not in box)
            box[me] = payload
            self.posted += 1
            self.cond.notify_all()
            self.waiting[me] = (key, parts, op, where)
            seen, since = None, time.monotonic()
            try:
                while True:
                    if len(box) == len(parts):       # complete: taken even if a rank failed since
                        taken = self.taken.setdefault(key, set())
                        taken.add(me)
                        if len(taken) == len(parts):
                            del self.posts[key], self.taken[key]
                        return dict(box)
                    if self.cancelled or (sync is not None and sync.cancelled):
                        raise CoreStopped
                    missing = [p for p in parts if p not in box]
                    stuck = self._blocked(rank, sync)
                    if stuck is not None and me in stuck and me == min(stuck):
                        raise DeadlockError(op, self._describe_stuck(me, missing, members, rank, sync),
                                            where=where)
                    progress = self._progress()
                    now = time.monotonic()
                    if progress != seen:
                        seen, since = progress, now
                    elif now - since >= self.timeout and me == min(self.waiting):
                        raise DeadlockError(op, self._describe_timeout(me, missing, members), where=where)
                    if sync is not None and self._sibling_may_act(me, sync, stuck):
                        self.cond.release()        # the other core of this launch runs (cooperative
                        try:                       # cores, runtime.cores): it may post, report or fail
                            sync.pause()
                        finally:
                            self.cond.acquire()
                    else:
                        self.cond.wait(_POLL_S)
            finally:
                self.waiting.pop(me, None)
                if sync is not None:
                    sync.back(core.core_id)

    def _sibling_may_act(self, me, sync, stuck) -> bool:
        """(LNC2, holding ``cond``) The other core of this rank, suspended in this thread while
        ``me`` waits, should run now: it is not waiting at a collective, or the one it waits at
        is complete, or it is the one to report a deadlock or a timeout."""
        sib = (me[0], 1 - me[1])
        if sync.finished[sib[1]]:
            return False
        w = self.waiting.get(sib)
        if w is None:
            return True
        if len(self.posts.get(w[0], ())) == len(w[1]):
            return True
        return (stuck is not None and sib in stuck and sib == min(stuck)) or sib == min(self.waiting)

    def _progress(self) -> tuple:
        """What changes while any rank progresses: every core's instruction count, the posts."""
        return (self.posted, *(getattr(seat.core_of(c), "seq", None) for seat in self.seats
                               for c in range(self.lnc)))

    def _describe_timeout(self, me, missing, members) -> str:
        what = []
        for p in missing:
            w = self.waiting.get(p)
            what.append(f"{_who(p, self.lnc)} issued no instruction for {self.timeout:g} s without reaching it"
                        if w is None else f"{_who(p, self.lnc)} waits at {w[2]} ({w[3]})")
        return f"{_who(me, self.lnc)} waits at {self.waiting[me][2]} with ranks {list(members)} but " + "; ".join(what)

    def _has_finished(self, p, my_rank: int, sync) -> bool:
        if p in self.finished:
            return True
        # a core of this rank that ended before the world heard of it (LNC2 Rendezvous knows)
        return p[0] == my_rank and sync is not None and sync.finished[p[1]]

    def _blocked(self, my_rank: int, sync):
        """None while some participant runs (it may still arrive or block: Decision: a deadlock
        is reported only once every participant finished or waits, so the report does not depend
        on timing); else the waiting participants that can never leave (one they wait for is
        finished or can never leave itself)."""
        everyone = [(r, c) for r in range(self.num_ranks) for c in range(self.lnc)]
        if any(p not in self.waiting and not self._has_finished(p, my_rank, sync) for p in everyone):
            return None
        progress: set = set()
        changed = True
        while changed:
            changed = False
            for p, (key, parts, _, _) in self.waiting.items():
                if p in progress:
                    continue
                box = self.posts.get(key, {})
                if all(q in box or q in progress for q in parts):
                    progress.add(p)
                    changed = True
        return set(self.waiting) - progress

    def _describe_stuck(self, me, missing, members, my_rank, sync) -> str:
        op = self.waiting[me][2]
        gone = [p for p in missing if self._has_finished(p, my_rank, sync)]
        if gone:
            who = ", ".join(_who(p, self.lnc) for p in gone)
            return (f"{_who(me, self.lnc)} waits at {op} with ranks {list(members)} but {who} finished the "
                    f"kernel without reaching it")
        what = []
        for p in missing:
            w = self.waiting[p]
            what.append(f"{_who(p, self.lnc)} waits at {w[2]} ({w[3]}) with ranks {sorted({q[0] for q in w[1]})}")
        return (f"{_who(me, self.lnc)} waits at {op} with ranks {list(members)} but " + "; ".join(what)
                + ": every rank must issue the same collectives in the same order")


def seat_of(core, op: str) -> RankSeat:
    """The running core's RankSeat; a launch without ranks is a world of one rank (rank 0)."""
    launch = core.launch
    seat = getattr(launch, "seat", None)
    if seat is None:
        with launch.lock:
            seat = getattr(launch, "seat", None)
            if seat is None:
                seat = World(1, launch.lnc, launch.settings.barrier_timeout_s).seats[0]
                seat.launch = launch
                if launch.sync is None:
                    seat.core = core
                launch.seat = seat
    return seat


# ---- the launch ---------------------------------------------------------------------------------

def _own_copy(value, num_ranks, rank, back):
    """Rank ``rank``'s argument: PerRank resolved, every array copied (recursively through
    tuples, lists and dicts); ``back`` collects (caller array, copy) pairs."""
    if isinstance(value, PerRank):
        value = value.of(rank, num_ranks)
    if isinstance(value, np.ndarray):
        c = value.copy()
        back.append((value, c))
        return c
    conv = _launch._adapter(value)
    if conv is not None:
        arr = conv.to_numpy(value)
        c = arr.copy()
        back.append((arr, c))
        return c
    if isinstance(value, tuple) and not hasattr(value, "_fields"):
        return tuple(_own_copy(v, num_ranks, rank, back) for v in value)
    if isinstance(value, list):
        return [_own_copy(v, num_ranks, rank, back) for v in value]
    if isinstance(value, dict):
        return {k: _own_copy(v, num_ranks, rank, back) for k, v in value.items()}
    return value


def run_ranks(func: Callable, num_ranks: int, args: tuple, kwargs: dict, *, lnc: int = 1,
              program_ndim: int = 0, settings: Settings | None = None) -> list:
    """Simulate ``func`` on ``num_ranks`` ranks at once; return their results in rank order.

    Rank r gets its own copy of every array argument (its own HBM); a ``per_rank(...)`` argument
    gives each rank its own value. After every rank succeeded, an input a rank wrote is copied
    into the caller's array (Decision: an array several ranks were given and wrote must hold
    the same values on each of them, else KernelArgumentError and the caller's arrays are left
    as they were; a ``per_rank`` array is each rank's own); results are each rank's own NumPy arrays. When any rank fails, every
    other rank stops at its next instruction or sync point, the caller's arrays are left as they
    were, and the root error is raised with a note naming its rank (Decision: a deadlock is
    usually the consequence of another rank's error, so other errors come first, then the lowest
    rank). While recording (``nkisim.trace.record()``), rank 0's events come first, then rank
    1's, and so on; collective events carry ``rank`` in their options.
    """
    settings = settings or Settings.from_env()
    if not isinstance(num_ranks, int) or isinstance(num_ranks, bool) or num_ranks < 1:
        raise ValueError(f"nki.simulate: ranks must be a positive integer, got {num_ranks!r}")
    world = World(num_ranks, lnc, settings.barrier_timeout_s)
    caller = kernel_location(2)
    backs = [[] for _ in range(num_ranks)]
    per_args = []
    for r in range(num_ranks):
        a = tuple(_own_copy(v, num_ranks, r, backs[r]) for v in args)
        k = {n: _own_copy(v, num_ranks, r, backs[r]) for n, v in kwargs.items()}
        per_args.append((a, k))
    outer = trace.active()
    recordings = [trace.events.Recording() if outer is not None else None for _ in range(num_ranks)]
    results: list = [None] * num_ranks
    errors: list = [None] * num_ranks
    threads = [_CoreThread(r) for r in range(num_ranks)]

    def body(me):
        r = me.core_id
        me.began.set()
        if recordings[r] is not None:
            trace.events._ACTIVE.set(recordings[r])
        state.current.set(None)
        try:
            me.live = True
            a, k = per_args[r]
            results[r] = _launch.run(func, a, k, lnc=lnc, program_ndim=program_ndim, settings=settings,
                                     seat=world.seats[r])
        except BaseException as exc:  # re-raised in the caller's thread below
            errors[r] = _located(exc, caller)
            world.cancel()
        finally:
            me.leave()
            world.rank_finished(r)

    run_threads(threads, body, contextvars.copy_context, "nkisim-rank", world)
    if outer is not None:
        for rec in recordings:
            outer.add_launch([list(rec)], rec.fast_paths)
    failures = [(r, e) for r, e in enumerate(errors) if e is not None and not isinstance(e, CoreStopped)]
    if failures:
        failures.sort(key=lambda re: (isinstance(re[1], DeadlockError), not isinstance(re[1], RaceError), re[0]))
        rank, exc = failures[0]
        if isinstance(exc, NkiError) and hasattr(exc, "add_note"):
            exc.add_note(f"(raised on rank {rank})")
        raise exc
    if any(isinstance(e, CoreStopped) for e in errors):      # cancelled with no root cause kept
        raise RuntimeError("nki.simulate: a rank stopped without an error")  # pragma: no cover
    written = {}                                  # id(caller array) -> [(rank, its copy)] that changed it
    for r in range(num_ranks):
        for orig, mine in backs[r]:
            if orig.shape == mine.shape and orig.tobytes() != mine.tobytes():
                written.setdefault(id(orig), (orig, []))[1].append((r, mine))
    for orig, copies in written.values():
        (r0, first), *rest = copies
        for r, mine in rest:
            if mine.tobytes() != first.tobytes():
                raise KernelArgumentError("nki.simulate", f"ranks {r0} and {r} wrote different values into "
                                          f"one input array given to every rank; give each rank its own "
                                          f"with nki.per_rank(...)")
    for orig, copies in written.values():
        np.copyto(orig, copies[0][1])
    return results


def _located(exc, caller: str):
    """An error of a rank's argument binding (raised in the rank's thread, where no kernel frame
    is on the stack) located at the caller's line, as a plain launch's is."""
    if isinstance(exc, NkiError) and exc.where.startswith("threading.py:") and type(exc).__init__ is NkiError.__init__:
        return type(exc)(exc.op, exc.what, where=caller)
    return exc


class RankSimulated:
    """``nki.simulate(kernel, ranks=N)``: call it with the kernel's arguments (``per_rank`` for
    rank-specific ones); ``[2]`` runs LNC2 ranks."""

    def __init__(self, kernel, ranks: int, overrides: dict):
        from .kernel import Kernel
        self.kernel = kernel if isinstance(kernel, Kernel) else Kernel(kernel)
        self.ranks, self.overrides = ranks, overrides

    def __getitem__(self, grid):
        return RankSimulated(self.kernel[grid], self.ranks, self.overrides)

    def __call__(self, *args, **kwargs) -> list:
        settings = Settings.from_env(**self.overrides)
        return run_ranks(self.kernel.func, self.ranks, args, kwargs, lnc=self.kernel.lnc,
                         program_ndim=len(self.kernel.grid), settings=settings)


def simulate_ranks(kernel, ranks: int, inputs=None, *, lnc: int | None = None, **options) -> list:
    """Run ``kernel`` on ``ranks`` ranks; return the list of each rank's results.

    ``inputs`` gives the kernel's arguments: a callable ``inputs(rank)`` returning a dict of
    keyword arguments (or a tuple of positional ones), a sequence of one such value per rank, or
    one dict for every rank (each rank gets its own copy of every array). ``lnc`` (default: the
    kernel's grid, ``kernel[2]``) makes every rank an LNC2 kernel instance. ``options`` are
    ``nki.simulate``'s (``target``, ``barrier_timeout_s``, ...). See ``run_ranks``."""
    from .kernel import Kernel
    bad = set(options) - set(SIMULATE_OPTIONS)
    if bad:
        raise TypeError(f"nkisim.simulate_ranks: unknown option(s) {sorted(bad)}; expected {list(SIMULATE_OPTIONS)}")
    k = kernel if isinstance(kernel, Kernel) else Kernel(kernel)
    if lnc is not None and lnc != k.lnc:
        k = k[lnc]

    def of(r):
        v = inputs(r) if callable(inputs) else (inputs if inputs is None or isinstance(inputs, dict)
                                                else inputs[r])
        if v is None:
            return (), {}
        return ((), dict(v)) if isinstance(v, dict) else (tuple(v), {})

    if not callable(inputs) and not (inputs is None or isinstance(inputs, dict)) and len(inputs) != ranks:
        raise ValueError(f"nkisim.simulate_ranks: {len(inputs)} inputs given for {ranks} ranks")
    per = [of(r) for r in range(ranks)]
    n_pos = {len(a) for a, _ in per}
    names = {tuple(sorted(kw)) for _, kw in per}
    if len(n_pos) != 1 or len(names) != 1:
        raise ValueError("nkisim.simulate_ranks: every rank must be given the same arguments")
    args = tuple(PerRank([per[r][0][i] for r in range(ranks)]) for i in range(n_pos.pop()))
    kwargs = {n: PerRank([per[r][1][n] for r in range(ranks)]) for n in names.pop()}
    settings = Settings.from_env(**options)
    return run_ranks(k.func, ranks, args, kwargs, lnc=k.lnc, program_ndim=len(k.grid), settings=settings)


__all__ = ["World", "RankSeat", "PerRank", "per_rank", "run_ranks", "simulate_ranks", "seat_of",
           "RankSimulated"]
