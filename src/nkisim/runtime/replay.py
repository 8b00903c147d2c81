"""Loop-body replay for timing-only profiles (``nkisim.profile(compute=False)``, setting
``loop_replay``): a loop whose body provably issues the same instructions every iteration, each
operand moved by a constant stride, runs iterations 0, 1, 2 and the last; the others' events are
synthesised as exact translations of iteration 2's.

Why it is exact (each point is checked, and anything unproven runs the loop normally):

- Static guards on the body's AST (``_plan``): no branch, ``break``/``continue``/``return``,
  ``try``/``with``, comprehension, lambda, ``and``/``or``, conditional expression or walrus;
  no name is read before the body assigns it (no Python value carried from one iteration to the
  next), except ``t += ...`` on a tensor (an instruction, the tensor object unchanged); no
  attribute is assigned, and ``x[...] = ...`` only on a tensor; values derived from the loop
  index (tainted) only go through ``+``, ``-``, ``*`` by an untainted value, ``slice``, tensor
  subscripts and nkisim calls, so every offset the body computes is affine in the index; nested
  loops' bounds are untainted.
- Runtime guards when the loop starts and after iteration 2: every called name resolves to an
  nkisim function (not a dynamic loop, a register op, a collective or a print) or
  ``slice``/``range``/``len``;
  subscripted and ``+=`` names hold tensors; names the body assigns hold immutable values or
  tensors (no list or dict filled per iteration).
- Event guards: iterations 1 and 2 issue the same instructions (op, api, engine, location,
  options, operand roles, buffers, shapes, dtypes, sizes equal), each operand of iteration 2 is
  iteration 1's moved by a constant (view offset, partition and byte ranges; its allocation is
  the same one made before iteration 1, or the one made that many allocations later in the
  iteration); no operand has an unknown range (indirect or dynamic); the counters (instructions,
  allocations, the on-chip lifetime clock) advance by the same amount in iterations 0→1 and
  1→2 and no shared_hbm tensor is made. Iteration 0 may differ (a first, non-accumulating matmul).
- The last iteration runs for real and must equal the extrapolation, event for event; else
  ``ReplayMismatch``. Any error in a launch that replayed (and ``ReplayMismatch``, and a value
  read back into Python after a skip: a register load, ``np.asarray(tensor)``) makes
  ``run_profiled`` run the launch again without replay.

Only in timing-only recordings, LNC1, with ``detect_races`` off, ``findings="first"``,
sentinel uninitialised reads, program iteration order and fast paths on. Imports state,
trace.events and memory.tensor only.
"""
from __future__ import annotations

import ast
import builtins
import dis
import inspect
import textwrap

from ..errors import ReplayMismatch
from ..trace.events import Instruction, Operand

_GET_ITER = dis.opmap["GET_ITER"]
_LOOP_FUNCS = frozenset(("affine_range", "sequential_range", "static_range", "range"))
_DYNAMIC = frozenset(("dynamic_range", "fori_loop", "while_loop"))
_BUILTINS_OK = {"slice": builtins.slice, "range": builtins.range, "len": builtins.len}
# the simulator's own NKI API (ops, nl functions, views, loops): pure functions of their arguments
# and the simulator's state, never of user code
_OWN_MODULES = ("nkisim.isa.", "nkisim.language.", "nkisim.memory.", "nkisim.runtime.loops",
                "nkisim.runtime.beta1")
_MIN_TRIPS = 5          # 0, 1, 2 real, at least one synthesised, the last real


# ---- static analysis ------------------------------------------------------------------------------
class _Reject(Exception):
    pass


_BAD_NODES = (ast.If, ast.While, ast.Break, ast.Continue, ast.Return, ast.Try, ast.With,
              ast.AsyncWith, ast.AsyncFor, ast.Raise, ast.Assert, ast.Global, ast.Nonlocal,
              ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda, ast.Yield,
              ast.YieldFrom, ast.Await, ast.Delete, ast.Import, ast.ImportFrom, ast.IfExp,
              ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp, ast.BoolOp,
              ast.NamedExpr, ast.Starred, ast.Match if hasattr(ast, "Match") else ast.If,
              ast.TryStar if hasattr(ast, "TryStar") else ast.Try)
