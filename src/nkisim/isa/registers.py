"""Scalar registers: ``register_alloc``, ``register_move``, ``register_load``, ``register_store``.

A ``VirtualRegister`` holds one 32-bit integer. Kernels use registers as loop bounds
(``nl.dynamic_range``, ``nl.fori_loop``), as ``while reg:`` conditions and as ``scalar_offset`` of
``.ap()``. Decision: the simulator knows every register's value, so ``int(reg)``, ``bool(reg)``
and comparisons (``==``, ``!=``, ``<``, ``<=``, ``>``, ``>=`` with an integer or another
register) are computed from its current value: the docs allow registers in Python control flow
(``while reg:``, ``nl.dynamic_range(reg)``) under the parser frontend; under the tracer frontend
they raise TypeError. Comparing with anything else raises DtypeError: never a silent constant.
A ``while`` loop testing a register stops with LoopLimitError past ``max_loop_iterations``. Register values are runtime state: every register
instruction is an ``@instruction`` spec with ``memo=False`` and reads or writes values only in its
compute function. Source: aws-neuron-sdk nki/api/nki/isa/__init__.py (VirtualRegister,
register_alloc, register_move, register_load, register_store). Imports memory, checks, dispatch.
"""
from __future__ import annotations

import dis
import operator
import sys

import numpy as np

from .. import state
from ..checks import rules
from ..errors import DtypeError, LoopLimitError, MemorySpaceError, ShapeError, UninitializedReadError
from ..memory.access import read_raw, write
from ..memory.tensor import NkiTensor
from .dispatch import Passed, api_function, instruction
from .enums import engine as _engine

_I32 = np.iinfo(np.int32)
# Decision: the docs say "Each engine sequencer (Tensor/Scalar/Vector/GpSimd/Sync Engine) within a
# NeuronCore maintains its own set of physical registers" and that the compiler picks the sequencer;
# they name no engine for register instructions, so their events name the Sync engine.
_REGISTER_ENGINE = _engine.sync


class VirtualRegister:
    """A 32-bit scalar register; ``.value`` is its current value (None until written)."""
    __slots__ = ("value", "frozen")

    def __init__(self, value=None, frozen=False):
        self.value = None if value is None else _wrap32(value)
        self.frozen = frozen

    def __int__(self):
        if self.value is None:
            raise UninitializedReadError("nisa.VirtualRegister", "register read before it was written")
        return self.value

    __index__ = __int__

    def __bool__(self):
        v = int(self) != 0
        _loop_condition(v, 2)
        return v

    def _compare(self, other, fn, sym):
        if isinstance(other, VirtualRegister):
            other = int(other)
        elif isinstance(other, (bool, np.bool_)) or not isinstance(other, (int, float, np.integer, np.floating)):
            raise DtypeError("nisa.VirtualRegister", f"cannot compare a register with "
                                                     f"{type(other).__name__} {other!r} ({sym}); compare "
                                                     f"it with an integer or another register")
        v = fn(int(self), other)
        _loop_condition(v, 3)
        return v

    def __eq__(self, other):
        return self._compare(other, operator.eq, "==")

    def __ne__(self, other):
        return self._compare(other, operator.ne, "!=")

    def __lt__(self, other):
        return self._compare(other, operator.lt, "<")

    def __le__(self, other):
        return self._compare(other, operator.le, "<=")

    def __gt__(self, other):
        return self._compare(other, operator.gt, ">")

    def __ge__(self, other):
        return self._compare(other, operator.ge, ">=")

    __hash__ = object.__hash__      # Decision: by identity (a register is mutable state)

    def __repr__(self):
        return f"VirtualRegister({self.value})"


# ---- `while reg:` / `while reg != 0:` in kernel code: the iteration cap ---------------------------

_BACK_EDGES: dict = {}      # id(code) -> (code, {offset: value that loops})


def _back_edges(code) -> dict:
    """Offsets in ``code`` whose value decides whether a ``while`` loop runs once more (its
    bottom test): a backward conditional jump (Python 3.11), or a conditional jump out of the
    loop right before the jump back to its body (3.12+; a jump back to a ``for`` loop's
    ``FOR_ITER`` is an ``if`` at the end of a for body, not a loop test); also the comparison
    or ``TO_BOOL`` right before it, where a register's ``__eq__``/``__bool__`` is called. Each
    with the truth value that runs the loop once more."""
    hit = _BACK_EDGES.get(id(code))
    if hit is not None and hit[0] is code:
        return hit[1]
    ins = [i for i in dis.get_instructions(code) if i.opname != "CACHE"]
    at = {i.offset: i for i in ins}
    edges: dict = {}
    for k, i in enumerate(ins):
        name = i.opname
        if "JUMP" not in name or not name.endswith(("_IF_TRUE", "_IF_FALSE")):
            continue
        if_true = name.endswith("_IF_TRUE")
        if "BACKWARD" in name or (isinstance(i.argval, int) and i.argval < i.offset):
            loops = if_true                       # jumps back to the body when the test holds
        elif (k + 1 < len(ins) and ins[k + 1].opname.startswith("JUMP_BACKWARD")
              and getattr(at.get(ins[k + 1].argval), "opname", "FOR_ITER") != "FOR_ITER"):
            loops = not if_true                   # falls through to the jump back
        else:
            continue
        edges[i.offset] = loops
        j = k - 1
        if j >= 0 and ins[j].opname == "TO_BOOL":
            edges[ins[j].offset] = loops
            j -= 1
        if j >= 0 and ins[j].opname == "COMPARE_OP":
            edges[ins[j].offset] = loops
    if len(_BACK_EDGES) > 4096:
        _BACK_EDGES.clear()
    _BACK_EDGES[id(code)] = (code, edges)
    return edges


