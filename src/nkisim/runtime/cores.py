"""LNC2 cores of one launch: cooperative cores in the caller's thread, the rendezvous of their
sync ops, the order of their shared-HBM instructions, and stopping; also the threads of the ranks
of a multi-rank launch (``run_threads``).

Decision (cooperative cores): the cores of one launch are greenlets in the calling thread; one
runs at a time, and a core gives way to the other only where it must wait: for its shared-HBM
turn, at a sync point (``core_barrier``, a ``sendrecv`` receive) or collective the other core
has not reached, and at the end of its kernel. An LNC2 launch so costs about what an LNC1 launch
costs (no thread start, join or GIL hand-off), ``breakpoint()`` and ``print`` see one core at a
time, and an exception in the caller's thread (KeyboardInterrupt) stops the launch where it is.

Decision (determinism): the instructions of the cores that touch shared HBM take turns in a
fixed order -- core 0's first, then core 1's first, core 0's second, and so on -- skipping a core
that cannot issue one until the other acts (it finished, or waits at a sync point or collective
the other has not reached). Such an instruction runs whole on its turn (``Rendezvous.take_turn``
at its first shared-HBM access, ``end_turn`` when it ends). Only shared HBM is seen by both
cores, so a launch gives the same results on every run. A kernel whose cores touch the same
shared-HBM elements without a barrier ("disjoint portions of a shared HBM tensor",
nki/api/nki/isa/__init__.py core_barrier) has a race whose outcome hardware does not fix; nkisim
gives the outcome of this order, and ``NKISIM_DETECT_RACES=1`` reports the race.

Decision (deadlocks): a core waits only while the other one runs in the same thread, so when no
core can progress (the other finished, or waits at a point or collective this one has not
reached) the launch is deadlocked and DeadlockError is raised at once. ``barrier_timeout_s``
therefore bounds only the waits of multi-rank collectives (ranks run in threads, ``ranks``): a
core whose peer loops in Python without issuing an instruction is not waiting, the peer is
running, and such a loop hangs an LNC2 launch as it would an LNC1 one (KeyboardInterrupt stops
it).

A launch never outlives its call: on any exit the rendezvous is cancelled and every suspended
core is stopped where it waits (CoreStopped raised there, so its ``finally`` blocks run) before
the caller's arrays are restored; a cancel from another thread (a failing rank) stops a running
core at its next instruction (``CoreState.before_ins``, called by ``isa.dispatch.run``) or sync
point. Imports state and errors only.
"""
from __future__ import annotations

import contextvars
import functools
import threading
import time
from typing import Callable

import greenlet

from .. import state
from ..errors import DeadlockError, NkiError, RaceError, kernel_location
from ..memory.tensor import NkiTensor


class CoreStopped(BaseException):
    """Raised inside a core when its launch is cancelled (the other core failed, a rank failed,
    or the caller's thread left the launch): the core stops at its next instruction or where it
    waits. A BaseException, so a kernel's ``except Exception`` cannot swallow it; never seen by
    callers."""


