"""nkisim's pytest plugin: run NKI kernel tests over targets and settings, and see simulator time.

Registered through the ``pytest11`` entry point (``nkisim``), so installing nkisim is enough;
``-p no:nkisim`` turns it off. A session that gives none of its options and has no test with its
marker or fixtures runs exactly as without it: the plugin then only registers the options, the
``nki`` marker and the fixtures, and imports nothing of nkisim (it loads in every pytest process
of the environment, so it imports the simulator lazily, when a test asks for it).

Command-line options (each also an ini option of the same name without ``--`` and with ``_``:
``nki_target = trn1,trn2``, ``nki_lnc = 1,2``; the command line wins):

- ``--nki-target=trn1,trn2,trn3``: every NKI test (one with the ``nki`` marker, or one that uses
  the ``nki_target`` or ``nki_lnc`` fixture, directly or through another fixture) runs once per
  target, with ids like ``test_add[trn2]``; each run sees its target as the environment default
  (``NEURON_PLATFORM_TARGET_OVERRIDE``), so plain calls and ``nki.simulate`` without ``target=``
  simulate it. Aliases (``inf2``, ``gen3``, ...) are accepted; the id is the canonical name.
- ``--nki-lnc=1,2``: every test that uses the ``nki_lnc`` fixture (directly or through another
  fixture) runs once per LNC, the fixture giving each run's value (ids ``test_add[lnc2]``); with
  ``--nki-target`` too, once per (target, LNC) pair, the product, ids ``test_add[trn2-lnc2]``
  (targets outer); a pair whose target lacks the LNC (trn1 has no LNC2) is collected and skipped
  with the reason. A marker's ``lnc=`` wins: that test runs with its own LNC only. Decision: only
  tests asking for ``nki_lnc`` are parametrised (the plugin does not change how kernels launch,
  so for any other test a second run would repeat the first).
- ``--nki-strict``: uninitialised reads raise (``NKISIM_STRICT_UNINIT=1``), in every test.
- ``--nki-races``: race detection with the shuffled ``affine_range`` order
  (``NKISIM_DETECT_RACES=1``, ``NKISIM_SHUFFLE=1``), in every test; ``--nki-seed=N`` picks the order.
- ``--nki-findings=first|all|warn``: ``NKISIM_FINDINGS`` in every test ("warn": a broken rule
  inside an instruction is reported and the instruction skipped; a rule broken outside any
  instruction, e.g. an out-of-bounds slice, is always fatal: the test fails with that error,
  whose message says so; see ``runtime.launch.run``).
- ``--nki-durations=N``: at the end, the N tests that spent the most wall time inside simulated
  kernel launches (0: all that launched any). Decision: shown when asked, and (N=5) whenever
  another ``--nki-*`` option is given; a session without them measures nothing.

Decision (how the settings reach the simulator): through the environment variables of the
settings table (``nkisim.config``), since every call path (plain ``@nki.jit`` calls,
``nki.simulate``, the torch layer, a subprocess the test starts) reads them at call time and an
``nki.simulate`` option still wins over them. They are set for one test (its setup, call and
teardown) and restored afterwards to exactly what they were (unset ones unset again), so nothing
leaks into the next test; under pytest-xdist each worker is its own process with its own
environment, and the durations travel to the controller inside the test reports.

Marker ``@pytest.mark.nki(target=None, lnc=1)``: marks an NKI test.
- ``target``: a target name or a list of them: the test runs on those only (a list is
  parametrised like ``--nki-target``). Decision: with ``--nki-target`` too, the test runs on the
  targets of the option that the marker allows; when none is, one run per marker target is
  collected and skipped (so the deselection is visible, never silent).
- ``lnc``: 1 or 2 (default: each of ``--nki-lnc``, else 1). Decision: the plugin does not change
  how kernels launch (``kernel[2]`` stays the only way to ask for LNC2, as on a device); ``lnc``
  is the value of the ``nki_lnc`` fixture, for the test to launch ``kernel[nki_lnc]``, and a run
  on a target that has fewer cores per logical core (``arch``'s ``lnc_max``: trn1 has 1) is
  skipped with the reason. Given, it wins over ``--nki-lnc`` for that test.

Fixtures: ``nki_target`` (the target of this run: its ``--nki-target`` / marker parametrisation,
the marker's single target, else the environment's default, ``Settings.from_env().target``);
``nki_lnc`` (the marker's ``lnc``, else this run's ``--nki-lnc`` value, else 1).

Simulator time: while measuring, each test's launches in the test's own thread (plain
``@nki.jit`` calls and ``nki.simulate``, LNC1 and LNC2) are timed through the runtime's launch
hook (``runtime.launch.LAUNCH_HOOK``). Not counted: launches inside ``nkisim.profile`` /
``nkisim profile`` (their own hook takes over), multi-rank launches (``ranks=``) and launches
made from other threads.
"""
from __future__ import annotations

