"""``nkisim ops``: every public name of the ``nki.isa`` and ``nki.language`` faces with its kind,
status (simulated, partly, not yet) and the generations it is valid on, worked out from the code
each time it runs (so it cannot go stale). A command-line layer module: imports the faces.

How each column is found:
- kind: ``instruction`` (an ``@instruction`` spec in ``isa.dispatch.SPECS``), ``token`` (an
  ``nl`` operator token, ``language.ops.Op``), ``function``, ``enum``, ``class``, ``dtype``,
  ``buffer``, ``constant``.
- status ``not yet``: a function (or an object's ``__call__`` / ``__getitem__``) whose body does
  nothing but raise ``UnsupportedError``, directly or through a helper that does only that (read
  from its source with ``ast``). ``partly``: an instruction whose rules or compute, or an ``nl``
  function whose body, raises an ``UnsupportedError`` saying nkisim does not simulate a case (its
  message says "not simulated", "does not simulate" or "not yet"; helpers it calls are read one
  level deep), or a token in ``isa.alu``'s table of documented activation functions nkisim does
  not simulate. Decision: an ``UnsupportedError`` about the hardware (a generation or mode NKI
  rejects) does not make a name partly simulated; it is a rule, checked like any other.
- note: the message of each such error, read from its source. Decision: an f-string hole is
  rendered from the call site where the source gives its value (a string literal passed to the
  helper, or the keyword names a ``**operands`` helper loops over: "dst, src or dst_scale is an
  indirect view"), else restated as a plain word for what it stands for ("the target", "an
  operand", "a value"), so no ``{...}`` ever reaches the table (``_text``, ``_hole``, ``_bind``).
- generations: for an instruction, its rules are probed on each target of ``arch.TARGETS`` with
  placeholder arguments: a target on which they raise ``UnsupportedError`` naming that target
  before touching any argument lacks the instruction. For a token, ``arch.Target.alu_ops_excluded``.
  Decision: every other name is valid on every generation (``nl`` functions are compositions of
  instructions, whose own rules say where a case is not valid).
"""
from __future__ import annotations

import ast
import enum
import inspect
import textwrap
from dataclasses import dataclass

STATUSES = ("simulated", "partly", "not yet")
_GAP_WORDS = ("not simulated", "does not simulate", "not yet")
_FACES = (("nisa", "nkisim.nki.isa"), ("nl", "nkisim.nki.language"))


@dataclass(frozen=True)
class Row:
    """One public name: ``api`` ("nisa.tensor_tensor"), ``kind``, ``family`` (the isa module of an
    instruction, else ""), ``status``, ``generations`` (target names), ``note`` (why partly / not
    yet, from the error's message)."""
    api: str
    kind: str
    family: str
    status: str
    generations: tuple
    note: str = ""


# ---- reading the code -----------------------------------------------------------------------

def _tree(fn):
    """The ``ast`` of ``fn``'s source (a FunctionDef), or None when there is no source."""
    try:
        src = textwrap.dedent(inspect.getsource(fn))
        node = ast.parse(src).body[0]
    except (OSError, TypeError, SyntaxError, IndexError):
        return None
    return node if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) else None


def _is_unsupported_raise(node) -> bool:
    if not isinstance(node, ast.Raise) or not isinstance(node.exc, ast.Call):
        return False
    f = node.exc.func
    return (f.id if isinstance(f, ast.Name) else getattr(f, "attr", "")) == "UnsupportedError"


def _text(call: ast.Call, bound: dict | None = None) -> str:
    """The text of an error call's message argument, as the note shows it: an f-string's literal
    parts joined, each hole rendered (``_hole``) so no ``{...}`` ever reaches the table."""
    args = call.args[1:] if len(call.args) > 1 else call.args
    out = []
    for a in args[:1]:
        for part in (a.values if isinstance(a, ast.JoinedStr) else [a]):
            if isinstance(part, ast.Constant) and isinstance(part.value, str):
                out.append(part.value)
            elif isinstance(part, ast.FormattedValue):
                out.append(_hole(part.value, bound or {}))
    return " ".join("".join(out).split())


