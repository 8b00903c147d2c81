"""Beta-1 assignment targets: in ``t[key] = nisa.activation(...)`` (a Beta-1 value-returning call
that is the whole right-hand side of a subscript assignment) the instruction writes ``t[key]``
itself, as the Beta-1 compiler places it, not a new tile then copied. Imports memory.tensor only.

``assignable(api)`` wraps a Beta-1 entry point: when it is called from a kernel statement of that
form, ``t[key]`` is evaluated first (in the kernel's frame) and offered to the call's result
allocation (``take``). The statement is found from the calling instruction's source position and
the kernel file's syntax tree (cached per call site); nothing is offered when the source cannot be
read, the key holds a call other than an index builder, or the view is not a plain on-chip view
whose memory no operand of the call shares except as exactly that view (``acc[...] = nl.add(acc,
x)`` writes acc in place: the call's final instruction reads its operands before writing). Python's own ``t[key] = result`` then assigns the
view to exactly itself, which ``NkiTensor.__setitem__`` skips.

``assignable(api, sums=True)`` (the matmuls: ``nisa.nc_matmul``, ``nl.matmul``) also offers the
target of ``t += call(...)`` and ``t[key] += call(...)`` (``take_sum``): the call accumulates into
``t`` itself, as the Beta-1 compiler runs ``psum += matmul`` (one accumulating matmul, the Beta-2
port's ``nc_matmul(dst=psum, ..., accumulate=True)``), and returns ``Summed(t)``, which the
``+=`` that follows takes as already done (``operators``: no second add). Nothing is offered for
``+=`` when any operand of the call shares the target's memory; an offer the call does not take
(dtype, shape or buffer differ) leaves the old path: a new result tile, then the in-place add.

``folds_zeros(frame)`` (Beta-1 ``nl.zeros``) tells whether the call at ``frame`` is the whole
right-hand side of ``name = nl.zeros(...)`` whose next use of ``name`` in the enclosing function
(source order) is the target of ``name += <...matmul(...)>`` or ``name[...] += <...matmul(...)>``,
reached from the zeros statement through later statements of the same block or the bodies of
``for`` / ``with`` statements among them; never when a nested function or lambda uses ``name``
or the name is declared global / nonlocal.
"""
from __future__ import annotations

import ast
import contextvars
import functools
import linecache
import sys

import numpy as np

from ..memory.tensor import NkiTensor

_HINT: contextvars.ContextVar = contextvars.ContextVar("nkisim_beta1_target", default=None)  # an Offer
_ACTIVE: contextvars.ContextVar = contextvars.ContextVar("nkisim_beta1_call", default=False)
_MISS = object()
_SITES: dict = {}          # (code object, instruction offset) -> (compiled target expression, summed) or None
_TREES: dict = {}          # (file name, its text) -> {(lineno, end_lineno, col, end_col) of a call: (target, summed)}
# calls a key may hold: index builders with no side effect (anything else: no target is offered)
_FOLDS: dict = {}          # (code object, instruction offset) -> folds_zeros answer
_ZERO_TREES: dict = {}     # (file name, its text) -> {position of an nl.zeros call: folds}
_MATMULS = {"nc_matmul", "matmul"}
_PURE_CALLS = {"arange", "ds", "mgrid", "par_dim", "len", "min", "max", "int", "slice", "range"}


class Offer:
    """The assignment target offered to one Beta-1 call: ``view`` for ``api``; ``summed``: the
    statement is ``t += call`` (else ``t = call``); ``taken``: a result allocation took it."""
    __slots__ = ("view", "api", "summed", "taken")

    def __init__(self, view, api, summed):
        self.view, self.api, self.summed, self.taken = view, api, summed, False


class Summed:
    """The result of a call that accumulated into its ``t += call`` target ``view``: the in-place
    add that follows does nothing (``operators``) and leaves ``view``."""
    __slots__ = ("view",)

    def __init__(self, view):
        self.view = view


def assignable(api: str, sums: bool = False):
    """Decorate the Beta-1 entry point ``api`` (e.g. "nisa.activation") so that, called as the
    whole right-hand side of ``t[key] = ...``, its result allocation may be ``t[key]`` (``take``);
    with ``sums``, also of ``t += ...`` / ``t[key] += ...`` (``take_sum``)."""
    def deco(fn):
        @functools.wraps(fn)
        def call(*args, **kwargs):
            if _ACTIVE.get():                       # a Beta-1 call inside another: plain
                return fn(*args, **kwargs)
            return call_at(sys._getframe(1), api, fn, args, kwargs, sums)
        return call
    return deco


def call_at(frame, api, fn, args, kwargs, sums=False):
    """``fn(*args, **kwargs)`` as the Beta-1 call ``api`` made at ``frame``, its assignment target
    offered to its result; ``Summed(view)`` when it accumulated into a ``+=`` target."""
    offer = _offer(frame, args, kwargs, api, sums)
    active, hint = _ACTIVE.set(True), _HINT.set(offer)
    try:
        result = fn(*args, **kwargs)
    finally:
        _HINT.reset(hint)
        _ACTIVE.reset(active)
    if offer is not None and offer.summed and offer.taken:
        return Summed(offer.view)
    return result


