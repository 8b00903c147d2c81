"""nkisim.profile, nki.benchmark and nki.profile on CPU, with ``schedule.estimate`` replaced by
the conftest's fake (100 ns per instruction, one after the other): the figures below are counted
from the kernel's instructions by hand."""
import json
import re
import sys

import numpy as np
import pytest

import nkisim
import nkisim.nki as nki
import nkisim.nki.isa as nisa
import nkisim.nki.language as nl
from nkisim import trace
from nkisim.errors import SimulatorOffError, UnsupportedError


@nki.jit
def add_kernel(a, b):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    x = nl.load(a)          # 1 dma
    y = nl.load(b)          # 2 dma
    nl.store(out, x + y)    # 3 vector, 4 dma
    return out


def inputs():
    rng = np.random.default_rng(0)
    return rng.random((128, 512), dtype=np.float32), rng.random((128, 512), dtype=np.float32)


def test_profile_returns_profile_and_outputs(fake_schedule):
    a, b = inputs()
    p = nkisim.profile(add_kernel, target="trn2")(a, b)
    assert isinstance(p, nkisim.Profile)
    assert [r.op for r in p.records] == ["dma_copy", "dma_copy", "tensor_tensor", "dma_copy"]
    assert p.total_us == pytest.approx(0.4) and p.target == "trn2" and p.lnc == 1
    assert p.engine_busy == pytest.approx({"core0.vector": 0.25, "core0.dma0": 0.75})
    assert p.kernel == "add_kernel"
    np.testing.assert_array_equal(p.outputs, a + b)
    # mbu: 3 x 128 x 512 x 4 HBM bytes over 100 B/ns x 400 ns
    assert p.mbu == pytest.approx(3 * 128 * 512 * 4 / (100.0 * 400))
    assert p.records[0].location.startswith("test_profiling.py:")


def test_profile_lnc2_and_plain_function(fake_schedule):
    a, b = inputs()
    p = nkisim.profile(add_kernel.func, target="trn2", lnc=2)(a, b)
    assert p.lnc == 2 and {r.core for r in p.records} == {0, 1}
    np.testing.assert_array_equal(p.outputs, a + b)


def test_profile_events_reach_an_enclosing_recording(fake_schedule):
    with trace.record() as events:
        nkisim.profile(add_kernel)(*inputs())
    assert len(events) == 4


@nki.jit
def mm_kernel(a, b):        # a (128, 128) stationary, b (128, 512) moving: out = a.T @ b
    out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    ps = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.psum)
    nisa.nc_matmul(dst=ps, stationary=nl.load(a), moving=nl.load(b))
    nisa.nc_matmul(dst=ps, stationary=nl.load(a), moving=nl.load(b), accumulate=True)
    res = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=res, src=ps)
    nl.store(out, res)
    return out


def test_profile_compute_false_times_the_same_instructions_without_the_products(fake_schedule, monkeypatch):
    rng = np.random.default_rng(1)
    a, b = rng.random((128, 128), dtype=np.float32), rng.random((128, 512), dtype=np.float32)
    full = nkisim.profile(mm_kernel, target="trn2")(a, b)
    np.testing.assert_allclose(full.outputs, 2 * (a.T @ b), rtol=1e-5)
    import nkisim.isa.matmul as mm

    def no_product(*args, **kwargs):
        raise AssertionError("compute=False multiplied")
    monkeypatch.setattr(mm, "_product", no_product)
    quick = nkisim.profile(mm_kernel, target="trn2", compute=False)(a, b)
    assert quick.outputs is None
    assert [(r.op, r.engine) for r in quick.records] == [(r.op, r.engine) for r in full.records]
    assert [e.options.get("accumulate") for e in quick.events] == [e.options.get("accumulate") for e in full.events]
    assert quick.total_us == full.total_us


def test_profile_compute_false_still_checks_the_kernel(fake_schedule):
    from nkisim.errors import CapacityError

    @nki.jit
    def nine_banks(a, b):
        out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
        st, mv = nl.load(a), nl.load(b)
        banks = [nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.psum) for _ in range(9)]
        for ps in banks:
            nisa.nc_matmul(dst=ps, stationary=st, moving=mv)
        for ps in banks + banks:            # all read, then again: nine live together
            nisa.tensor_copy(dst=ps[:, 0:1], src=ps[:, 0:1])
        return out
    a, b = np.zeros((128, 128), np.float32), np.zeros((128, 512), np.float32)
    with pytest.raises(CapacityError, match=r"psum allocation \(128, 512\) float32 needs 2048 bytes"):
        nkisim.profile(nine_banks, target="trn2", compute=False)(a, b)


