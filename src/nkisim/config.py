"""Settings: every behaviour knob of the simulator and of its torch layer, declared once.

Each field of ``Settings`` is one row of the settings table (``KNOBS``): its environment
variable(s), its ``nki.simulate`` option name, its default, a one-line doc and the parser of its
environment value. ``Settings.from_env()`` is the only reader of ``os.environ``, called when a
kernel is called (never at import or decoration); the core (``runtime``) and the torch layer
(``can_run_kernel``, the HOP) both read it. README's settings table is ``settings_table_markdown()``
(tests/test_settings_table.py checks it). Imports nothing from nkisim.

How an environment value is read (the same for every knob; Decisions):
- surrounding whitespace is stripped, and an empty value counts as unset (the default applies);
- a value outside the accepted ones raises ValueError naming the variable and the accepted values
  (never silently read as the default);
- a knob given as an ``nki.simulate`` option is not read from the environment at all.
"""
from __future__ import annotations

import dataclasses
import difflib
import numbers
import operator
import os
import warnings
from dataclasses import dataclass
from typing import Any, Callable, Literal

_TARGET_ALIASES = {
    "trn1": "trn1", "inf2": "trn1", "gen2": "trn1",
    "trn2": "trn2", "gen3": "trn2",
    "trn3": "trn3", "gen4": "trn3",
}


def normalize_target(name: str, source: str = "NEURON_PLATFORM_TARGET_OVERRIDE") -> str:
    """Map ``trn1|inf2|gen2``, ``trn2|gen3``, ``trn3|gen4`` (any case) to trn1/trn2/trn3.

    Raises ValueError naming ``source`` (the variable or field) and the accepted values.
    """
    key = str(name).strip().lower()
    if key not in _TARGET_ALIASES:
        raise ValueError(
            f"{source}: unknown target {str(name).strip()!r}; "
            f"expected one of {', '.join(sorted(_TARGET_ALIASES))}")
    return _TARGET_ALIASES[key]


# ---- parsers: (variable name, stripped non-empty value) -> field value ---------------------------

_TRUE, _FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off")
# The one text of every bad flag, from an environment variable or a Python value (True/False and
# the integers 1/0 are the "true/false" and "1/0" it names): "1/0, true/false, yes/no or on/off".
_FLAG_FORMS = ", ".join(f"{t}/{f}" for t, f in zip(_TRUE[:-1], _FALSE[:-1])) + \
    f" or {_TRUE[-1]}/{_FALSE[-1]} (any case)"


def _flag(var: str, value: str) -> bool:
    """1/true/yes/on or 0/false/no/off, any case."""
    v = value.lower()
    if v in _TRUE:
        return True
    if v in _FALSE:
        return False
    raise ValueError(f"{var}: expected {_FLAG_FORMS}, got {value!r}")


def _as_bool(field: str, value) -> bool:
    """A flag given as a Settings field or ``nki.simulate`` option: a bool, 0/1, or a string the
    environment variable would accept ("no" is off, never truthy). Raises ValueError otherwise,
    with the same text as a bad environment value (``_FLAG_FORMS``)."""
    if isinstance(value, str):
        return _flag(field, value.strip())
    if isinstance(value, bool) or type(value).__name__ in ("bool_", "bool"):   # numpy's bool too
        return bool(value)
    try:
        number = operator.index(value)
    except TypeError:
        number = None
    if number in (0, 1):
        return bool(number)
    raise ValueError(f"{field}: expected {_FLAG_FORMS}, got {value!r}")


def _flag_choice(on: str, off: str) -> Callable[[str, str], str]:
    """A flag that selects one of two ``Literal`` values."""
    def parse(var: str, value: str) -> str:
        return on if _flag(var, value) else off
    parse.__doc__ = f"a flag: 1 selects {on!r}, 0 {off!r}"
    return parse


