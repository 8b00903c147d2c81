"""The instruction pipeline: every ``nisa`` op is one ``OpSpec`` run by ``run``.

``@instruction(...)`` turns a documented signature (a stub with the op's docstring) into the public
op: a generated function with exactly that signature (an unknown keyword raises TypeError naming
the op and the keyword, with the closest parameter and the kernel's line) that calls ``run``.
``run`` finds the core, checks the rules (memoised here and only here, keyed by every argument's
static signature), computes, and appends one ``trace.Instruction`` when a recording is active.
``findings="all"`` is applied here, and in ``api_call`` for the ``nl`` functions.
Imports state, errors, trace, memory types; the op modules import this.
"""
from __future__ import annotations

import difflib
import enum
import inspect
from typing import Any, Callable, NamedTuple

import numpy as np

from .. import dtypes as _dt
from .. import state
from ..state import current as _current
from ..errors import NkiError, UnsupportedError, kernel_location
from ..memory import access as _access
from ..memory import affine as _affine
from ..memory import masks as _masks
from ..memory.indirect import IndirectTensor
from ..memory.tensor import NkiTensor
from ..trace.events import Instruction, Operand
from . import enums as _enums
from . import operands as _operands
from ..memory.buffers import MemoryRegion
from .enums import NkiInstruction, engine as _engine

MEMO_LIMIT = 8192   # passed signatures kept per op; a full table starts over


class Passed(NamedTuple):
    """What an op's rules derive from a passing call: the concrete engine that runs it and any
    op-specific facts (an ALU row, (k, m, n), ...) its compute function reads as ``ins.info``."""
    engine: _engine
    info: Any = None


class Ins:
    """The running instruction: its spec, core, arguments and what its rules derived. Memory reads
    and writes find it as ``core.ins`` (to name the operand in an error); ``extra`` holds facts the
    compute function decided (they go to the event's options)."""
    __slots__ = ("spec", "core", "args", "engine", "info", "extra", "seq")

    def __init__(self, spec, core, args):
        self.spec = spec
        self.core = core
        self.args = args
        self.extra = None

    @property
    def target(self):
        return self.core.target

    @property
    def op(self) -> str:
        """The public name used in error messages (``nisa.tensor_tensor``)."""
        return self.spec.api

    def note(self, **facts) -> None:
        """Record facts for the event (e.g. ``accumulate=True`` as applied)."""
        if self.core.events is not None:
            if self.extra is None:
                self.extra = {}
            self.extra.update(facts)

    def role_of(self, t, kind: str = "r") -> str:
        """The parameter name ``t`` was passed as (a write names a written role first)."""
        spec = self.spec
        names = [n for n, a in zip(spec.names, self.args) if _same_view(a, t)]
        outs = [n for n in names if n in spec.writes]
        ins = [n for n in names if n not in spec.writes]
        pick = (outs or ins) if kind == "w" else (ins or outs)
        return pick[0] if pick else "operand"


def _same_view(a, t) -> bool:
    if a is t:
        return True
    if isinstance(a, IndirectTensor):
        a = a.base
    return (isinstance(a, NkiTensor) and isinstance(t, NkiTensor) and a.alloc is t.alloc
            and a.offset == t.offset and a.shape == t.shape)


class OpSpec:
    """One instruction, declared once: its names, documented parameters and their roles, the
    rules (a pure function of the arguments' static signature and the target, returning
    ``Passed``), the compute function and the memo of passed signatures."""
    __slots__ = ("op", "api", "names", "reads", "writes", "rules", "compute", "memo", "passed",
                 "signature", "index", "name_at", "handle", "key", "required", "event_plan")

    def __init__(self, op, api, signature, reads, writes, rules, compute, memo):
        self.op, self.api = op, api
        self.signature = signature
        self.names = tuple(signature.parameters)
        self.index = {n: i for i, n in enumerate(self.names)}
        for role in (*reads, *writes):
            if role not in self.index:
                raise TypeError(f"{api}: operand role {role!r} is not a parameter")
        self.reads, self.writes = tuple(reads), tuple(writes)
        self.rules, self.compute, self.memo = rules, compute, memo
        self.passed: dict = {}
        self.name_at = self.index.get("name")     # where the instruction's ``name`` argument is
        self.handle = NkiInstruction(api)         # the shared handle of unnamed instructions
        self.key = _key_function(self.names)      # (target, *args) -> memo key, or None
        self.required = ()                        # indices of required parameters (_generate)
        self.event_plan = None                    # _event's role / option indices (built once)

    def __repr__(self):
        return f"OpSpec({self.api})"


