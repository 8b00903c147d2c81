"""The pytest plugin (nkisim.pytest_plugin): test files written as a user would, run by pytester.

Every expectation comes from the documented simulator behaviour (abs_max needs trn3 or newer,
trn1 has no LNC2, strict reads raise, affine_range overwrites race, the findings modes), never
from the plugin's own code.
"""
import importlib.metadata
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parents[1]

# Installed nkisim loads the plugin through its pytest11 entry point; a source tree on PYTHONPATH
# (no entry point) loads it by name.
_INSTALLED = any(e.name == "nkisim" for e in importlib.metadata.entry_points(group="pytest11"))
PLUGIN = [] if _INSTALLED else ["-p", "nkisim.pytest_plugin"]

KERNELS = '''
import os
import numpy as np
import pytest
import nkisim
import nkisim.nki as nki
import nkisim.nki.language as nl
import nkisim.nki.isa as nisa


@nki.jit
def absmax_kernel(a, b):
    """abs_max twice: NeuronCore-v4 (trn3) and newer only."""
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    ta = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    tb = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=ta, src=a)
    nisa.dma_copy(dst=tb, src=b)
    nisa.tensor_tensor(dst=ta, data1=ta, data2=tb, op=nl.abs_max)
    nisa.tensor_tensor(dst=tb, data1=ta, data2=tb, op=nl.abs_max)
    nisa.dma_copy(dst=out, src=tb)
    return out


def run_absmax():
    a = -np.ones((4, 8), np.float32)
    b = 2 * np.ones((4, 8), np.float32)
    np.testing.assert_array_equal(nki.simulate(absmax_kernel)(a, b), np.full((4, 8), 2.0))


@nki.jit
def half_written(x):
    t = nl.ndarray((4, 8), dtype=nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=t[:, 0:4], value=1.0)
    out = nl.ndarray((4, 8), dtype=nl.float32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=t)
    return out


@nki.jit
def overwriting(x):
    out = nl.ndarray((4, 8), dtype=nl.float32, buffer=nl.shared_hbm)
    for i in nl.affine_range(2):
        t = nl.ndarray((4, 8), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x)
        nisa.dma_copy(dst=out, src=t)
    return out


@nki.jit
def lnc_add(a, b):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    half = a.shape[0] // nl.num_programs(0)
    rows = nl.ds(nl.program_id(0) * half, half)
    ta = nl.ndarray((half, a.shape[1]), dtype=a.dtype, buffer=nl.sbuf)
    tb = nl.ndarray((half, a.shape[1]), dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=ta, src=a[rows, :])
    nisa.dma_copy(dst=tb, src=b[rows, :])
    nisa.tensor_tensor(dst=ta, data1=ta, data2=tb, op=nl.add)
    nisa.dma_copy(dst=out[rows, :], src=ta)
    return out


X = np.ones((4, 8), np.float32)
'''

_NKI_VARS = ("NEURON_PLATFORM_TARGET_OVERRIDE", "NKI_NC_VERSION", "NKISIM_STRICT_UNINIT", "NKISIM_DETECT_RACES",
             "NKISIM_SHUFFLE", "NKISIM_SEED", "NKISIM_FINDINGS")


@pytest.fixture
def run(pytester, monkeypatch):
    """``run(body, *args)``: write a test file (the kernels above, then ``body``), run pytest on it
    in this process and check it left the environment and the launch hook as they were."""
    for var in _NKI_VARS:
        monkeypatch.delenv(var, raising=False)

    def go(body, *args, name="test_user"):
        pytester.makepyfile(**{name: KERNELS + body})
        before = _environ()
        result = pytester.runpytest(*PLUGIN, "-v", "-p", "no:cacheprovider", *args)
        assert _environ() == before
        from nkisim.runtime import launch
        assert launch.LAUNCH_HOOK.get() is None
        return result
    return go


def _environ() -> dict:
    """os.environ less pytest's own PYTEST_CURRENT_TEST (which the inner session removes)."""
    return {k: v for k, v in os.environ.items() if k != "PYTEST_CURRENT_TEST"}


