"""``nkisim run SCRIPT.py [args]``, ``nkisim --version`` and ``python -m nkisim``: scripts run
with the simulator on, their findings as JSON that validates against the schema in the package."""
import json
import os
import subprocess
import sys
import textwrap
from importlib import metadata

import numpy as np
import pytest

from nkisim import findings as nk_findings
from nkisim.cli import main

ADD = textwrap.dedent('''
    import sys
    import numpy as np
    import nkisim.nki as nki
    import nkisim.nki.language as nl
    import nkisim.nki.isa as nisa

    @nki.jit
    def add_kernel(a, b):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        ta = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
        tb = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=ta, src=a)
        nisa.dma_copy(dst=tb, src=b)
        nisa.tensor_tensor(dst=ta, data1=ta, data2=tb, op=nl.add)
        nisa.dma_copy(dst=out, src=ta)
        return out

    rows = int(sys.argv[1]) if len(sys.argv) > 1 else 2
    a = np.arange(rows * 3, dtype=np.float32).reshape(rows, 3)
    print("sum", add_kernel(a, a).tolist())
    if "--exit" in sys.argv:
        sys.exit(4)
''')

# Two broken rules at lines 11 and 12 (shapes, buffer), each in a launch of its own kernel call
BROKEN = textwrap.dedent('''\
    import numpy as np
    import nkisim.nki as nki
    import nkisim.nki.language as nl
    import nkisim.nki.isa as nisa

    @nki.jit
    def broken(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        t = nl.ndarray((128, 512), dtype=a.dtype, buffer=nl.sbuf)
        u = nl.ndarray((128, 256), dtype=a.dtype, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=u, data1=t, data2=t, op=nl.add)
        nisa.tensor_copy(dst=out, src=t)
        nisa.dma_copy(dst=out, src=t)
        return out

    print("returned", broken(np.ones((128, 512), np.float32)).shape)
''')


@pytest.fixture
def add_script(tmp_path):
    path = tmp_path / "add_script.py"
    path.write_text(ADD)
    return path


@pytest.fixture
def broken_script(tmp_path):
    path = tmp_path / "broken_script.py"
    path.write_text(BROKEN)
    return path


def _validate(doc):
    jsonschema = pytest.importorskip("jsonschema")
    jsonschema.validate(doc, nk_findings.schema())


def test_run_prints_the_simulated_result(add_script, capsys, monkeypatch):
    monkeypatch.setenv("NKI_SIMULATOR", "0")             # the command turns the simulator on
    argv, path = sys.argv[:], sys.path[:]
    assert main(["run", str(add_script)]) == 0
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    assert capsys.readouterr().out == f"sum {(a + a).tolist()}\n"
    assert os.environ["NKI_SIMULATOR"] == "0" and sys.argv == argv and sys.path == path


def test_run_passes_arguments_and_the_exit_status(add_script, capsys):
    assert main(["run", str(add_script), "1", "--exit"]) == 4
    assert capsys.readouterr().out == "sum [[0.0, 2.0, 4.0]]\n"


def test_run_sets_the_options_only_while_the_script_runs(tmp_path, capsys, monkeypatch):
    for var in ("NEURON_PLATFORM_TARGET_OVERRIDE", "NKISIM_STRICT_UNINIT", "NKISIM_DETECT_RACES",
                "NKISIM_SHUFFLE", "NKISIM_FINDINGS"):
        monkeypatch.delenv(var, raising=False)
    script = tmp_path / "show.py"
    script.write_text("from nkisim.config import Settings\ns = Settings.from_env()\n"
                      "print(s.target, s.uninitialized_reads, s.detect_races, s.iteration_order, s.findings)\n")
    assert main(["run", "--target", "trn2", "--strict", "--races", "--findings", "warn", str(script)]) == 0
    assert capsys.readouterr().out == "trn2 raise True shuffled warn\n"
    assert "NKISIM_FINDINGS" not in os.environ and "NEURON_PLATFORM_TARGET_OVERRIDE" not in os.environ