SPECS: dict = {}      # api name -> OpSpec, filled at import by @instruction


def instruction(*, reads: tuple = (), writes: tuple = (), rules: Callable, compute: Callable,
                memo: bool = True, op: str | None = None, api: str | None = None):
    """Decorate a signature stub (its parameters and docstring are the public op's) into the op.

    ``rules(ins, *args) -> Passed`` raises the op's NkiErrors; ``compute(ins, *args)`` reads the
    operands and writes the results. ``memo=False`` for ops whose rules read more than the
    arguments' static signature (runtime values, the core's state)."""
    def wrap(stub):
        name = op or stub.__name__
        spec = OpSpec(name, api or f"nisa.{name}", inspect.signature(stub), reads, writes, rules,
                      compute, memo)
        SPECS[spec.api] = spec
        fn = _generate(stub, spec)
        fn.spec = spec
        return fn
    return wrap


def _generate(stub, spec: OpSpec):
    """A function with ``stub``'s exact signature that calls ``run(spec, (args...))``, and
    reports unknown keywords (Python would say only "unexpected keyword argument")."""
    params, ns, seen_kwonly = [], {"_run": run, "_spec": spec, "_bad_call": _bad_call,
                                   "_M": _MISSING, "_missing": _missing}, False
    required = []
    for p in spec.signature.parameters.values():
        if p.kind not in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY):
            raise TypeError(f"{spec.api}: only plain parameters are supported, not {p}")
        if p.kind is p.KEYWORD_ONLY and not seen_kwonly:
            params.append("*")
            seen_kwonly = True
        if p.default is p.empty:        # defaulted to a sentinel: a misspelt keyword is named first
            params.append(f"{p.name}=_M")
            required.append(p.name)
        else:
            ns[f"_d_{p.name}"] = p.default
            params.append(f"{p.name}=_d_{p.name}")
    args = ", ".join(spec.names) + ("," if len(spec.names) == 1 else "")
    keyed = ", ".join(_key_part(n) for n in spec.names if n != "name")
    name = "name" if "name" in spec.index else "None"
    ns.update(_current=state.current, _NT=NkiTensor, _KIND2=_SINGLETONS, _vk=_value_key, _is=_intern_sig, _E=(),
              _NoKey=_NoKey, _Ins=Ins, _event=_event, _NkiError=NkiError, _NkiInstruction=NkiInstruction)
    # The fast lane (fast paths on, not inside another instruction, rules already passed for
    # this signature; a recording gets the same event as from run()) is run() with the memo hit inlined; anything else
    # goes through run().
    spec.required = tuple(spec.index[n] for n in required)
    # A required argument left out is _M: it keys no memo entry (_vk raises _NoKey), so such a
    # call always reaches run(), which names it; the fast lane pays nothing for the check.
    # extra positional arguments land in _x (Python would say "takes from 0 to N positional
    # arguments", counting the sentinel-defaulted required ones as optional)
    params = [("*_x" if p == "*" else p) for p in params] + ([] if "*" in params else ["*_x"])
    src = f"""def {stub.__name__}({', '.join(params)}, **_kw):
    if _kw or _x:
        _bad_call(_spec, _x, _kw)
    _c = _current.get()
    if _c is None or not _c.fast or _c.ins is not None or not _spec.memo or _c.mask is not None:
        return _run(_spec, ({args}))
    try:
        _p = _spec.passed.get((_c.target, {keyed},))
    except _NoKey:
        _p = None
    if _p is None:
        return _run(_spec, ({args}))
    _i = _c.ins = _Ins(_spec, _c, ({args}))
    _i.engine, _i.info = _p
    if _c.memory is not None:
        _c.memory.clock += 1
    try:
        _spec.compute(_i, {args})
    except _NkiError as _e:
        _c.ins = None
        if _c.after_ins is not None:
            _c.after_ins(_c)
        if not _c.launch.record(_e):
            raise
        return _spec.handle if {name} is None else _NkiInstruction(_spec.api, {name})
    except BaseException:
        _c.ins = None
        if _c.after_ins is not None:
            _c.after_ins(_c)
        raise
    _c.ins = None
    if _c.after_ins is not None:
        _c.after_ins(_c)
    _c.seq += 1
    if _c.events is not None:
        _i.seq = _c.seq
        _c.launch.count("rule_memo")
        _c.events.append(_event(_i))
    return _spec.handle if {name} is None else _NkiInstruction(_spec.api, {name})
"""
    exec(compile(src, f"<nkisim {spec.api}>", "exec"), ns)
    fn = ns[stub.__name__]
    fn.__doc__ = stub.__doc__
    fn.__module__ = stub.__module__
    fn.__qualname__ = stub.__qualname__
    fn.__signature__ = spec.signature
    return fn


