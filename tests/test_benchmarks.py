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


def test_interleaved_times_runs_the_loop_reference_third_in_every_round(run_mod):
    calls = []
    t_sim, t_ref, extra = run_mod.interleaved_times(lambda: calls.append("sim"), lambda: calls.append("ref"),
                                                    3, lambda: calls.append("loop"))
    assert calls == ["sim", "ref", "loop"] * 6
    assert extra["loop_s"] > 0
    assert extra["sim_over_loop"] == pytest.approx(t_sim / extra["loop_s"])
    assert extra["loop_over_reference"] == pytest.approx(extra["loop_s"] / t_ref)


@pytest.mark.parametrize("dtype", [np.float32, ml_dtypes.bfloat16])
def test_tile_loop_is_the_benchmark_kernels_algorithm(run_mod, dtype):
    rng = np.random.default_rng(7)
    lhsT = rng.standard_normal((384, 256), dtype=np.float32).astype(dtype)
    rhs = rng.standard_normal((384, 1024), dtype=np.float32).astype(dtype)
    got = run_mod.tile_loop(lhsT, rhs)
    exact = lhsT.astype(np.float64).T @ rhs.astype(np.float64)
    assert got.dtype == dtype and got.shape == (256, 1024)
    np.testing.assert_allclose(got.astype(np.float64), exact, rtol=2.0**-8 if dtype != np.float32 else 1e-5,
                               atol=1e-3)
    # fp32 sums of the K tiles' products in K order: the bits the simulator gives
    sim = simulate(run_mod.kernels.matmul_tiled, lhsT, rhs)
    assert np.array_equal(got.view(np.uint8), sim.view(np.uint8))