def _one_or_zero(var: str, value: str) -> bool:
    """Exactly 1 (on) or 0 (off). Decision: vllm-neuron turns the simulator on only for the
    literal "1" (``os.environ.get("NKI_SIMULATOR") == "1"``); a value it would silently take as
    off ("true", "yes", "2") raises here instead of being read either way."""
    if value == "1":
        return True
    if value == "0":
        return False
    raise ValueError(f"{var}: expected 1 or 0, got {value!r}")


def _int_flag(var: str, value: str) -> bool:
    """vllm-neuron's ``bool(int(value))``: any integer, nonzero is on."""
    try:
        return bool(int(value))
    except ValueError:
        raise ValueError(f"{var}: expected an integer (nonzero is on), got {value!r}") from None


def _target(var: str, value: str) -> str:
    return normalize_target(value, var)


def _seed(var: str, value: str) -> int:
    try:
        seed = int(value)
    except ValueError:
        seed = -1
    if seed < 0:
        raise ValueError(f"{var}: expected a non-negative integer, got {value!r}")
    return seed


def _positive_int(var: str, value: str) -> int:
    try:
        n = int(value)
    except ValueError:
        n = 0
    if n < 1:
        raise ValueError(f"{var}: expected a positive integer, got {value!r}")
    return n


def _findings(var: str, value: str) -> str:
    v = value.lower()
    if v not in ("first", "all", "warn"):
        raise ValueError(f"{var}: expected first, all or warn, got {value!r}")
    return v


# NKI releases (Neuron SDK release notes, "Neuron Kernel Interface (NKI) [0.x.0]") whose documented
# behaviour nkisim tells apart where a release changed it; the newest is the default.
NKI_VERSIONS = ("0.3", "0.4", "0.5")


def _nki_version(var: str, value: str) -> str:
    """``0.3``, ``0.4`` or ``0.5`` (a trailing ``.0`` accepted)."""
    v = value.lower().removeprefix("v")
    v = v[:-2] if v.count(".") == 2 and v.endswith(".0") else v
    if v not in NKI_VERSIONS:
        raise ValueError(f"{var}: expected an NKI release, one of {', '.join(NKI_VERSIONS)}, got {value!r}")
    return v


def _knob(default, doc: str, *, env: tuple = (), parse: Callable | None = None, option: bool = True,
          layer: str = "core"):
    """One row of the settings table, as the dataclass field that holds it."""
    return dataclasses.field(default=default, metadata={"knob": dict(
        env=env, parse=parse, option=option, layer=layer, doc=doc)})


