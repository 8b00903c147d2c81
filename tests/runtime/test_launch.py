"""Launch semantics: in-place writes, untouched inputs on failure, LNC2, settings at call time."""
import os
import subprocess
import sys
import time

import ml_dtypes
import numpy as np
import pytest

import nkisim.nki as nki
import nkisim.nki.isa as nisa
import nkisim.nki.language as nl
from nkisim.errors import DeadlockError, DtypeError, SimulatorOffError, UnsupportedError
from conftest import simulate


def scale_in_place(x):
    t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    nisa.tensor_scalar(dst=t, data=t, op0=nl.multiply, operand0=2.0)
    nisa.dma_copy(dst=x, src=t)


def test_input_written_by_kernel_is_updated_in_place():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    want = x * 2
    assert simulate(scale_in_place, x) is None
    np.testing.assert_array_equal(x, want)


def test_bf16_input_updated_in_place_bit_exact():
    x = (np.arange(12, dtype=np.float32).reshape(3, 4) / 7).astype(ml_dtypes.bfloat16)
    want = (x.astype(np.float32) * 2).astype(ml_dtypes.bfloat16)
    simulate(scale_in_place, x)
    assert x.view(np.uint16).tolist() == want.view(np.uint16).tolist()


def test_failing_kernel_leaves_caller_arrays_untouched():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    before = x.copy()

    def kernel(x):
        scale_in_place(x)
        nl.ndarray((129, 1), dtype=nl.float32, buffer=nl.sbuf)
    with pytest.raises(Exception, match="partition dim 129"):
        simulate(kernel, x)
    np.testing.assert_array_equal(x, before)


def test_float64_argument_is_rejected_with_hint():
    with pytest.raises(DtypeError, match=r"dtype float64 is not an NKI dtype.*astype\(np.float32\)"):
        simulate(scale_in_place, np.zeros((2, 2)))


def test_plain_call_needs_simulator(monkeypatch):
    k = nki.jit(scale_in_place)
    monkeypatch.delenv("NKI_SIMULATOR", raising=False)
    with pytest.raises(SimulatorOffError, match="NKI_SIMULATOR=1"):
        k(np.zeros((2, 2), np.float32))
    monkeypatch.setenv("NKI_SIMULATOR", "1")       # read at call time, after decoration
    x = np.ones((2, 2), np.float32)
    k(x)
    np.testing.assert_array_equal(x, 2 * np.ones((2, 2)))


def test_jit_forms_and_program_ids():
    seen = []

    @nki.jit(mode="auto", debug_kernel=True)
    def k(x):
        seen.append((nl.program_id(0), nl.num_programs(0), nl.program_ndim()))
        return x

    simulate(k, np.zeros((1, 1), np.float32))
    simulate(k, np.zeros((1, 1), np.float32), lnc=2)
    assert seen[0] == (0, 1, 0)
    assert sorted(seen[1:]) == [(0, 2, 1), (1, 2, 1)]


def lnc2_add(a, b):
    """Each core adds its half of the rows into a shared output."""
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    half = a.shape[0] // nl.num_programs(0)
    rows = nl.ds(nl.program_id(0) * half, half)
    ta = nl.ndarray((half, a.shape[1]), dtype=a.dtype, buffer=nl.sbuf)
    tb = nl.ndarray((half, a.shape[1]), dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=ta, src=a[rows, :])
    nisa.dma_copy(dst=tb, src=b[rows, :])
    nisa.tensor_tensor(dst=ta, data1=ta, data2=tb, op=nl.add)
    nisa.dma_copy(dst=out[rows, :], src=ta)
    nisa.core_barrier(out, (0, 1))
    return out


def test_lnc2_shared_output(rng):
    a = rng.standard_normal((256, 64), dtype=np.float32)
    b = rng.standard_normal((256, 64), dtype=np.float32)
    np.testing.assert_array_equal(simulate(nki.jit(lnc2_add)[2], a, b), a + b)
    np.testing.assert_array_equal(nki.simulate(nki.jit(lnc2_add))[2](a, b), a + b)


