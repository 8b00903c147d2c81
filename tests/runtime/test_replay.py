"""Loop-body replay in timing-only profiles (``runtime.replay``, setting ``loop_replay``): the
Profile with replay must equal the Profile of the plain run (every iteration simulated), the
reference here, field for field and event for event; loops that cannot be proven translation-
invariant must not be replayed, and give the same answer."""
import dataclasses
import importlib.util
import os

import ml_dtypes
import numpy as np
import pytest

import nkisim
import nkisim.nki.isa as nisa
import nkisim.nki.language as nl
from nkisim import examples
from nkisim.runtime import profiling, replay

from conftest import bench_module

BF16 = ml_dtypes.bfloat16


def fingerprint(p):
    return (p.total_us, p.engine_busy, [dataclasses.astuple(r) for r in p.records],
            [str(w) for w in p.warnings], p.hfu, p.mbu, p.events, p.summary())


@pytest.fixture
def counts(monkeypatch):
    """How many iterations replay synthesised, and how many launches ran (a rerun adds one)."""
    seen = {"synthesised": 0, "launches": 0}
    shifted, recorded = replay._shifted, profiling._recorded

    def counting_shifted(*a, **k):
        seen["synthesised"] += 1
        return shifted(*a, **k)

    def counting_recorded(*a, **k):
        seen["launches"] += 1
        return recorded(*a, **k)

    monkeypatch.setattr(replay, "_shifted", counting_shifted)
    monkeypatch.setattr(profiling, "_recorded", counting_recorded)
    return seen


def both(kernel, args, target="trn3", **opts):
    """(fingerprint with replay, fingerprint of the plain run). Replay is one of the fast paths
    (off under NKISIM_FAST_PATHS=0), so the replayed run turns them on; the plain run keeps the
    environment's setting (under NKISIM_FAST_PATHS=0 it is the slowest path of all)."""
    got = nkisim.profile(kernel, target=target, compute=False, loop_replay=True, fast_paths=True,
                         **opts)(*args)
    want = nkisim.profile(kernel, target=target, compute=False, loop_replay=False, **opts)(*args)
    return fingerprint(got), fingerprint(want)


def bf16(rng, *shape):
    return rng.standard_normal(shape, dtype=np.float32).astype(BF16)


# ---- the same Profile over the kernels the repository profiles --------------------------------------
@pytest.mark.parametrize("name", examples.NAMES)
def test_examples_profile_the_same(name):
    mod = examples.load(name)
    got, want = both(mod.KERNEL, mod.make_inputs(np.random.default_rng(0), small=False))
    assert got == want


@pytest.mark.parametrize("kind", ["matmul_tiled", "tiled", "hoist", "nl"])
@pytest.mark.parametrize("target", ["trn1", "trn3"])
def test_benchmark_matmuls_profile_the_same(kind, target, counts):
    kernels, tutorial_kernels = bench_module("kernels"), bench_module("tutorial_kernels")
    kernel = kernels.matmul_tiled if kind == "matmul_tiled" else tutorial_kernels.KERNELS[kind]
    rng = np.random.default_rng(1)
    got, want = both(kernel, (bf16(rng, 1024, 1024), bf16(rng, 1024, 1536)), target=target)
    assert got == want
    assert counts["launches"] == 2          # no rerun
    if kind in ("matmul_tiled", "tiled"):   # K/128 = 8 k-steps, M/128 = 8 rows: both loops replay
        assert counts["synthesised"] > 0


def test_the_2048_matmul_replays_and_matches(counts):
    kernels = bench_module("kernels")
    rng = np.random.default_rng(2)
    args = (bf16(rng, 2048, 2048), bf16(rng, 2048, 2048))
    got, want = both(kernels.matmul_tiled, args)
    assert got == want
    # 16 x 4 output tiles, each 16 k-steps of 2 loads + 1 matmul, then a copy and a store
    assert len(want[6]) == 16 * 4 * (16 * 3 + 2)
    assert counts["synthesised"] > 0 and counts["launches"] == 2