def _claim(shape, dtype, buffer, api, summed):
    hint = _HINT.get()
    if hint is None or hint.api != api or hint.summed is not summed:
        return None
    _HINT.set(None)
    view = hint.view
    if tuple(view.shape) != tuple(int(s) for s in shape) or view.dtype != np.dtype(dtype) or view.buffer is not buffer:
        return None
    hint.taken = True
    return view


def take(shape, dtype, buffer, api: str):
    """The offered ``t[key] = ...`` target for the result of ``api`` when it has exactly this
    shape, dtype and buffer, else None. The offer is used up by the first result allocation of
    ``api`` that asks, matching or not (so no later allocation of the same call can take it). A
    ``+=`` offer is never taken here (nor used up): only ``take_sum`` takes it."""
    return _claim(shape, dtype, buffer, api, False)


def take_sum(shape, dtype, buffer, api: str):
    """The offered ``t += ...`` target for the result of ``api`` (which then accumulates into it)
    when it has exactly this shape, dtype and buffer, else None; used up as ``take``'s is."""
    return _claim(shape, dtype, buffer, api, True)


def target(frame, args, kwargs) -> NkiTensor | None:
    """``t[key]`` of the statement the call at ``frame``'s current instruction is the right-hand
    side of, evaluated in that frame; None when there is no such statement or the view does not
    qualify (see the module docstring)."""
    offer = _offer(frame, args, kwargs, "", False)
    return None if offer is None else offer.view


def _offer(frame, args, kwargs, api, sums) -> Offer | None:
    key = (frame.f_code, frame.f_lasti)
    site = _SITES.get(key, _MISS)
    if site is _MISS:
        site = _SITES[key] = _site(frame.f_code, frame.f_lasti, frame.f_globals)
    if site is None or (site[1] and not sums):
        return None
    code, summed = site
    try:
        view = eval(code, frame.f_globals, frame.f_locals)     # noqa: S307 (the kernel's own key)
    except Exception:           # noqa: BLE001 (a key this cannot rebuild here: the plain path)
        return None
    if type(view) is not NkiTensor or not view.on_chip or view.oob is not None or view.dynamic:
        return None
    if summed and view.storage is not view.alloc.storage:       # (a view of another dtype: the plain path)
        return None
    for t in _tiles((args, kwargs)):
        if getattr(t, "alloc", None) is view.alloc and (summed or not same_view(t, view)):
            return None
    return Offer(view, api, summed)


def same_view(t, view) -> bool:
    """``t`` is exactly ``view`` (``acc[...] = nl.add(acc, x)``): the call's last instruction reads
    its operands before it writes, so the result is the value assigned either way."""
    return (type(t) is NkiTensor and t.storage is view.storage and t.offset == view.offset
            and t.shape == view.shape and t.strides == view.strides and t.dtype == view.dtype)


def _tiles(value):
    if isinstance(value, NkiTensor) or hasattr(value, "alloc"):
        yield value
    elif isinstance(value, (tuple, list)):
        for v in value:
            yield from _tiles(v)
    elif isinstance(value, dict):
        for v in value.values():
            yield from _tiles(v)


def _site(code, lasti, module_globals=None):
    """(the compiled ``t[key]`` / ``t`` load, whether the statement is ``+=``) for the call
    instruction at ``lasti`` of ``code``, or None."""
    try:
        pos = list(code.co_positions())[lasti // 2]
    except (IndexError, ValueError):
        return None
    linecache.checkcache(code.co_filename)          # the file as it is now (it may have been rewritten)
    src = "".join(linecache.getlines(code.co_filename, module_globals))
    tree = _TREES.get((code.co_filename, src))
    if tree is None:
        tree = _TREES[(code.co_filename, src)] = _assignments(src)
    node = tree.get(pos)
    if node is None:
        return None
    try:
        return compile(ast.Expression(body=node[0]), code.co_filename, "eval"), node[1]
    except (SyntaxError, ValueError, TypeError):
        return None


def _assignments(src: str) -> dict:
    """{position of a call: (the target it is assigned to as a load, True for ``+=``)} for every
    ``t[key] = call(...)``, ``t[key] += call(...)`` and ``t += call(...)`` of the source ``src``
    whose key holds only pure calls (empty when it is empty or does not parse)."""
    try:
        tree = ast.parse(src)
    except (SyntaxError, ValueError):
        return {}
    out = {}
    for n in ast.walk(tree):
        if (isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Subscript)
                and isinstance(n.value, ast.Call) and _pure(n.targets[0])):
            sub, summed = n.targets[0], False
        elif (isinstance(n, ast.AugAssign) and isinstance(n.op, ast.Add) and isinstance(n.value, ast.Call)
                and isinstance(n.target, (ast.Subscript, ast.Name)) and _pure(n.target)):
            sub, summed = n.target, True
        else:
            continue
        v = n.value
        if isinstance(sub, ast.Name):
            load = ast.Name(id=sub.id, ctx=ast.Load())
        else:
            load = ast.Subscript(value=sub.value, slice=sub.slice, ctx=ast.Load())
        ast.copy_location(load, sub)
        ast.fix_missing_locations(load)
        out[(v.lineno, v.end_lineno, v.col_offset, v.end_col_offset)] = (load, summed)
    return out