class _Missing:
    __slots__ = ()

    def __repr__(self):
        return "<required>"


_MISSING = _Missing()     # the generated default of a required parameter


def _missing(spec: OpSpec, args: tuple):
    names = [n for n, a in zip(spec.names, args) if a is _MISSING]
    listed = ", ".join(repr(n) for n in names)
    raise TypeError(f"{spec.api}() missing {len(names)} required argument{'s' if len(names) > 1 else ''}: "
                    f"{listed} ({kernel_location(2)})")


def _bad_call(spec: OpSpec, extra: tuple, kw: dict):
    """An unknown keyword, or more positional arguments than the op has: TypeError with the
    kernel's line."""
    if kw:
        _unknown_keywords(spec, kw)
    n = sum(1 for p in spec.signature.parameters.values() if p.kind is p.POSITIONAL_OR_KEYWORD)
    raise TypeError(f"{spec.api}() takes {n} positional arguments but {n + len(extra)} were given "
                    f"({kernel_location(3)})")


def _unknown_keywords(spec: OpSpec, kw: dict):
    name = next(iter(kw))
    close = difflib.get_close_matches(name, spec.names, n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    raise TypeError(f"{spec.api}() got an unexpected keyword argument {name!r}{hint} "
                    f"({kernel_location(2)})")


# ---- the memo key: every argument's static signature ----------------------------------------

_SCALARS = (int, float, str, np.float32, np.float64, np.int32, np.int64, np.bool_, np.dtype)


# The memo key of one call is a flat tuple: the target, then per argument (``name`` excepted:
# it labels the instruction and no rule reads it) a tensor's interned view signature (a negative
# int: everything static about the view -- type, shape, strides, offset, dtype, buffer, its
# allocation's shape and dtype, whether it reinterprets the storage -- so a rule reading any of
# them cannot see a stale hit), an enum member's or operator token's id (they are singletons
# that live as long as the process; so are None, True and False), 0 for the empty tuple (ids are
# positive, view ids negative), or a scalar's (type, value) pair. Any other argument (a
# list, an array, an indirect view, a register) makes the call unkeyable: its rules run.

class _NoKey(Exception):
    """An argument that cannot key the memo (its instruction's rules run on every call)."""


def _value_key(a):
    """The key of a non-tensor argument (see the key comment above); raises _NoKey."""
    ta = type(a)
    if ta is NkiTensor:
        return _intern_sig(a)
    kind = _KIND.get(ta)
    if kind == 2 or (kind is None and isinstance(a, enum.Enum)):
        return id(a)
    if kind is None:
        if ta is not tuple:
            raise _NoKey
        try:
            hash(a)
        except TypeError:
            raise _NoKey from None
    return (ta, a)


def _key_part(n: str) -> str:
    """The key expression of parameter ``n`` (see ``_key_function``)."""
    return (f"(({n}._sig if {n}._sig is not None else _is({n})) if type({n}) is _NT else "
            f"id({n}) if type({n}) in _KIND2 else 0 if {n} is _E else _vk({n}))")


def _key_function(names):
    """``key(target, *args)``: the memo key of one call, unrolled per parameter (a view with a
    cached signature id costs two attribute reads, an enum member or token one set lookup).
    ``name`` is not keyed: it labels the instruction and no rule reads it."""
    keyed = [n for n in names if n != "name"]
    src = (f"def key(_t, {', '.join(names)}):\n"
           f"    try:\n"
           f"        return (_t, {', '.join(_key_part(n) for n in keyed)},)\n"
           f"    except _NoKey:\n"
           f"        return None\n")
    ns = {"_NT": NkiTensor, "_vk": _value_key, "_NoKey": _NoKey, "_KIND2": _SINGLETONS, "_is": _intern_sig, "_E": ()}
    exec(compile(src, "<nkisim memo key>", "exec"), ns)
    return ns["key"]


_SIGS: dict = {}      # view signature -> negative id (a view's id is cached on it as ._sig)


def _intern_sig(a) -> int:
    """The view's signature id (cached on the view)."""
    alloc = a.alloc
    sig = (a.shape, a.strides, a.offset, a.dtype, alloc.buffer, alloc.shape, alloc.dtype,
           a.storage is alloc.storage, a.dynamic, a.oob is not None)   # (dynamic: memory.tensor._view)
    i = _SIGS.get(sig)
    if i is None:
        if len(_SIGS) >= 1 << 20:       # start over (ids cached on live views stay unique)
            _SIGS.clear()
        _NEXT[0] -= 1
        i = _SIGS[sig] = _NEXT[0]
    a._sig = i
    geo = a._geo
    if geo is not None:     # every view with this Geometry has this signature (memory.tensor)
        geo.sig = i
    return i


_NEXT = [0]
# argument type -> 1: a scalar (keyed by type and value), 2: a singleton (an enum member or an
# operator token, keyed by id)
_KIND: dict = {t: 1 for t in _SCALARS}
_SINGLETONS: set = {_enums.engine, _enums.dge_mode, _enums.oob_mode, _enums.reduce_cmd,
                    _enums.matmul_perf_mode, _enums.nc_version, _enums.dma_engine, MemoryRegion,
                    type(None), bool}          # None, True and False are singletons too
_KIND.update({t: 2 for t in _SINGLETONS})


_TOKEN_TYPES: tuple = ()


def register_token_type(cls) -> None:
    """Operator tokens (``nl.add``, ALU rows) are immutable: they may key the memo by identity."""
    global _TOKEN_TYPES
    if cls not in _TOKEN_TYPES:
        _TOKEN_TYPES = _TOKEN_TYPES + (cls,)
    _KIND[cls] = 2
    _SINGLETONS.add(cls)


# ---- run ----------------------------------------------------------------------------------------

def run(spec: OpSpec, args: tuple):
    """Run one instruction: rules (memoised) -> compute -> event. Under ``findings="all"`` a
    broken rule (any NkiError of the instruction) is recorded and the instruction skipped."""
    for i in spec.required:
        if args[i] is _MISSING:
            _missing(spec, args)
    core = _current.get()
    if core is None:
        raise NkiError(spec.api, "called outside a simulated kernel; run the kernel with "
                                 "nki.simulate(kernel)(...) or set NKI_SIMULATOR=1")
    keep = None
    if core.mask is not None and core.ins is None:
        kept = _masked_args(spec, args, core.mask)
        if kept is None:                # the mask keeps no element: the instruction is not issued
            return _named(spec, args)
        args = kept
        keep = core.mask.keep
    ins = Ins(spec, core, args)
    prev = core.ins
    core.ins = ins
    if core.mask is not None and prev is None:
        ins.note(mask=True)
        if keep is not None:
            _access.keeping(core, keep)
    mem = core.memory
    if mem is not None:
        mem.clock += 1              # the on-chip lifetime clock: one tick per instruction
    try:
        if spec.memo and core.fast:
            key = spec.key(core.target, *args)
            passed = spec.passed.get(key) if key is not None else None
            if passed is None:
                passed = _rules(spec, ins, args)
                if key is not None:
                    _remember(spec.passed, key, passed)
            elif core.events is not None:
                core.launch.count("rule_memo")
        else:
            if core.before_ins is not None:     # LNC2 stop / pending receives (core.fast is off then)
                core.before_ins(ins)
            passed = _rules(spec, ins, args)
        ins.engine, ins.info = passed
        spec.compute(ins, *args)
    except NkiError as exc:
        if not core.launch.record(exc):
            raise
        return _named(spec, args)
    finally:
        core.ins = prev
        if keep is not None:
            _access.keeping(core, None)
        if prev is None and core.after_ins is not None:     # LNC2: the shared-HBM turn ends
            core.after_ins(core)
    core.seq += 1
    if core.events is not None:
        ins.seq = core.seq
        core.events.append(_event(ins))
    return _named(spec, args)


# operand dim -> mask axis (negative: from the last) where it is not NumPy's right alignment
MASK_AXES = {
    # the mask's axes are the inputs' (contraction partition axis, free axis); dst[m, n] takes
    # stationary's free range on m and moving's on n ("operand masking", nki.api.shared.rst)
    "nisa.nc_matmul": {"dst": (-1, -1)},
    "nisa.nc_transpose": {"dst": (-1, -2)},         # dst[f, p] = data[p, f]
}


def _masked_args(spec: OpSpec, args: tuple, box) -> tuple | None:
    """The arguments of an instruction issued under a Beta-1 mask (``language.indexing.masked``):
    each tensor operand restricted to the positions the mask keeps, or None when it keeps none.

    Decision (the docs: the mask "informs the compiler to skip generating the instruction or
    generate the instruction with a smaller input tile shape"): a masked instruction is the same
    instruction on sub-views of its operands, so masked-off elements are neither read (no
    uninitialised-read, race or bounds error for them) nor written (dst keeps its old values),
    and reductions see only the kept elements. The mask's grid is broadcast against each
    operand like a NumPy array (right-aligned, but an operand's dim 0 takes the mask's first
    axis; ``MASK_AXES`` for ops whose dst axes differ); see
    ``memory.masks.axis_ranges`` for which dims are restricted. An empty mask issues no
    instruction (no event). Tensor operands only (gathered / scattered views stay whole).
    A predicate that is not a range of each axis (``iy < ix``; ``Box.keep``): the operands are
    restricted to its bounding box and the instruction's writes store only the elements it keeps
    (``access.keeping``); the elements of the box it drops are still read (Decision: the docs
    define masks as ranges; this serves ``nisa.affine_select``-style predicates). It raises
    UnsupportedError on matmul / transpose, and on a dst not of the mask's grid (a reduction).
    A gather / scatter view (``t[idx_tile, i_f]``) is restricted like a tensor: the rows it
    keeps keep their index-tile entries (masked-off rows' indices are never read); under a
    non-range mask the indirect DMA copies row by row, each row keeping its own elements."""
    if box.empty:
        return None
    roles = MASK_AXES.get(spec.api)
    if box.keep is not None and roles is not None:
        raise UnsupportedError(spec.api, "a mask that is not a range of each axis (e.g. i_f < i_p) on an "
                                         "instruction whose output axes are not its inputs'")
    out = list(args)
    done = {}                           # id(operand) -> its restriction: one view per operand
    for r in (*spec.reads, *spec.writes):
        i = spec.index[r]
        a = out[i]
        if a is not args[i]:            # a role both read and written: restricted once
            continue
        axes = roles.get(r) if roles else None
        if type(a) in (list, tuple):    # a list of operands (dma_compute's srcs): each restricted
            out[i] = type(a)(_restricted(spec, box, x, axes, done) for x in a)
        else:
            out[i] = _restricted(spec, box, a, axes, done)
    return tuple(out)


def _restricted(spec: OpSpec, box, a, axes, done: dict):
    """``a`` (a tensor or a gather / scatter view, else unchanged) restricted to the positions
    ``box`` keeps; a gather / scatter view keeps the index rows it keeps. An operand passed
    twice (dma_compute's dst among its srcs) gets the same view both times."""
    kind = type(a)
    if kind is not NkiTensor and kind is not IndirectTensor:
        return a
    hit = done.get(id(a))
    if hit is not None:
        return hit
    ranges = _masks.axis_ranges(box, a.shape, axes)
    v = a if ranges is None else _affine.restrict(a, ranges) if kind is NkiTensor else a.restrict(ranges, spec.api)
    done[id(a)] = v
    return v


def _rules(spec: OpSpec, ins: Ins, args: tuple) -> Passed:
    """Every instruction's operand rules (``operands.check``), then the op's own."""
    _operands.check(spec, args)
    return spec.rules(ins, *args)


def _remember(table: dict, key, passed) -> None:
    if len(table) >= MEMO_LIMIT:
        table.clear()
    table[key] = passed


def _named(spec, args):
    name = None if spec.name_at is None else args[spec.name_at]
    return spec.handle if name is None else NkiInstruction(spec.api, name)


def api_call(api: str, fn: Callable, args, kwargs, fallback=None):
    """Run an ``nl`` function as API ``api``: its instructions' events say ``api`` (the outermost
    nl function names them); under ``findings="all"`` a rule the function itself checks is
    recorded and ``fallback(*args, **kwargs)`` (a placeholder result, or None) is returned so the
    kernel can go on (a rule broken inside one of its instructions skips that instruction, as
    for a bare nisa call)."""
    core = _current.get()
    if core is None:
        return fn(*args, **kwargs)
    prev = core.api
    if prev is None:
        core.api = api
    try:
        return fn(*args, **kwargs)
    except NkiError as exc:
        if prev is not None or not core.launch.record(exc):
            raise
        return fallback(*args, **kwargs) if fallback is not None else None
    finally:
        core.api = prev


def api_function(api: str, fallback: Callable | None = None):
    """Decorate an ``nl`` function that issues instructions: the public function has the same
    signature, reports unknown keywords like an op (TypeError naming ``api``, the keyword, the
    closest parameter and the kernel's line) and runs through ``api_call``."""
    def wrap(fn):
        sig = inspect.signature(fn)
        names = tuple(sig.parameters)
        plain_params = all(p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
                           for p in sig.parameters.values())

        if plain_params:
            stub = _KeywordCheck(api, names)

            def public(*args, **kwargs):
                for k in kwargs:
                    if k not in stub.index:
                        _unknown_keywords(stub, {k: None})
                return api_call(api, fn, args, kwargs, fallback)
        else:
            def public(*args, **kwargs):
                return api_call(api, fn, args, kwargs, fallback)
        public.__name__, public.__qualname__ = fn.__name__, fn.__qualname__
        public.__doc__, public.__module__ = fn.__doc__, fn.__module__
        public.__signature__ = sig
        public.__wrapped_api__ = fn
        public.api = api                 # what events of its instructions name as ``api``
        return public
    return wrap


class _KeywordCheck:
    """The names ``_unknown_keywords`` needs for an nl function."""
    __slots__ = ("api", "names", "index")

    def __init__(self, api, names):
        self.api, self.names = api, names
        self.index = frozenset(names)


# ---- events ---------------------------------------------------------------------------------------

def _event(ins: Ins) -> Instruction:
    spec, args, core = ins.spec, ins.args, ins.core
    plan = spec.event_plan
    if plan is None:
        plan = spec.event_plan = _event_plan(spec)
    read_roles, write_roles, option_names = plan
    got = {}                    # role -> its operands (each role's argument is walked once)
    indirect = False
    reads = ()
    for r, i in read_roles:
        a = args[i]
        ops = got[r] = _role_operands(r, a)
        reads += ops
        if type(a) is IndirectTensor:
            indirect = True
    writes = ()
    for r, i in write_roles:
        ops = got.get(r)
        if ops is None:
            a = args[i]
            ops = got[r] = _role_operands(r, a)
            if type(a) is IndirectTensor:
                indirect = True
        writes += ops
    if indirect:    # a gathered / scattered operand also reads its index tile: "<role>.index"
        reads += tuple(operand(f"{r}.index", args[i].index) for r, i in (*read_roles, *write_roles)
                       if isinstance(args[i], IndirectTensor))
    # options: every non-tensor argument but ``name``; a role parameter passed a scalar (an
    # ``operand0=2.0``, an ``offset=3``) is an option too, one left at None is not
    vals = tuple(args[i] for _, i in option_names)
    try:                        # most calls repeat their options: memoised by (type, value)
        okey = (spec, tuple(map(type, vals)), vals)
        base = _OPTIONS.get(okey)
    except TypeError:           # an unhashable value (a list): built each time
        okey = base = None
    if base is None:
        base = {n: plain(a) for (n, _), a in zip(option_names, vals)
                if not isinstance(a, (NkiTensor, IndirectTensor))}
        if okey is not None:
            if len(_OPTIONS) >= MEMO_LIMIT:
                _OPTIONS.clear()
            _OPTIONS[okey] = base
    options = dict(base)
    for r, ops in got.items():
        if not ops:
            a = args[spec.index[r]]
            if a is not None and not isinstance(a, (NkiTensor, IndirectTensor)):
                options[r] = plain(a)
    if ins.extra:
        options.update(ins.extra)
    eng = ins.engine
    # positional: (op, api, engine, core, seq, location, reads, writes, options)
    return Instruction(spec.op, core.api or spec.api, eng.name if isinstance(eng, _engine) else str(eng),
                       core.core_id, ins.seq, kernel_location(3), reads, writes, options)


_OPTIONS: dict = {}     # (spec, option value types, option values) -> their plain() dict


def _event_plan(spec: OpSpec) -> tuple:
    """((read role, index), ...), ((write role, index), ...), ((option name, index), ...) of an
    op, in parameter order (options: the parameters that are no role, ``name`` left out)."""
    roles = set(spec.reads) | set(spec.writes)
    return (tuple((r, spec.index[r]) for r in spec.reads),
            tuple((r, spec.index[r]) for r in spec.writes),
            tuple((n, i) for i, n in enumerate(spec.names) if n != "name" and n not in roles))


def _role_operands(role: str, a) -> tuple:
    """The event operands of one role: a tensor, or each tensor of a (nested) list of them
    (``srcs[0]``, ``srcs_by_channel[1][0]``: the collectives' list parameters)."""
    if type(a) is NkiTensor:
        return (operand(role, a),)
    if isinstance(a, (list, tuple)):
        return tuple(o for i, x in enumerate(a) for o in _role_operands(f"{role}[{i}]", x))
    o = operand(role, a)
    return () if o is None else (o,)


def operand(role: str, t) -> Operand | None:
    """The event operand of tensor ``t`` passed as ``role`` (None for a scalar or None). An
    indirect view is the elements it accesses: its shape, their bytes, runs of at most one row
    (the rows are wherever the index tile says)."""
    if isinstance(t, IndirectTensor):
        base = t.base
        isz = base.dtype.itemsize
        n = 1
        for d in t.shape:
            n *= d
        return Operand(role=role, buffer=str(base.alloc.buffer), shape=t.shape,
                       dtype=_dt.name(base.dtype), nbytes=n * isz, alloc=base.alloc.id, partitions=1,
                       contiguous_bytes=_contiguous(t.shape[1:], t.steps[1:]) * isz)
    if not isinstance(t, NkiTensor):
        return None
    alloc = t.alloc
    if t.dynamic:
        g = _geometry(role, t, alloc)
        return Operand(g[0], g[1], g[2], g[3], g[4], alloc.id, *g[5:])
    ops = alloc.ops             # Operand is immutable: the same view in the same role is built once
    if ops is None:
        ops = alloc.ops = {}
    key = (role, t.offset, t.shape, t.strides, t.dtype)
    o = ops.get(key)
    if o is None:
        # a fresh allocation of a loop body's tile has the geometry of the last one: look it up
        gkey = (key, alloc.buffer, alloc.shape[0] if alloc.shape else None, t.storage.size)
        g = _GEOMETRY.get(gkey)
        if g is None:
            if len(_GEOMETRY) >= MEMO_LIMIT:
                _GEOMETRY.clear()
            g = _GEOMETRY[gkey] = _geometry(role, t, alloc)
        o = ops[key] = Operand(g[0], g[1], g[2], g[3], g[4], alloc.id, *g[5:])
    return o


_GEOMETRY: dict = {}    # (view key, buffer, partitions, storage size) -> _geometry(...)


def _geometry(role: str, t, alloc) -> tuple:
    """Every ``Operand`` field of view ``t`` but ``alloc``, in field order (role, buffer, shape,
    dtype, nbytes, partitions, contiguous_bytes, view, part_start, part_end, byte_start,
    byte_end): what depends only on the view and its allocation's layout."""
    on_chip = t.on_chip
    isz = t.dtype.itemsize
    shape, strides = t.shape, t.strides
    p0 = p1 = b0 = b1 = 0
    if not t.dynamic and t.size:
        # offsets and strides count elements of the view's dtype (its storage holds one per
        # element, float32 for bf16/fp8 when NKI_PRECISE_FP=0): bytes are elements x item size
        ssz = isz
        lo = hi = t.offset
        for n, s in zip(shape[1:] if on_chip else shape, strides[1:] if on_chip else strides):
            if s > 0:
                hi += (n - 1) * s
            else:
                lo += (n - 1) * s
        if on_chip and shape:
            row = t.storage.size // alloc.shape[0] if alloc.shape and alloc.shape[0] else 0
            if row:
                base = t.offset // row
                last = (t.offset + (shape[0] - 1) * strides[0]) // row
                p0, p1 = min(base, last), max(base, last) + 1
                lo, hi = lo - base * row, hi - base * row
                if lo < 0 or hi >= row:      # free dims cross partitions: the whole rows
                    lo, hi = 0, row - 1
                b0, b1 = lo * ssz, (hi + 1) * ssz
        else:
            p1 = 1
            b0, b1 = lo * ssz, (hi + 1) * ssz
    return (role, str(alloc.buffer), shape, _dt.name(t.dtype), t.size * isz,
            shape[0] if on_chip and shape else 1,
            _contiguous(shape[1:] if on_chip else shape, strides[1:] if on_chip else strides) * isz,
            (_offset(t.offset), t.strides), p0, p1, b0, b1)


def _offset(offset) -> int | None:
    """A view's element offset as an int (None when it is a runtime value not known here)."""
    try:
        return int(offset)
    except (TypeError, ValueError):
        return None


def _contiguous(shape, strides) -> int:
    """Elements in the longest dense run at the end of a view (the innermost dims)."""
    run = 1
    for n, s in zip(reversed(shape), reversed(strides)):
        if n == 1:
            continue
        if s != run:
            return run if run > 1 else 1
        run *= n
    return run


_PLAIN = frozenset((int, float, bool, str, type(None)))


def plain(a):
    """An option value as a plain Python value (enums and tokens by name)."""
    if type(a) in _PLAIN:
        return a
    if isinstance(a, enum.Enum):
        return a.name
    if isinstance(a, _TOKEN_TYPES):
        return getattr(a, "name", repr(a))
    if isinstance(a, (np.generic,)):
        return a.item()
    if isinstance(a, (int, float, bool, str, type(None))):
        return a
    if isinstance(a, (tuple, list)):
        return tuple(plain(x) for x in a)
    return repr(a)


__all__ = ["instruction", "run", "api_call", "api_function", "Passed", "Ins", "OpSpec", "SPECS", "operand", "plain",
           "register_token_type"]
