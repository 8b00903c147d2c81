"""The SDK's own Beta-1 test suite (``general/nki/test`` of an aws-neuron-sdk 2.2x release), run
unmodified against nkisim: one line per test file (PASS / FAIL / KNOWN with its counts) and a total
(issue 15's closing figure).

Usage: python benchmarks/beta1_sdk_suite.py SDK_CHECKOUT [--only SUBSTR ...] [--list]
       [--timeout SECONDS]

``SDK_CHECKOUT`` is aws-neuron/aws-neuron-sdk at a release with the Beta-1 (``neuronxcc.nki``) tests:
``general/nki/test`` up to v2.26.0 (74 tests), ``nki/test`` from v2.26.1 (v2.27.x: 86 tests; v2.28.0
still Beta 1). A file that holds no test (v2.26.0's ``test_nki_isa_dma_transpose.py`` has kernels
only) is listed as such.
Nothing of it is copied here: each test file runs in its own child process (``python -m pytest``
on the file in place, the cwd and pytest's rootdir a scratch directory, this checkout's ``src``
first on ``PYTHONPATH`` so ``import neuronxcc.nki`` is nkisim's face). A failing test whose cause
was found to be the test's own (``KNOWN`` below) is printed with that cause and counted apart (a file
whose only failures are such is KNOWN; the exit status is 1 only for other failures or errors).
Not part of CI (the checkout comes from the network); ``tests/test_benchmarks.py`` checks only
that the script starts and rejects a missing checkout.
"""
from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.join(HERE, "..", "src")
LAYOUTS = (os.path.join("general", "nki", "test"), os.path.join("nki", "test"))   # <= 2.26.0, later

# failing tests whose cause is the test's own, not the simulator's (test id -> cause)
KNOWN = {
    "test_nki_isa_activation.py::TestNkiIsaExamplesActivation::test_activation":
        "the test's fault: it asks nisa.activation for dtype=nl.bfloat16 output (8 significand bits, "
        "relative rounding up to 2**-8) and compares it with the fp32 formula by np.allclose's default "
        "rtol 1e-5",
    "test_nki_isa_dropout.py::TestNkiIsaExamplesDropout::test_dropout":
        "the test's fault: its per-partition prob is random_sample * 100, so each of the 128 rows keeps "
        "its elements only when its prob < 1 (probability 0.01); all 128 rows dropped, an all-zero "
        "output, happens for 0.99**128 = 28% of the (unseeded) draws and fails assertFalse(allclose(c, 0))",
}

# tests the suite marks xfail that pass here, and why that is right (test id -> note)
XPASS_NOTES = {
    "test_nki_isa_dma_transpose.py::TestNkiIsaExamplesDmaTranspose::test_dma_transpose_indirect":
        "marked xfail(reason=\"PBE-63\"), an internal ticket; nkisim's result equals the test's own NumPy "
        "golden (np.transpose of the gathered rows), which the test asserts",
}

_COUNT = re.compile(r"(\d+) (passed|failed|errors?|skipped|xfailed|xpassed|deselected|warnings?)")
_REPORT = re.compile(r"^(FAILED|ERROR|XPASS|XFAIL|SKIPPED)\s+(\S+)")


def suite_dir(sdk):
    """The checkout's Beta-1 test directory (``LAYOUTS``), or None."""
    for rel in LAYOUTS:
        if os.path.isdir(os.path.join(sdk, rel)):
            return os.path.join(sdk, rel)
    return None


def files(sdk):
    """The suite's test files, sorted (``test_*.py`` in ``suite_dir``)."""
    d = suite_dir(sdk)
    return sorted(f for f in os.listdir(d) if f.startswith("test_") and f.endswith(".py"))