class Rendezvous:
    """Meeting point and scheduler of the cooperative cores of one LNC2 launch, one channel per
    kind of sync point: ``core_barrier`` and each ``sendrecv`` ``pipe_id``. The r-th call of a
    core on a channel meets the r-th call of the other core on the same channel, so calls on
    different pipes progress independently (documented: "Operations with different pipe_id
    values can progress independently without blocking each other").

    A core that must wait gives way to the other (``pause``); one waiting at a point raises
    DeadlockError when no core can progress: the peer finished the kernel, waits itself at a
    point this core will not reach (Decision: when both wait, core 0 reports), or waits at a
    collective this core has not reached (the core at the sync point reports). ``cancel()``
    makes every core raise CoreStopped at its next instruction or where it waits. Only the
    thread running the launch touches this state, except ``cancel`` (any thread) and the reads
    of a multi-rank World (``finished``, ``cores``)."""

    def __init__(self, parties: int, timeout: float):
        self.rounds = [0] * parties            # sync points each core passed (race-check epochs)
        self.channel_rounds = [dict() for _ in range(parties)]
        self.posts: dict = {}                  # (channel, round, core) -> payload
        self.finished = [False] * parties
        self.waiting: list = [None] * parties  # (point, key awaited) of a blocked core
        self.pending: list = [[] for _ in range(parties)]   # receives not yet written (sendrecv)
        self.cores: list = [None] * parties    # CoreState of each core (its seq shows progress)
        self.timeout = timeout                 # (multi-rank collectives only; see the module docstring)
        self.cancelled = False
        self.turn = 0                          # the core whose shared-HBM instruction goes next
        self.holding = [False] * parties       # a core runs a shared-HBM instruction (has the turn)
        self.away: list = [None] * parties     # (ready, op, where, needs) of the collective a core waits at
        self.hub = None                        # the greenlet that schedules the cores (the caller's)
        self.workers: list = [None] * parties  # each core's greenlet, once started (run_cores)
        self.running = 0                       # the core whose greenlet runs now

    # ---- cores --------------------------------------------------------------------------------
    def attach(self, core) -> None:
        self.cores[core.core_id] = core
        if self.cancelled:
            self._stop_core(core)

    def cancel(self) -> None:
        """Stop every core at its next instruction (through ``before_ins``) or where it waits."""
        self.cancelled = True
        for c in self.cores:
            if c is not None:
                self._stop_core(c)

    def _stop_core(self, core) -> None:
        core.before_ins = self.before_instruction
        core.fast = False          # the fast lane then takes run(), which calls before_ins

    def pause(self) -> None:
        """The running core must wait: let the other core run -- switched into directly when it
        has started and not finished (one greenlet switch, not two through the scheduler), else
        through the scheduler (``run_cores``), which starts it. The order the cores run in is the
        scheduler's either way: the core that waits hands over to the other one."""
        peer = 1 - self.running
        g = self.workers[peer]
        if g is not None and not self.finished[peer]:
            self.running = peer
            g.switch()
        else:
            self.hub.switch()
        if self.cancelled:
            raise CoreStopped

    def before_instruction(self, ins) -> None:
        """run()'s hook for a core that must stop or has receives to complete."""
        if self.cancelled:
            raise CoreStopped
        core = ins.core
        if ins.spec.api not in _SYNC_APIS:
            self.complete(core)
            return
        # a sync op reading (or writing) a pending receive's dst waits for that receive first
        allocs = {id(a.alloc) for a in ins.args if isinstance(a, NkiTensor)}
        pending = self.pending[core.core_id]
        last = max((i for i, p in enumerate(pending) if id(p[5]) in allocs), default=-1)
        if last >= 0:
            self.complete(core, last + 1)

    def core_finished(self, core_id: int):
        self.finished[core_id] = True
        self._drop_turn(core_id)

    # ---- shared-HBM turns (see the module docstring) -----------------------------------------
    def take_turn(self, core) -> None:
        """Before ``core``'s first shared-HBM access in an instruction (or outside one): wait
        until it is this core's turn, or the other core cannot issue a shared-HBM instruction
        before this one acts (``_idle``). The turn is held until the instruction ends
        (``end_turn``, called by the dispatcher through ``core.after_ins``), the core waits at a
        sync point or collective, or it finishes."""
        me = core.core_id
        peer = 1 - me
        while self.turn != me and not self._idle(peer):
            if self.cancelled:
                raise CoreStopped
            self.pause()
        if self.cancelled:
            raise CoreStopped
        self.turn = me
        self.holding[me] = True
        core.after_ins = self.end_turn

    def end_turn(self, core) -> None:
        """The instruction that took the turn ended: the other core's shared-HBM instruction
        goes next."""
        core.after_ins = None
        self._drop_turn(core.core_id)

    def _drop_turn(self, core_id: int) -> bool:
        """Give up the turn if this core holds it; True if it did."""
        if not self.holding[core_id]:
            return False
        self.holding[core_id] = False
        self.turn = 1 - core_id
        return True

    def _idle(self, c: int) -> bool:
        """Core ``c`` cannot issue an instruction before the other core acts: it finished, waits
        at a sync point for a post not yet made, or waits at a collective that is not complete
        (both cores of a rank take part in each, so it cannot complete while the other core
        runs)."""
        if self.finished[c]:
            return True
        w = self.waiting[c]
        if w is not None and w[1] not in self.posts:
            return True
        away = self.away[c]
        return away is not None and not away[0]()

    def leave(self, core_id: int, ready: Callable[[], bool], op: str = "a collective", where: str = "?",
              needs: Callable[[int], bool] | None = None) -> None:
        """The core waits at collective ``op`` (outside this rendezvous) until ``ready()``;
        ``needs(c)``: that collective still waits for core ``c``'s post. It gives up the turn
        meanwhile."""
        self.away[core_id] = (ready, op, where, needs or (lambda c: True))
        self._drop_turn(core_id)

    def back(self, core_id: int) -> None:
        self.away[core_id] = None

    # ---- points -------------------------------------------------------------------------------
    def _post(self, core_id: int, channel, payload) -> tuple:
        """Post this core's next call on ``channel``; the key of the peer's matching call."""
        r = self.channel_rounds[core_id].get(channel, 0)
        self.channel_rounds[core_id][channel] = r + 1
        self.rounds[core_id] += 1
        self.posts[(channel, r, core_id)] = payload
        return (channel, r, 1 - core_id)

    def _wait(self, core_id: int, op: str, point: tuple, key: tuple, where: str | None = None):
        """Wait for the peer's post ``key`` (the peer runs meanwhile); return its payload."""
        peer = 1 - core_id
        self.waiting[core_id] = (point, key)
        self._drop_turn(core_id)
        try:
            while True:
                if self.cancelled:
                    raise CoreStopped
                if key in self.posts:
                    return self.posts.pop(key)
                if self.finished[peer]:
                    raise DeadlockError(op, f"core {core_id} waits at {_describe(point)} but core {peer} "
                                            f"finished the kernel without reaching it", where=where)
                blocked = self.waiting[peer]
                if blocked is not None and blocked[1] not in self.posts and core_id == 0:
                    raise DeadlockError(op, f"core {core_id} is at {_describe(point)} while core {peer} is at "
                                            f"{_describe(blocked[0])}; both cores must reach the same sync "
                                            f"points in the same order", where=where)
                away = self.away[peer]
                if away is not None and not away[0]() and away[3](core_id):
                    raise DeadlockError(op, f"core {core_id} is at {_describe(point)} while core {peer} waits at "
                                            f"{away[1]} ({away[2]}); both cores must reach the same sync points "
                                            f"and collectives in the same order", where=where)
                self.pause()
        finally:
            self.waiting[core_id] = None

    def barrier(self, core_id: int, op: str) -> None:
        """``core_barrier``: wait until the other core reaches its matching barrier."""
        if self.cancelled:
            raise CoreStopped
        key = self._post(core_id, ("core_barrier",), None)
        self._wait(core_id, op, ("core_barrier",), key)

    def send(self, core, op: str, pipe_id: int, payload, receive: Callable, dst) -> None:
        """``sendrecv`` on ``pipe_id``: post ``payload``; ``receive(peer_payload)`` writes this
        core's dst now if the peer's matching call was posted, else before this core's next
        instruction that is not a sync op (or when its kernel returns)."""
        core_id = core.core_id
        if self.cancelled:
            raise CoreStopped
        point = ("sendrecv", pipe_id)
        key = self._post(core_id, point, payload)
        if key in self.posts and not self.pending[core_id]:
            got = self.posts.pop(key)
        else:
            self.pending[core_id].append((point, key, receive, core.ins, kernel_location(), dst.alloc))
            core.before_ins = self.before_instruction
            core.fast = False
            return
        receive(got)

    def complete(self, core, count: int | None = None) -> None:
        """Write the first ``count`` (default: every) pending receives of ``core``, in call order,
        waiting for the peer's posts."""
        core_id = core.core_id
        pending = self.pending[core_id]
        count = len(pending) if count is None else count
        for _ in range(count):
            point, key, receive, ins, where, _ = pending[0]
            got = self._wait(core_id, ins.op, point, key, where)
            prev, core.ins = core.ins, ins       # the write is the sendrecv's (race and event roles)
            try:
                receive(got, where)
            finally:
                core.ins = prev
            pending.pop(0)
        if not self.cancelled and not pending:
            core.before_ins = None
            core.fast = core.settings.fast_paths


