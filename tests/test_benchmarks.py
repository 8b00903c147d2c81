"""The benchmark script stays runnable (timings themselves are never asserted here)."""
import json
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
RUN = os.path.join(HERE, "..", "benchmarks", "run.py")


def test_every_case_function_the_table_names_exists():
    src = open(RUN).read()
    called = set(re.findall(r"\b(case_\w+)\(", src))
    defined = set(re.findall(r"^def (case_\w+)\(", src, re.M))
    assert called <= defined, called - defined


def test_quick_run_of_one_case_writes_json(tmp_path):
    out = tmp_path / "bench.json"
    res = subprocess.run([sys.executable, RUN, "--quick", "--only", "lnc2_add", "--json", str(out)],
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    data = json.loads(out.read_text())
    assert data["cases"]["lnc2_add"]["ratio"] > 0