# Words for a hole whose value the source does not give, by the name the expression ends in
# (Decision: restate it plainly rather than show ``{nm}``; an unknown name reads "a value")
_HOLE_WORDS = {"op": "the op", "api": "the op", "opn": "the op", "nm": "an operand", "name": "an operand",
               "operand": "an operand", "role": "an operand", "arg": "an argument", "dtype": "the dtype",
               "shape": "the shape", "target": "the target", "t": "the target", "buffer": "the buffer",
               "engine": "the engine", "mode": "the mode", "axis": "the axis"}


def _hole(expr, bound: dict) -> str:
    """One f-string hole of a note: its value when ``bound`` (names the call site gives, see
    ``_bind``) knows the name, else a plain word for what it stands for (``_HOLE_WORDS``: by the
    expression's base name, then its attributes from the base out: ``{t.name}`` and
    ``{x.target.name}`` the target, ``{x.shape}`` the shape), else "a value"."""
    if isinstance(expr, ast.Name) and expr.id in bound:
        return bound[expr.id]
    node, attrs = expr, []
    while isinstance(node, (ast.Attribute, ast.Subscript, ast.Call)):
        if isinstance(node, ast.Attribute):
            attrs.append(node.attr)
        node = node.func if isinstance(node, ast.Call) else node.value
    if isinstance(node, ast.Name) and node.id in _HOLE_WORDS:
        return _HOLE_WORDS[node.id]
    return next((_HOLE_WORDS[a] for a in reversed(attrs) if a in _HOLE_WORDS), "a value")


def _bind(helper, call: ast.Call, bound: dict) -> dict:
    """The names a call ``helper(...)`` gives ``helper``'s source: a parameter passed a string
    literal (or a name the caller has bound) reads as that value; the names of the keywords a
    ``**kwargs`` parameter collects read as "a, b or c", and so does a loop variable over that
    dict's keys (``for nm, x in operands.items()``)."""
    try:
        params = list(inspect.signature(helper).parameters.values())
    except (TypeError, ValueError):
        return {}

    def value(node):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return node.value
        if isinstance(node, ast.Name) and node.id in bound:
            return bound[node.id]
        return None
    out: dict = {}
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    for p, node in zip(positional, call.args):
        v = value(node)
        if v is not None:
            out[p.name] = v
    named = {p.name for p in params}
    extra = []
    for kw in call.keywords:
        if kw.arg in named:
            v = value(kw.value)
            if v is not None:
                out[kw.arg] = v
        elif kw.arg is not None:
            extra.append(kw.arg)
    var_kw = next((p.name for p in params if p.kind is p.VAR_KEYWORD), None)
    if var_kw and extra:
        names = extra[0] if len(extra) == 1 else ", ".join(extra[:-1]) + " or " + extra[-1]
        out[var_kw] = names
        node = _tree(helper)
        for loop in (ast.walk(node) if node is not None else ()):
            if isinstance(loop, ast.For) and _iterates(loop.iter, var_kw):
                target = loop.target.elts[0] if isinstance(loop.target, ast.Tuple) else loop.target
                if isinstance(target, ast.Name):
                    out[target.id] = names
    return out


def _iterates(node, name: str) -> bool:
    """``name``, ``name.items()`` or ``name.keys()``: a loop over a dict's keys (first)."""
    if isinstance(node, ast.Name):
        return node.id == name
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("items", "keys") and isinstance(node.func.value, ast.Name)
            and node.func.value.id == name)


def _body(node):
    body = list(node.body)
    if body and isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None), ast.Constant):
        body = body[1:]
    return body


def _resolve(fn, name_node):
    """The function a call inside ``fn`` names (``helper(...)`` or ``module.helper(...)``), looked
    up in ``fn``'s globals; None when it is no plain Python function."""
    g = getattr(fn, "__globals__", {})
    if isinstance(name_node, ast.Name):
        obj = g.get(name_node.id)
    elif isinstance(name_node, ast.Attribute) and isinstance(name_node.value, ast.Name):
        obj = getattr(g.get(name_node.value.id), name_node.attr, None)
    else:
        return None
    return obj if inspect.isfunction(obj) else None