def take_shared_turn(t, kind: str, accumulation: bool) -> None:
    """The access hook (``alloc.watch``) of a shared-HBM allocation under LNC2: a core's first
    shared-HBM access in an instruction waits for its turn (``Rendezvous.take_turn``)."""
    core = state.current.get()
    if core is not None:
        sync = core.launch.sync
        if sync is not None and not sync.holding[core.core_id]:
            sync.take_turn(core)


_SYNC_APIS = frozenset(("nisa.core_barrier", "nisa.sendrecv"))


def _describe(point):
    return point[0] if len(point) == 1 else f"{point[0]} (pipe_id={point[1]})"


def run_cores(func, args, kwargs, launch, finish: Callable):
    """Run the kernel body on each core, cooperatively in the calling thread (``finish(core)``
    after it returned); return core 0's result.

    Each core runs in a greenlet (``_take_worker``) with a contextvars context of its own (its
    ``state.current``); the caller's greenlet schedules them: core 0 first, then whichever core is not the one that just
    paused or finished (a core that pauses while the other has started switches into it
    directly, ``Rendezvous.pause``: the same order, one switch). A launch never outlives its call: on any exit (a core failed, the
    caller's thread was interrupted, e.g. KeyboardInterrupt, or a rank of a multi-rank launch
    failed) the rendezvous is cancelled and every core that is suspended is stopped where it
    waits (a core never started is not started), so the caller's arrays are restored after the
    last write. When one core fails, the other stops the same way (it does not run to the
    end)."""
    n = launch.lnc
    sync = launch.sync = Rendezvous(n, launch.settings.barrier_timeout_s)
    results: list = [None] * n
    errors: list = [None] * n

    def body(core_id):
        core = state.CoreState(launch, core_id)
        state.current.set(core)
        sync.attach(core)
        try:
            results[core_id] = func(*args, **kwargs)
            try:
                sync.complete(core)        # receives still pending when the body returned
            except NkiError as exc:
                if not launch.record(exc):
                    raise
            finish(core)
        except BaseException as exc:  # re-raised in the caller's greenlet below
            errors[core_id] = exc
            sync.cancel()
        finally:
            sync.core_finished(core_id)

    hub = sync.hub = greenlet.getcurrent()
    workers = sync.workers                        # each core's worker greenlet, once started
    done = [False] * n
    try:
        c, left = 0, n
        while left and not sync.cancelled:
            if done[c]:
                c = done.index(False)
            g = workers[c]
            sync.running = c
            if g is None:
                g = workers[c] = _take_worker(hub)
                got = g.switch(functools.partial(body, c))
            else:
                got = g.switch()
            c = sync.running        # the core that handed back (cores switch into each other: pause)
            if got is _DONE:
                done[c] = True
                left -= 1
                _give_back(workers[c])
            c = (c + 1) % n
    except BaseException:
        sync.cancel()
        _stop_cores(workers, done)
        raise
    _stop_cores(workers, done)
    failures = [(i, e) for i, e in enumerate(errors) if e is not None and not isinstance(e, CoreStopped)]
    if failures:
        # The root cause first: a deadlock is usually the consequence of the other core's error,
        # and an uninitialised read on one core may be the consequence of a race with the other.
        failures.sort(key=lambda ie: (isinstance(ie[1], DeadlockError), not isinstance(ie[1], RaceError)))
        core_id, exc = failures[0]
        if isinstance(exc, NkiError) and hasattr(exc, "add_note"):
            exc.add_note(f"(raised on LNC core {core_id})")
        raise exc
    if sync.cancelled and any(isinstance(e, CoreStopped) for e in errors):
        raise CoreStopped          # stopped from outside (a failing rank): the rank's caller drops it
    return results[0]


