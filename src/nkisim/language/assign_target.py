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
"""
from __future__ import annotations

import ast
import contextvars
import functools
import linecache
import sys

import numpy as np

from ..memory.tensor import NkiTensor

_HINT: contextvars.ContextVar = contextvars.ContextVar("nkisim_beta1_target", default=None)  # (view, api)
_ACTIVE: contextvars.ContextVar = contextvars.ContextVar("nkisim_beta1_call", default=False)
_MISS = object()
_SITES: dict = {}          # (code object, instruction offset) -> compiled ``t[key]`` expression or None
_TREES: dict = {}          # (file name, its text) -> {(lineno, end_lineno, col, end_col) of a call: its target}
# calls a key may hold: index builders with no side effect (anything else: no target is offered)
_PURE_CALLS = {"arange", "ds", "mgrid", "par_dim", "len", "min", "max", "int", "slice", "range"}


def assignable(api: str):
    """Decorate the Beta-1 entry point ``api`` (e.g. "nisa.activation") so that, called as the
    whole right-hand side of ``t[key] = ...``, its result allocation may be ``t[key]`` (``take``)."""
    def deco(fn):
        @functools.wraps(fn)
        def call(*args, **kwargs):
            if _ACTIVE.get():                       # a Beta-1 call inside another: plain
                return fn(*args, **kwargs)
            view = target(sys._getframe(1), args, kwargs)
            active, hint = _ACTIVE.set(True), _HINT.set(None if view is None else (view, api))
            try:
                return fn(*args, **kwargs)
            finally:
                _HINT.reset(hint)
                _ACTIVE.reset(active)
        return call
    return deco


def take(shape, dtype, buffer, api: str):
    """The offered assignment target for the result of ``api`` when it has exactly this shape,
    dtype and buffer, else None. The offer is used up by the first result allocation of ``api``
    that asks, matching or not (so no later allocation of the same call can take it)."""
    hint = _HINT.get()
    if hint is None or hint[1] != api:
        return None
    _HINT.set(None)
    view = hint[0]
    if tuple(view.shape) != tuple(int(s) for s in shape) or view.dtype != np.dtype(dtype) or view.buffer is not buffer:
        return None
    return view


def target(frame, args, kwargs) -> NkiTensor | None:
    """``t[key]`` of the statement the call at ``frame``'s current instruction is the right-hand
    side of, evaluated in that frame; None when there is no such statement or the view does not
    qualify (see the module docstring)."""
    key = (frame.f_code, frame.f_lasti)
    site = _SITES.get(key, _MISS)
    if site is _MISS:
        site = _SITES[key] = _site(frame.f_code, frame.f_lasti, frame.f_globals)
    if site is None:
        return None
    try:
        view = eval(site, frame.f_globals, frame.f_locals)     # noqa: S307 (the kernel's own key)
    except Exception:           # noqa: BLE001 (a key this cannot rebuild here: the plain path)
        return None
    if type(view) is not NkiTensor or not view.on_chip or view.oob is not None or view.dynamic:
        return None
    for t in _tiles((args, kwargs)):
        if getattr(t, "alloc", None) is view.alloc and not _same_view(t, view):
            return None
    return view


def _same_view(t, view) -> bool:
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
    """The compiled ``t[key]`` load for the call instruction at ``lasti`` of ``code``, or None."""
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
        return compile(ast.Expression(body=node), code.co_filename, "eval")
    except (SyntaxError, ValueError, TypeError):
        return None


def _assignments(src: str) -> dict:
    """{position of a call: the Subscript it is assigned to} for every ``t[key] = call(...)`` of the
    source ``src`` whose key holds only pure calls (empty when it is empty or does not parse)."""
    try:
        tree = ast.parse(src)
    except (SyntaxError, ValueError):
        return {}
    out = {}
    for n in ast.walk(tree):
        if (isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Subscript)
                and isinstance(n.value, ast.Call) and _pure(n.targets[0])):
            v = n.value
            sub = n.targets[0]
            load = ast.Subscript(value=sub.value, slice=sub.slice, ctx=ast.Load())
            ast.copy_location(load, sub)
            ast.fix_missing_locations(load)
            out[(v.lineno, v.end_lineno, v.col_offset, v.end_col_offset)] = load
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


__all__ = ["assignable", "take", "target"]