def test_a_kernel_error_is_one_clear_line_and_exit_1(add_script, capsys):
    assert main(["run", str(add_script), "256"]) == 1           # 256 partitions > 128
    err = capsys.readouterr().err
    assert err == ("nkisim run: ShapeError: nl.ndarray: partition dim 256 of sbuf tensor (256, 3) "
                   "exceeds 128 on trn3 (add_script.py:11)\n")


def test_json_findings_warn_validate_and_name_the_lines(broken_script, tmp_path, capsys):
    out = tmp_path / "f.json"
    assert main(["run", "--findings", "warn", "--json", str(out), str(broken_script)]) == 0
    assert "returned (128, 512)" in capsys.readouterr().out
    doc = json.loads(out.read_text())
    _validate(doc)
    assert doc["status"] == 0 and doc["launches"] == 1 and doc["settings"]["findings"] == "warn"
    assert [(f["rule"], f["op"], f["operand"], f["limit"], f["file"], f["line"]) for f in doc["findings"]] == [
        ("ShapeError", "nisa.tensor_tensor", "dst", 512, str(broken_script), 11),
        ("MemorySpaceError", "nisa.tensor_copy", "dst", ["psum", "sbuf"], str(broken_script), 12)]
    assert doc["findings"][1]["message"] == ("nisa.tensor_copy: dst is in shared_hbm (HBM); must be in "
                                             "psum or sbuf (broken_script.py:12)")


def test_json_findings_all_and_first(broken_script, tmp_path, capsys):
    out = tmp_path / "all.json"
    assert main(["run", "--findings", "all", "--json", str(out), str(broken_script)]) == 1
    assert "nkisim run: FindingsError: kernel launch: kernel broken broke 2 rule(s)" in capsys.readouterr().err
    doc = json.loads(out.read_text())
    _validate(doc)
    assert [f["line"] for f in doc["findings"]] == [11, 12] and doc["status"] == 1
    out = tmp_path / "first.json"
    assert main(["run", "--findings", "first", "--json", str(out), str(broken_script)]) == 1
    doc = json.loads(out.read_text())
    _validate(doc)
    assert [(f["rule"], f["line"]) for f in doc["findings"]] == [("ShapeError", 11)]


def test_json_records_an_error_the_script_caught(tmp_path, capsys):
    script = tmp_path / "caught.py"
    script.write_text(BROKEN.replace('print("returned", broken(np.ones((128, 512), np.float32)).shape)',
                                     'try:\n    broken(np.ones((128, 512), np.float32))\n'
                                     'except ValueError as e:\n    print("caught")'))
    out = tmp_path / "c.json"
    assert main(["run", "--json", str(out), str(script)]) == 0
    doc = json.loads(out.read_text())
    _validate(doc)
    assert [(f["rule"], f["line"]) for f in doc["findings"]] == [("ShapeError", 11)]


def test_schema_rejects_a_record_without_its_fields():
    jsonschema = pytest.importorskip("jsonschema")
    bad = {"version": 1, "script": "s.py", "status": 0, "launches": 0, "settings": {},
           "findings": [{"rule": "ShapeError", "op": "nisa.x", "message": "m"}]}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, nk_findings.schema())


def test_the_schema_ships_in_the_package():
    assert os.path.dirname(nk_findings.SCHEMA_PATH).startswith(os.path.dirname(nk_findings.__file__))
    assert nk_findings.schema()["$defs"]["finding"]["required"] == [
        "rule", "op", "operand", "limit", "file", "line", "message"]


def _env():
    env = dict(os.environ)
    src = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src")
    env["PYTHONPATH"] = src + os.pathsep + env.get("PYTHONPATH", "")
    env.pop("NKI_SIMULATOR", None)
    return env


def test_python_dash_m_nkisim_runs_a_script_and_knows_its_version(add_script):
    got = subprocess.run([sys.executable, "-m", "nkisim", "run", str(add_script)], capture_output=True,
                         text=True, env=_env(), timeout=120)
    assert (got.returncode, got.stdout, got.stderr) == (0, "sum [[0.0, 2.0, 4.0], [6.0, 8.0, 10.0]]\n", "")
    got = subprocess.run([sys.executable, "-m", "nkisim", "--version"], capture_output=True, text=True,
                         env=_env(), timeout=120)
    assert got.returncode == 0 and got.stdout == f"nkisim {metadata.version('nkisim')}\n"