def test_profile_unknown_option():
    with pytest.raises(TypeError, match=r"nkisim.profile: unknown option\(s\) \['bogus'\]"):
        nkisim.profile(add_kernel, bogus=1)


def test_profile_without_cost_model(monkeypatch):
    monkeypatch.setitem(sys.modules, "nkisim.trace.schedule", None)
    with pytest.raises(UnsupportedError, match=r"the cost model \(nkisim.trace.schedule\) is not in this build"):
        nkisim.profile(add_kernel)(*inputs())


def test_benchmark_result_every_percentile_is_the_estimate(fake_schedule, capsys, monkeypatch, tmp_path):
    monkeypatch.delenv("NKI_SIMULATOR", raising=False)      # no device, simulator off: still runs
    monkeypatch.chdir(tmp_path)

    @nki.benchmark(warmup=5, iters=20, save_neff_name="file.neff", save_trace_name="profile.ntff")
    def k(a, b):
        return add_kernel(a, b)

    a, b = inputs()
    np.testing.assert_array_equal(k(a, b), a + b)
    lat = k.benchmark_result.nc_latency
    for p in (0, 1, 10, 25, 50, 90, 99, 100):
        assert lat.get_latency_percentile(p) == pytest.approx(0.4)
    with pytest.raises(ValueError, match=r"percentile 75 is not available"):
        lat.get_latency_percentile(75)
    out = capsys.readouterr().out
    assert "nki.benchmark k: estimated 0.400 us on" in out and "warmup=5, iters=20" in out
    doc = json.loads((tmp_path / "profile.json").read_text())
    assert sum(e["ph"] == "X" for e in doc["traceEvents"]) == 4
    assert not (tmp_path / "file.neff").exists()
    assert k.profile_result is k.benchmark_result.profile


def test_benchmark_bare_decorator_and_lnc2(fake_schedule, capsys):
    k = nki.benchmark(add_kernel)
    assert k.benchmark_result is None
    k[2](*inputs())
    assert k[2].benchmark_result is None          # a new kernel object per grid, like nki.jit
    kk = k[2]
    kk(*inputs())
    assert kk.benchmark_result.profile.lnc == 2


def test_nki_profile_writes_the_trace_in_working_directory(fake_schedule, tmp_path, capsys):
    @nki.profile(working_directory=str(tmp_path), save_trace_name="prof.ntff", profile_nth=2)
    def k(a, b):
        return add_kernel(a, b)

    a, b = inputs()
    np.testing.assert_array_equal(k(a, b), a + b)
    assert (tmp_path / "prof.json").exists()
    with pytest.raises(FileExistsError, match=r"prof.json exists; pass overwrite=True"):
        k(a, b)
    k2 = nki.profile(k.func, working_directory=str(tmp_path), save_trace_name="prof.ntff", overwrite=True)
    k2(a, b)
    assert k2.profile_result.total_us == pytest.approx(0.4)
    with pytest.raises(ValueError, match="profile_nth must be an integer >= 1"):
        nki.profile(working_directory=str(tmp_path), profile_nth=0)


def test_jit_unchanged(monkeypatch):
    monkeypatch.setenv("NKI_SIMULATOR", "0")
    with pytest.raises(SimulatorOffError):
        add_kernel(*inputs())
    assert nki.baremetal is nki.jit


def test_profile_warnings_name_the_kernel_lines(fake_schedule):
    @nki.jit
    def twice(a):
        out = nl.ndarray((128, 64), dtype=a.dtype, buffer=nl.shared_hbm)
        x = nl.load(a)
        y = nl.load(a)
        nl.store(out, x + y)
        return out

    p = nkisim.profile(twice)(np.ones((128, 64), np.float32))
    lines = [r.location for r in p.records if r.api == "nl.load"]
    reload = next(w for w in p.warnings if w.kind == "reload")
    assert reload.locations == (lines[1], lines[0])
    small = next(w for w in p.warnings if w.kind == "small_dma")
    assert small.locations == (lines[0],) and "256 B contiguous per partition" in small.message