def outcomes(result) -> dict:
    """test id -> PASSED/FAILED/SKIPPED, from the -v lines."""
    found = {}
    for line in result.outlines:
        m = re.match(r"^\S+::(\S+) (PASSED|FAILED|SKIPPED|ERROR)", line)
        if m:
            found[m.group(1)] = m.group(2)
    return found


def test_nki_target_parametrises_fixture_and_marker_tests_and_each_sees_its_target(run):
    result = run('''
def test_fixture(nki_target):
    assert nkisim.Settings.from_env().target == nki_target
    run_absmax()

@pytest.mark.nki
def test_marked():
    run_absmax()

def test_plain():
    assert "NEURON_PLATFORM_TARGET_OVERRIDE" not in os.environ
''', "--nki-target=trn1,gen3,trn3")
    assert outcomes(result) == {
        "test_fixture[trn1]": "FAILED", "test_fixture[trn2]": "FAILED", "test_fixture[trn3]": "PASSED",
        "test_marked[trn1]": "FAILED", "test_marked[trn2]": "FAILED", "test_marked[trn3]": "PASSED",
        "test_plain": "PASSED"}
    result.stdout.fnmatch_lines(["*UnsupportedError: nisa.tensor_tensor: op abs_max needs trn3 or newer, "
                                 "not supported on trn1*",
                                 "*not supported on trn2*"])


def test_without_options_nothing_is_parametrised_and_the_fixture_is_the_environment_default(run, monkeypatch):
    body = '''
@pytest.mark.nki
def test_marked():
    assert "NEURON_PLATFORM_TARGET_OVERRIDE" not in os.environ

def test_fixture(nki_target, nki_lnc):
    assert (nki_target, nki_lnc) == (os.environ.get("EXPECT", "trn3"), 1)

def test_hook():
    from nkisim.runtime import launch
    assert launch.LAUNCH_HOOK.get() is None
'''
    result = run(body)
    assert outcomes(result) == {"test_marked": "PASSED", "test_fixture": "PASSED", "test_hook": "PASSED"}
    assert "nkisim:" not in result.stdout.str()
    assert "warning" not in result.stdout.str()          # e.g. none about assertion rewriting
    monkeypatch.setenv("NKI_NC_VERSION", "gen2")
    monkeypatch.setenv("EXPECT", "trn1")
    assert outcomes(run(body))["test_fixture"] == "PASSED"


def test_marker_targets(run):
    body = '''
@pytest.mark.nki(target="trn2")
def test_one(nki_target):
    assert nki_target == "trn2" == nkisim.Settings.from_env().target

@pytest.mark.nki(target=["trn2", "trn3"])
def test_list():
    run_absmax()

@pytest.mark.nki(target="trn1")
def test_excluded():
    pass
'''
    assert outcomes(run(body)) == {"test_one": "PASSED", "test_list[trn2]": "FAILED", "test_list[trn3]": "PASSED",
                                   "test_excluded": "PASSED"}
    result = run(body, "--nki-target=trn2,trn3", "-rs")
    assert outcomes(result) == {"test_one[trn2]": "PASSED", "test_list[trn2]": "FAILED",
                                "test_list[trn3]": "PASSED", "test_excluded[trn1]": "SKIPPED"}
    result.stdout.fnmatch_lines(["*allows none of --nki-target=trn2,trn3*"])


def test_lnc_marker_gives_the_fixture_and_skips_targets_without_that_lnc(run):
    result = run('''
@pytest.mark.nki(lnc=2)
def test_lnc(nki_target, nki_lnc):
    a = np.arange(256 * 8, dtype=np.float32).reshape(256, 8)
    assert nki_lnc == 2
    np.testing.assert_array_equal(nki.simulate(lnc_add)[nki_lnc](a, a), 2 * a)

@pytest.mark.nki(lnc=2)
def test_lnc_marker_only():
    pass
''', "--nki-target=trn1,trn2", "-rs")
    assert outcomes(result) == {"test_lnc[trn1]": "SKIPPED", "test_lnc[trn2]": "PASSED",
                                "test_lnc_marker_only[trn1]": "SKIPPED", "test_lnc_marker_only[trn2]": "PASSED"}
    result.stdout.fnmatch_lines(["*LNC2 needs a target with 2 cores per logical core; trn1 has 1*"])