def test_quick_matmul_case_reports_sim_over_loop(tmp_path):
    out = tmp_path / "bench.json"
    res = subprocess.run([sys.executable, RUN, "--quick", "--only", "matmul512_fp32", "--json", str(out)],
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    case = json.loads(out.read_text())["cases"]["matmul512_fp32"]
    assert case["sim_over_loop"] == pytest.approx(case["sim_s"] / case["loop_s"])
    assert "sim/loop" in res.stdout


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


def test_nki_library_summary_counts_compiler_mode_skips_apart_and_pre_simulator_failures(tmp_path):
    mod = _load("nki_library")
    junit = tmp_path / "j.xml"
    junit.write_text(f"""<testsuites><testsuite>
      <testcase classname="a" name="t1" time="1"/>
      <testcase classname="a" name="t2" time="1"/>
      <testcase classname="a" name="t3" time="1"/>
      <testcase classname="a" name="t4" time="2"><properties><property name="{mod.STAGE}" value="{mod.BEFORE_SIMULATOR}"/></properties>
        <failure message="numpy._core._exceptions._ArrayMemoryError: Unable to allocate 8.00 GiB"/></testcase>
      <testcase classname="a" name="t5" time="2"><failure message="AssertionError: Validation failed for ['out']"/></testcase>
      <testcase classname="b" name="t6" time="0"><skipped type="pytest.skip" message="{mod.NOT_SIMULATION}trace_only"/></testcase>
      <testcase classname="b" name="t7" time="0"><skipped type="pytest.skip" message="{mod.NOT_SIMULATION}compile_only"/></testcase>
      <testcase classname="b" name="t8" time="0"><skipped type="pytest.skip" message="too slow for simulation"/></testcase>
      <testcase classname="b" name="t9" time="0"><properties><property name="other" value="{mod.BEFORE_SIMULATOR}"/></properties>
        <error message="fixture 'x' not found"/></testcase>
    </testsuite></testsuites>""")
    c = mod.summarise(str(junit))["counts"]
    assert (c["passed"], c["failed"], c["error"], c["skipped"]) == (3, 2, 1, 1)
    assert c["not_simulation"] == 2 and c["before_simulator"] == 1
    lines = mod.report_lines(c).splitlines()
    assert lines[0] == "3 passed, 2 failed, 1 skipped, 1 errors"
    assert "failed before reaching the simulator" in lines[1] and lines[1].endswith(": 1")
    assert lines[2].startswith("not simulation tests: 2")
    assert lines[3] == "pass rate of the simulation tests run: 50.0 %"      # 3 of 6 run
    assert c["out_of_memory"] == 1
    assert lines[4] == ("  ran out of this machine's memory (or crashed a worker): 1; pass rate of the "
                        "others: 60.0 %")                                   # 3 of 5


def test_nki_library_summary_without_either_kind_prints_no_extra_lines(tmp_path):
    mod = _load("nki_library")
    junit = tmp_path / "j.xml"
    junit.write_text('<testsuites><testsuite><testcase classname="a" name="t1" time="1"/>'
                     '<testcase classname="a" name="t2" time="1"><failure message="E"/></testcase>'
                     '</testsuite></testsuites>')
    lines = mod.report_lines(mod.summarise(str(junit))["counts"]).splitlines()
    assert lines == ["1 passed, 1 failed, 0 skipped, 0 errors", "pass rate of the simulation tests run: 50.0 %"]


def _report(nodeid, when, outcome, duration=1.0, longrepr=None, props=()):
    import types
    return types.SimpleNamespace(nodeid=nodeid, when=when, outcome=outcome, duration=duration,
                                 passed=outcome == "passed", failed=outcome == "failed",
                                 skipped=outcome == "skipped", longrepr=longrepr,
                                 user_properties=list(props))


def test_nki_library_plugin_writes_one_result_line_per_finished_test_and_summary_reads_them(plugin, tmp_path, monkeypatch):
    import types
    mod = _load("nki_library")
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)     # the controller writes
    results = tmp_path / "r.jsonl"
    plugin["_RESULTS"] = str(results)
    crash = types.SimpleNamespace(reprcrash=types.SimpleNamespace(message="ValueError: bad 12"))
    stage = (mod.STAGE, mod.BEFORE_SIMULATOR)
    log = plugin["pytest_runtest_logreport"]
    for rep in [_report("a::ok", "setup", "passed", 0.5), _report("a::ok", "call", "passed", 2.0),
                _report("a::ok", "teardown", "passed", 0.5),
                _report("a::bad", "setup", "passed"), _report("a::bad", "call", "failed", 3.0, crash, [stage]),
                _report("a::bad", "teardown", "passed"),
                _report("a::skip", "setup", "skipped", 0, ("f.py", 1, "Skipped: needs the Neuron compiler: marked trace_only")),
                _report("a::skip", "teardown", "passed", 0),
                _report("a::fix", "setup", "failed", 0, "E  fixture 'x' not found\n"),
                _report("a::fix", "teardown", "passed", 0)]:
        log(rep)
    assert len(results.read_text().splitlines()) == 4           # each test once it has finished
    log(_report("a::crash", "???", "failed", 0, "worker 'gw0' crashed while running 'a::crash'"))
    log(_report("a::running", "setup", "passed"))                  # unfinished: not written
    lines = [json.loads(ln) for ln in results.read_text().splitlines()]
    assert [(r["name"], r["outcome"]) for r in lines] == [
        ("a::ok", "passed"), ("a::bad", "failed"), ("a::skip", "skipped"), ("a::fix", "error"),
        ("a::crash", "failed")]
    assert lines[0]["time"] == 3.0 and lines[1]["before_simulator"] is True
    s = mod.summarise(str(results))
    c = s["counts"]
    assert (c["passed"], c["failed"], c["error"], c["skipped"], c["not_simulation"], c["before_simulator"]) \
        == (1, 2, 1, 0, 1, 1)
    assert dict(s["causes"])["ValueError: bad N"] == 1
    assert dict(s["causes"])["fixture 'x' not found"] == 1
    assert s["slowest"][:2] == [(5.0, "a::bad"), (3.0, "a::ok")]


def test_nki_library_plugin_finds_out_of_memory_anywhere_in_the_exception_chain(plugin):
    oom = plugin["_out_of_memory"]

    def negative_test():            # the harness's shape: a golden's MemoryError, then a bare assert
        try:
            raise MemoryError("Unable to allocate 3.4 GiB for an array with shape (57, 716, 11278)")
        except MemoryError:
            assert False

    try:
        negative_test()
    except AssertionError as e:
        assert oom(e)
    wrapped = RuntimeError("InferenceException")
    wrapped.__cause__ = RuntimeError("DefaultCPUAllocator: can't allocate memory: you tried to allocate 5")
    assert oom(wrapped)
    assert not oom(AssertionError()) and not oom(ValueError("shape (57, 716) is off the tile grid"))
    looped = ValueError("a")
    looped.__context__ = looped                       # a cycle ends the walk
    assert not oom(looped)