@dataclass(frozen=True, kw_only=True)
class Settings:
    """Every behaviour knob; one instance per kernel call (``from_env``), or given in full.

    Each field is one row of the settings table: default, doc, environment variable(s) (the
    first one set wins), ``nki.simulate`` option (the field's name) and parser.
    """
    simulator: bool = _knob(
        False, "1: a plain call of a `@nki.jit` kernel runs in the simulator (read at call time); "
               "0 (default): it raises `SimulatorOffError`",
        env=("NKI_SIMULATOR",), parse=_one_or_zero, option=False)
    precise_fp: bool = _knob(
        True, "1 (default): bf16/fp8 stored with ml_dtypes, rounded on every write; 0: float32 storage",
        env=("NKI_PRECISE_FP",), parse=_flag)
    target: Literal["trn1", "trn2", "trn3"] = _knob(
        "trn3", "`trn1`/`inf2`/`gen2`, `trn2`/`gen3`, `trn3`/`gen4`, any case (default `trn3`); "
                "`NKI_NC_VERSION` is read when the first is unset",
        env=("NEURON_PLATFORM_TARGET_OVERRIDE", "NKI_NC_VERSION"), parse=_target)
    uninitialized_reads: Literal["sentinel", "raise"] = _knob(
        "sentinel", "1: the first instruction reading never-written elements raises (`\"raise\"`; "
                    "default `\"sentinel\"`: they read NaN / 4)",
        env=("NKISIM_STRICT_UNINIT",), parse=_flag_choice("raise", "sentinel"))
    detect_races: bool = _knob(
        False, "1: `affine_range` iterations overwriting each other's unread HBM results, and LNC2 "
               "cores touching the same shared-HBM elements without a barrier, raise `RaceError` "
               "(loop-carried reads and accumulation are legal: `affine_range` is an alias of `range`)",
        env=("NKISIM_DETECT_RACES",), parse=_flag)
    iteration_order: Literal["program", "shuffled"] = _knob(
        "program", "1: run `affine_range` iterations in a seeded shuffled order to expose order "
                   "dependence (`\"shuffled\"`; default `\"program\"`)",
        env=("NKISIM_SHUFFLE",), parse=_flag_choice("shuffled", "program"))
    seed: int = _knob(
        0, "the seed of the shuffled order, a non-negative integer (default 0)",
        env=("NKISIM_SEED",), parse=_seed)
    findings: Literal["first", "all", "warn"] = _knob(
        "first", "`all`: skip each failing instruction, print every finding grouped by rule, then "
                 "raise one `FindingsError` holding them (`.findings`); `warn`: the same without the "
                 "error, the kernel returns normally (default `first`: stop at the first). A rule "
                 "broken outside any instruction (indexing a tensor, allocating one, a loop over its "
                 "limit, the launch itself) is always fatal, in every mode. Decision: a Beta-1 index expression "
                 "(`a[i_p, i_f]`, `a[:, 32:96]` under `neuronxcc.nki`) is lazy and is bounds-checked by the "
                 "instruction that uses it, so an out-of-bounds one is that instruction's finding (`nl.load` "
                 "reports as the `nisa.dma_copy` it issues) and `warn`/`all` skip it",
        env=("NKISIM_FINDINGS",), parse=_findings)
    fast_paths: bool = _knob(
        True, "0: no rule memo, deferred copies or fills, storage pool, `out=` writes or GC pause "
              "(default 1; results are bit-identical either way)",
        env=("NKISIM_FAST_PATHS",), parse=_flag)
    barrier_timeout_s: float = _knob(
        30.0, "longest wait at a collective of a multi-rank launch, in seconds, while no other "
              "core or rank issues an instruction, before `DeadlockError` (default 30; the cores of "
              "one LNC2 launch run in one thread and report a deadlock at once)")
    max_loop_iterations: int = _knob(
        1_000_000, "most iterations of one dynamic loop (`while reg:`, `nl.while_loop`, "
                   "`nl.dynamic_range`, `nl.fori_loop`) before `LoopLimitError`, a positive integer "
                   "(default 1000000)",
        env=("NKISIM_MAX_LOOP_ITERATIONS",), parse=_positive_int)
    loop_tile_buffers: int = _knob(
        2, "cost model: the physical buffers a tile allocated in a loop body rotates through "
           "(iteration i + K reuses iteration i's buffer), a positive integer (default 2, double "
           "buffering); read by `nkisim.profile` / `nki.benchmark` only",
        env=("NKISIM_LOOP_TILE_BUFFERS",), parse=_positive_int)
    loop_replay: bool = _knob(
        True, "timing-only profiles (`nkisim.profile(compute=False)`): a loop whose body provably "
              "issues the same instructions every iteration, moved by constant strides, runs "
              "iterations 0, 1, 2 and the last and synthesises the others' events (the same "
              "Profile; `runtime/replay.py`); 0, or `NKISIM_FAST_PATHS=0`, runs every iteration (default 1)",
        env=("NKISIM_LOOP_REPLAY",), parse=_flag)
    nki_version: str = _knob(
        NKI_VERSIONS[-1], "the NKI release simulated where releases documented different behaviour: "
                          "`0.3`, `0.4` or `0.5` (default `0.5`, the current docs); today one rule "
                          "differs: `nisa.quantize_mx`'s block scale (0.5 doubled it)",
        env=("NKISIM_NKI_VERSION",), parse=_nki_version)
    cpu_mode: bool = _knob(
        False, "vLLM-on-Neuron: nonzero runs the plugin on CPU; `can_run_kernel` then follows "
               "`NKI_SIMULATOR` (default 0)",
        env=("VLLM_NEURON_CPU_MODE",), parse=_int_flag, option=False, layer="torch")
    disable_kernels: bool = _knob(
        False, "vLLM-on-Neuron: nonzero makes every op take its PyTorch fallback (`can_run_kernel` "
               "is False; default 0)",
        env=("VLLM_NEURON_DISABLE_NKI_KERNELS",), parse=_int_flag, option=False, layer="torch")

    def __post_init__(self):
        for field, kind in _FIELD_KINDS.items():
            value = getattr(self, field)
            if kind is bool:
                value = _as_bool(field, value)
            elif kind is str:
                if isinstance(value, str):
                    value = value.strip().lower()
            elif isinstance(value, bool) or not isinstance(value, kind):   # a bool or str is no number
                what = "a positive integer" if field in ("max_loop_iterations", "loop_tile_buffers") else \
                    "an integer" if kind is numbers.Integral else "a number"
                raise ValueError(f"Settings.{field} must be {what}, got {value!r}")
            object.__setattr__(self, field, value)
        object.__setattr__(self, "target", normalize_target(self.target, "Settings.target"))
        if self.uninitialized_reads not in ("sentinel", "raise"):
            raise ValueError(f"Settings.uninitialized_reads must be 'sentinel' or 'raise', "
                             f"got {self.uninitialized_reads!r}")
        if self.iteration_order not in ("program", "shuffled"):
            raise ValueError(f"Settings.iteration_order must be 'program' or 'shuffled', "
                             f"got {self.iteration_order!r}")
        if self.findings not in ("first", "all", "warn"):
            raise ValueError(f"Settings.findings must be 'first', 'all' or 'warn', got {self.findings!r}")
        object.__setattr__(self, "nki_version", _nki_version("Settings.nki_version", str(self.nki_version)))
        if self.seed < 0:
            raise ValueError(f"Settings.seed must be >= 0, got {self.seed}")
        if self.max_loop_iterations < 1:
            raise ValueError(f"Settings.max_loop_iterations must be a positive integer, "
                             f"got {self.max_loop_iterations!r}")
        if self.loop_tile_buffers < 1:
            raise ValueError(f"Settings.loop_tile_buffers must be a positive integer, "
                             f"got {self.loop_tile_buffers!r}")
        if self.barrier_timeout_s <= 0:
            raise ValueError(f"Settings.barrier_timeout_s must be > 0, got {self.barrier_timeout_s}")

    @classmethod
    def from_env(cls, env=None, **overrides) -> "Settings":
        """Settings from ``env`` (default ``os.environ``) by the table, then keyword overrides
        (a None override counts as not given). An overridden knob's variable is not read.

        Raises ValueError naming the variable for a value its parser does not accept.
        Settings are immutable, so a call reading ``os.environ`` reuses the Settings of the
        last call that saw the same values of the table's variables and the same overrides
        (a launch reads the environment up to three times)."""
        if env is None:
            env = os.environ
            try:
                raw = getattr(env, "_data", None) if os.name == "posix" else None
                values = tuple(map(raw.get, _ENV_KEYS)) if isinstance(raw, dict) else \
                    tuple(map(env.get, _ENV_VARS))
                key = (values, tuple(sorted(overrides.items())))
                hit = _FROM_ENV.get(key)
            except TypeError:             # an unhashable override: no reuse
                key, hit = None, None
            if hit is not None:
                return hit
            made = cls._from(env, overrides)
            _warn_unknown(env)
            if key is not None:
                if len(_FROM_ENV) >= 64:
                    _FROM_ENV.clear()
                _FROM_ENV[key] = made
            return made
        return cls._from(env, overrides)

    @classmethod
    def _from(cls, env, overrides) -> "Settings":
        kw = {}
        for knob in KNOBS:
            if overrides.get(knob.field) is None:
                value = knob.read(env)
                if value is not _UNSET:
                    kw[knob.field] = value
        kw.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**kw)

    def replace(self, **changes) -> "Settings":
        return dataclasses.replace(self, **changes)


