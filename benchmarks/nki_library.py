"""Run AWS's kernel library's own test suite (aws-neuron/nki-library) against nkisim.

    python benchmarks/nki_library.py /path/to/nki-library            # the suite as it runs itself
    python benchmarks/nki_library.py /path/to/nki-library --all      # its slow shapes included
    python benchmarks/nki_library.py /path/to/nki-library -k router_topk --timeout 300
    python benchmarks/nki_library.py /path/to/nki-library test/integration/nkilib/core/cumsum
    python benchmarks/nki_library.py /path/to/nki-library --deadline 60 --results r.jsonl
    python benchmarks/nki_library.py --summarise run.jsonl rerun.jsonl   # failure table, pass rates

The suite runs in its simulation mode (``--test-mode simulation``) with ``pytest -n 2``, a per-test
timeout and a per-process memory cap (tracebacks in Python's native format: pytest's own parses
source files, which can run a worker near its cap out of memory and stop the whole session);
nki-library is not edited. Its harness imports the simulator as ``nki_cpu_simulator``, which
nkisim's import face serves. What the public repository lacks is stood in for here, outside the
nkisim package, in a temporary folder put on the path:
``neuron_dtypes`` (a private dtype helper its tests import), ``test.utils.perf_analysis_private``
and ``test.utils.scripts.remote_lock_scripts`` (private modules its orchestrator and hardware-host
locking import) and ``Orchestrator._compiled_kernel`` (read in simulation mode before anything
sets it). One more stand-in: the public harness runs one rank in simulation, so its collective
tests (``InferenceArgs.collective_ranks > 1`` or a ``PerRankLazyInputGenerator`` input) could not
pass; the plugin wraps ``Orchestrator._run_simulator_inference`` at runtime to run every rank at
once on nkisim's multi-rank launch (``nki.simulate(kernel, ranks=N)``, rank r given
``for_rank(r)``) and to leave each rank's outputs in ``infer_result/output_worker_<r>/`` as the
hardware run does, so the suite's own validation checks what it checks on hardware: every rank
against a per-rank golden (``PerRankLazyGoldenGenerator``), rank 0 against a single golden.

Tests marked ``trace_only`` / ``compile_only`` / ``compile_and_infer`` run in that mode even under
``--test-mode simulation`` and need the Neuron compiler: the plugin skips them at collection
("needs the Neuron compiler: marked trace_only") and the summary counts them apart ("not
simulation tests"), outside the pass rate. A test failing before any kernel reached the simulator
(its own input or golden generation, e.g. a MemoryError under the memory cap) is still a failure,
counted on its own line too ("failed before reaching the simulator").
A test that ran out of memory under the per-worker cap (a MemoryError or an allocator's message
anywhere in its exception chain: a negative test's harness turns the golden's MemoryError into a
bare AssertionError) or whose worker crashed is re-run alone under ``--retry-memory-gib``.

The checkout is simulated as the NKI release current on its last commit's date (``--nki-version``
overrides): nki-library's goldens follow the release it was written for, e.g. quantize_mx's
OCP-sample scale before NKI 0.5.
Each test's result is written as it finishes (``--results``, JSON lines: name, outcome, time, cause),
so a run stopped at ``--deadline`` (minutes) or by Ctrl-C still reports every test finished by then.
Prints pass / fail / skip / error counts, the share of simulation tests run that pass, the top
failure causes (exception type and first message line, numbers masked) and the slowest ten tests
with times.
Needs the suite's test dependencies in the running environment (the script names any missing).
Not run in CI: the checkout comes from the network.
"""
from __future__ import annotations

import argparse
import collections
import os
import re
import resource
import signal
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET

# What the suite's conftest and utilities import (module name -> package to install).
NEEDS = {"pytest": "pytest", "xdist": "pytest-xdist", "pytest_timeout": "pytest-timeout",
         "pytest_html": "pytest-html", "pytest_metadata": "pytest-metadata", "boto3": "boto3",
         "aws_embedded_metrics": "aws-embedded-metrics", "fabric2": "fabric2", "filelock": "filelock",
         "allpairspy": "allpairspy", "plotext": "plotext", "pandas": "pandas", "torch": "torch==2.13.0",
         "ml_dtypes": "ml_dtypes", "scipy": "scipy", "nkisim": "nkisim"}