_LINEAR = (ast.Add, ast.Sub, ast.Mult)


class _Plan:
    """What the runtime must check for one loop: the call chains, the names that must hold
    tensors, the names the body assigns."""
    __slots__ = ("calls", "tensors", "stored", "aug")

    def __init__(self):
        self.calls: set = set()         # tuples of names: ("nisa", "dma_copy"), ("slice",)
        self.tensors: set = set()       # names that must hold an NkiTensor (subscripted by taint, +=)
        self.stored: set = set()        # names the body assigns
        self.aug: set = set()           # names of ``t += ...``


def _chain(node):
    """("a", "b", "c") for ``a.b.c``; None for anything else."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return tuple(reversed(parts))


class _Walker:
    """One pass over the body in evaluation order: taint (values derived from loop indices),
    first stores, and the rules of the module docstring."""

    def __init__(self, target: str):
        self.plan = _Plan()
        self.tainted = {target}
        self.assigned = {target}        # names with a value from this iteration
        self.loaded_first: set = set()  # names read before any store in the body

    def stmt(self, s):
        if isinstance(s, _BAD_NODES):
            raise _Reject(type(s).__name__)
        if isinstance(s, ast.Expr):
            self.expr(s.value)
        elif isinstance(s, ast.Assign):
            t = self.expr(s.value)
            for tg in s.targets:
                self.store(tg, t)
        elif isinstance(s, ast.AnnAssign):
            if s.value is None:
                raise _Reject("annotation")
            self.store(s.target, self.expr(s.value))
        elif isinstance(s, ast.AugAssign):
            t = self.expr(s.value)
            tg = s.target
            if isinstance(tg, ast.Name):            # ``acc += ...`` on a tensor: an instruction
                if t or tg.id in self.tainted:
                    raise _Reject("tainted +=")
                self.plan.aug.add(tg.id)
                self.plan.tensors.add(tg.id)
            elif isinstance(tg, ast.Subscript):
                self.subscript_store(tg, t)
            else:
                raise _Reject("attribute +=")
        elif isinstance(s, ast.For):
            if not isinstance(s.target, ast.Name) or s.orelse:
                raise _Reject("for target")
            it = s.iter
            if not isinstance(it, ast.Call) or _chain(it.func) is None:
                raise _Reject("for iter")
            if self.expr(it):
                raise _Reject("tainted inner bounds")
            self.tainted.add(s.target.id)
            self.assigned.add(s.target.id)
            self.plan.stored.add(s.target.id)
            for b in s.body:
                self.stmt(b)
        elif isinstance(s, ast.Pass):
            pass
        else:
            raise _Reject(type(s).__name__)

    def store(self, tg, tainted: bool):
        if isinstance(tg, ast.Name):
            self.assigned.add(tg.id)
            self.plan.stored.add(tg.id)
            if tainted:
                self.tainted.add(tg.id)
            else:
                self.tainted.discard(tg.id)
        elif isinstance(tg, ast.Tuple):
            for e in tg.elts:
                self.store(e, tainted)
        elif isinstance(tg, ast.Subscript):
            self.subscript_store(tg, tainted)
        else:
            raise _Reject("store")

    def subscript_store(self, tg, tainted):
        base = tg.value
        if not isinstance(base, ast.Name):
            raise _Reject("subscript store base")
        self.load(base.id)
        self.plan.tensors.add(base.id)
        self.expr(tg.slice)

    def load(self, name):
        if name not in self.assigned:
            self.loaded_first.add(name)

    def expr(self, e) -> bool:
        """Walk ``e``; True when its value depends on a loop index."""
        if isinstance(e, _BAD_NODES):
            raise _Reject(type(e).__name__)
        if isinstance(e, ast.Constant):
            return False
        if isinstance(e, ast.Name):
            self.load(e.id)
            return e.id in self.tainted
        if isinstance(e, ast.Attribute):
            t = self.expr(e.value)
            if t:
                raise _Reject("attribute of a tainted value")
            return False
        if isinstance(e, ast.BinOp):
            a, b = self.expr(e.left), self.expr(e.right)
            if not (a or b):
                return False
            if not isinstance(e.op, _LINEAR) or (isinstance(e.op, ast.Mult) and a and b):
                raise _Reject("nonlinear " + type(e.op).__name__)
            return True
        if isinstance(e, ast.UnaryOp):
            t = self.expr(e.operand)
            if t and not isinstance(e.op, (ast.USub, ast.UAdd)):
                raise _Reject("tainted unary")
            return t
        if isinstance(e, ast.Compare):
            if any(self.expr(x) for x in (e.left, *e.comparators)):
                raise _Reject("tainted comparison")
            return False
        if isinstance(e, (ast.Tuple, ast.List)):
            return any([self.expr(x) for x in e.elts])
        if isinstance(e, ast.Dict):
            return any([self.expr(x) for x in (*e.keys, *e.values) if x is not None])
        if isinstance(e, ast.Slice):
            return any([self.expr(x) for x in (e.lower, e.upper, e.step) if x is not None])
        if isinstance(e, ast.Subscript):
            tb = self.expr(e.value)
            ts = self.expr(e.slice)
            if ts:                          # an index from the loop: only into a named tensor
                if not isinstance(e.value, ast.Name):
                    raise _Reject("tainted index into an expression")
                self.plan.tensors.add(e.value.id)
            return tb or ts
        if isinstance(e, ast.Call):
            ch = _chain(e.func)
            if ch is None:
                raise _Reject("call of an expression")
            self.expr(e.func)
            t = any([self.expr(a) for a in e.args])
            t = any([self.expr(k.value) for k in e.keywords]) or t
            if any(k.arg is None for k in e.keywords):
                raise _Reject("**kwargs")
            self.plan.calls.add(ch)
            if t and ch in (("len",), ("range",)):
                raise _Reject("tainted builtin call")
            return t
        if isinstance(e, ast.JoinedStr):
            return any([self.expr(v) for v in e.values])
        if isinstance(e, ast.FormattedValue):
            return self.expr(e.value)
        raise _Reject(type(e).__name__)


_PLANS: dict = {}       # (code, line) -> (_Plan, target name) or None


def _function_ast(code):
    try:
        lines, first = inspect.getsourcelines(code)
    except (OSError, TypeError):
        return None, 0
    try:
        tree = ast.parse(textwrap.dedent("".join(lines)))
    except SyntaxError:
        return None, 0
    return tree, first - 1


def _plan(code, line: int):
    key = (code, line)
    if key in _PLANS:
        return _PLANS[key]
    result = None
    tree, shift = _function_ast(code)
    if tree is not None:
        found = [n for n in ast.walk(tree) if isinstance(n, ast.For) and n.iter.lineno + shift == line
                 and n.lineno + shift == line]
        if len(found) == 1 and isinstance(found[0].target, ast.Name) and not found[0].orelse:
            node = found[0]
            ch = _chain(node.iter.func) if isinstance(node.iter, ast.Call) else None
            if ch is not None and ch[-1] in _LOOP_FUNCS:
                w = _Walker(node.target.id)
                try:
                    for s in node.body:
                        w.stmt(s)
                    carried = (w.loaded_first & w.plan.stored) - w.plan.aug
                    if not carried:
                        result = (w.plan, node.target.id)
                except _Reject:
                    result = None
    if len(_PLANS) > 4096:
        _PLANS.clear()
    _PLANS[key] = result
    return result


# ---- runtime guards -------------------------------------------------------------------------------
def _resolve(frame, chain):
    name = chain[0]
    if name in frame.f_locals:
        obj = frame.f_locals[name]
    elif name in frame.f_globals:
        obj = frame.f_globals[name]
    elif hasattr(builtins, name):
        obj = getattr(builtins, name)
    else:
        raise LookupError(name)
    for a in chain[1:]:
        obj = getattr(obj, a)
    return obj


def _tensor_types():
    from ..memory.indirect import IndirectTensor
    from ..memory.tensor import NkiTensor
    return (NkiTensor, IndirectTensor)


def _callable_ok(obj, chain, stored) -> bool:
    if chain[0] in stored:          # a method of a value the body made (checked by _values_ok)
        return True
    if len(chain) == 1 and chain[0] in _BUILTINS_OK and obj is _BUILTINS_OK[chain[0]]:
        return True
    owner = getattr(obj, "__self__", None)
    if inspect.ismethod(obj) and isinstance(owner, _tensor_types()):
        return True                                 # a bound method of a tensor (a view, an op)
    if not (inspect.isfunction(obj) or inspect.isbuiltin(obj) or isinstance(obj, type)):
        return False                                # an object with __call__ (a sub-kernel, ...)
    mod = getattr(obj, "__module__", None) or ""
    if not mod.startswith(_OWN_MODULES):
        return False
    name = getattr(obj, "__name__", "")
    # dynamic loops, registers (values into control flow), collectives (other ranks wait for each
    # call), prints (output per iteration): never skipped
    return name not in _DYNAMIC and not any(w in mod for w in ("registers", "collectives")) \
        and "register" not in name and "print" not in name


_IMMUTABLE = (int, float, bool, str, type(None), slice, range)


def _value_ok(v, depth=0) -> bool:
    if isinstance(v, _IMMUTABLE):
        return True
    if isinstance(v, tuple) and depth < 3:
        return all(_value_ok(x, depth + 1) for x in v)
    if isinstance(v, _tensor_types()):
        return True
    mod = type(v).__module__ or ""
    if mod.startswith("numpy") and getattr(v, "ndim", 1) == 0:
        return True                 # a NumPy scalar
    # nkisim's own immutable helpers (nl.ds, Beta-1 index expressions, dtypes)
    return mod.startswith("nkisim") and not hasattr(v, "__setitem__") and not isinstance(v, list)


def _start_ok(frame, plan) -> bool:
    """The guards that hold before the loop runs: names resolve to allowed callables, tensors."""
    tensors = _tensor_types()
    try:
        for ch in plan.calls:
            if ch[0] in plan.stored:
                continue
            if not _callable_ok(_resolve(frame, ch), ch, plan.stored):
                return False
        for name in plan.tensors - plan.stored:
            if not isinstance(_resolve(frame, (name,)), tensors):
                return False
    except (LookupError, AttributeError):
        return False
    return True


def _values_ok(frame, plan, aug_before) -> bool:
    """After an iteration: the names the body assigned hold immutable values or tensors, the
    subscripted names tensors, and every ``+=`` name the same tensor as before the loop."""
    loc = frame.f_locals
    tensors = _tensor_types()
    for name in plan.stored:
        if name in loc and not _value_ok(loc[name]):
            return False
    for name in plan.tensors:
        if name in loc and not isinstance(loc[name], tensors):
            return False
    for name, obj in aug_before.items():
        if loc.get(name) is not obj:
            return False
    for ch in plan.calls:
        if ch[0] in plan.stored:
            try:
                obj = _resolve(frame, ch)
            except (LookupError, AttributeError):
                return False
            owner = getattr(obj, "__self__", None)
            if owner is None or not isinstance(owner, tensors):
                return False
    return True


# ---- event pattern ------------------------------------------------------------------------------------
def _alloc_number(a: str, pre: str):
    """n of allocation id ``a`` when it is ``<pre><n>`` (``pre``: ``c<core>.``), else None."""
    if a.startswith(pre):
        try:
            return int(a[len(pre):])
        except ValueError:
            return None
    return None


def _operand_step(o1: Operand, o2: Operand, pre, lc1, lc2, dlocal):
    """(alloc step, offset step, part step, byte step) taking o1 to o2, or None."""
    if (o1.role, o1.buffer, o1.shape, o1.dtype, o1.nbytes, o1.partitions, o1.contiguous_bytes) != \
            (o2.role, o2.buffer, o2.shape, o2.dtype, o2.nbytes, o2.partitions, o2.contiguous_bytes):
        return None
    if not o1.byte_end or not o2.byte_end or not o1.view or not o2.view:
        return None                 # an unknown range (indirect / dynamic view)
    if o1.view[1] != o2.view[1]:
        return None
    if o1.alloc == o2.alloc:
        n = _alloc_number(o1.alloc, pre)
        if n is not None and n > lc1:       # made in iteration 1 yet used in iteration 2
            return None
        da = 0
    else:
        n1, n2 = _alloc_number(o1.alloc, pre), _alloc_number(o2.alloc, pre)
        if n1 is None or n2 is None or n2 - n1 != dlocal or not (lc1 < n1 <= lc1 + dlocal) \
                or not (lc2 < n2 <= lc2 + dlocal):
            return None
        da = dlocal
    dp = o2.part_start - o1.part_start
    if o2.part_end - o1.part_end != dp:
        return None
    db = o2.byte_start - o1.byte_start
    if o2.byte_end - o1.byte_end != db:
        return None
    return (da, o2.view[0] - o1.view[0], dp, db)


def _same(a, b) -> bool:
    """``a == b`` as a plain bool (False when the comparison is not one: an array option)."""
    try:
        return bool(a == b)
    except (TypeError, ValueError):
        return False


def _event_steps(e1: Instruction, e2: Instruction, core_id, lc1, lc2, dlocal):
    if (e1.op, e1.api, e1.engine, e1.core, e1.location) != (e2.op, e2.api, e2.engine, e2.core, e2.location) \
            or not _same(e1.options, e2.options) \
            or len(e1.reads) != len(e2.reads) or len(e1.writes) != len(e2.writes):
        return None
    steps = []
    pre = f"c{core_id}."
    for o1, o2 in zip((*e1.reads, *e1.writes), (*e2.reads, *e2.writes)):
        s = _operand_step(o1, o2, pre, lc1, lc2, dlocal)
        if s is None:
            return None
        steps.append(s)
    return tuple(steps)


def _compile(template, steps, core_id) -> list:
    """The synthesis plan of one replayed loop: per event of ``template``, (its fields that never
    move: op, api, engine, core, location, options, origin; its seq; reads count; per operand
    (operand, None) when it never moves, else (operand, its moving fields, then its fields that
    never move: role, buffer, shape, dtype, nbytes, partitions, contiguous_bytes; its alloc))."""
    plan = []
    pre = f"c{core_id}."
    for ev, st in zip(template, steps):
        ops = []
        for o, (da, dv, dp, db) in zip((*ev.reads, *ev.writes), st):
            if not (da or dv or dp or db):
                ops.append((o, None))
            else:
                n0 = _alloc_number(o.alloc, pre) if da else None
                ops.append((o, (pre, n0, da, o.view[0], o.view[1], dv, o.part_start, o.part_end, dp,
                                o.byte_start, o.byte_end, db,
                                (o.role, o.buffer, o.shape, o.dtype, o.nbytes, o.partitions,
                                 o.contiguous_bytes), o.alloc)))
        head = (ev.op, ev.api, ev.engine, ev.core, ev.location, ev.options,
                ev if ev.origin is None else ev.origin)         # a nested loop's origin: its root
        plan.append((head, ev.seq, len(ev.reads), tuple(ops)))
    return plan


def _shifted(plan, k: int, dseq: int) -> list:
    """The events of the iteration ``k`` iterations after the template's (``_compile``); each
    event's ``origin`` is its template event (or that one's origin: an event that ran). Built by
    ``object.__new__`` and slot assignment (every field set, the same values the dataclass
    ``__init__`` would set, in a quarter of the time; the fields that never move unpacked from
    one tuple, a tenth less again)."""
    out = []
    add = out.append
    new_obj = object.__new__
    for head, seq, nr, ops in plan:
        new = []
        for o, m in ops:
            if m is None:
                new.append(o)
                continue
            pre, n0, da, v0, strides, dv, ps, pe, dp, bs, be, db, fixed, alloc = m
            x = new_obj(Operand)
            x.role, x.buffer, x.shape, x.dtype, x.nbytes, x.partitions, x.contiguous_bytes = fixed
            x.alloc = pre + str(n0 + da * k) if da else alloc
            x.view = (v0 + dv * k, strides)
            x.part_start, x.part_end, x.byte_start, x.byte_end = ps + dp * k, pe + dp * k, bs + db * k, be + db * k
            new.append(x)
        e = new_obj(Instruction)
        e.op, e.api, e.engine, e.core, e.location, e.options, e.origin = head
        e.seq = seq + dseq * k
        e.reads, e.writes = tuple(new[:nr]), tuple(new[nr:])
        add(e)
    return out


# ---- the loop ---------------------------------------------------------------------------------------
def _marks(core):
    mem = core.memory
    return (len(core.events), core.seq, core.local_count, core.serial,
            mem.clock if mem is not None else 0, core.shared_count, core.launch.next_id)


def eligible(core) -> bool:
    """Replay may run in this core's launch (the cheap tests, before any frame is looked at)."""
    launch = core.launch
    rec = launch.recording
    s = core.settings
    return (rec is not None and rec.timing_only and core.events is not None and s.loop_replay
            and launch.lnc == 1 and not s.detect_races and s.findings == "first"
            and s.uninitialized_reads == "sentinel" and s.iteration_order == "program" and s.fast_paths
            and launch.shared_watch is None)