def test_profile_with_the_real_cost_model_is_never_faster_than_the_physical_floors():
    """End to end (no fake): a 128x128 @ 128x512 bf16 matmul; the estimate is at least the TensorE
    FLOP floor and the HBM byte floor of trn2, and every instruction has a record."""
    import ml_dtypes
    import nkisim
    from nkisim import arch
    import nkisim.nki.isa as nisa
    import nkisim.nki.language as nl

    def mm(a, b):
        out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
        at = nl.ndarray((128, 128), dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=at, src=a)
        bt = nl.ndarray((128, 512), dtype=b.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=bt, src=b)
        ps = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.psum)
        nisa.nc_matmul(dst=ps, stationary=at, moving=bt)
        o = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=o, src=ps)
        nisa.dma_copy(dst=out, src=o)
        return out
    a = np.ones((128, 128), ml_dtypes.bfloat16)
    b = np.ones((128, 512), ml_dtypes.bfloat16)
    p = nkisim.profile(mm, target="trn2")(a, b)
    np.testing.assert_array_equal(p.outputs, np.full((128, 512), 128.0, np.float32))
    t = arch.get("trn2")
    flops = 2 * 128 * 128 * 512
    peak = 128 * 128 * 2 * 2.4            # PE array x 2 flop x 2.4 GHz (flop per ns), bf16
    hbm = a.nbytes + b.nbytes + 128 * 512 * 4
    assert p.total_us * 1e3 >= flops / peak
    assert p.total_us * 1e3 >= hbm / (t.hbm_device_bytes_per_ns / t.cores_per_device)
    assert len(p.records) == 5 and 0 < p.hfu < 1 and 0 < p.mbu < 1


def test_benchmark_result_is_set_on_the_decorated_kernel_by_an_lnc2_call(fake_schedule):
    import nkisim.nki as nki
    import nkisim.nki.isa as nisa
    import nkisim.nki.language as nl

    @nki.benchmark(warmup=1, iters=1)
    def copy(x):
        t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x)
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=t)
        return out
    copy[2](np.ones((128, 8), np.float32))
    assert copy.benchmark_result.nc_latency.get_latency_percentile(50) > 0
    assert copy.benchmark_result.profile.lnc == 2


def test_profile_of_a_simulate_callable_keeps_its_options(fake_schedule):
    import nkisim
    import nkisim.nki as nki
    import nkisim.nki.language as nl
    from nkisim.errors import UninitializedReadError

    def reads_garbage(x):
        t = nl.ndarray((4, 4), dtype=nl.float32, buffer=nl.sbuf)
        out = nl.ndarray((4, 4), dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out, t)
        return out
    with pytest.raises(UninitializedReadError):
        nkisim.profile(nki.simulate(reads_garbage, uninitialized_reads="raise"))(np.zeros((4, 4), np.float32))
    p = nkisim.profile(nki.simulate(reads_garbage, target="trn1"))(np.zeros((4, 4), np.float32))
    assert p.target == "trn1"


@pytest.mark.parametrize("kw, want", [({"iters": 0}, "iters must be an integer >= 1, got 0"),
                                      ({"warmup": -1}, "warmup must be an integer >= 0, got -1"),
                                      ({"iters": 2.5}, "iters must be an integer >= 1, got 2.5")])
def test_benchmark_rejects_iteration_counts_it_cannot_measure(kw, want):
    from nkisim.errors import ArgumentError
    with pytest.raises(ArgumentError, match="^nki\\.benchmark: " + re.escape(want) + r" \(test_profiling\.py:\d+\)$"):
        nki.benchmark(**kw)


def test_profile_compute_false_gives_the_real_estimate_of_compute_true():
    a, b = np.ones((128, 128), np.float32), np.ones((128, 512), np.float32)
    full = nkisim.profile(mm_kernel, target="trn2")(a, b)
    quick = nkisim.profile(mm_kernel, target="trn2", compute=False)(a, b)
    assert full.total_us > 0 and quick.total_us == full.total_us
    assert [(r.start_us, r.end_us, r.track) for r in quick.records] == \
        [(r.start_us, r.end_us, r.track) for r in full.records]


def test_no_garbage_collection_while_estimating_and_the_collector_restored(fake_schedule, monkeypatch):
    """The schedule and the Profile build run with the cyclic collector off; after the profile
    (also when the estimate raises) it is as it was: on when it was on, off when it was off."""
    import gc
    seen = []
    estimate = fake_schedule.estimate

    def watching(*a, **k):
        seen.append(gc.isenabled())
        return estimate(*a, **k)
    monkeypatch.setattr(fake_schedule, "estimate", watching)
    a, b = inputs()
    was = gc.isenabled()
    try:
        gc.enable()
        nkisim.profile(add_kernel)(a, b)
        assert seen == [False] and gc.isenabled()
        gc.disable()
        nkisim.profile(add_kernel)(a, b)
        assert seen == [False, False] and not gc.isenabled()
        gc.enable()

        def failing(*a, **k):
            raise RuntimeError("estimate failed")
        monkeypatch.setattr(fake_schedule, "estimate", failing)
        with pytest.raises(RuntimeError, match="estimate failed"):
            nkisim.profile(add_kernel)(a, b)
        assert gc.isenabled()
    finally:
        (gc.enable if was else gc.disable)()