NEURON_DTYPES = '''\
"""Stand-in for the private ``neuron_dtypes`` module nki-library's tests import (not public)."""
import ml_dtypes as _ml
import numpy as _np

import nkisim.dtypes as _d

bfloat16 = _ml.bfloat16
float8_e4m3 = _ml.float8_e4m3
float8_e4m3fn = _ml.float8_e4m3fn
float8_e5m2 = _ml.float8_e5m2
for _name in ("float8_e4m3fn_x4", "float8_e5m2_x4", "float4_e2m1fn_x4", "float8_e8m0fnu"):
    if hasattr(_d, _name):
        globals()[_name] = getattr(_d, _name)
finfo = _ml.finfo


def is_float_type(dtype):
    dtype = _np.dtype(dtype)
    return dtype.kind == "f" or _np.issubdtype(dtype, _np.floating) or dtype in (
        _np.dtype(bfloat16), _np.dtype(float8_e4m3), _np.dtype(float8_e4m3fn), _np.dtype(float8_e5m2))


def sizeinbytes(dtype):
    return _np.dtype(dtype).itemsize


def static_cast(array, dtype):
    """C++-style cast: floats round to nearest even into float types; into integer types they
    truncate toward zero, saturating at the type's range."""
    array, dtype = _np.asarray(array), _np.dtype(dtype)
    if dtype.kind in "iu" and array.dtype.kind == "f" or is_float_type(array.dtype) and dtype.kind in "iu":
        info = _np.iinfo(dtype)
        return _np.clip(_np.trunc(array.astype(_np.float64)), info.min, info.max).astype(dtype)
    return array.astype(dtype)
'''