LNC_BODY = '''
A = np.arange(128 * 8, dtype=np.float32).reshape(128, 8)
SEEN = {"lnc1": 1, "lnc2": 2}

def launch(nki_lnc):
    np.testing.assert_array_equal(nki.simulate(lnc_add)[nki_lnc](A, A), 2 * A)

def test_both(request, nki_target, nki_lnc):
    assert nkisim.Settings.from_env().target == nki_target
    assert nki_lnc == SEEN[request.node.callspec.id.split("-")[-1]]
    launch(nki_lnc)

@pytest.mark.nki(lnc=2)
def test_marker_two(nki_lnc):
    assert nki_lnc == 2
    launch(nki_lnc)

@pytest.mark.nki(lnc=1)
def test_marker_one(nki_lnc):
    assert nki_lnc == 1

def test_target_only(nki_target):
    pass

@pytest.fixture
def through(nki_lnc):
    return nki_lnc

def test_through_a_fixture(request, through):
    assert through == SEEN[request.node.callspec.id.split("-")[-1]]

def test_plain():
    pass
'''


def test_nki_lnc_parametrises_the_nki_lnc_tests(run):
    result = run(LNC_BODY, "--nki-lnc=1,2")
    assert outcomes(result) == {
        "test_both[lnc1]": "PASSED", "test_both[lnc2]": "PASSED", "test_marker_two": "PASSED",
        "test_marker_one": "PASSED", "test_target_only": "PASSED", "test_through_a_fixture[lnc1]": "PASSED",
        "test_through_a_fixture[lnc2]": "PASSED", "test_plain": "PASSED"}


def test_nki_lnc_and_nki_target_are_a_product_and_the_marker_lnc_wins(run):
    result = run(LNC_BODY, "--nki-target=trn1,trn2", "--nki-lnc=1,2", "-rs")
    assert outcomes(result) == {
        "test_both[trn1-lnc1]": "PASSED", "test_both[trn1-lnc2]": "SKIPPED",      # trn1 has no LNC2
        "test_both[trn2-lnc1]": "PASSED", "test_both[trn2-lnc2]": "PASSED",
        "test_marker_two[trn1]": "SKIPPED", "test_marker_two[trn2]": "PASSED",
        "test_marker_one[trn1]": "PASSED", "test_marker_one[trn2]": "PASSED",
        "test_target_only[trn1]": "PASSED", "test_target_only[trn2]": "PASSED",
        "test_through_a_fixture[trn1-lnc1]": "PASSED", "test_through_a_fixture[trn1-lnc2]": "SKIPPED",
        "test_through_a_fixture[trn2-lnc1]": "PASSED", "test_through_a_fixture[trn2-lnc2]": "PASSED",
        "test_plain": "PASSED"}
    result.stdout.fnmatch_lines(["*LNC2 needs a target with 2 cores per logical core; trn1 has 1*"])


def test_nki_lnc_with_a_marker_target_and_in_the_ini_file(run, pytester):
    body = '''
@pytest.mark.nki(target="trn1")
def test_t(nki_lnc):
    assert nki_lnc in (1, 2)
'''
    assert outcomes(run(body, "--nki-lnc=2,1")) == {"test_t[lnc2]": "SKIPPED", "test_t[lnc1]": "PASSED"}
    pytester.makeini("[pytest]\nnki_lnc = 1, 2\n")
    assert outcomes(run(body)) == {"test_t[lnc1]": "PASSED", "test_t[lnc2]": "SKIPPED"}
    assert outcomes(run(body, "--nki-lnc=1")) == {"test_t[lnc1]": "PASSED"}      # the command line wins


def test_nki_lnc_usage_errors(run):
    for value in ("3", "1,x", ","):
        result = run("def test_t(nki_lnc):\n    pass\n", f"--nki-lnc={value}")
        assert result.ret == pytest.ExitCode.USAGE_ERROR
        result.stderr.fnmatch_lines(["*--nki-lnc: *expected 1*"])