import os
import time

import pytest

_TARGETS = ("trn1", "trn2", "trn3")
_TARGET_VAR = "NEURON_PLATFORM_TARGET_OVERRIDE"
_PARAM = "nki_target"
_LNC = "nki_lnc"
_DEFAULT_TOP = 5                      # --nki-durations when another --nki-* option is given


def pytest_addoption(parser):
    group = parser.getgroup("nkisim", "nkisim (NKI kernel simulator)")
    opts = [
        ("--nki-target", dict(action="store", metavar="TARGETS", default=None,
                              help="run every NKI test once per target, e.g. trn1,trn2,trn3 (ids [trn2])")),
        ("--nki-lnc", dict(action="store", metavar="LNCS", default=None,
                           help="run every test that uses the nki_lnc fixture once per LNC, e.g. 1,2 "
                                "(ids [lnc2], with --nki-target [trn2-lnc2]); a marker's lnc= wins")),
        ("--nki-strict", dict(action="store_true", default=None,
                              help="uninitialised reads raise (NKISIM_STRICT_UNINIT=1) in every test")),
        ("--nki-races", dict(action="store_true", default=None,
                             help="race detection with the shuffled affine_range order in every test")),
        ("--nki-seed", dict(action="store", metavar="N", default=None,
                            help="seed of the shuffled order (NKISIM_SEED)")),
        ("--nki-findings", dict(action="store", metavar="MODE", default=None, choices=("first", "all", "warn"),
                                help="NKISIM_FINDINGS in every test: first (default), all or warn (a rule "
                                     "broken outside any instruction - indexing, allocation, a loop "
                                     "limit, the launch - is always fatal)")),
        ("--nki-durations", dict(action="store", metavar="N", default=None, type=int,
                                 help="show the N tests with the most simulator time (0: all)")),
    ]
    for flag, kw in opts:
        group.addoption(flag, dest=flag[2:].replace("-", "_"), **kw)
        ini_type = "bool" if kw.get("action") == "store_true" else "string"
        parser.addini(flag[2:].replace("-", "_"), kw["help"] + " (the command line wins)", type=ini_type,
                      default=None)


def _opt(config, name):
    """The option's value: the command line, else the ini file, else None."""
    value = config.getoption(name)
    if value is None:
        value = config.getini(name)
        if value in ("", [], None, False):
            return None
    return value