def test_nki_library_plugin_does_not_count_a_capacity_error_as_the_machines_memory(plugin):
    from nkisim.errors import CapacityError
    oom = plugin["_out_of_memory"]
    wrapped = RuntimeError("InferenceException: nl.ndarray: psum allocation (128, 512) float32 needs 2048")
    wrapped.__cause__ = CapacityError("nl.ndarray", "psum allocation (128, 512) float32 needs 2048 bytes")
    assert isinstance(wrapped.__cause__, MemoryError) and not oom(wrapped)


def test_nki_library_summarise_files_categorises_the_latest_record_of_each_test(tmp_path, capsys):
    mod = _load("nki_library")
    first, second = tmp_path / "run.jsonl", tmp_path / "rerun.jsonl"
    rows = [
        {"name": "integration/x/test_a.py::T::t[1]", "outcome": "failed", "cause": "Failed: Timeout (>300.0s) from pytest-timeout."},
        {"name": "integration/x/test_a.py::T::t[2]", "outcome": "passed"},
        {"name": "integration/x/test_gen_mask_tkg.py::T::t[1]", "outcome": "failed", "cause": "KeyError: 'mask_out_hbm'"},
        {"name": "integration/x/test_b.py::T::t[1]", "outcome": "failed",
         "cause": "numpy._core._exceptions._ArrayMemoryError: Unable to allocate 7.89 GiB for an array"},
        {"name": "integration/x/test_b.py::T::t[2]", "outcome": "failed", "cause": "AssertionError", "out_of_memory": True},
        {"name": "integration/x/test_c.py::T::t[1]", "outcome": "failed", "out_of_memory": True,
         "cause": "InferenceException: nl.ndarray: psum allocation (128, 512) float32 needs 2048 bytes per partition "
                  "(1 bank(s)) but 16384 of 16384 bytes per partition (8 banks of 2048) are live on trn2"},
        {"name": "integration/x/test_c.py::T::t[2]", "outcome": "failed", "cause": "ValueError: wrong 3"},
        {"name": "integration/x/test_c.py::T::t[3]", "outcome": "skipped", "reason": mod.NOT_SIMULATION + "trace_only"},
    ]
    first.write_text("".join(json.dumps(r) + "\n" for r in rows))
    second.write_text(json.dumps({"name": "integration/x/test_a.py::T::t[1]", "outcome": "passed", "time": 192.1}) + "\n")
    assert mod.main(["--summarise", str(first), str(second)]) == 0
    out = capsys.readouterr().out
    assert "7 run (2 passed, 5 failed, 0 errors), 0 skipped by the suite, 1 not simulation tests" in out
    assert re.search(r"suite defect: 1\n +1  test_gen_mask_tkg: gen_mask_tkg", out)
    assert re.search(r"machine memory: 2\n +2  test_b: out of this machine's memory", out)
    assert re.search(r"on-chip capacity: 1\n +1  test_c: InferenceException: nl.ndarray: psum allocation", out)
    assert re.search(r"other: 1\n +1  test_c: ValueError: wrong N", out) and "timeout" not in out
    assert "of the simulation tests run:" in out and "2/7 = 28.6 %" in out
    assert "2/5 = 40.0 %" in out and "2/4 = 50.0 %" in out       # not memory; nor a suite defect


def test_nki_library_plugin_marks_out_of_memory_and_crashed_tests_for_the_re_run(plugin, tmp_path, monkeypatch):
    mod = _load("nki_library")
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    results = tmp_path / "r.jsonl"
    plugin["_RESULTS"] = str(results)
    log = plugin["pytest_runtest_logreport"]
    log(_report("a::neg", "call", "failed", 1.0, "E   AssertionError\n", [(mod.OUT_OF_MEMORY, "1")]))
    log(_report("a::neg", "teardown", "passed"))
    log(_report("a::bad", "call", "failed", 1.0, "E   ValueError: no\n"))
    log(_report("a::bad", "teardown", "passed"))
    log(_report("a::crash", "???", "failed", 0, "worker 'gw0' crashed while running 'a::crash'"))
    marked = {r["name"]: r["out_of_memory"] for r in map(json.loads, results.read_text().splitlines())}
    assert marked == {"a::neg": True, "a::bad": False, "a::crash": True}