def test_nki_findings_warn_says_an_out_of_bounds_slice_is_always_fatal(run):
    result = run('''
def oob(a):
    t = nl.ndarray((4, 8), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a[0:4, 0:20])
    return a

def test_oob():
    nki.simulate(oob)(X)
''', "--nki-findings=warn")
    assert outcomes(result) == {"test_oob": "FAILED"}
    result.stdout.fnmatch_lines(["*BoundsError: tensor indexing: slice 0:20 on dim 1 of tensor 'argument 0' (4, 8) "
                                 "is outside 0:8; always fatal, even with findings=\"warn\"*"])


def test_strict_races_and_findings_change_behaviour(run):
    body = '''
def test_uninit():
    out = nki.simulate(half_written)(X)
    assert np.isnan(out[:, 4:]).all()

def test_race():
    np.testing.assert_array_equal(nki.simulate(overwriting)(X), X)

@pytest.mark.nki(target="trn2")
def test_findings():
    run_absmax()

def test_option_wins():
    nki.simulate(half_written, uninitialized_reads="sentinel")(X)
'''
    plain = run(body)
    assert outcomes(plain) == {"test_uninit": "PASSED", "test_race": "PASSED", "test_findings": "FAILED",
                               "test_option_wins": "PASSED"}
    plain.stdout.fnmatch_lines(["*UnsupportedError: nisa.tensor_tensor: op abs_max*"])

    strict = run(body, "--nki-strict")
    assert outcomes(strict)["test_uninit"] == "FAILED"
    assert outcomes(strict)["test_race"] == outcomes(strict)["test_option_wins"] == "PASSED"
    strict.stdout.fnmatch_lines(["*UninitializedReadError: nisa.dma_copy: src reads 16 never-written*"])

    races = run(body, "--nki-races")
    assert outcomes(races)["test_race"] == "FAILED" and outcomes(races)["test_uninit"] == "PASSED"
    races.stdout.fnmatch_lines(["*RaceError: nisa.dma_copy: dst writes 32 element(s)*"])

    every = run(body, "--nki-findings=all")
    assert outcomes(every)["test_findings"] == "FAILED"
    every.stdout.fnmatch_lines(["*FindingsError*broke 2 rule(s)*"])
    assert outcomes(run(body, "--nki-findings=warn"))["test_findings"] == "PASSED"


def test_settings_do_not_leak_from_one_test_into_the_next(run, monkeypatch):
    monkeypatch.setenv("NKISIM_FINDINGS", "first")
    result = run('''
@pytest.mark.nki(target="trn1")
def test_a(monkeypatch):
    monkeypatch.setenv("NKISIM_SEED", "7")
    assert os.environ["NEURON_PLATFORM_TARGET_OVERRIDE"] == "trn1"
    os.environ["NKISIM_FINDINGS"] = "all"            # a test's own change is undone too

def test_b():
    assert "NEURON_PLATFORM_TARGET_OVERRIDE" not in os.environ
    assert os.environ["NKISIM_FINDINGS"] == "warn" and os.environ["NKISIM_STRICT_UNINIT"] == "1"
    assert "NKISIM_SEED" not in os.environ
''', "--nki-strict", "--nki-findings=warn")
    assert outcomes(result) == {"test_a": "PASSED", "test_b": "PASSED"}


def test_ini_options(run, pytester):
    pytester.makeini("[pytest]\nnki_target = trn2, trn3\nnki_strict = true\n")
    result = run('''
def test_t(nki_target):
    assert os.environ["NKISIM_STRICT_UNINIT"] == "1"
''')
    assert outcomes(result) == {"test_t[trn2]": "PASSED", "test_t[trn3]": "PASSED"}
    assert outcomes(run("def test_t(nki_target):\n    pass\n", "--nki-target=trn1")) == {"test_t[trn1]": "PASSED"}


def test_simulator_time_summary(run):
    body = '''
def test_two_launches():
    nki.simulate(half_written)(X)
    nki.simulate(half_written)(X)

def test_no_launch():
    pass

def test_one_launch():
    nki.simulate(overwriting)(X)
'''
    result = run(body, "--nki-durations=0")
    result.stdout.fnmatch_lines(["*= nkisim: simulator time =*",
                                 r"*s      2 launches  test_user.py::test_two_launches",
                                 "*s      3 launches in 2 tests*"])
    assert "test_no_launch" not in result.stdout.str().split("nkisim: simulator time")[1]
    assert re.search(r"s +1 launch +test_user\.py::test_one_launch", result.stdout.str())
    top = run(body, "--nki-durations=1").stdout.str().split("nkisim: simulator time (top 1)")[1]
    assert len(re.findall(r"(?m)^ +[\d.]+s +\d+ launch", top)) == 2      # one test's row, then the total
    assert "nkisim: simulator time (top 5)" in run(body, "--nki-strict").stdout.str()
    assert "nkisim:" not in run(body).stdout.str()


