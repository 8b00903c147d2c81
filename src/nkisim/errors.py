"""The nkisim exception family: one class per kind of broken rule, each also a builtin subclass.

Every message reads ``<op>: <what> (<file>:<line>)`` where file:line is the innermost frame of the
kernel (the first frame outside nkisim). Imports nothing from nkisim.
"""
from __future__ import annotations

import os
import sys

_PKG_DIR = os.path.dirname(os.path.abspath(__file__))


_INTERNAL: dict = {}
# nkisim's own kernels and examples are kernels like any other: errors name their lines
_USER_DIRS = tuple(os.path.join(_PKG_DIR, d) + os.sep for d in ("kernels", "examples"))


def _is_internal(filename: str) -> bool:
    hit = _INTERNAL.get(filename)
    if hit is None:
        path = os.path.abspath(filename)
        hit = _INTERNAL[filename] = ((path.startswith(_PKG_DIR) and not path.startswith(_USER_DIRS))
                                     or filename.startswith(("<frozen", "<nkisim"))
                                     or "importlib" in filename)
    return hit


_BASENAME: dict = {}     # id(code) -> (code, basename of a user file, or None for nkisim's code)
_LOCATION: dict = {}     # (id(code), instruction offset) -> (code, "file:line")
# Keyed by id() (a code object's own hash walks its bytecode and constants); the stored code
# object is compared by identity, so a recycled id never returns a stale entry.


def kernel_location(depth: int = 1) -> str:
    """``file:line`` of the innermost caller frame that is not nkisim code ("?" if none)."""
    frame = sys._getframe(depth)
    while frame is not None:
        code = frame.f_code
        entry = _BASENAME.get(id(code))
        if entry is None or entry[0] is not code:
            if len(_BASENAME) > 65536:
                _BASENAME.clear()
            entry = _BASENAME[id(code)] = (code, None if _is_internal(code.co_filename)
                                           else os.path.basename(code.co_filename))
        base = entry[1]
        if base is not None:
            key = (id(code), frame.f_lasti)
            hit = _LOCATION.get(key)
            if hit is None or hit[0] is not code:
                if len(_LOCATION) > 65536:
                    _LOCATION.clear()
                hit = _LOCATION[key] = (code, f"{base}:{frame.f_lineno}")
            return hit[1]
        frame = frame.f_back
    return "?"


def kernel_path(depth: int = 1) -> str | None:
    """The full file name of the frame ``kernel_location(depth)`` names (None if none). Only for
    errors, when raising: the hot path is ``kernel_location``."""
    frame = sys._getframe(depth)
    while frame is not None:
        if not _is_internal(frame.f_code.co_filename):
            return frame.f_code.co_filename
        frame = frame.f_back
    return None


class NkiError(Exception):
    """A kernel broke a hardware or API rule. ``op`` names the instruction or API, ``what`` the rule.

    Structured fields (the message is built from ``op``, ``what``, ``where`` alone): ``operand``
    (the public parameter name that broke the rule, where the raising check knows it), ``limit``
    (the limit it broke: a number, or the accepted buffers / dtypes / engines), ``path`` (the full
    file name of the kernel line in ``where``, when found by walking the stack); ``file`` and
    ``line`` split ``where``. Machine-readable records: ``nkisim.findings.record``. ``fatal``: True
    once a findings="warn"/"all" launch has marked the error always fatal (broken outside any
    instruction; ``runtime.launch.mark_fatal``).
    """

    fatal = False

    def __init__(self, op: str, what: str, where: str | None = None, *, operand: str | None = None,
                 limit=None):
        self.op, self.what = op, what
        self.operand, self.limit = operand, limit
        if where is None:
            self.where, self.path = kernel_location(2), kernel_path(2)
        else:
            self.where, self.path = where, None
        super().__init__(f"{op}: {what} ({self.where})")

    @property
    def file(self) -> str | None:
        """The kernel's file: its full name when known, else the base name ``where`` gives."""
        if self.path is not None:
            return self.path
        name = self.where.rpartition(":")[0]
        return name or None

    @property
    def line(self) -> int | None:
        """The kernel's line number from ``where`` (None if there is none, e.g. "?")."""
        tail = self.where.rpartition(":")[2]
        return int(tail) if tail.isdigit() else None

    def __reduce__(self):
        return (type(self), (self.op, self.what, self.where), self._fields())

    def _fields(self) -> dict:
        return {"operand": self.operand, "limit": self.limit, "path": self.path, "fatal": self.fatal}


class ShapeError(NkiError, ValueError):
    """Operand shapes, partition counts or element counts break a rule."""


class DtypeError(NkiError, TypeError):
    """A dtype the op, engine or target does not accept."""


class MemorySpaceError(NkiError, ValueError):
    """An operand lives in a buffer (HBM, SBUF, PSUM) the op cannot use."""


class BoundsError(NkiError, IndexError):
    """An index, slice or access pattern reaches outside its tensor."""


class CapacityError(NkiError, MemoryError):
    """An allocation does not fit in SBUF, PSUM or the device's HBM."""


class KernelArgumentError(NkiError, TypeError):
    """A kernel was called with an argument of a kind NKI kernels do not take (e.g. a list)."""


class FindingsError(NkiError, RuntimeError):
    """A ``findings="all"`` launch in which rules broke: ``.findings`` holds every recorded NkiError
    in the order they happened; the message counts them by kind and quotes the first."""

    def __init__(self, op: str, what: str, where: str | None = None, findings=()):
        self.findings = list(findings)
        super().__init__(op, what, where)

    def __reduce__(self):
        return (type(self), (self.op, self.what, self.where, self.findings), self._fields())


class RaceError(NkiError, RuntimeError):
    """Two iterations or two cores touch the same elements without ordering."""


class UninitializedReadError(NkiError, RuntimeError):
    """An instruction read elements that were never written."""


class ArgumentError(NkiError, ValueError):
    """An argument value the op does not accept: an operator, enum member, axis or option."""


class EngineError(NkiError, ValueError):
    """The op cannot run on the requested engine."""


class UnsupportedError(NkiError, NotImplementedError):
    """The target generation (or nkisim) does not support this op, mode or dtype."""


class DeadlockError(NkiError, RuntimeError):
    """LNC cores wait at synchronisation points that can never be met."""


class LoopLimitError(NkiError, RuntimeError):
    """A dynamic loop ran more iterations than ``Settings.max_loop_iterations`` (it would hang).
    Decision: its own class, not DeadlockError (no core waits for another) nor UnsupportedError
    (the loop is legal NKI; its condition just never clears)."""


class SimulatorOffError(RuntimeError):
    """A jitted kernel was called for hardware, but there is no Neuron device and the simulator is off."""


__all__ = [
    "NkiError", "ShapeError", "DtypeError", "MemorySpaceError", "BoundsError", "CapacityError",
    "KernelArgumentError", "FindingsError",
    "RaceError", "UninitializedReadError", "ArgumentError", "EngineError", "UnsupportedError", "DeadlockError",
    "LoopLimitError", "SimulatorOffError", "kernel_location", "kernel_path",
]


class ReplayMismatch(Exception):
    """Internal to timing-only profiles (``runtime.replay``): a replayed loop's last iteration
    differed from its extrapolation, or a value went back to Python after a skipped iteration;
    ``runtime.profiling`` then runs the launch again without replay (a user never sees it)."""