def test_nki_library_plugin_writes_nothing_on_a_worker(plugin, tmp_path, monkeypatch):
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw0")
    plugin["_RESULTS"] = str(tmp_path / "r.jsonl")
    plugin["pytest_runtest_logreport"](_report("a::ok", "teardown", "passed"))
    assert not (tmp_path / "r.jsonl").exists()


def test_nki_library_plugin_and_summary_agree_on_the_markers_they_share():
    mod = _load("nki_library")
    compile(mod.PLUGIN, "nkisim_nkilib_plugin.py", "exec")
    assert f'NOT_SIMULATION = "{mod.NOT_SIMULATION}"' in mod.PLUGIN
    assert f'STAGE, BEFORE_SIMULATOR = "{mod.STAGE}", "{mod.BEFORE_SIMULATOR}"' in mod.PLUGIN
    assert f'OUT_OF_MEMORY = "{mod.OUT_OF_MEMORY}"' in mod.PLUGIN
    assert mod.NEEDS["scipy"] == "scipy"


# ---- the plugin's multi-rank simulation step, on stand-ins for the harness's few names it uses ----

class _PerRankInputs:                       # the harness's PerRankLazyInputGenerator (same surface)
    def __init__(self, generator):
        self.generator = generator

    def for_rank(self, rank_id):
        return self.generator(rank_id=rank_id)


class _PerRankGolden(_PerRankInputs):       # its PerRankLazyGoldenGenerator
    pass


class _InferenceException(Exception):
    pass


class _ValidationException(Exception):
    pass


def _harness_modules(tmp_path):
    import contextlib
    import enum
    import types
    dc = types.ModuleType("test.utils.common_dataclasses")
    dc.INF_ARTIFACT_DIR_NAME = "infer_result"
    dc.PerRankLazyInputGenerator = _PerRankInputs
    dc.TraceMode = enum.Enum("TraceMode", {"Simulator": "simulation", "TraceOnly": "trace_only"})
    dc.normalize_golden_output = lambda golden, rank_id=0: (golden.for_rank(rank_id)
                                                            if isinstance(golden, _PerRankGolden) else golden)
    ex = types.ModuleType("test.utils.exceptions")
    ex.InferenceException, ex.ValidationException = _InferenceException, _ValidationException
    mc = types.ModuleType("test.utils.metrics_collector")
    mc.MetricName = types.SimpleNamespace(SIMULATION_TIME="sim")

    class Orchestrator:                      # the instance surface _run_ranks touches
        def __init__(self):
            self.fs_config = types.SimpleNamespace(artifacts_output_directory_path=str(tmp_path))
            self.emitter = types.SimpleNamespace(get_collector=lambda: types.SimpleNamespace(
                timer=lambda name: contextlib.nullcontext()))

        def __dump_tensors__(self, where, tensors, name_fn):
            os.makedirs(where, exist_ok=True)
            for name, value in tensors.items():
                value.tofile(os.path.join(where, name_fn(name) + ".bin"))

        def _run_simulator_inference(self, kernel_under_test):
            return "one rank"
    orch = types.ModuleType("test.utils.test_orchestrator")
    orch.Orchestrator = Orchestrator
    return {m.__name__: m for m in (dc, ex, mc, orch)}


@pytest.fixture
def plugin(tmp_path, monkeypatch):
    mod = _load("nki_library")
    monkeypatch.setenv("NKI_NC_VERSION", "gen3")      # the step sets it (as the harness does); undone after
    for name, m in _harness_modules(tmp_path).items():
        monkeypatch.setitem(sys.modules, name, m)
    before = set(sys.modules)
    ns = {"__name__": "nkisim_nkilib_plugin_under_test"}
    exec(compile(mod.PLUGIN, "nkisim_nkilib_plugin.py", "exec"), ns)
    yield ns
    for name in set(sys.modules) - before:
        if name.startswith("test.utils."):
            del sys.modules[name]