class _Plan:
    """What the options ask for, fixed at configure time (one per process: each xdist worker
    parses the same command line)."""

    def __init__(self, config):
        targets = _opt(config, "nki_target")
        self.targets = _parse_targets(targets, "--nki-target") if targets else None
        lncs = _opt(config, "nki_lnc")
        self.lncs = _parse_lncs(lncs) if lncs else None
        env = {}
        if _truthy(_opt(config, "nki_strict")):
            env.update(NKISIM_STRICT_UNINIT="1")
        if _truthy(_opt(config, "nki_races")):
            env.update(NKISIM_DETECT_RACES="1", NKISIM_SHUFFLE="1")
        seed = _opt(config, "nki_seed")
        if seed is not None:
            if not str(seed).strip().isdigit():
                raise pytest.UsageError(f"--nki-seed: expected a non-negative integer, got {seed!r}")
            env["NKISIM_SEED"] = str(seed).strip()
        findings = _opt(config, "nki_findings")
        if findings is not None:
            findings = str(findings).strip().lower()
            if findings not in ("first", "all", "warn"):
                raise pytest.UsageError(f"--nki-findings: expected first, all or warn, got {findings!r}")
            env["NKISIM_FINDINGS"] = findings
        self.env = env
        top = _opt(config, "nki_durations")
        if top is not None:
            try:
                top = int(top)
            except ValueError:
                raise pytest.UsageError(f"--nki-durations: expected an integer, got {top!r}") from None
            if top < 0:
                raise pytest.UsageError(f"--nki-durations: expected N >= 0, got {top}")
        elif self.targets or self.lncs or env:
            top = _DEFAULT_TOP
        self.top = top                   # None: measure nothing


def _truthy(value) -> bool:
    if isinstance(value, str):
        return value.strip().lower() in ("1", "true", "yes", "on")
    return bool(value)


def _parse_targets(value, source: str) -> list:
    """``"trn1,trn2"`` or a list of names -> canonical names, in order, without repeats."""
    from nkisim.config import normalize_target
    names = value.split(",") if isinstance(value, str) else list(value)
    out = []
    for name in names:
        if isinstance(name, str) and not name.strip():
            continue
        try:
            t = normalize_target(name, source)
        except ValueError as e:
            raise pytest.UsageError(str(e)) from None
        if t not in out:
            out.append(t)
    if not out:
        raise pytest.UsageError(f"{source}: no target given; expected names from {', '.join(_TARGETS)}")
    return out


def _parse_lncs(value) -> list:
    """``"1,2"`` -> [1, 2], in order, without repeats; each must be 1 or 2."""
    out = []
    for part in str(value).split(","):
        part = part.strip()
        if not part:
            continue
        if part not in ("1", "2"):
            raise pytest.UsageError(f"--nki-lnc: expected 1 or 2 (comma-separated, e.g. 1,2), got {part!r}")
        if int(part) not in out:
            out.append(int(part))
    if not out:
        raise pytest.UsageError("--nki-lnc: no LNC given; expected 1, 2 or 1,2")
    return out


_PLAN = pytest.StashKey()
_SIM = pytest.StashKey()              # item -> [seconds, launches] of the current phase


def pytest_configure(config):
    config.addinivalue_line(
        "markers",
        "nki(target=None, lnc=1): an NKI kernel test (nkisim). target: a name or list (trn1, trn2, "
        "trn3): the test runs on those (parametrised, ids [trn2], with --nki-target: those the option "
        "allows); lnc: 1 or 2, the nki_lnc fixture's value, over --nki-lnc (a target without that LNC "
        "is skipped)")
    plan = _Plan(config)
    config.stash[_PLAN] = plan
    if plan.top is not None:
        config.pluginmanager.register(_Durations(plan.top), "nkisim-durations")


# ---- collection ---------------------------------------------------------------------------------

def _marker_args(marker, where):
    """(targets or None, lnc or None when the marker does not give it, whether target= is a list)."""
    kw = dict(marker.kwargs)
    if marker.args:
        if len(marker.args) > 1 or "target" in kw:
            raise pytest.UsageError(f"{where}: @pytest.mark.nki takes target= (one positional) and lnc=")
        kw["target"] = marker.args[0]
    bad = set(kw) - {"target", "lnc"}
    if bad:
        raise pytest.UsageError(f"{where}: @pytest.mark.nki: unknown argument(s) {sorted(bad)}; "
                                f"expected target=, lnc=")
    lnc = kw.get("lnc")
    if lnc is not None and (isinstance(lnc, bool) or lnc not in (1, 2)):
        raise pytest.UsageError(f"{where}: @pytest.mark.nki(lnc={lnc!r}): expected 1 or 2")
    target = kw.get("target")
    targets = _parse_targets(target, f"{where}: @pytest.mark.nki(target=)") if target is not None else None
    return targets, (None if lnc is None else int(lnc)), (isinstance(target, (list, tuple)))