PLUGIN = '''\
"""pytest plugin: stand-ins for what the public nki-library repository lacks (see the runner's docstring)."""
import sys
import types

import enum

_perf = types.ModuleType("test.utils.perf_analysis_private")
_perf.analyze_trace = lambda *args, **kwargs: None
sys.modules.setdefault("test.utils.perf_analysis_private", _perf)

# The hardware hosts' core-lock helpers (only used when tests run on a remote Trainium host).
_scripts = types.ModuleType("test.utils.scripts")
_scripts.__path__ = []
_locks = types.ModuleType("test.utils.scripts.remote_lock_scripts")
_locks.LockStatus = enum.Enum("LockStatus", "ALLOCATED NO_CORES DRAINING DRAINED RELEASED UNDRAINED "
                              "FLOCK_TIMEOUT ERROR")
_locks.LockResult = type("LockResult", (), {"__init__": lambda self, status=None, **kw: setattr(self, "status", status)})
sys.modules.setdefault("test.utils.scripts", _scripts)
sys.modules.setdefault("test.utils.scripts.remote_lock_scripts", _locks)


import copy
import os

import pytest

# Skip reason of the tests a trace-mode marker runs outside simulation (the summary counts them).
NOT_SIMULATION = "needs the Neuron compiler: marked "
# junit property of a test that failed before any kernel reached the simulator.
STAGE, BEFORE_SIMULATOR = "nkisim_stage", "before-simulator"
# junit property of a test whose exception chain holds an out-of-memory error anywhere (a negative
# test's harness turns the golden's MemoryError into a bare AssertionError).
OUT_OF_MEMORY = "nkisim_out_of_memory"
_MEMORY_WORDS = ("Unable to allocate", "can't allocate memory", "Cannot allocate memory", "bad_alloc")
_reached = [False]         # did this test call the simulator (any launch, any rank)?


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config, items):
    """Tests a marker runs in a compiler trace mode even under --test-mode simulation (the suite's
    trace_mode fixture) are not simulation tests: skip them, naming the marker."""
    modes = [m.value for m in _trace_modes() if m.value != "simulation"]
    for item in items:
        marked = next((m for m in modes if item.get_closest_marker(m) is not None), None)
        if marked is not None:
            item.add_marker(pytest.mark.skip(reason=NOT_SIMULATION + marked))


def _trace_modes():
    from test.utils.common_dataclasses import TraceMode
    return list(TraceMode)


def _reaching(fn):
    def wrapped(*args, **kwargs):
        _reached[0] = True
        return fn(*args, **kwargs)
    wrapped.__wrapped__ = fn
    return wrapped


def pytest_configure(config):
    import nkisim.runtime.launch as launch
    if not hasattr(launch.run, "__wrapped__"):
        launch.run = _reaching(launch.run)


def pytest_runtest_setup(item):
    _reached[0] = False
    orchestrator = sys.modules.get("test.utils.test_orchestrator")
    if orchestrator is not None and not hasattr(orchestrator.Orchestrator, "_compiled_kernel"):
        orchestrator.Orchestrator._compiled_kernel = None
    if orchestrator is not None and not hasattr(orchestrator.Orchestrator._run_simulator_inference, "__wrapped__"):
        one_rank = orchestrator.Orchestrator._run_simulator_inference

        def run_simulator_inference(self, kernel_under_test):
            from test.utils.common_dataclasses import PerRankLazyInputGenerator
            ranks = kernel_under_test.inference_args.collective_ranks
            if ranks > 1 or isinstance(kernel_under_test.kernel_input, PerRankLazyInputGenerator):
                return _run_ranks(self, kernel_under_test, ranks)
            return one_rank(self, kernel_under_test)
        run_simulator_inference.__wrapped__ = one_rank
        orchestrator.Orchestrator._run_simulator_inference = run_simulator_inference


# One JSON line per finished test, written as it finishes (by the controller under xdist), so a run
# stopped at its deadline or interrupted still has every result so far (junit is written only at
# the end).
_RESULTS = os.environ.get("NKISIM_RESULTS")
_pending = {}


def _crash_line(report):
    crash = getattr(report.longrepr, "reprcrash", None)
    if crash is not None and getattr(crash, "message", None):
        return crash.message
    text = str(report.longrepr or "")
    last = next((ln for ln in reversed(text.splitlines()) if ln.strip()), "")
    return last.strip().removeprefix("E ").strip()        # pytest's error-line marker


def pytest_runtest_logreport(report):
    if not _RESULTS or os.environ.get("PYTEST_XDIST_WORKER"):
        return
    rec = _pending.setdefault(report.nodeid, {"name": report.nodeid, "outcome": "passed", "time": 0.0})
    rec["time"] += report.duration
    if report.skipped and rec["outcome"] == "passed":
        rec["outcome"] = "skipped"
        rec["reason"] = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
    elif report.failed and rec["outcome"] in ("passed", "skipped"):
        rec["outcome"] = "error" if report.when in ("setup", "teardown") else "failed"   # "???": worker crashed
        rec["cause"] = _crash_line(report)
        props = [tuple(p) for p in report.user_properties]
        rec["before_simulator"] = (STAGE, BEFORE_SIMULATOR) in props
        rec["out_of_memory"] = (OUT_OF_MEMORY, "1") in props or "crashed" in rec["cause"]
    if report.when not in ("setup", "call"):        # teardown, or xdist's report of a crashed worker
        _flush(report.nodeid)


def _flush(nodeid):
    import json
    rec = _pending.pop(nodeid, None)
    if rec is not None:
        with open(_RESULTS, "a") as f:
            f.write(json.dumps(rec) + "\\n")


def pytest_sessionfinish(session):
    for nodeid in list(_pending):
        _flush(nodeid)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    outcome = yield
    if outcome.excinfo is not None and not _reached[0]:
        item.user_properties.append((STAGE, BEFORE_SIMULATOR))
    if outcome.excinfo is not None and _out_of_memory(outcome.excinfo[1]):
        item.user_properties.append((OUT_OF_MEMORY, "1"))


def _out_of_memory(exc):
    """Is a MemoryError (or an allocator's out-of-memory message) anywhere in exc's chain? (Not
    nkisim's CapacityError, a MemoryError too: the kernel does not fit on-chip, whatever the
    machine.)"""
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if type(exc).__name__ == "CapacityError":
            return False
        if isinstance(exc, MemoryError) or any(w in str(exc) for w in _MEMORY_WORDS):
            return True
        exc = exc.__cause__ or exc.__context__
    return False


def _own(value):
    """A rank's copy of an input: arrays copied (through dicts, lists, tuples)."""
    import numpy as np
    if isinstance(value, np.ndarray):
        return value.copy()
    if isinstance(value, dict):
        return {k: _own(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_own(v) for v in value]
    if isinstance(value, tuple) and not hasattr(value, "_fields"):
        return tuple(_own(v) for v in value)
    return value


def _run_ranks(self, kernel_under_test, ranks):
    """The simulation step of a collective test: every rank of the kernel at once (nkisim's
    multi-rank launch), rank r given kernel_input.for_rank(r) (or the one input dict), each
    rank's outputs dumped to infer_result/output_worker_<r>/ as the hardware run leaves them,
    so the suite's own validation checks the ranks it checks on hardware (every rank against a
    per-rank golden, rank 0 against a single golden)."""
    import numpy as np
    import nki
    from test.utils.common_dataclasses import (INF_ARTIFACT_DIR_NAME, PerRankLazyInputGenerator,
                                               normalize_golden_output)
    from test.utils.exceptions import InferenceException, ValidationException
    from test.utils.metrics_collector import MetricName

    ranks = max(ranks, 1)
    given = kernel_under_test.kernel_input
    # the test's own input generation (before the simulator)
    per = [given.for_rank(r) if isinstance(given, PerRankLazyInputGenerator) else (given or {})
           for r in range(ranks)]
    # Decision: each rank gets copies, as on hardware (inputs go to files): the test's arrays,
    # which its golden generators may read after the run, stay as they were.
    per = [{k.removesuffix(".must_alias_input"): _own(v) for k, v in p.items()} for p in per]
    names = set(per[0])
    if any(set(p) != names for p in per):
        raise InferenceException("nkisim runner: every rank's kernel_input must name the same arguments, got "
                                 + "; ".join(f"rank {r}: {sorted(p)}" for r, p in enumerate(per)))
    collector = self.emitter.get_collector()
    os.environ["NKI_NC_VERSION"] = kernel_under_test.compiler_input.platform_target.get_nc_gen()
    lnc = kernel_under_test.compiler_input.logical_nc_config
    kwargs = {n: nki.per_rank([p[n] for p in per]) for n in names}
    _reached[0] = True
    try:
        with collector.timer(MetricName.SIMULATION_TIME):
            results = nki.simulate(kernel_under_test.kernel_func, ranks=ranks)[lnc](**kwargs)
    except Exception as e:
        raise InferenceException(str(e)) from e
    if kernel_under_test.validation_args is None:
        raise InferenceException("Simulation mode requires validation_args to verify outputs")
    golden_output = kernel_under_test.validation_args.golden_output
    # The output names come from the goldens; a per-rank golden is computed here, after the
    # simulation: its failure is a validation failure, as on hardware (where the validator makes it).
    try:
        goldens = [normalize_golden_output(golden_output, rank_id=r) for r in range(ranks)]
    except Exception as e:
        raise ValidationException(f"golden generation failed: {type(e).__name__}: {e}") from e
    base = os.path.join(self.fs_config.artifacts_output_directory_path, INF_ARTIFACT_DIR_NAME)
    for r, (result, golden) in enumerate(zip(results, goldens)):
        outputs = [] if result is None else list(result) if isinstance(result, (list, tuple)) else [result]
        if len(outputs) != len(golden):
            raise InferenceException(f"rank {r}: kernel returned {len(outputs)} outputs but expected "
                                     f"{len(golden)}: {list(golden)}")
        tensors = {name: np.asarray(out, dtype=g.dtype) for (name, g), out in zip(golden.items(), outputs)}
        where = os.path.join(base, f"output_worker_{r}") if ranks > 1 else base
        self.__dump_tensors__(where, tensors, lambda name: name)
    return base
'''