def _stop_cores(workers, done) -> None:
    """Stop every suspended core where it waits (CoreStopped raised there, its ``finally``
    blocks run); a core never started is not started. Exceptions that arrive meanwhile (a
    KeyboardInterrupt) do not cut this short; the first is raised at the end."""
    first = None
    for i, g in enumerate(workers):
        while g is not None and not done[i] and not g.dead:
            try:
                if g.throw(CoreStopped) is _DONE:
                    done[i] = True
                    _give_back(g)
            except CoreStopped:
                pass
            except BaseException as exc:      # keep stopping; raised afterwards
                first = first or exc
    if first is not None:
        raise first


# Decision (speed): the greenlets cores run in are kept, a few per thread, and reused: starting
# a new greenlet costs ~20 us (measured, greenlet 3.5 on CPython 3.11), switching into an idle
# one ~1 us. A worker holds no reference to its last core's body once it ended.
_DONE = object()                  # what a worker hands its hub when its core's body ended
_POOL = threading.local()         # .idle: the idle workers of this thread
_POOL_SIZE = 4


def _worker(task):
    """A worker greenlet: run one core's body per task, then hand _DONE to the hub that gave
    it and wait for the next task."""
    while True:
        task()
        task = None
        task = greenlet.getcurrent().parent.switch(_DONE)