def _user_parametrises(metafunc, name: str) -> bool:
    for m in metafunc.definition.iter_markers("parametrize"):
        names = m.args[0] if m.args else m.kwargs.get("argnames", ())
        names = [n.strip() for n in names.split(",")] if isinstance(names, str) else list(names)
        if name in names:
            return True
    return False


def pytest_generate_tests(metafunc):
    """Parametrise an NKI test over its targets (``--nki-target`` / a marker's list) and, if it
    uses the ``nki_lnc`` fixture, over ``--nki-lnc`` (unless its marker gives ``lnc=``): one
    parametrisation of both, their product, ids ``[trn2-lnc2]``; a run on a target without
    that LNC is collected with a skip mark. Decision: ``--nki-lnc`` parametrises only tests that
    ask for ``nki_lnc`` (directly or through another fixture): the plugin never changes how a
    kernel launches, so another test would run the same thing twice."""
    marker = metafunc.definition.get_closest_marker("nki")
    uses_target = _PARAM in metafunc.fixturenames
    uses_lnc = _LNC in metafunc.fixturenames
    if marker is None and not uses_target and not uses_lnc:
        return
    plan = metafunc.config.stash[_PLAN]
    where = metafunc.definition.nodeid
    m_targets, m_lnc, m_list = _marker_args(marker, where) if marker is not None else (None, None, False)

    targets, skip_all = None, None           # None: the target is not parametrised
    if (plan.targets is not None or (m_targets and m_list)) and not _user_parametrises(metafunc, _PARAM):
        if plan.targets is not None and m_targets is not None:
            targets = [t for t in plan.targets if t in m_targets]
            if not targets:
                targets = m_targets
                skip_all = (f"nkisim: @pytest.mark.nki(target={m_targets}) allows none of "
                            f"--nki-target={','.join(plan.targets)}")
        else:
            targets = plan.targets if plan.targets is not None else m_targets
    lncs = None                              # None: the LNC is not parametrised
    if plan.lncs is not None and uses_lnc and m_lnc is None and not _user_parametrises(metafunc, _LNC):
        lncs = plan.lncs
    if targets is None and lncs is None:
        return                               # one run: the marker's single target or the environment's

    def marks(target, lnc):
        reason = skip_all or (_lnc_skip(target, lnc) if target is not None else None)
        return (pytest.mark.skip(reason=reason),) if reason else ()

    if targets is not None and lncs is not None:
        params = [pytest.param(t, n, id=f"{t}-lnc{n}", marks=marks(t, n)) for t in targets for n in lncs]
        names = [_PARAM, _LNC]
    elif targets is not None:
        params = [pytest.param(t, id=t, marks=marks(t, m_lnc or 1)) for t in targets]
        names = [_PARAM]
    else:
        fixed = m_targets[0] if m_targets else None      # else the environment's, checked when run
        params = [pytest.param(n, id=f"lnc{n}", marks=marks(fixed, n)) for n in lncs]
        names = [_LNC]
    if _PARAM in names and not uses_target:
        # A marked test that does not ask for the fixture: the run's target lives in its callspec
        # (pytest prunes the name from the fixtures it sets up).
        metafunc.fixturenames.append(_PARAM)
    metafunc.parametrize(names if len(names) > 1 else names[0], params, indirect=True)


def _lnc_skip(target: str, lnc: int):
    if lnc == 1:
        return None
    from nkisim import arch
    have = arch.get(target).lnc_max
    if lnc > have:
        return f"nkisim: LNC{lnc} needs a target with {lnc} cores per logical core; {target} has {have}"
    return None


def _run_target(item):
    """The target this item runs on, or None for the environment's default."""
    callspec = getattr(item, "callspec", None)
    if callspec is not None and _PARAM in callspec.params:
        return callspec.params[_PARAM]
    marker = item.get_closest_marker("nki")
    if marker is not None:
        targets, _, _ = _marker_args(marker, item.nodeid)
        if targets:
            return targets[0]
    return None