def _env():
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([os.path.abspath(SRC)] +
                                        [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    return env


def parse(stdout, name):
    """(counts by outcome, [(outcome, ``name::Class::test``)]) from pytest's ``-q -rfEXxs`` output for
    the file ``name`` (pytest prints ids outside its rootdir with the path left out)."""
    counts = {}
    lines = [ln for ln in stdout.strip().splitlines() if ln.strip()]
    if lines:
        for n, what in _COUNT.findall(lines[-1]):
            what = {"error": "errors", "warning": "warnings"}.get(what, what)
            counts[what] = counts.get(what, 0) + int(n)
    reports = []
    for ln in lines:
        m = _REPORT.match(ln)
        if m:
            tid = m.group(2)
            reports.append((m.group(1), name + tid[tid.index("::"):] if "::" in tid else name))
    return counts, reports


def run_file(sdk, name, timeout):
    """Run one test file in a child pytest; returns (counts, reports, note)."""
    path = os.path.join(suite_dir(sdk), name)
    with tempfile.TemporaryDirectory(prefix="nkisim-sdk-suite-") as scratch:
        cmd = [sys.executable, "-m", "pytest", "-q", "-rfEXxs", "-p", "no:cacheprovider", "-p", "no:warnings",
               "--rootdir", scratch, path]
        try:
            r = subprocess.run(cmd, cwd=scratch, env=_env(), capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return {"errors": 1}, [("ERROR", name)], f"timeout {timeout} s"
    counts, reports = parse(r.stdout, name)
    if r.returncode == 5 and not reports:           # pytest's "no tests collected"
        return {}, [], "no tests in this file"
    if not counts:
        tail = [ln for ln in (r.stdout + r.stderr).strip().splitlines() if ln.strip()]
        return {"errors": 1}, [("ERROR", name)], (tail[-1][:300] if tail else f"exit {r.returncode}")
    return counts, reports, ""


def run(sdk, only=(), timeout=900, out=sys.stdout):
    """Run every file (those naming one of ``only``); returns the totals by outcome (``known`` counts
    the failures in ``KNOWN``, ``failed`` the others)."""
    total = {"passed": 0, "xpassed": 0, "failed": 0, "known": 0, "errors": 0, "skipped": 0, "xfailed": 0}
    for name in files(sdk):
        if only and not any(o in name for o in only):
            continue
        t = time.time()
        counts, reports, note = run_file(sdk, name, timeout)
        bad = [(o, tid) for o, tid in reports if o in ("FAILED", "ERROR")]
        known = [tid for o, tid in bad if tid in KNOWN]
        for k in ("passed", "xpassed", "skipped", "xfailed", "errors"):
            total[k] += counts.get(k, 0)
        total["failed"] += counts.get("failed", 0) - len(known)
        total["known"] += len(known)
        status = ("PASS" if not bad else "KNOWN" if len(known) == len(bad) else "FAIL") \
            if not counts.get("errors") else "FAIL"
        shown = ", ".join(f"{v} {k}" for k, v in counts.items() if k not in ("warnings", "deselected")) or "-"
        print(f"{status} {name} ({time.time() - t:.0f} s) {shown}{' ' + note if note else ''}", file=out, flush=True)
        for o, tid in reports:
            if o in ("FAILED", "ERROR", "XPASS"):
                note = KNOWN.get(tid) if o != "XPASS" else XPASS_NOTES.get(tid)
                print(f"    {o} {tid}{' [known: ' + note + ']' if note else ''}", file=out, flush=True)
    print(f"total: {total['passed']} passed, {total['xpassed']} xpassed, {total['failed']} failed, "
          f"{total['known']} failed (known test faults), {total['errors']} errors, {total['skipped']} skipped",
          file=out, flush=True)
    return total


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("sdk", metavar="SDK_CHECKOUT", help="aws-neuron-sdk at a 2.2x release (general/nki/test or nki/test)")
    p.add_argument("--only", nargs="*", default=(), help="run only the files whose name contains one of these")
    p.add_argument("--list", action="store_true", help="list the test files and exit")
    p.add_argument("--timeout", type=float, default=900, help="seconds per file (default 900)")
    a = p.parse_args(argv)
    sdk = os.path.abspath(a.sdk)
    if suite_dir(sdk) is None:
        p.error(f"SDK_CHECKOUT {sdk}: no {' or '.join(LAYOUTS)} there")
    if a.list:
        print("\n".join(files(sdk)))
        return 0
    total = run(sdk, a.only, a.timeout)
    return 1 if total["failed"] or total["errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