def _pure(node) -> bool:
    for n in ast.walk(node):
        if isinstance(n, (ast.NamedExpr, ast.Lambda, ast.Await, ast.Yield, ast.YieldFrom)):
            return False
        if isinstance(n, ast.Call):
            f = n.func
            name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None
            if name not in _PURE_CALLS:
                return False
    return True


def folds_zeros(frame) -> bool:
    """Whether the ``nl.zeros`` call at ``frame``'s current instruction is ``name = nl.zeros(...)``
    whose next use of ``name`` is ``name += <matmul>`` / ``name[...] += <matmul>`` (the module
    docstring gives the exact rule); False when the source cannot be read. Cached per call site."""
    key = (frame.f_code, frame.f_lasti)
    r = _FOLDS.get(key)
    if r is None:
        r = _FOLDS[key] = _fold_site(frame.f_code, frame.f_lasti, frame.f_globals)
    return r


def _fold_site(code, lasti, module_globals) -> bool:
    try:
        pos = list(code.co_positions())[lasti // 2]
    except (IndexError, ValueError):
        return False
    linecache.checkcache(code.co_filename)
    src = "".join(linecache.getlines(code.co_filename, module_globals))
    tree = _ZERO_TREES.get((code.co_filename, src))
    if tree is None:
        tree = _ZERO_TREES[(code.co_filename, src)] = _zero_folds(src)
    return tree.get(pos, False)


def _zero_folds(src: str) -> dict:
    """{position of the call of every ``name = <...>zeros(...)`` statement inside a function: True
    when its zero fill folds into the next ``+=`` matmul (``folds_zeros``)}."""
    try:
        tree = ast.parse(src)
    except (SyntaxError, ValueError):
        return {}
    out = {}

    def visit(stmts, func):
        for i, s in enumerate(stmts):
            if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)):
                visit(s.body, s)
                continue
            if (func is not None and isinstance(s, ast.Assign) and len(s.targets) == 1
                    and isinstance(s.targets[0], ast.Name) and isinstance(s.value, ast.Call)
                    and _call_name(s.value) == "zeros"):
                v = s.value
                out[(v.lineno, v.end_lineno, v.col_offset, v.end_col_offset)] = _folds(func, stmts, i, s.targets[0].id)
            for field in ("body", "orelse", "finalbody", "handlers"):
                inner = getattr(s, field, None)
                if isinstance(inner, list) and inner and isinstance(inner[0], (ast.stmt, ast.excepthandler)):
                    visit(inner, func)
    visit(tree.body, None)
    return out


def _call_name(call):
    f = call.func
    return f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None


def _folds(func, stmts, i, name) -> bool:
    uses = []
    for n in ast.walk(func):
        if isinstance(n, (ast.Global, ast.Nonlocal)) and name in n.names:
            return False
        if n is not func and isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            if any(isinstance(m, ast.Name) and m.id == name for m in ast.walk(n)):
                return False
        if isinstance(n, ast.Name) and n.id == name:
            uses.append(n)
    end = (stmts[i].end_lineno, stmts[i].end_col_offset)
    later = [n for n in uses if (n.lineno, n.col_offset) >= end]
    if not later:
        return False
    use = min(later, key=lambda n: (n.lineno, n.col_offset))
    return _reaches(stmts[i + 1:], use, name)


def _reaches(stmts, use, name) -> bool:
    """The statement of ``stmts`` holding ``use`` is ``name (+ [key]) += <matmul call>``, or a
    ``for`` / ``with`` whose body (not its header) leads to one."""
    for s in stmts:
        if not any(n is use for n in ast.walk(s)):
            continue
        if isinstance(s, ast.AugAssign):
            t = s.target
            if isinstance(t, ast.Subscript):        # ``name[...]`` only: the whole tile
                if not (isinstance(t.slice, ast.Constant) and t.slice.value is Ellipsis):
                    return False
                t = t.value
            return (t is use and isinstance(s.op, ast.Add) and isinstance(s.value, ast.Call)
                    and _call_name(s.value) in _MATMULS)
        if isinstance(s, (ast.For, ast.With)) and any(any(n is use for n in ast.walk(b)) for b in s.body):
            return _reaches(s.body, use, name)
        return False
    return False


__all__ = ["Offer", "Summed", "assignable", "call_at", "folds_zeros", "take", "take_sum", "target"]