def _stub_reason(fn, depth: int = 1, bound: dict | None = None) -> str | None:
    """The message of the UnsupportedError ``fn`` raises when that is all it does, else None."""
    node = _tree(fn)
    if node is None:
        return None
    body = _body(node)
    if len(body) != 1:
        return None
    stmt = body[0]
    if _is_unsupported_raise(stmt):
        return _text(stmt.exc, bound) or "raises UnsupportedError"
    if depth and isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
        helper = _resolve(fn, stmt.value.func)
        if helper is not None:
            return _stub_reason(helper, depth - 1, _bind(helper, stmt.value, bound or {}))
    return None


def _gaps(fn, depth: int = 1, bound: dict | None = None) -> list:
    """Messages of the UnsupportedErrors in ``fn`` (and the helpers it calls, ``depth`` levels)
    that say nkisim does not simulate a case, as the notes show them (holes rendered)."""
    node = _tree(fn)
    if node is None:
        return []
    found, helpers = [], []
    for sub in ast.walk(node):
        if _is_unsupported_raise(sub):
            text = _text(sub.exc, bound)
            if any(w in text for w in _GAP_WORDS):
                found.append(text)
        elif depth and isinstance(sub, ast.Call):
            helper = _resolve(fn, sub.func)
            if helper is not None and helper is not fn:
                helpers.append((helper, sub))
    for h, call in helpers:
        found.extend(_gaps(h, depth - 1, _bind(h, call, bound or {})))
    return list(dict.fromkeys(found))


# ---- probing the rules per generation --------------------------------------------------------

class _Stop(Exception):
    """A rule touched a placeholder: it got past any whole-instruction generation check."""


class _Placeholder:
    """An argument that stops the rules as soon as they look at it."""

    def _stop(self, *args, **kwargs):
        raise _Stop

    __getattr__ = __getitem__ = __iter__ = __len__ = __bool__ = __index__ = __int__ = __float__ = _stop
    __eq__ = __ne__ = __lt__ = __le__ = __gt__ = __ge__ = __hash__ = __call__ = __contains__ = _stop


class _ProbeIns:
    """The ``ins`` a probed rule sees: its op and target, nothing else."""

    def __init__(self, op, target):
        self.op, self.api, self.target = op, op, target

    def __getattr__(self, name):
        raise _Stop


def _valid_on(spec, targets) -> tuple:
    """The targets on which ``spec``'s rules do not reject the instruction as a whole."""
    from .errors import UnsupportedError
    ok = []
    for t in targets:
        args = [_Placeholder() if p.default is p.empty else p.default
                for p in spec.signature.parameters.values()]
        try:
            spec.rules(_ProbeIns(spec.api, t), *args)
        except UnsupportedError as exc:
            if t.name in exc.what:
                continue
        except Exception:           # noqa: BLE001 - any other stop means the gate (if any) passed
            pass
        ok.append(t.name)
    return tuple(ok)


# ---- the rows --------------------------------------------------------------------------------

def _kind(prefix: str, name: str, obj, specs) -> str:
    from .language.ops import Op
    from .memory.buffers import MemoryRegion
    if f"{prefix}.{name}" in specs and prefix == "nisa":
        return "instruction"
    if isinstance(obj, Op):
        return "token"
    if isinstance(obj, MemoryRegion):
        return "buffer"
    if inspect.isclass(obj) and issubclass(obj, enum.Enum):
        return "enum"
    if isinstance(obj, enum.Enum):
        return "constant"
    if _is_dtype(obj):
        return "dtype"
    if inspect.isclass(obj):
        return "class"
    if callable(obj) or (hasattr(type(obj), "__getitem__") and not isinstance(obj, (dict, list, tuple, str))):
        return "function" if (inspect.isfunction(obj) or inspect.isbuiltin(obj)
                              or hasattr(obj, "__wrapped_api__")) else "object"
    return "constant"