# NKI releases by date (Neuron SDK release notes, "Neuron Kernel Interface (NKI) [0.x.0]"): a
# checkout is simulated as the release current on its last commit's date (nkisim's
# NKISIM_NKI_VERSION), so behaviour a later release changed (quantize_mx's scale, 0.5) matches
# what the checkout was written and tested against.
NKI_RELEASES = (("2026-04-09", "0.3"), ("2026-05-21", "0.4"), ("2026-07-07", "0.5"))


def nki_version_for(day: str | None) -> str:
    """The NKI release current on ``day`` (YYYY-MM-DD): the newest when unknown, the oldest nkisim
    tells apart (0.3) for an older day."""
    if not day:
        return NKI_RELEASES[-1][1]
    current = [v for d, v in NKI_RELEASES if d <= day]
    return current[-1] if current else NKI_RELEASES[0][1]


def _checkout_day(root: str) -> str | None:
    try:
        done = subprocess.run(["git", "-C", root, "log", "-1", "--format=%cs"], capture_output=True,
                              text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() or None if done.returncode == 0 else None


OUT_OF_MEMORY = "nkisim_out_of_memory"      # the plugin's junit property (same name there)
# A failure's cause naming an out-of-memory condition (NumPy, torch, the C++ allocator).
MEMORY = re.compile(r"MemoryError|Unable to allocate|can't allocate memory|Cannot allocate memory|bad_alloc")


def _pytest(cmd, root, env, log, memory_gib, deadline):
    """Run one pytest session (its own process group, under the address-space cap) until it
    ends or ``deadline`` (a time.time() value) passes; returns (why it was stopped or "", exit)."""
    with open(log, "w") as out:
        proc = subprocess.Popen(cmd, cwd=root, env=env, stdout=out, stderr=subprocess.STDOUT,
                                preexec_fn=_cap_memory(memory_gib), start_new_session=True)
        stopped = ""
        try:
            proc.wait(timeout=None if deadline is None else max(1.0, deadline - time.time()))
        except subprocess.TimeoutExpired:
            stopped = "at the deadline"
        except KeyboardInterrupt:
            stopped = "by an interrupt"
        finally:
            if proc.poll() is None:             # pytest and its xdist workers: the whole group
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
    return stopped, proc.returncode


def _merge(results: str, again: str) -> None:
    """Replace the records of ``results`` that ``again`` re-ran by the re-run's (marked retried)."""
    import json
    new = {r["name"]: {**r, "retried": True} for r in _jsonl_records(again)}
    merged = [new.pop(r["name"], r) for r in _jsonl_records(results)] + list(new.values())
    with open(results, "w") as f:
        f.writelines(json.dumps(r) + "\n" for r in merged)


def _missing() -> list[str]:
    import importlib.util
    return [pkg for mod, pkg in NEEDS.items() if importlib.util.find_spec(mod) is None]


def _cap_memory(gib: float):
    limit = int(gib * 2 ** 30)
    return lambda: resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def _cause(text: str) -> str:
    """One line naming why a test failed: exception type and first message line, numbers masked."""
    line = next((ln for ln in text.strip().splitlines() if ln.strip()), "")
    line = re.sub(r"0x[0-9a-f]+", "0x…", line)
    line = re.sub(r"\d+(\.\d+)?", "N", line)
    line = re.sub(r"\(/[^)]*:N\)", "(…)", line)
    return line[:160]


# Kept equal to the plugin's NOT_SIMULATION / STAGE / BEFORE_SIMULATOR (a test checks).
NOT_SIMULATION = "needs the Neuron compiler: marked "
STAGE, BEFORE_SIMULATOR = "nkisim_stage", "before-simulator"


def _junit_records(junit: str) -> list[dict]:
    """The runner's per-test records (as the plugin writes them) from a junit XML report."""
    out = []
    for case in ET.parse(junit).getroot().iter("testcase"):
        kinds = {c.tag for c in case}
        rec = {"name": f"{case.get('classname', '')}::{case.get('name', '')}",
               "time": float(case.get("time") or 0), "outcome": "passed"}
        if "skipped" in kinds:
            skip = next(c for c in case if c.tag == "skipped")
            rec.update(outcome="skipped", reason=skip.get("message") or skip.text or "")
        elif kinds & {"failure", "error"}:
            node = next(c for c in case if c.tag in ("failure", "error"))
            rec.update(outcome="failed" if "failure" in kinds else "error",
                       cause=(node.get("message") or node.text or "").strip(),
                       before_simulator="failure" in kinds and any(
                           p.get("name") == STAGE and p.get("value") == BEFORE_SIMULATOR
                           for p in case.iter("property")))
        out.append(rec)
    return out


def _jsonl_records(path: str) -> list[dict]:
    import json
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def summarise(report: str, top: int = 15) -> dict:
    """Counts, top causes and slowest tests from a junit XML report (``*.xml``) or from the
    plugin's per-test JSON lines (written as tests finish, so a run stopped early has them).

    ``counts``: passed / failed / error / skipped, and apart from them ``not_simulation`` (skipped
    by the plugin: a marker runs them in a compiler trace mode), so the pass rate is over the
    simulation tests; ``before_simulator`` counts the failed ones (they stay in ``failed``) whose
    failure came before any kernel reached the simulator (the test's own input or golden
    generation, e.g. a MemoryError under the memory cap); ``out_of_memory`` counts the failed or
    errored ones that ran out of memory (or crashed their worker) after any re-run."""
    records = _junit_records(report) if report.endswith(".xml") else _jsonl_records(report)
    counts, causes, times = collections.Counter(), collections.Counter(), []
    for rec in records:
        if rec["outcome"] == "skipped":
            counts["not_simulation" if NOT_SIMULATION in rec.get("reason", "") else "skipped"] += 1
            continue
        counts[rec["outcome"]] += 1
        if rec["outcome"] in ("failed", "error"):
            causes[_cause(rec.get("cause", ""))] += 1
            if rec["outcome"] == "failed" and rec.get("before_simulator"):
                counts["before_simulator"] += 1
            if rec.get("out_of_memory") or MEMORY.search(rec.get("cause", "")):
                counts["out_of_memory"] += 1
        times.append((rec["time"], rec["name"]))
    times.sort(reverse=True)
    return {"counts": counts, "causes": causes.most_common(top), "slowest": times[:10]}


# Failures of nki-library's own making, checked one by one (test name pattern, cause pattern, why).
SUITE_DEFECTS = (
    (r"test_gen_mask_tkg\.py", r"KeyError: 'mask_out_hbm'",
     "gen_mask_tkg: the test reads an output 'mask_out_hbm' its kernel call never returns"),
    (r"test_attention_block_tkg\.py.*MODEL_WIP", r"",
     "attention_block_tkg MODEL_WIP configs: the golden lacks the kernel's FP8 cast and other steps "
     "(configs marked work in progress)"),
    (r"test_moe_block_tkg\.py.*MODEL_WIP", r"Validation failed",
     "moe_block_tkg MODEL_WIP configs: the golden's RMSNorm is not rounded to bf16 as the kernel's is"),
    (r"test_output_proj_tkg\.py", r"sbuf allocation",
     "output_proj_tkg: every head's weights loaded up front, more than SBUF holds"),
)
# nkisim's CapacityError (a kernel's tiles do not fit SBUF/PSUM on the target).
CAPACITY = re.compile(r"(sbuf|psum) allocation .* on trn")


def categorise(rec: dict) -> tuple[str, str]:
    """(kind, cause) of a failed or errored record: kind is "suite defect", "machine memory",
    "on-chip capacity", "timeout" or "other"; cause says which (a suite defect's why, else the
    masked first line)."""
    name, cause = rec["name"], rec.get("cause", "")
    if "Timeout (>" in cause:               # unfinished: not known to fail by its suite defect
        return "timeout", _cause(cause)
    for name_pat, cause_pat, why in SUITE_DEFECTS:
        if re.search(name_pat, name) and re.search(cause_pat, cause) and not MEMORY.search(cause):
            return "suite defect", why
    if CAPACITY.search(cause):
        return "on-chip capacity", _cause(cause)
    if MEMORY.search(cause) or "crashed" in cause or rec.get("out_of_memory"):
        return "machine memory", "out of this machine's memory (the test's own float64 golden/inputs)" \
            if MEMORY.search(cause) or rec.get("out_of_memory") else _cause(cause)
    return "other", _cause(cause)


def summarise_files(paths: list[str]) -> str:
    """The table of several JSON-lines result files (a run and its re-runs, given oldest first:
    a later file's record of a test replaces an earlier one): every failure category with its
    count, and the pass rates of all simulation tests run, of those not out of the machine's
    memory, and of those besides not failing by a suite defect."""
    latest: dict = {}
    for path in paths:
        for rec in _jsonl_records(path):
            latest[rec["name"]] = rec
    counts, kinds, table = collections.Counter(), collections.Counter(), collections.Counter()
    for rec in latest.values():
        if rec["outcome"] == "skipped":
            counts["not_simulation" if NOT_SIMULATION in rec.get("reason", "") else "skipped"] += 1
            continue
        counts[rec["outcome"]] += 1
        if rec["outcome"] in ("failed", "error"):
            kind, cause = categorise(rec)
            kinds[kind] += 1
            module = rec["name"].split("::")[0].rsplit("/", 1)[-1].removesuffix(".py")
            table[(kind, module, cause)] += 1
    ran = counts["passed"] + counts["failed"] + counts["error"]
    lines = [f"{len(latest)} tests in {len(paths)} file(s): {ran} run ({counts['passed']} passed, "
             f"{counts['failed']} failed, {counts['error']} errors), {counts['skipped']} skipped by the suite, "
             f"{counts['not_simulation']} not simulation tests", "", "failures by category:"]
    for kind in ("suite defect", "machine memory", "on-chip capacity", "timeout", "other"):
        rows = sorted(((n, m, c) for (k, m, c), n in table.items() if k == kind), reverse=True)
        if rows:
            lines.append(f"  {kind}: {kinds[kind]}")
            lines.extend(f"    {n:5d}  {m}: {c}" for n, m, c in rows)

    def rate(passed, of):
        return f"{passed}/{of} = {100 * passed / of:.1f} %" if of else "n/a"
    fit = ran - kinds["machine memory"]
    lines += ["", "pass rate:",
              f"  of the simulation tests run:                          {rate(counts['passed'], ran)}",
              f"  of those not out of the machine's memory:             {rate(counts['passed'], fit)}",
              f"  of those, besides not failing by a suite defect:      "
              f"{rate(counts['passed'], fit - kinds['suite defect'])}"]
    return "\n".join(lines)


def report_lines(c) -> str:
    """The summary's count lines from ``summarise(...)["counts"]``."""
    ran = c["passed"] + c["failed"] + c["error"]
    lines = [f"{c['passed']} passed, {c['failed']} failed, {c['skipped']} skipped, {c['error']} errors"]
    if c["before_simulator"]:
        lines.append(f"  of the failed, failed before reaching the simulator (the test's own input/golden "
                     f"generation): {c['before_simulator']}")
    if c["not_simulation"]:
        lines.append(f"not simulation tests: {c['not_simulation']} (skipped: a marker runs them in a "
                     f"compiler trace mode, which needs the Neuron compiler)")
    lines.append(f"pass rate of the simulation tests run: {100 * c['passed'] / ran if ran else 0:.1f} %")
    if c["out_of_memory"]:
        fit = ran - c["out_of_memory"]
        lines.append(f"  ran out of this machine's memory (or crashed a worker): {c['out_of_memory']}; pass rate "
                     f"of the others: {100 * c['passed'] / fit if fit else 0:.1f} %")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("checkout", help="an nki-library checkout (its root, holding src/ and test/)")
    ap.add_argument("--all", action="store_true", help="include the suite's slow shapes "
                    "(NKILIB_SIMULATION_RUN_ALL=1)")
    ap.add_argument("-n", "--workers", default="2", help="pytest-xdist workers (default 2)")
    ap.add_argument("--timeout", type=int, default=900, help="per-test timeout, seconds (default 900)")
    ap.add_argument("--memory-gib", type=float, default=10.0, help="address-space cap per process")
    ap.add_argument("--platform-target", default="trn2")
    ap.add_argument("--junit", help="where to keep the junit XML (default: a temporary file)")
    ap.add_argument("--results", help="where to keep the per-test JSON lines, written as tests finish "
                    "(default: a temporary file); the summary is made from them")
    ap.add_argument("--nki-version", help="the NKI release to simulate (NKISIM_NKI_VERSION; default: "
                    "the release current on the checkout's last commit date)")
    ap.add_argument("--retry-memory-gib", type=float, default=20.0, help="re-run the tests that ran "
                    "out of memory one at a time under this cap (0: no re-run; default 20)")
    ap.add_argument("--deadline", type=float, help="stop the run after this many minutes and "
                    "summarise the tests finished by then")
    ap.add_argument("--summarise", nargs="+", metavar="RESULTS", help="only summarise these per-test "
                    "JSON-lines files (oldest first: a later record of a test replaces an earlier one) "
                    "into failure categories and pass rates; the checkout argument is then not needed")
    if argv is None:
        argv = sys.argv[1:]
    if "--summarise" in argv:
        args = ap.parse_args(["-", *argv])
        print(summarise_files(args.summarise))
        return 0
    args, extra = ap.parse_known_args(argv)      # the rest goes to pytest (-k, test paths, ...)

    root = os.path.abspath(args.checkout)
    if not os.path.isdir(os.path.join(root, "test", "integration")):
        print(f"{root} is not an nki-library checkout (no test/integration)")
        return 2
    missing = _missing()
    if missing:
        print("missing test dependencies; install them first:\n  pip install " + " ".join(missing))
        return 2
    work = tempfile.mkdtemp(prefix="nkisim-nkilib-")
    with open(os.path.join(work, "neuron_dtypes.py"), "w") as f:
        f.write(NEURON_DTYPES)
    with open(os.path.join(work, "nkisim_nkilib_plugin.py"), "w") as f:
        f.write(PLUGIN)
    junit = args.junit or os.path.join(work, "junit.xml")
    results = os.path.abspath(args.results or os.path.join(work, "results.jsonl"))
    open(results, "w").close()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([work, os.path.join(root, "src"), root,
                                                         os.environ.get("PYTHONPATH", "")]),
           "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
           "MALLOC_ARENA_MAX": "2",   # fewer malloc arenas: less address space under the cap
           "NKISIM_RESULTS": results,
           # the suite's sweeps sample their configs at random unless seeded, and seed 0 only under
           # xdist (its conftest): seeded here too, so a -n 0 run (and the re-run alone) collects
           # the test ids a -n 2 run does
           "NEURON_PYTHONHASHSEED": os.environ.get("NEURON_PYTHONHASHSEED", "0")}
    if args.all:
        env["NKILIB_SIMULATION_RUN_ALL"] = "1"
    day = _checkout_day(root)
    env["NKISIM_NKI_VERSION"] = args.nki_version or nki_version_for(day)
    print(f"simulating NKI {env['NKISIM_NKI_VERSION']}"
          + ("" if args.nki_version else f" (the release current on the checkout's date, {day or 'unknown'})"))
    extra = [a for a in extra if a != "--"]
    paths = [] if any(a.startswith("test/") for a in extra) else ["test/integration"]
    base = [sys.executable, "-m", "pytest", "--test-mode", "simulation",
            "--platform-target", args.platform_target, "-p", "nkisim_nkilib_plugin",
            "--timeout", str(args.timeout), "-q", "--tb=native", "-p", "no:cacheprovider",
            "--output-directory", os.path.join(work, "out"), "--force-local-cleanup",
            "--disable-no-tests-failure", "-o", "junit_family=xunit1"]
    cmd = base + ["-n", args.workers, f"--junitxml={junit}", *paths, *extra]
    print("running:", " ".join(cmd), flush=True)
    start = time.time()
    log = os.path.join(work, "pytest.log")
    deadline = start + args.deadline * 60 if args.deadline else None
    stopped, code = _pytest(cmd, root, env, log, args.memory_gib, deadline)
    retried = []
    if not stopped and args.retry_memory_gib:
        retried = [r["name"] for r in _jsonl_records(results)
                   if r["outcome"] in ("failed", "error")
                   and (r.get("out_of_memory") or MEMORY.search(r.get("cause", "")))]
    if retried:
        again = results + ".retry"
        open(again, "w").close()
        print(f"re-running {len(retried)} test(s) that ran out of memory, one at a time under a "
              f"{args.retry_memory_gib:g} GiB cap", flush=True)
        stopped, _ = _pytest(base + ["-n", "0", *[f"test/{n}" for n in retried]], root,
                             {**env, "NKISIM_RESULTS": again}, log + ".retry", args.retry_memory_gib, deadline)
        _merge(results, again)
    wall = time.time() - start
    s = summarise(results)
    c = s["counts"]
    print(f"nki-library suite{' (slow shapes included)' if args.all else ''}: {wall / 60:.1f} min, log {log}")
    if stopped:
        print(f"STOPPED {stopped}: the counts cover the tests finished by then")
    elif not sum(c.values()):
        print(f"pytest ran no test (exit {code}); log: {log}")
        return 1
    print(report_lines(c))
    if retried:
        back = {r["name"]: r["outcome"] for r in _jsonl_records(results) if r.get("retried")}
        print(f"  ran out of memory under the {args.memory_gib:g} GiB per-worker cap and re-run alone "
              f"under {args.retry_memory_gib:g} GiB: {len(retried)}, of which passed: "
              f"{sum(v == 'passed' for v in back.values())}")
    print(f"per-test results: {results}" + (f"; junit: {junit}" if os.path.exists(junit) else ""))
    if s["causes"]:
        print("\ntop failure causes:")
        for cause, n in s["causes"]:
            print(f"  {n:5d}  {cause}")
    print("\nslowest ten:")
    for t, name in s["slowest"]:
        print(f"  {t:8.1f} s  {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