def iterate(core, r: range, frame):
    """An iterator over ``r`` that replays the loop whose ``for`` statement is running in
    ``frame`` (the kernel's frame, at its GET_ITER), or None when the loop does not qualify."""
    if len(r) < _MIN_TRIPS or frame is None:
        return None
    code = frame.f_code
    if code.co_code[frame.f_lasti] != _GET_ITER:
        return None
    found = _plan(code, frame.f_lineno)
    if found is None:
        return None
    plan, _target = found
    if not _start_ok(frame, plan):
        return None
    return _replay(core, r, plan, frame)


def _replay(core, r, plan, frame):
    n = len(r)
    aug_before = {name: frame.f_locals.get(name) for name in plan.aug}
    marks = [_marks(core)]
    for j in (0, 1, 2):
        yield r[j]
        marks.append(_marks(core))
    m0, m1, m2, m3 = marks
    d01 = tuple(b - a for a, b in zip(m0[1:], m1[1:]))
    d12 = tuple(b - a for a, b in zip(m1[1:], m2[1:]))
    d23 = tuple(b - a for a, b in zip(m2[1:], m3[1:]))
    events = core.events
    template = steps = None
    if d12 == d23 and d01 == d12 and d12[0] == m2[0] - m1[0] == m3[0] - m2[0] and d12[4] == 0 \
            and d12[5] == 0 and _values_ok(frame, plan, aug_before):
        it1, it2 = events[m1[0]:m2[0]], events[m2[0]:m3[0]]
        dlocal = d12[1]
        steps = []
        for e1, e2 in zip(it1, it2):
            s = _event_steps(e1, e2, core.core_id, m1[2], m2[2], dlocal)
            if s is None:
                steps = None
                break
            steps.append(s)
        template = it2
    if steps is None:
        for j in builtins.range(3, n):
            yield r[j]
        return
    skip = n - 4                    # iterations 3 .. n-2
    dseq, dlocal, dserial, dclock = d12[0], d12[1], d12[2], d12[3]
    synth = _compile(template, steps, core.core_id)
    for k in builtins.range(1, skip + 1):
        events.extend(_shifted(synth, k, dseq))
    core.seq += skip * dseq
    core.local_count += skip * dlocal
    core.serial += skip * dserial
    if core.memory is not None:
        core.memory.clock += skip * dclock
    core.launch.recording.replayed += 1
    start = len(events)
    yield r[n - 1]
    want = _shifted(synth, skip + 1, dseq)
    if not _same(events[start:], want) or not _values_ok(frame, plan, aug_before):
        raise ReplayMismatch(f"loop at line {frame.f_lineno}: the last iteration differs from the replay")


__all__ = ["ReplayMismatch", "eligible", "iterate"]