def _kut(kernel, kernel_input, golden, ranks, lnc=1):
    import types
    return types.SimpleNamespace(
        kernel_func=kernel, kernel_input=kernel_input,
        inference_args=types.SimpleNamespace(collective_ranks=ranks),
        compiler_input=types.SimpleNamespace(logical_nc_config=lnc,
                                             platform_target=types.SimpleNamespace(get_nc_gen=lambda: "gen3")),
        validation_args=types.SimpleNamespace(golden_output=golden))


def _all_reduce_kernel():
    import nkisim.nki as nki
    import nkisim.nki.collectives as ncc
    import nkisim.nki.isa as nisa
    import nkisim.nki.language as nl

    @nki.jit
    def all_reduce_then_overwrite_input(x, group):
        src = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=src, src=x)
        ncc.all_reduce(srcs=[src], dsts=[out], replica_group=group, op=nl.add)
        nisa.dma_copy(dst=x, src=out)                  # writes its input too
        return out
    return all_reduce_then_overwrite_input, ncc


@pytest.mark.parametrize("lnc", [1, 2])
def test_nki_library_plugin_runs_every_rank_and_leaves_each_rank_outputs_per_worker(plugin, tmp_path, lnc):
    kernel, ncc = _all_reduce_kernel()
    rng = np.random.default_rng(3)
    xs = rng.standard_normal((4, 128, 64), dtype=np.float32)
    before = xs.copy()
    group = ncc.ReplicaGroup([[0, 1], [2, 3]])
    inputs = _PerRankInputs(lambda rank_id: {"x.must_alias_input": xs[rank_id], "group": group})
    golden = _PerRankGolden(lambda rank_id: {"out": np.zeros((128, 64), np.float32)})
    orch = sys.modules["test.utils.test_orchestrator"].Orchestrator
    plugin["pytest_runtest_setup"](None)                      # wraps the orchestrator's step
    base = orch()._run_simulator_inference(_kut(kernel, inputs, golden, 4, lnc))
    assert base == str(tmp_path / "infer_result")
    for r in range(4):
        got = np.fromfile(tmp_path / "infer_result" / f"output_worker_{r}" / "out.bin", np.float32)
        pair = (r // 2) * 2
        np.testing.assert_allclose(got.reshape(128, 64), xs[pair] + xs[pair + 1], rtol=1e-6)
    assert np.array_equal(xs, before)                          # the test's arrays stay as they were
    assert plugin["_reached"][0]


def test_nki_library_plugin_keeps_one_rank_tests_on_the_harness_path_and_checks_output_counts(plugin, tmp_path):
    kernel, ncc = _all_reduce_kernel()
    orch = sys.modules["test.utils.test_orchestrator"].Orchestrator
    plugin["pytest_runtest_setup"](None)
    plugin["pytest_runtest_setup"](None)                      # wrapping twice is wrapping once
    x = np.ones((128, 64), np.float32)
    group = ncc.ReplicaGroup([[0]])
    assert orch()._run_simulator_inference(_kut(kernel, {"x": x, "group": group}, {}, 1)) == "one rank"
    # a per-rank input on one rank runs rank 0 through the launch; outputs land where one rank's do
    per = _PerRankInputs(lambda rank_id: {"x": x, "group": group})
    orch()._run_simulator_inference(_kut(kernel, per, {"out": x}, 1))
    assert np.array_equal(np.fromfile(tmp_path / "infer_result" / "out.bin", np.float32), x.ravel())
    two = _PerRankGolden(lambda rank_id: {"out": x, "extra": x})
    with pytest.raises(_InferenceException, match=r"rank 0: kernel returned 1 outputs but expected 2"):
        orch()._run_simulator_inference(_kut(kernel, per, two, 1))
    def golden_runs_out_of_memory(rank_id):
        raise MemoryError("golden")
    with pytest.raises(_ValidationException, match=r"golden generation failed: MemoryError: golden"):
        orch()._run_simulator_inference(_kut(kernel, per, _PerRankGolden(golden_runs_out_of_memory), 1))
    odd = _PerRankInputs(lambda rank_id: {"x": x, "group": group} if rank_id == 0 else {"x": x})
    with pytest.raises(_InferenceException, match=r"every rank's kernel_input must name the same arguments"):
        orch()._run_simulator_inference(_kut(kernel, odd, two, 2))


@pytest.mark.parametrize("day, version", [("2026-04-13", "0.3"), ("2026-04-09", "0.3"), ("2026-05-20", "0.3"),
                                          ("2026-05-21", "0.4"), ("2026-08-01", "0.5"), (None, "0.5"),
                                          ("2025-12-01", "0.3")])
def test_nki_library_runner_simulates_the_release_current_on_the_checkout_date(day, version):
    mod = _load("nki_library")
    assert mod.nki_version_for(day) == version


def test_nki_library_memory_retry_replaces_the_rerun_records(tmp_path):
    mod = _load("nki_library")
    main, again = tmp_path / "r.jsonl", tmp_path / "r.retry"
    main.write_text("\n".join(json.dumps(r) for r in [
        {"name": "a::ok", "outcome": "passed", "time": 1.0},
        {"name": "a::big", "outcome": "failed", "time": 2.0,
         "cause": "numpy._core._exceptions._ArrayMemoryError: Unable to allocate 9.00 GiB"},
        {"name": "a::torch", "outcome": "failed", "time": 2.0,
         "cause": "RuntimeError: [enforce fail at alloc_cpu.cpp:127] DefaultCPUAllocator: can't allocate memory"},
        {"name": "a::bad", "outcome": "failed", "time": 2.0, "cause": "AssertionError: mismatch"}]) + "\n")
    assert [r["name"] for r in mod._jsonl_records(str(main))
            if mod.MEMORY.search(r.get("cause", ""))] == ["a::big", "a::torch"]
    again.write_text(json.dumps({"name": "a::big", "outcome": "passed", "time": 30.0}) + "\n")
    mod._merge(str(main), str(again))
    recs = mod._jsonl_records(str(main))
    assert [(r["name"], r["outcome"], r.get("retried", False)) for r in recs] == [
        ("a::ok", "passed", False), ("a::big", "passed", True), ("a::torch", "failed", False),
        ("a::bad", "failed", False)]
    assert dict(mod.summarise(str(main))["counts"]) == {"passed": 2, "failed": 2, "out_of_memory": 1}   # a::torch


def test_profile_cases_measure_the_estimate_against_simulate_and_numpy(run_mod):
    t_prof, t_sim, extra = run_mod.case_profile(1, n=512)
    assert t_prof > 0 and t_sim > 0 and extra["estimate_us"] > 0 and extra["timing"] == "interleaved"
    t_prof, t_np, extra = run_mod.case_profile_timing_only(m=128, k=256, n=512)
    assert t_prof > 0 and t_np > 0 and extra["shape"] == [128, 256, 512]
    assert extra["instructions"] == 2 + 2 + 2 + 1 + 1   # 2 lhsT + 2 rhs loads, 2 matmuls, copy, store
    assert extra["estimate_us"] > 0
    t_timing, t_sim, extra = run_mod.case_timing_only_vs_compute(1, n=512)
    assert t_timing > 0 and t_sim > 0 and extra["estimate_us"] > 0


def test_beta1_kernels_script_starts_and_rejects_missing_checkouts(tmp_path):
    script = os.path.join(BENCH, "beta1_kernels.py")
    res = subprocess.run([sys.executable, script, "--help"], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0 and "SDK_CHECKOUT" in res.stdout and "SAMPLES_CHECKOUT" in res.stdout
    sdk = tmp_path / "sdk"
    (sdk / "general" / "nki" / "examples").mkdir(parents=True)
    res = subprocess.run([sys.executable, script, str(sdk), str(tmp_path / "missing")],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 2 and "SAMPLES_CHECKOUT" in res.stderr and "src/nki_samples" in res.stderr
    res = subprocess.run([sys.executable, script, str(tmp_path / "nosdk"), str(tmp_path)],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 2 and "SDK_CHECKOUT" in res.stderr


def test_beta1_kernels_script_skips_cases_an_empty_checkout_lacks(tmp_path):
    script = os.path.join(BENCH, "beta1_kernels.py")
    sdk, samples = tmp_path / "sdk", tmp_path / "samples"
    (sdk / "general" / "nki" / "examples").mkdir(parents=True)
    (samples / "src" / "nki_samples").mkdir(parents=True)
    res = subprocess.run([sys.executable, script, str(sdk), str(samples), "--no-unit", "--only", "rmsnorm",
                          "contributed matmul"],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    lines = res.stdout.strip().splitlines()
    assert lines[0].startswith("SKIP sdk rmsnorm") and lines[1].startswith("SKIP samples contributed matmul")
    assert lines[-1] == "total: 0 passed, 0 failed, 2 skipped"


def test_beta1_kernels_script_skips_unit_tests_whose_reference_kernels_the_checkout_lacks(tmp_path):
    """nki-samples HEAD keeps test/unit but not src/nki_samples/reference, which the tests import:
    those cases (and the trn2 double-row case, which imports its unit test) print SKIP, not FAIL."""
    script = os.path.join(BENCH, "beta1_kernels.py")
    sdk, samples = tmp_path / "sdk", tmp_path / "samples"
    (sdk / "general" / "nki" / "examples").mkdir(parents=True)
    (samples / "src" / "nki_samples").mkdir(parents=True)
    unit = samples / "test" / "unit"
    unit.mkdir(parents=True)
    (unit / "test_resize_nearest.py").write_text(
        "import numpy as np\nfrom nki_samples.reference.vision import resize_nearest_fixed_dma_kernel\n")
    (unit / "test_double_row_matmul.py").write_text(
        "from nki_samples.reference.double_row_matmul import quantized_double_row_matmul\n")
    res = subprocess.run([sys.executable, script, str(sdk), str(samples), "--only", "resize_nearest", "double_row"],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    lines = res.stdout.strip().splitlines()
    assert lines[0].startswith("SKIP samples reference double_row_matmul on trn2")
    assert lines[0].endswith("not in this checkout (src/nki_samples/reference/double_row_matmul)")
    assert lines[1].startswith("SKIP samples unit test_resize_nearest.py --simulation-only")
    assert lines[1].endswith("not in this checkout (src/nki_samples/reference/vision)")
    assert lines[2].startswith("SKIP samples unit test_double_row_matmul.py ")     # needs a trn2 host
    assert lines[-1] == "total: 0 passed, 0 failed, 3 skipped"


def test_tutorials_step_improves_only_beyond_one_percent():
    """benchmarks/tutorials.py: a step improves when its estimate is more than MIN_GAIN (1 %)
    lower; equal estimates (mamba v1 / v2: 2075.2498 vs 2075.2477 us) do not."""
    tut = _load("tutorials")
    assert tut.MIN_GAIN == 0.01
    assert not tut.improves(2075.2477, 2075.2498)
    assert not tut.improves(99.5, 100.0) and tut.improves(98.9, 100.0)
    assert not tut.improves(None, 100.0) and not tut.improves(1.0, None)


def test_beta1_sdk_suite_script_starts_and_rejects_a_missing_checkout(tmp_path):
    script = os.path.join(BENCH, "beta1_sdk_suite.py")
    res = subprocess.run([sys.executable, script, "--help"], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0 and "SDK_CHECKOUT" in res.stdout
    res = subprocess.run([sys.executable, script, str(tmp_path / "nosdk")], capture_output=True, text=True,
                         timeout=120)
    assert res.returncode == 2 and "SDK_CHECKOUT" in res.stderr and "nki/test" in res.stderr


def test_beta1_sdk_suite_script_counts_each_file_in_a_child(tmp_path):
    script = os.path.join(BENCH, "beta1_sdk_suite.py")
    suite = tmp_path / "nki" / "test"
    suite.mkdir(parents=True)
    (suite / "test_a.py").write_text(
        "import unittest\nimport neuronxcc.nki.language as nl\n\n"
        "class T(unittest.TestCase):\n"
        "    def test_ok(self):\n        self.assertTrue(callable(nl.load))\n"
        "    def test_bad(self):\n        self.assertEqual(1, 2)\n")
    (suite / "test_empty.py").write_text("X = 1\n")
    res = subprocess.run([sys.executable, script, str(tmp_path)], capture_output=True, text=True, timeout=300)
    lines = res.stdout.strip().splitlines()
    assert res.returncode == 1, res.stdout + res.stderr
    assert lines[0].startswith("FAIL test_a.py (") and lines[0].endswith("1 failed, 1 passed")
    assert lines[1] == "    FAILED test_a.py::T::test_bad"
    assert lines[2].startswith("PASS test_empty.py (") and lines[2].endswith("no tests in this file")
    assert lines[-1] == ("total: 1 passed, 0 xpassed, 1 failed, 0 failed (known test faults), 0 errors, "
                         "0 skipped")