def test_lnc2_on_trn1_is_unsupported():
    with pytest.raises(UnsupportedError, match="LNC2 needs .* trn1 has 1"):
        simulate(lnc2_add, np.zeros((2, 2), np.float32), np.zeros((2, 2), np.float32), lnc=2,
                 target="trn1")


def test_barrier_reached_by_one_core_fails_fast():
    def kernel(x):
        if nl.program_id(0) == 0:
            nisa.core_barrier(x, (0, 1))
        return x
    t0 = time.monotonic()
    with pytest.raises(DeadlockError, match=r"nisa.core_barrier: core 0 waits at core_barrier but core 1 "
                                            r"finished the kernel without reaching it \(test_launch\.py:\d+\)"):
        simulate(kernel, np.zeros((2, 2), np.float32), lnc=2)
    assert time.monotonic() - t0 < 5


def test_sendrecv_swaps_tiles():
    def kernel(x):
        out = nl.ndarray((2, 4), dtype=x.dtype, buffer=nl.shared_hbm)
        me = nl.program_id(0)
        src = nl.ndarray((1, 4), dtype=x.dtype, buffer=nl.sbuf)
        dst = nl.ndarray((1, 4), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=src, src=x[me:me + 1, :])
        nisa.sendrecv(src=src, dst=dst, send_to_rank=1 - me, recv_from_rank=1 - me, pipe_id=0)
        nisa.dma_copy(dst=out[me:me + 1, :], src=dst)
        return out
    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    np.testing.assert_array_equal(simulate(kernel, x, lnc=2), x[::-1])


def test_import_nki_in_fresh_interpreter():
    code = ("import nki, nki.language as nl, nki.isa as nisa, nki.isa.constants, nki.typing, "
            "nki.compiler, nki.simulator; import nkisim.nki; "
            "print(nl.add is nkisim.nki.language.add, nisa.get_nc_version() >= 3)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd="/", env={**os.environ, "NEURON_PLATFORM_TARGET_OVERRIDE": "trn2"})
    assert out.stdout.split() == ["True", "True"], out.stderr


def test_real_nki_package_wins(tmp_path):
    (tmp_path / "nki").mkdir()
    (tmp_path / "nki" / "__init__.py").write_text("REAL = True\n")
    code = "import nki; print(getattr(nki, 'REAL', False))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd="/",
                         env={**os.environ, "PYTHONPATH": str(tmp_path)})
    assert out.stdout.strip() == "True", out.stderr


def test_sendrecv_shape_mismatch_between_cores_is_a_shape_error():
    def kernel(x):
        me = nl.program_id(0)
        n = 4 if me == 0 else 2
        src = nl.ndarray((1, n), dtype=x.dtype, buffer=nl.sbuf)
        dst = nl.ndarray((1, n), dtype=x.dtype, buffer=nl.sbuf)
        nisa.memset(dst=src, value=1.0)
        nisa.sendrecv(src=src, dst=dst, send_to_rank=1 - me, recv_from_rank=1 - me, pipe_id=0)
        return x
    from nkisim.errors import ShapeError
    with pytest.raises(ShapeError, match=r"^nisa\.sendrecv: core \d sent src \(1, \d\) float32 but dst on core "
                                         r"\d is \(1, \d\) float32; both cores must pass equal shapes "
                                         r"\(test_launch\.py:\d+\)"):
        simulate(kernel, np.zeros((1, 1), np.float32), lnc=2)


def test_core_barrier_needs_lnc2():
    def kernel(x):
        nisa.core_barrier(x, (0, 1))
        return x
    with pytest.raises(UnsupportedError, match=r"^nisa\.core_barrier: core_barrier needs an LNC2 launch"):
        simulate(kernel, np.zeros((1, 1), np.float32))


