"""The benchmark script stays runnable and its kernels stay correct (timings are never asserted)."""
import importlib.util
import json
import os
import re
import subprocess
import sys

import ml_dtypes
import numpy as np
import pytest

from conftest import simulate

HERE = os.path.dirname(os.path.abspath(__file__))
BENCH = os.path.join(HERE, "..", "benchmarks")
RUN = os.path.join(BENCH, "run.py")
TUTORIAL_CASES = ["matmul512_fp32_tutorial_tiled", "matmul512_fp32_tutorial_hoist",
                  "matmul512_fp32_tutorial_nl"]


def _load(name):
    """Import benchmarks/<name>.py as a module (the directory is not a package)."""
    spec = importlib.util.spec_from_file_location(f"bench_{name}", os.path.join(BENCH, f"{name}.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def run_mod():
    return _load("run")


@pytest.fixture(scope="module")
def tutorial():
    return _load("tutorial_kernels")


def test_every_case_function_the_table_names_exists():
    src = open(RUN).read()
    called = set(re.findall(r"\b(case_\w+)\(", src))
    defined = set(re.findall(r"^def (case_\w+)\(", src, re.M))
    assert called <= defined, called - defined


def test_quick_run_of_some_cases_writes_json(tmp_path):
    out = tmp_path / "bench.json"
    only = ",".join(["lnc2_add", *TUTORIAL_CASES])
    res = subprocess.run([sys.executable, RUN, "--quick", "--only", only, "--json", str(out)],
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    cases = json.loads(out.read_text())["cases"]
    assert set(cases) == {"lnc2_add", *TUTORIAL_CASES}
    for name, case in cases.items():
        for key in ("sim_s", "reference_s", "ratio", "baseline", "target", "timing", "runs",
                    "pair_ratio_median", "sim_s_min", "reference_s_min"):
            assert key in case, (name, key)
        assert case["ratio"] == pytest.approx(case["sim_s"] / case["reference_s"])
        assert case["timing"] == "interleaved" and case["runs"] == (5 if name == "lnc2_add" else 9)
    for name in TUTORIAL_CASES:
        assert cases[name]["target"] == (None if name.endswith("_nl") else 2.0)
        assert cases[name]["baseline"] == "one numpy.matmul fp32"
        assert cases[name]["style"].startswith("tutorial-style")
        assert cases[name]["max_rel_err"] < 1e-5
        assert name in res.stdout
    assert res.stdout.count("tutorial-style") == len(TUTORIAL_CASES)


def test_interleaved_times_alternates_after_three_warm_ups_each(run_mod):
    calls = []
    t_sim, t_ref, extra = run_mod.interleaved_times(lambda: calls.append("sim"),
                                                    lambda: calls.append("ref"), 4)
    assert calls == ["sim", "ref"] * 7
    assert extra["timing"] == "interleaved" and extra["runs"] == 4
    assert t_sim >= extra["sim_s_min"] > 0 and t_ref >= extra["reference_s_min"] > 0


@pytest.mark.parametrize("variant", ["tiled", "hoist", "nl"])
@pytest.mark.parametrize("K,M,N", [(256, 256, 512), (384, 128, 1024)])
def test_tutorial_kernel_matches_numpy_fp32(tutorial, variant, K, M, N):
    rng = np.random.default_rng(K + M + N)
    lhsT = rng.standard_normal((K, M), dtype=np.float32)
    rhs = rng.standard_normal((K, N), dtype=np.float32)
    out = simulate(tutorial.KERNELS[variant], lhsT, rhs)
    expected = lhsT.astype(np.float64).T @ rhs.astype(np.float64)
    assert out.shape == (M, N) and out.dtype == np.float32
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("variant", ["tiled", "hoist", "nl"])
def test_tutorial_kernel_bf16_rounds_once_into_the_output(tutorial, variant):
    bf16 = ml_dtypes.bfloat16
    rng = np.random.default_rng(1)
    lhsT = rng.standard_normal((256, 128), dtype=np.float32).astype(bf16)
    rhs = rng.standard_normal((256, 512), dtype=np.float32).astype(bf16)
    out = simulate(tutorial.KERNELS[variant], lhsT, rhs)
    exact = lhsT.astype(np.float64).T @ rhs.astype(np.float64)
    assert out.dtype == bf16
    # fp32 accumulation then one rounding to bf16: within one bf16 ulp (2**-8 relative) of exact
    np.testing.assert_allclose(out.astype(np.float64), exact, rtol=2.0**-8, atol=1e-3)


def test_tutorial_kernel_rejects_shapes_off_the_tile_grid(tutorial):
    lhsT = np.zeros((256, 100), np.float32)
    rhs = np.zeros((256, 512), np.float32)
    with pytest.raises(AssertionError, match=r"need K % 128 == M % 128 == N % 512 == 0, got K=256 M=100 N=512"):
        simulate(tutorial.KERNELS["tiled"], lhsT, rhs)


# ---- benchmarks/nki_library.py: the nki-library suite runner (the suite itself is not run here) ----

def test_nki_library_summary_counts_causes_and_slowest(tmp_path):
    mod = _load("nki_library")
    junit = tmp_path / "j.xml"
    junit.write_text("""<testsuites><testsuite>
      <testcase classname="a" name="t1" time="3.5"/>
      <testcase classname="a" name="t2" time="1.0"><failure message="UnsupportedError: nisa.topk at k.py:12 (x 128)"/></testcase>
      <testcase classname="a" name="t3" time="2.0"><failure message="UnsupportedError: nisa.topk at k.py:40 (x 64)"/></testcase>
      <testcase classname="b" name="t4" time="0.0"><skipped message="slow"/></testcase>
      <testcase classname="b" name="t5" time="0.1"><error message="ImportError: no module x"/></testcase>
    </testsuite></testsuites>""")
    s = mod.summarise(str(junit))
    assert dict(s["counts"]) == {"passed": 1, "failed": 2, "skipped": 1, "error": 1}
    assert s["causes"][0] == ("UnsupportedError: nisa.topk at k.py:N (x N)", 2)
    assert [name for _, name in s["slowest"]][:2] == ["a::t1", "a::t3"]


def test_nki_library_neuron_dtypes_stand_in_casts_like_cpp(tmp_path):
    mod = _load("nki_library")
    (tmp_path / "neuron_dtypes_standin.py").write_text(mod.NEURON_DTYPES)
    sys.path.insert(0, str(tmp_path))
    try:
        import neuron_dtypes_standin as nd
    finally:
        sys.path.remove(str(tmp_path))
    x = np.array([1.5, -2.7, 3e10, -3e10, 0.33333334], dtype=np.float32)
    assert nd.static_cast(x, np.int32).tolist() == [1, -2, 2**31 - 1, -2**31, 0]   # truncate, saturate
    assert nd.static_cast(x, ml_dtypes.bfloat16).tolist() == x.astype(ml_dtypes.bfloat16).tolist()
    assert nd.sizeinbytes(np.float32) == 4 and nd.is_float_type(ml_dtypes.bfloat16)
    assert not nd.is_float_type(np.int8)


def test_nki_library_runner_refuses_a_folder_that_is_not_a_checkout(tmp_path, capsys):
    mod = _load("nki_library")
    assert mod.main([str(tmp_path)]) == 2
    assert "not an nki-library checkout" in capsys.readouterr().out
