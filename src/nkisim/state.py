"""The running launch, found through one ContextVar: per-core state of the kernel being simulated.

``runtime.launch`` creates and sets it; ops and allocations read it with ``core()``. Imports only
errors and arch/config types.
"""
from __future__ import annotations

import contextvars
import threading
from dataclasses import dataclass, field
from typing import Any

from .errors import NkiError, ReplayMismatch


class LaunchState:
    """What the cores of one kernel call share: settings, target, shared HBM, sync points."""

    def __init__(self, settings, target, lnc: int, program_ndim: int):
        self.settings = settings
        self.target = target
        self.lnc = lnc
        self.program_ndim = program_ndim
        self.lock = threading.Lock()
        self.shared_allocs: list = []          # k-th shared_hbm allocation of every core
        self.inputs: list = []                 # (caller array, tensor) pairs to write back
        self.done = [False] * lnc
        self.sync = None                       # runtime.launch.Rendezvous under LNC2
        self.shared_watch = None               # LNC2: alloc.watch of shared_hbm allocations (turns, races)
        self.shared_races = None               # checks.races.SharedRaces under LNC2 + detect_races
        self.program_races = None              # checks.races.ProgramRaces: Beta-1 SPMD grid + detect_races
        self.findings: list = []               # NkiErrors recorded when settings.findings == "all"
        self.recording = None                  # trace.Recording active when the launch started
        self.core_events: list = []            # one event list per core (while recording)
        self.fast_counts = None                # Counter of fast paths taken (while recording)
        self.next_id = 0                       # shared_hbm allocation ids
        self.param_names: tuple = ()           # kernel parameter names (argument ids in events)

    def count(self, fast_path: str) -> None:
        """Count one firing of a fast path (only while recording)."""
        c = self.fast_counts
        if c is not None:
            if self.lnc == 1:           # one core, one thread: no lock needed
                c[fast_path] += 1
            else:
                with self.lock:
                    c[fast_path] += 1

    def record(self, error) -> bool:
        """Keep ``error`` and go on (True) when findings="all" or "warn"; False means raise it."""
        if self.settings.findings == "first":
            return False
        with self.lock:
            self.findings.append(error)
        return True


@dataclass
class CoreState:
    """One NeuronCore's view of the launch: its id, its engine state, its allocation counters."""
    launch: LaunchState
    core_id: int
    shared_count: int = 0
    act_acc: Any = None        # ScalarE per-partition fp32 accumulator (np.ndarray (128,))
    vec_acc: Any = None        # VectorE per-partition fp32 accumulator
    serial: int = 0            # allocations made so far (orders allocations against loops)
    local_count: int = 0       # this core's own allocations so far (their ids: c<core>.<n>)
    loops: list = field(default_factory=list)   # running affine_range scopes (race detection)
    memory: Any = None         # memory.capacity.CoreMemory: live SBUF/PSUM allocations
    extras: dict = field(default_factory=dict)
    ins: Any = None            # isa.dispatch.Ins: the instruction running now (memory names operands by it)
    api: Any = None            # the nl function running now ("nl.load"), None for a bare nisa call
    seq: int = 0               # instructions issued so far (the event's seq)
    events: Any = None         # list of trace.Instruction while a recording is active, else None
    fast: bool = True          # settings.fast_paths: memo, deferred copies, storage pool, out= writes
    before_ins: Any = None     # LNC2: callable(ins) run() calls before an instruction (stop / pending receives)
    after_ins: Any = None      # LNC2: callable(core) the dispatcher calls when a top-level instruction ends
    mask: Any = None           # memory.masks.Box: the Beta-1 mask= of the instructions issued now (dispatch)
    keep: Any = None           # the running instruction's non-range mask: the dst elements it writes (access)
    settings: Any = field(init=False, repr=False)   # the launch's (plain attributes: every op
    target: Any = field(init=False, repr=False)     # reads the target, a property call is slower)

    def __post_init__(self):
        self.settings = self.launch.settings
        self.target = self.launch.target
        self.fast = self.launch.settings.fast_paths
        if self.launch.recording is not None:
            self.events = []
            self.launch.core_events.append((self.core_id, self.events))


current: contextvars.ContextVar[CoreState | None] = contextvars.ContextVar("nkisim_core", default=None)


def core(op: str = "nki") -> CoreState:
    """The calling core's state; raises NkiError when no kernel is being simulated."""
    c = current.get()
    if c is None:
        raise NkiError(op, "called outside a simulated kernel; run the kernel with nki.simulate(kernel)(...) "
                           "or set NKI_SIMULATOR=1")
    return c


def maybe_core() -> CoreState | None:
    return current.get()


def value_read(what: str) -> None:
    """A tensor's value went back to Python (``what``: a register load, ``np.asarray(tile)``).
    After a loop replay skipped iterations (``runtime.replay``) it may be a value the skipped
    iterations would have written: raise ReplayMismatch so the launch runs again without replay."""
    c = current.get()
    if c is not None:
        rec = c.launch.recording
        if rec is not None and rec.replayed:
            raise ReplayMismatch(f"{what} read a value after a replayed loop")