def test_usage_errors_name_the_option(run):
    result = run("def test_t(nki_target):\n    pass\n", "--nki-target=trn9")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--nki-target: unknown target 'trn9'; expected one of gen2, gen3, gen4, inf2, "
                                 "trn1, trn2, trn3*"])
    result = run("@pytest.mark.nki(lnc=3)\ndef test_t():\n    pass\n")
    assert result.ret != 0
    result.stdout.fnmatch_lines(["*@pytest.mark.nki(lnc=3): expected 1 or 2*"])


def test_help_and_markers_document_the_plugin(pytester):
    result = pytester.runpytest(*PLUGIN, "--markers")
    result.stdout.fnmatch_lines(["@pytest.mark.nki(target=None, lnc=1): an NKI kernel test (nkisim)*"])
    result = pytester.runpytest(*PLUGIN, "--help")
    result.stdout.fnmatch_lines(["*--nki-target=TARGETS*", "*--nki-lnc=LNCS*", "*--nki-strict*", "*--nki-races*",
                                 "*--nki-findings=MODE*", "*--nki-durations=N*"])


def test_loading_the_plugin_imports_no_simulator():
    code = ("import sys, nkisim.pytest_plugin; "
            "heavy = [m for m in ('numpy', 'torch', 'nkisim.runtime', 'nkisim.config') if m in sys.modules]; "
            "print(heavy)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONPATH": str(ROOT / "src")})
    assert out.stdout.strip() == "[]"


def test_timeout_option(run):
    pytest.importorskip("pytest_timeout")
    result = run("def test_t(nki_target):\n    run_absmax()\n", "--timeout", "60", "--nki-target=trn3")
    assert outcomes(result) == {"test_t[trn3]": "PASSED"}


def test_xdist_two_workers(run):
    pytest.importorskip("xdist")
    result = run('''
@pytest.mark.nki
def test_absmax(nki_target):
    assert os.environ["NEURON_PLATFORM_TARGET_OVERRIDE"] == nki_target
    run_absmax()

@pytest.mark.parametrize("i", range(4))
def test_uninit(i):
    nki.simulate(half_written)(X)
''', "-n", "2", "--nki-target=trn2,trn3", "--nki-strict", "--nki-durations=0")
    result.assert_outcomes(passed=1, failed=5)
    text = result.stdout.str()
    assert re.search(r"FAILED test_user\.py::test_absmax\[trn2\]", text)
    assert not re.search(r"FAILED test_user\.py::test_absmax\[trn3\]", text)
    assert text.count("UninitializedReadError") >= 4
    assert re.search(r"s +6 launches in 6 tests", text)


def _readme_section() -> str:
    text = (ROOT / "README.md").read_text()
    return text.split("\n## pytest plugin\n", 1)[1].split("\n## ", 1)[0]


def test_readme_example_runs_as_printed(pytester):
    section = _readme_section()
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    command = re.search(r"`(pytest [^`]*test_double\.py)`", section).group(1).split()
    pytester.makepyfile(test_double=code)
    args = [a for a in command[1:] if not (a == "--timeout" or a == "60") or _has("pytest_timeout")]
    result = pytester.runpytest(*PLUGIN, "-v", *[a for a in args if a != "test_double.py"], "test_double.py")
    assert result.ret == 0
    found = outcomes(result)
    assert found == {"test_double[trn1]": "PASSED", "test_double[trn2]": "PASSED", "test_double[trn3]": "PASSED",
                     "test_double_lnc2[trn1]": "SKIPPED", "test_double_lnc2[trn2]": "PASSED",
                     "test_double_lnc2[trn3]": "PASSED", "test_abs_max[trn3]": "PASSED"}, found


def _has(module: str) -> bool:
    try:
        __import__(module)
        return True
    except ImportError:
        return False