# ---- fixtures ------------------------------------------------------------------------------------

@pytest.fixture
def nki_target(request):
    """The NKI target of this test run: ``--nki-target`` / marker parametrisation, the marker's
    ``target=``, else the environment's default (``Settings.from_env().target``)."""
    target = getattr(request, "param", None) or _run_target(request.node)
    if target is None:
        from nkisim.config import Settings
        target = Settings.from_env().target
    return target


@pytest.fixture
def nki_lnc(request, nki_target):
    """The LNC of this test run (1 or 2): the marker's ``lnc=``, else this run's ``--nki-lnc``
    value, else 1; launch ``kernel[nki_lnc](...)``. A run on a target without that LNC is skipped."""
    lnc = getattr(request, "param", None)
    if lnc is None:
        marker = request.node.get_closest_marker("nki")
        lnc = (_marker_args(marker, request.node.nodeid)[1] if marker is not None else None) or 1
    reason = _lnc_skip(nki_target, lnc)
    if reason:
        pytest.skip(reason)
    return lnc


# ---- each test: its environment, its simulator time ---------------------------------------------

# Decision: old-style hook wrappers (``hookwrapper=True``), which every pytest >= 7 and pluggy take:
# the plugin loads in every pytest process of the environment, whatever pytest that is.
@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    plan = item.config.stash[_PLAN]
    env = dict(plan.env)
    target = _run_target(item)
    if target is not None:
        env[_TARGET_VAR] = target
    if not env and plan.top is None:
        yield                            # nothing asked: this test runs untouched
        return
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    token = None
    if plan.top is not None:
        from nkisim.runtime import launch
        sim = item.stash[_SIM] = [0.0, 0]

        def timed(func, go, target, lnc):
            t0 = time.perf_counter()
            try:
                return go()
            finally:
                sim[0] += time.perf_counter() - t0
                sim[1] += 1
        token = (launch.LAUNCH_HOOK, launch.LAUNCH_HOOK.set(timed))
    try:
        yield
    finally:
        if token is not None:
            token[0].reset(token[1])
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    sim = item.stash.get(_SIM, None)
    if sim is not None and sim[1]:
        report = outcome.get_result()
        # this phase's launches; a plain attribute survives xdist's report serialisation
        report.nkisim_sim = [sim[0], sim[1]]
        sim[0], sim[1] = 0.0, 0


class _Durations:
    """Simulator time per test, gathered where the reports arrive (the controller under xdist)
    and shown in the terminal summary; registered only when measuring."""

    def __init__(self, top: int):
        self.top = top
        self.times: dict = {}            # nodeid -> [seconds, launches]

    def pytest_runtest_logreport(self, report):
        sim = getattr(report, "nkisim_sim", None)
        if sim:
            acc = self.times.setdefault(report.nodeid, [0.0, 0])
            acc[0] += sim[0]
            acc[1] += sim[1]

    def pytest_terminal_summary(self, terminalreporter, config):
        if hasattr(config, "workerinput"):
            return                       # an xdist worker: its reports go to the controller
        rows = sorted(self.times.items(), key=lambda kv: (-kv[1][0], kv[0]))
        shown = rows if self.top == 0 else rows[:self.top]
        total = sum(s for s, _ in self.times.values())
        launches = sum(n for _, n in self.times.values())
        title = "nkisim: simulator time" + ("" if self.top == 0 else f" (top {self.top})")
        terminalreporter.write_sep("=", title)
        if not rows:
            terminalreporter.write_line("no test launched a simulated kernel")
            return
        for nodeid, (s, n) in shown:
            terminalreporter.write_line(f"{s:9.3f}s {n:6d} launch{'es' if n != 1 else '  '}  {nodeid}")
        terminalreporter.write_line(f"{total:9.3f}s {launches:6d} launches in {len(rows)} tests "
                                    f"(wall time inside simulated launches)")