_UNSET = object()


@dataclass(frozen=True)
class Knob:
    """One row of the settings table."""
    field: str                    # the Settings field
    env: tuple                    # environment variables, the first one set wins (may be empty)
    option: str | None            # the nki.simulate keyword (None: environment only)
    default: Any
    doc: str                      # one line, as README's settings table shows it
    parse: Callable | None        # (variable, stripped value) -> field value; raises ValueError
    layer: Literal["core", "torch"]   # who reads it: the simulator, or the torch layer only

    def read(self, env):
        """The field's value from ``env``, or _UNSET when no variable of the row is set."""
        for var in self.env:
            raw = env.get(var)
            if raw is not None and raw.strip():
                return self.parse(var, raw.strip())
        return _UNSET

    @property
    def setting(self) -> str:
        """README's "setting" cell: the variables, then the option."""
        names = [" or ".join(f"`{v}`" for v in self.env)] if self.env else []
        return ", ".join(names + ([f"`{self.option}=`"] if self.option else []))


KNOBS: tuple = tuple(
    Knob(field=f.name, env=f.metadata["knob"]["env"],
         option=f.name if f.metadata["knob"]["option"] else None, default=f.default,
         doc=f.metadata["knob"]["doc"], parse=f.metadata["knob"]["parse"],
         layer=f.metadata["knob"]["layer"])
    for f in dataclasses.fields(Settings))