def _sdk(rel):
    path = os.path.join("/tmp/sdk", rel)
    if not os.path.exists(path):
        pytest.skip("no aws-neuron-sdk checkout at /tmp/sdk")
    spec = importlib.util.spec_from_file_location(os.path.splitext(os.path.basename(rel))[0], path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("name", ["nki_matmul_tiled_", "nki_matmul_hoist_load_",
                                  "nki_matmul_block_free_dimension_", "nki_matmul_fully_optimized_"])
def test_sdk_matmul_tutorial_profiles_the_same(name):
    mm = _sdk("nki/examples/matrix_multiplication/matrix_multiplication_nki_kernels.py")
    rng = np.random.default_rng(3)
    got, want = both(getattr(mm, name), (bf16(rng, 1024, 4096), bf16(rng, 1024, 2048)), target="trn1")
    assert got == want


@pytest.mark.parametrize("name", ["mamba_v1", "mamba_v2", "mamba_v3"])
def test_sdk_mamba_tutorial_profiles_the_same(name):
    mb = _sdk("nki/examples/fused_mamba/mamba_nki_kernels.py")
    rng = np.random.default_rng(4)
    f = np.float32
    b, s, c, n = 1, 512, 512, 16
    args = (rng.random((b, c, s), dtype=f), rng.random((b, c, s), dtype=f), -rng.random((c, n), dtype=f),
            rng.random((b, n, s), dtype=f), rng.random((b, n, s), dtype=f))
    got, want = both(getattr(mb, name), args, target="trn1")
    assert got == want


# ---- loops replay must not take, with the same answer -----------------------------------------------
T = 8          # trips of the loops below (replay needs at least 5)


def _rows(i):
    return i * 128


def _kernel(body):
    """A kernel running ``body(i, a, out, state)`` for i in range(T) over 128-row tiles."""
    def kernel(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        body(a, out)
        return out
    return kernel


def branching(a, out):
    for i in nl.affine_range(T):
        t = nl.ndarray((128, 64), dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a[i * 128:(i + 1) * 128, :])
        if i == 5:                                  # one iteration issues an extra instruction
            nisa.tensor_scalar(dst=t, data=t, op0=nl.multiply, operand0=2.0)
        nisa.dma_copy(dst=out[i * 128:(i + 1) * 128, :], src=t)


def python_state(a, out):
    tiles = []
    for i in nl.affine_range(T):
        t = nl.ndarray((128, 64), dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a[i * 128:(i + 1) * 128, :])
        tiles.append(t)                             # Python state filled per iteration
    for i in nl.affine_range(T):
        nisa.dma_copy(dst=out[i * 128:(i + 1) * 128, :], src=tiles[T - 1 - i])


def carried(a, out):
    row = 0
    for i in nl.affine_range(T):
        t = nl.ndarray((128, 64), dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a[row:row + 128, :])
        nisa.dma_copy(dst=out[row:row + 128, :], src=t)
        row = row + 128 if i < 5 else row           # a carried value that stops moving


def nonlinear(a, out):
    for i in nl.affine_range(T):
        t = nl.ndarray((128, 64), dtype=a.dtype, buffer=nl.sbuf)
        j = (i * 3) % T                             # offsets not affine in i
        nisa.dma_copy(dst=t, src=a[j * 128:(j + 1) * 128, :])
        nisa.dma_copy(dst=out[i * 128:(i + 1) * 128, :], src=t)


def helper_call(a, out):
    for i in nl.affine_range(T):
        t = nl.ndarray((128, 64), dtype=a.dtype, buffer=nl.sbuf)
        r = _rows(i)                                # a user function: could be anything
        nisa.dma_copy(dst=t, src=a[r:r + 128, :])
        nisa.dma_copy(dst=out[r:r + 128, :], src=t)


def dynamic(a, out):
    for i in nl.dynamic_range(T):
        t = nl.ndarray((128, 64), dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a[0:128, :])
        nisa.dma_copy(dst=out[0:128, :], src=t)


@pytest.mark.parametrize("body", [branching, python_state, carried, nonlinear, helper_call, dynamic],
                         ids=lambda f: f.__name__)
def test_loops_that_must_not_replay(body, counts):
    a = np.random.default_rng(5).random((T * 128, 64), dtype=np.float32)
    got, want = both(_kernel(body), (a,))
    assert got == want
    assert counts["synthesised"] == 0


def test_a_plain_loop_does_replay(counts):
    """The control for the cases above: the same loop without the defect replays, and matches."""
    def plain(a, out):
        for i in nl.affine_range(T):
            t = nl.ndarray((128, 64), dtype=a.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=t, src=a[i * 128:(i + 1) * 128, :])
            nisa.tensor_scalar(dst=t, data=t, op0=nl.multiply, operand0=2.0)
            nisa.dma_copy(dst=out[i * 128:(i + 1) * 128, :], src=t)
    a = np.random.default_rng(6).random((T * 128, 64), dtype=np.float32)
    got, want = both(_kernel(plain), (a,))
    assert got == want
    assert len(want[6]) == 3 * T
    assert counts["synthesised"] == T - 4 + 1     # iterations 3..T-2, then the last one's check
    assert counts["launches"] == 2


def test_a_value_read_after_a_replayed_loop_reruns_without_replay(counts):
    """A register loaded from a tile the loop wrote decides how many instructions follow: the
    replayed launch stops there and runs again without replay (same Profile)."""
    def kernel(a, n):
        out = nl.ndarray((T * 128, 64), dtype=a.dtype, buffer=nl.shared_hbm)
        cnt = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
        for i in nl.affine_range(T):
            t = nl.ndarray((128, 64), dtype=a.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=t, src=a[i * 128:(i + 1) * 128, :])
            nisa.dma_copy(dst=cnt, src=n[i:i + 1, :])
            nisa.dma_copy(dst=out[i * 128:(i + 1) * 128, :], src=t)
        r = nisa.register_alloc()
        nisa.register_load(r, cnt)
        for _ in nl.dynamic_range(r):
            nisa.dma_copy(dst=out[0:128, :], src=a[0:128, :])
        return out
    rng = np.random.default_rng(7)
    a = rng.random((T * 128, 64), dtype=np.float32)
    n = np.arange(1, T + 1, dtype=np.int32).reshape(T, 1)       # the last iteration loads T
    got, want = both(kernel, (a, n))
    assert got == want
    assert len(want[6]) == 3 * T + 1 + T    # the register load, then T loads: the last count loaded
    assert counts["launches"] == 3          # replayed, rerun, plain


def test_replay_is_off_with_compute_with_races_and_without_fast_paths(counts):
    a = np.random.default_rng(8).random((T * 128, 64), dtype=np.float32)

    def plain(a, out):
        for i in nl.affine_range(T):
            t = nl.ndarray((128, 64), dtype=a.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=t, src=a[i * 128:(i + 1) * 128, :])
            nisa.dma_copy(dst=out[i * 128:(i + 1) * 128, :], src=t)
    k = _kernel(plain)
    p = nkisim.profile(k, compute=True)(a)
    np.testing.assert_array_equal(p.outputs, a)
    nkisim.profile(k, compute=False, detect_races=True, fast_paths=True)(a)
    nkisim.profile(k, compute=False, fast_paths=False)(a)
    assert counts["synthesised"] == 0


def test_a_loop_that_prints_prints_every_iteration(counts, capsys):
    def printing(a, out):
        for i in nl.affine_range(T):
            t = nl.ndarray((128, 64), dtype=a.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=t, src=a[i * 128:(i + 1) * 128, :])
            print("tile", i)
            nisa.dma_copy(dst=out[i * 128:(i + 1) * 128, :], src=t)
    a = np.random.default_rng(9).random((T * 128, 64), dtype=np.float32)
    nkisim.profile(_kernel(printing), compute=False, fast_paths=True)(a)
    assert capsys.readouterr().out.splitlines() == [f"tile {i}" for i in range(T)]
    assert counts["synthesised"] == 0


# ---- synthesised events: every field set, their origin's cost -----------------------------------------
@pytest.mark.parametrize("target", ["trn1", "trn3"])
def test_synthesised_events_are_whole_and_cost_what_their_origin_costs(target):
    from nkisim import arch
    from nkisim.trace import cost, schedule
    from nkisim.trace.events import Instruction, Operand
    kernels = bench_module("kernels")
    rng = np.random.default_rng(5)
    p = nkisim.profile(kernels.matmul_tiled, target=target, compute=False, loop_replay=True,
                       fast_paths=True)(bf16(rng, 1024, 1024), bf16(rng, 1024, 1536))
    t = arch.get(target)
    synth = [ev for ev in p.events if ev.origin is not None]
    # 8 row blocks (m) x 3 column tiles (n, too few to replay) x 8 k-steps of 3 events, + 2 per
    # tile: m = 3 .. 6 synthesised whole (4 x 3 x 26 events); in the 4 real ones, k = 3 .. 6
    assert len(synth) == 4 * 3 * (8 * 3 + 2) + 4 * 3 * 4 * 3
    for ev in synth:
        # built by slot assignment: every field set (a field left unset raises here)
        assert Instruction(*[getattr(ev, f.name) for f in dataclasses.fields(Instruction)]) == ev
        for o in (*ev.reads, *ev.writes):
            assert Operand(*[getattr(o, f.name) for f in dataclasses.fields(Operand)]) == o
        assert ev.origin.origin is None and ev.origin in p.events
        # the cost model on the event itself (not memoised) gives what the origin costs
        assert cost.cost(ev, t) == cost.cost(ev.origin, t)
    # the schedule (which reuses the origin's cost) places them as it places the same events
    # without an origin (each cost computed from the event)
    plain = [dataclasses.replace(ev, origin=None) for ev in p.events]
    assert all(ev.origin is None for ev in plain)
    key = lambda s: (s.event, s.track, s.start_ns, s.end_ns, s.flops, s.hbm_bytes, s.waited_on, s.why)
    got = schedule.estimate(list(p.events), t, 1)
    want = schedule.estimate(plain, t, 1)
    assert [key(s) for s in got.spans] == [key(s) for s in want.spans]
    assert got.total_ns == want.total_ns == p.timeline.total_ns


def test_schedule_takes_the_cost_of_an_events_origin():
    """The contract the schedule relies on, shown by breaking it: an event whose ``origin`` is a
    different instruction is placed with the origin's cost (so synthesised events must be exact
    translations, which the test above checks)."""
    from nkisim import arch
    from nkisim.trace import schedule
    from nkisim.trace.events import Instruction, Operand
    t = arch.get("trn3")

    def copy(nbytes, origin=None):
        src = Operand("src", "hbm", (nbytes,), "uint8", nbytes, "arg:x", 1, nbytes, (0, (1,)), 0, 1, 0, nbytes)
        dst = Operand("dst", "sbuf", (1, nbytes), "uint8", nbytes, "c0.1", 1, nbytes, (0, (nbytes, 1)),
                      0, 1, 0, nbytes)
        return Instruction("dma_copy", "nisa.dma_copy", "dma", 0, 1, "k.py:1", (src,), (dst,), {},
                           origin)
    small, big = copy(64), copy(1 << 20)
    lied = copy(64, origin=big)
    assert schedule.estimate([lied], t, 1).total_ns == schedule.estimate([big], t, 1).total_ns \
        > schedule.estimate([small], t, 1).total_ns