def _loop_condition(value, depth: int) -> None:
    """Count the iterations of a kernel's Python ``while`` loop whose condition is a register
    (``while reg:``, ``while reg != 0:``): each time its bottom test jumps back is one more
    iteration; past ``settings.max_loop_iterations`` it raises LoopLimitError naming the loop's
    line (a condition that never clears would hang the simulation). Other uses of a register's
    truth (``if reg:``) are not counted."""
    core = state.maybe_core()
    if core is None:
        return
    frame = sys._getframe(depth)      # the frame that tests the register
    edges = _back_edges(frame.f_code)
    loops = edges.get(frame.f_lasti)
    if loops is None:
        return
    counts = core.extras.setdefault("while_loops", {})
    key = (id(frame), frame.f_lasti)
    if bool(value) is not loops:
        counts.pop(key, None)            # the loop ends
        return
    n = counts.get(key, 1) + 1           # the first iteration passed the loop's top test
    cap = core.settings.max_loop_iterations
    if n > cap:
        counts.pop(key, None)
        raise LoopLimitError("while", f"the loop's register condition still holds after {cap} "
                                      f"iterations (max_loop_iterations {cap}, "
                                      f"NKISIM_MAX_LOOP_ITERATIONS); does it ever clear?")
    counts[key] = n


def _wrap32(v) -> int:
    v = int(v)
    return (v - _I32.min) % 2**32 + _I32.min


def _value(src, op):
    if isinstance(src, VirtualRegister):
        return int(src)
    if isinstance(src, NkiTensor):
        if src.size != 1:
            raise ShapeError(op, f"src must hold one element, got shape {src.shape}")
        state.value_read(op)
        return read_raw(src).reshape(-1)[0].item()
    return src


def _target_register(op, dst):
    if not isinstance(dst, VirtualRegister):
        raise DtypeError(op, f"dst must be a VirtualRegister, got {type(dst).__name__}")
    if dst.frozen:
        raise MemorySpaceError(op, "dst is a loop induction register, which is read-only")


def _move_rules(ins, dst, src, name):
    """register_move's rules: dst is a writable register."""
    _target_register(ins.op, dst)
    return Passed(_REGISTER_ENGINE)


def _move_compute(ins, dst, src, name):
    dst.value = _wrap32(_value(src, ins.op))


@instruction(rules=_move_rules, compute=_move_compute, memo=False)
def register_move(dst, src, name=None):
    """dst <- src (an integer constant or another register), wrapped to 32 bits.

    Engine: Sync (Decision: see ``_REGISTER_ENGINE``). Decision: ``name`` is accepted as on every
    other instruction (the documented signature is ``register_move(dst, src)``).
    Raises: DtypeError (dst not a register), MemorySpaceError (dst a loop induction register),
    UninitializedReadError (src a register never written).
    Source: aws-neuron-sdk nki/api/nki/isa/__init__.py (register_move).
    """


def _load_rules(ins, dst, src, name):
    """register_load's rules: dst is a writable register, src a tensor."""
    op = ins.op
    _target_register(op, dst)
    rules.tensor(op, "src", src)
    return Passed(_REGISTER_ENGINE)


def _load_compute(ins, dst, src, name):
    dst.value = _wrap32(_value(src, ins.op))


@instruction(reads=("src",), rules=_load_rules, compute=_load_compute, memo=False)
def register_load(dst, src, name=None):
    """dst <- the single element of ``src`` (a [1] or [1, 1] tensor in HBM or SBUF).

    Engine: Sync (Decision: see ``_REGISTER_ENGINE``). Decision: ``name`` is accepted (the
    documented signature is ``register_load(dst, src)``).
    Raises: DtypeError, MemorySpaceError (dst), ShapeError (src not a one-element tensor).
    Source: aws-neuron-sdk nki/api/nki/isa/__init__.py (register_load).
    """


def _store_rules(ins, dst, src, name):
    """register_store's rules: dst is a one-element tensor."""
    op = ins.op
    rules.tensor(op, "dst", dst)
    if dst.size != 1:
        raise ShapeError(op, f"dst must hold one element, got shape {dst.shape}")
    return Passed(_REGISTER_ENGINE)


def _store_compute(ins, dst, src, name):
    write(dst, np.array([int(src)], np.int64).reshape(dst.shape))


@instruction(writes=("dst",), rules=_store_rules, compute=_store_compute, memo=False)
def register_store(dst, src, name=None):
    """The single element of ``dst`` (a 1-element tensor) <- register ``src``.

    Engine: Sync (Decision: see ``_REGISTER_ENGINE``). Decision: ``name`` is accepted (the
    documented signature is ``register_store(dst, src)``).
    Raises: ShapeError (dst), UninitializedReadError (src never written).
    Source: aws-neuron-sdk nki/api/nki/isa/__init__.py (register_store).
    """


@api_function("nisa.register_alloc")
def register_alloc(x=None) -> VirtualRegister:
    """A new register, uninitialised or holding the integer ``x``.

    Allocation itself is no instruction ("conceptually allocates a register within a virtual
    register space"); Decision: an initial value ``x`` is one ``register_move`` instruction (its
    event has op ``register_move``, api ``nisa.register_alloc``).
    Source: aws-neuron-sdk nki/api/nki/isa/__init__.py (register_alloc).
    """
    state.core("nisa.register_alloc")
    reg = VirtualRegister()
    if x is not None:
        register_move(reg, x)
    return reg


__all__ = ["VirtualRegister", "register_alloc", "register_move", "register_load", "register_store"]