def _is_dtype(obj) -> bool:
    import numpy as np
    try:
        return isinstance(obj, np.dtype) or (inspect.isclass(obj) and issubclass(obj, np.generic))
    except TypeError:
        return False


def _callables(obj) -> list:
    """The Python functions that implement ``obj``: itself, or its type's __call__/__getitem__."""
    if inspect.isfunction(obj):
        return [getattr(obj, "__wrapped_api__", obj)]
    out = []
    for attr in ("__call__", "__getitem__"):
        f = getattr(type(obj), attr, None)
        if inspect.isfunction(f):
            out.append(f)
    return out


def _row(prefix: str, name: str, obj, specs, targets) -> Row:
    from .isa import alu
    kind = _kind(prefix, name, obj, specs)
    everywhere = tuple(t.name for t in targets)
    if kind == "instruction":
        spec = specs[f"{prefix}.{name}"]
        gaps = _gaps(spec.rules) + _gaps(spec.compute)
        return Row(f"{prefix}.{name}", kind, spec.compute.__module__.rsplit(".", 1)[-1],
                   "partly" if gaps else "simulated", _valid_on(spec, targets), "; ".join(dict.fromkeys(gaps)))
    if kind == "token":
        gens = tuple(t.name for t in targets if name not in t.alu_ops_excluded)
        reason = getattr(alu, "_ACT_NOT_SIMULATED", {}).get(name)
        return Row(f"{prefix}.{name}", kind, "", "partly" if reason else "simulated", gens,
                   f"nisa.activation: {reason}" if reason else "")
    if kind in ("function", "object"):
        fns = _callables(obj)
        for f in fns:
            reason = _stub_reason(f)
            if reason is not None:
                return Row(f"{prefix}.{name}", kind, "", "not yet", everywhere, reason)
        gaps = [g for f in fns for g in _gaps(f)]
        return Row(f"{prefix}.{name}", kind, "", "partly" if gaps else "simulated", everywhere,
                   "; ".join(dict.fromkeys(gaps)))
    return Row(f"{prefix}.{name}", kind, "", "simulated", everywhere)


def rows(stubs_only: bool = False) -> list:
    """Every public name of ``nki.isa`` then ``nki.language`` (each face's ``__all__``, sorted);
    ``stubs_only``: only those not fully simulated (status partly or not yet)."""
    import importlib

    from . import arch
    from .isa import dispatch

    targets = sorted(arch.TARGETS.values(), key=lambda t: t.nc_version)
    out = []
    for prefix, module in _FACES:
        face = importlib.import_module(module)
        for name in sorted(set(face.__all__)):
            row = _row(prefix, name, getattr(face, name), dispatch.SPECS, targets)
            if not stubs_only or row.status != "simulated":
                out.append(row)
    return out


def _gens(row: Row, every: tuple) -> str:
    return "all" if row.generations == every else (", ".join(row.generations) or "none")


def text(table: list) -> str:
    """The plain listing: one line per name (api, kind, family, status, generations, note)."""
    from . import arch
    every = tuple(t.name for t in sorted(arch.TARGETS.values(), key=lambda t: t.nc_version))
    cells = [(r.api, r.kind, r.family or "-", r.status, _gens(r, every), r.note) for r in table]
    widths = [max((len(c[i]) for c in cells), default=0) for i in range(5)]
    return "\n".join("  ".join([c.ljust(w) for c, w in zip(cell[:5], widths)] + [cell[5]]).rstrip()
                     for cell in cells)


def markdown(table: list) -> str:
    """The README's table: name, kind, status, generations, note."""
    from . import arch
    every = tuple(t.name for t in sorted(arch.TARGETS.values(), key=lambda t: t.nc_version))
    lines = ["| name | kind | status | generations | note |", "|---|---|---|---|---|"]
    for r in table:
        note = r.note.replace("|", "\\|")
        lines.append(f"| `{r.api}` | {r.kind} | {r.status} | {_gens(r, every)} | {note} |")
    return "\n".join(lines)


__all__ = ["Row", "rows", "text", "markdown", "STATUSES"]