SIMULATE_OPTIONS: tuple = tuple(k.option for k in KNOBS if k.option)   # nki.simulate's keywords
_ENV_VARS: tuple = tuple(v for k in KNOBS for v in k.env)
# os.environ's own bytes dict on POSIX: the reuse key reads it directly (a dozen os.environ.get
# calls cost ~15 us, more than the rest of a small launch's setup)
_ENV_KEYS: tuple = tuple(os.fsencode(v) for v in _ENV_VARS)
# field -> bool (a flag: parsed by _as_bool), str (a choice: stripped, any case) or the number
# kind a numeric field must be (numbers.Integral / numbers.Real; never a bool or a string)
_FIELD_KINDS: dict = {f.name: (bool if f.type in (bool, "bool") else
                               numbers.Integral if f.type in (int, "int") else
                               numbers.Real if f.type in (float, "float") else
                               str if isinstance(f.default, str) and f.name != "target" else None)
                      for f in dataclasses.fields(Settings)}
_FIELD_KINDS = {k: v for k, v in _FIELD_KINDS.items() if v is not None}
_FROM_ENV: dict = {}      # (variable values, overrides) -> Settings (see Settings.from_env)
# NKISIM_* variables that are not settings but are nkisim's own: the kernel-library runner's
# result file (benchmarks/nki_library.py)
_OTHER_NKISIM_VARS = frozenset({"NKISIM_RESULTS"})
_WARNED: set = set()


def _warn_unknown(env) -> None:
    """Warn once per process per name about an ``NKISIM_*`` variable that is no setting (a
    misspelt knob would otherwise be silently ignored, e.g. ``NKISIM_PRECISE_FP`` for
    ``NKI_PRECISE_FP``), naming the closest setting's variable. Decision: a UserWarning, not an
    error: an environment may carry variables of another nkisim version."""
    for name in env:
        if (name.startswith("NKISIM_") and name not in _ENV_VARS and name not in _OTHER_NKISIM_VARS
                and name not in _WARNED):
            _WARNED.add(name)
            close = difflib.get_close_matches(name, _ENV_VARS, n=1, cutoff=0.6)
            hint = f"; did you mean {close[0]}?" if close else ""
            warnings.warn(f"{name} is not an nkisim setting and is ignored{hint} (the settings: "
                          f"README's settings table, nkisim.config.KNOBS)", UserWarning, stacklevel=3)


def settings_table_markdown() -> str:
    """README's settings table (``| setting | meaning |``), one row per knob, in table order."""
    rows = ["| setting | meaning |", "|---|---|"]
    rows += [f"| {k.setting} | {k.doc} |" for k in KNOBS]
    return "\n".join(rows) + "\n"


__all__ = ["Settings", "Knob", "KNOBS", "SIMULATE_OPTIONS", "normalize_target", "settings_table_markdown"]