def test_read_only_input_written_by_kernel_is_a_clear_error():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    x.flags.writeable = False
    from nkisim.errors import MemorySpaceError
    with pytest.raises(MemorySpaceError, match=r"^nisa\.dma_copy: dst is argument 0, a read-only array of the "
                                               r"caller; the kernel cannot write it .*\(test_launch\.py:\d+\)$"):
        simulate(scale_in_place, x)
    np.testing.assert_array_equal(x, np.arange(12, dtype=np.float32).reshape(3, 4))


def test_read_only_input_that_is_only_read_works():
    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    x.flags.writeable = False

    def kernel(x):
        t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x)
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=t)
        return out
    np.testing.assert_array_equal(simulate(kernel, x), x)


@pytest.mark.parametrize("value", ["bogus", "2"])
def test_bad_flag_values_are_rejected(monkeypatch, value):
    monkeypatch.setenv("NKI_PRECISE_FP", value)
    with pytest.raises(ValueError, match=rf"NKI_PRECISE_FP: expected 1/0, true/false, yes/no or on/off \(any case\), got '{value}'"):
        simulate(scale_in_place, np.zeros((2, 2), np.float32))


def test_real_nki_package_without_a_submodule_is_not_mixed_with_ours(tmp_path):
    (tmp_path / "nki").mkdir()
    (tmp_path / "nki" / "__init__.py").write_text("REAL = True\n")
    code = ("import nki\ntry:\n    import nki.isa\n    print('mixed', nki.isa.__file__)\n"
            "except ImportError:\n    print('ImportError')\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd="/",
                         env={**os.environ, "PYTHONPATH": str(tmp_path)})
    assert out.stdout.strip() == "ImportError", out.stdout + out.stderr


def test_lnc2_failure_restores_arrays_both_cores_wrote():
    """Both cores write their half of a caller array used in place, then core 1 raises: the
    array must come back unchanged every time (found by review: the cores raced on the
    first-write snapshot and left it modified in about 1 run in 4)."""
    from nkisim.errors import ShapeError

    def kernel(x, y):
        r = nl.ds(nl.program_id(0) * 128, 128)
        t = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x[r, :])
        nisa.dma_copy(dst=y[r, :], src=t)
        if nl.program_id(0) == 1:
            bad = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_tensor(dst=bad, data1=t, data2=t[0:64], op=nl.add)
        return y
    x = np.random.default_rng(0).standard_normal((256, 512)).astype(np.float32)
    for _ in range(40):
        y = np.zeros_like(x)
        with pytest.raises(ShapeError):
            nki.simulate(kernel)[2](x, y)
        assert not y.any()


def _gc_probe(seen):
    import gc

    def kernel(x):
        seen.append(gc.isenabled())
        if x.shape[0] == 2:
            raise ValueError("boom")
        return x
    return kernel


def test_garbage_collector_paused_during_a_launch_and_restored_after():
    import gc
    seen = []
    kernel = _gc_probe(seen)
    fast = nki.simulate(kernel, fast_paths=True)     # the GC pause is a fast path: not under NKISIM_FAST_PATHS=0
    assert gc.isenabled()
    fast(np.zeros((1, 1), np.float32))
    assert seen == [False] and gc.isenabled()
    with pytest.raises(ValueError):
        fast(np.zeros((2, 1), np.float32))
    assert gc.isenabled()
    gc.disable()
    try:
        fast(np.zeros((1, 1), np.float32))
        assert not gc.isenabled()          # the caller's choice is kept
    finally:
        gc.enable()
    fast[2](np.zeros((1, 1), np.float32))
    assert seen[-2:] == [False, False] and gc.isenabled()


def test_garbage_collector_not_paused_with_fast_paths_off(monkeypatch):
    import gc
    seen = []
    kernel = _gc_probe(seen)
    nki.simulate(kernel, fast_paths=False)(np.zeros((1, 1), np.float32))
    nki.simulate(kernel, fast_paths=False)[2](np.zeros((1, 1), np.float32))
    monkeypatch.setenv("NKISIM_FAST_PATHS", "0")
    nki.simulate(kernel)(np.zeros((1, 1), np.float32))
    assert seen == [True, True, True, True] and gc.isenabled()