def _take_worker(hub):
    """An idle worker of this thread (or a new one), scheduled by ``hub``, with a fresh
    contextvars context (its core's own ``state.current``, as a fresh thread had)."""
    idle = getattr(_POOL, "idle", None)
    if idle is None:
        idle = _POOL.idle = []
    g = idle.pop() if idle else greenlet.greenlet(_worker)
    g.parent = hub
    g.gr_context = contextvars.Context()
    return g


def _give_back(g) -> None:
    idle = _POOL.idle
    if len(idle) < _POOL_SIZE:
        idle.append(g)


class _CoreThread:
    """One core's thread and what stopping it needs: whether it was spawned and began, and
    whether it runs the kernel (only then may an asynchronous CoreStopped be raised in it)."""

    def __init__(self, core_id):
        self.core_id = core_id
        self.thread = None
        self.spawned = False
        self.began = threading.Event()
        self.done = threading.Event()       # set by the thread as its last step
        self.live = False
        self.guard = threading.Lock()

    def leave(self) -> None:
        """The kernel body is over: no asynchronous stop may arrive any more (one not yet
        delivered is dropped)."""
        import ctypes
        with self.guard:
            self.live = False
            ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(threading.get_ident()), None)

    def interrupt(self) -> None:
        import ctypes
        with self.guard:
            if self.live and self.thread.ident is not None:
                ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(self.thread.ident),
                                                           ctypes.py_object(CoreStopped))


def _reap(thread) -> None:
    """Wait (up to 1 s) until a thread that finished its work has left ``threading``'s table.
    Decision: the thread's own ``done`` event says when it ended, not ``Thread.join`` /
    ``is_alive``: a KeyboardInterrupt inside ``join(timeout)`` can mark a running thread stopped
    (CPython bpo-45274's handling in ``_wait_for_tstate_lock``)."""
    thread.join(1.0)
    end = time.monotonic() + 1.0
    while thread in threading.enumerate() and time.monotonic() < end:
        time.sleep(0.001)


def run_threads(threads, body, context, name: str, sync) -> None:
    """Run ``body(me)`` for each ``_CoreThread`` in a daemon thread of its own (in ``context()``,
    a fresh or copied contextvars context), wait until all are done or ``sync`` (a Rendezvous or
    a ranks World) is cancelled, then wait for every thread to end (``_stop_threads``). A
    KeyboardInterrupt in the caller cancels ``sync`` and is re-raised once the threads ended.
    Shared by the LNC2 cores of a launch and the ranks of a multi-rank launch."""
    def main(me):
        try:
            body(me)
        except CoreStopped:            # delivered late, after the thread's error was kept
            pass
        finally:
            me.done.set()

    for me in threads:
        me.thread = threading.Thread(target=context().run, args=(main, me),
                                     name=f"{name}{me.core_id}", daemon=True)
    try:
        for me in threads:
            me.spawned = True
            me.thread.start()
        for me in threads:
            while not me.done.wait(0.05) and not sync.cancelled:
                pass
    except BaseException:
        sync.cancel()
        _stop_threads(threads)
        raise
    interrupted = _stop_threads(threads)      # after one failed: the others end too
    if interrupted is not None:
        raise interrupted


def _stop_threads(cores):
    """Wait until every core thread of a (cancelled) launch has ended; return the first
    exception (KeyboardInterrupt) that arrived meanwhile, which does not cut the wait short: the
    cores must not write after the caller's arrays are restored. A core still in its kernel a
    second after the cancel (a Python-level loop issues no instruction) gets CoreStopped raised
    in it. A thread whose start was interrupted is waited for if it began within 2 s."""
    first = None
    for me in cores:
        t0 = time.monotonic()
        stopped_at = None
        while me.spawned:
            try:
                if not me.began.is_set():
                    if me.began.wait(0.05) or time.monotonic() - t0 < 2.0:
                        continue
                    break                  # never ran (interrupted before it was spawned)
                if me.done.wait(0.05):
                    _reap(me.thread)
                    break
                now = time.monotonic()
                stopped_at = stopped_at or now
                if now - stopped_at >= 1.0:
                    me.interrupt()
                    stopped_at = now - 0.5
            except BaseException as exc:      # keep waiting; the caller raises it afterwards
                first = first or exc
    return first


__all__ = ["CoreStopped", "Rendezvous", "run_cores", "take_shared_turn", "run_threads"]
