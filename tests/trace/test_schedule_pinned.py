"""The schedule of real kernels' event streams, pinned: every span's track, start, end (exact float
bits), FLOPs, HBM bytes, binding dependency and rule text, the total and the peak rates, checked
two ways:

- against the plain reference scheduler of ``test_schedule_reference`` (written from the module
  docstring's rules; kernels with ``core_barrier`` but no ``sendrecv``, which it does not model);
- against a digest of that output recorded from the scheduler before its per-event work was
  restructured (branch tim13, commit c891c8c, with ``loop_replay=False``), so a speed change that
  moves one float bit anywhere fails here. A deliberate change of a cost rule or schedule rule
  changes the digests: recompute them with ``python tests/trace/test_schedule_pinned.py`` and say
  why in the commit.

Each kernel is profiled with loop replay on and off (timing only), and with compute; the schedule
must be the same in all three.
"""
import hashlib
import os
import sys

import ml_dtypes
import numpy as np
import pytest

import nkisim
import nkisim.nki.isa as nisa
import nkisim.nki.language as nl
from nkisim import arch, examples, trace
from nkisim.trace.schedule import estimate

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_schedule_reference import ref_estimate  # noqa: E402
from conftest import bench_module  # noqa: E402

BF16 = ml_dtypes.bfloat16


def dma_mix(x, y):
    """DMA-heavy: whole and partial-partition loads, short strided runs, HBM -> HBM copies, a DMA
    transpose, VectorE / ScalarE / GpSimdE work on SBUF and PSUM (shared ports, PSUM banks)."""
    out = nl.ndarray((256, 512), dtype=x.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out[128:256, :], src=y[0:128, :])
    for i in nl.affine_range(6):
        t = nl.ndarray((128, 512), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x[i * 128:(i + 1) * 128, :])
        half = nl.ndarray((64, 512), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=half, src=y[i * 64:(i + 1) * 64, :])
        cols = nl.ndarray((128, 16), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=cols, src=x[i * 128:(i + 1) * 128, 0:512:32])
        acc = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.psum)
        nisa.tensor_copy(dst=acc, src=t)
        s = nl.ndarray((128, 512), dtype=x.dtype, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=s, data1=acc, data2=t, op=nl.add)
        nisa.activation(dst=s[0:64, :], op=nl.exp, data=half)
        nisa.tensor_tensor(dst=t, data1=s, data2=t, op=nl.multiply, engine=nisa.engine.gpsimd)
        nisa.dma_copy(dst=out[0:128, :], src=t)
    tt = nl.ndarray((128, 128), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_transpose(dst=tt, src=x[0:128, 0:128])
    nisa.dma_copy(dst=out[0:128, 0:128], src=tt)
    return out


def barrier_lnc2(a, b):
    """LNC2: each core adds its share of the tiles, a barrier, then each copies the other's."""
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    back = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    me = nl.program_id(0)
    for i in nl.affine_range(3):
        rows = nl.ds((2 * i + me) * 128, 128)
        ta = nl.ndarray((128, a.shape[1]), dtype=a.dtype, buffer=nl.sbuf)
        tb = nl.ndarray((128, a.shape[1]), dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=ta, src=a[rows, :])
        nisa.dma_copy(dst=tb, src=b[rows, :])
        nisa.tensor_tensor(dst=ta, data1=ta, data2=tb, op=nl.add)
        nisa.dma_copy(dst=out[rows, :], src=ta)
    nisa.core_barrier(out, (0, 1))
    for i in nl.affine_range(3):
        rows = nl.ds((2 * i + 1 - me) * 128, 128)
        t = nl.ndarray((128, a.shape[1]), dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=out[rows, :])
        nisa.dma_copy(dst=back[rows, :], src=t)
    return back


def sendrecv_lnc2(x):
    """LNC2: the cores swap a tile through sendrecv, twice, between loads and stores."""
    me = nl.program_id(0)
    out = nl.ndarray((256, 512), dtype=x.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(2):
        mine = nl.ndarray((128, 512), dtype=x.dtype, buffer=nl.sbuf)
        theirs = nl.ndarray((128, 512), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=mine, src=x[nl.ds(me * 128, 128), :])
        nisa.sendrecv(src=mine, dst=theirs, send_to_rank=1 - me, recv_from_rank=1 - me, pipe_id=i)
        nisa.dma_copy(dst=out[nl.ds(me * 128, 128), :], src=theirs)
    nisa.core_barrier(out, (0, 1))
    return out


def _cases():
    rng = np.random.default_rng(5)

    def bf16(*shape):
        return rng.standard_normal(shape, dtype=np.float32).astype(BF16)

    def f32(*shape):
        return rng.standard_normal(shape, dtype=np.float32)

    kernels = bench_module("kernels")
    out = {}
    for target in ("trn1", "trn2", "trn3"):
        out[f"matmul_tiled-{target}"] = (kernels.matmul_tiled, (bf16(1024, 640), bf16(1024, 1024)), target, 1)
        out[f"dma_mix-{target}"] = (dma_mix, (bf16(768, 512), bf16(384, 512)), target, 1)
        if target != "trn1":             # LNC2 needs two physical cores per logical core
            out[f"barrier_lnc2-{target}"] = (barrier_lnc2, (f32(768, 256), f32(768, 256)), target, 2)
    out["add_lnc-trn2"] = (kernels.add_lnc, (f32(1024, 512), f32(1024, 512)), "trn2", 2)
    out["sendrecv_lnc2-trn2"] = (sendrecv_lnc2, (f32(256, 512),), "trn2", 2)
    for name in examples.NAMES:
        mod = examples.load(name)
        out[f"example-{name}-trn2"] = (mod.KERNEL, mod.make_inputs(np.random.default_rng(0), small=False),
                                       "trn2", 1)
    return out


CASES = _cases()

# sha256 of ``_schedule_text`` per case, from tim13 (c891c8c), loop_replay=False
PINNED = {
    'add_lnc-trn2': '8a1b1b3b931a0e5bc0f85ee9c81fc10418caa7df5cf9724751156d1d306c5fd7',
    'barrier_lnc2-trn2': '992d9d685f9bd94e94ab47ac05ad4df055757d0a1345ac46d120d8ce06dfd27c',
    'barrier_lnc2-trn3': '9880a2c6d558d1a2e341dcc9e82cfe3fe885354dc80a40765814be42fc440b6f',
    'dma_mix-trn1': '387ed994556499323a9d05857eb99dcc43797e471eabe22b4d2ca9f878c1bb88',
    'dma_mix-trn2': '91c6d4a4894db0d3fec0c3272bb8a38d581b58f229c49a5519c6b529bdf733cb',
    'dma_mix-trn3': 'b6df061aef9a11117d7e33020cac974e5a88c9d4cb40c0f134b23e4ffd6922a9',
    'example-attention-trn2': 'e6dc236eefc8f90b45a990b39a6c97af37138d2bad478a5fe61f6abff6098f41',
    'example-cumsum-trn2': 'e9fdeb56ec3b2df7b9ad9c1f97d99969ec54d2fcd3ab2e9537029ac54b4ce1d9',
    'example-layernorm-trn2': '4f4d4a286d984c74ff86de0f37d5b453d00e8c34d12fa9c25967d50d154181e7',
    'example-matmul-trn2': '7a0ad639f3c769caa6bc770ae0f09f1541d009b45da9134e1d77fc7cdf8ae2e1',
    'example-rmsnorm-trn2': 'f42b846ab898cf60ffe4f0d730dfff9503a33014df36c48943ba4e0c37869f69',
    'example-softmax-trn2': '98ea611707af785c8105227fc161f3e1219806741a86e6dbc84d6ffb2f77589d',
    'example-tensor_add-trn2': '93cb9e7161a661c6edc103cd8fb191c55ce3fee10796c4a3b9d0b1f3a1838ed6',
    'example-transpose-trn2': 'b922a0c6c1eb3082928e4734110a3a733749d40b775f49524e7c2d6506e0a670',
    'matmul_tiled-trn1': 'af006477bc088b9eedb230c47c7aee9b44e24ba65ebd25cf9e087ca2ccffbc71',
    'matmul_tiled-trn2': '55d7efa3b246c1acee9416a7ad87090b15dc1fadbcbbaea6864e64297598ccee',
    'matmul_tiled-trn3': '2146c458ba67cf5ab9aaadcae66ee7f72cbc4a112484ecc6a132616b5bdac520',
    'sendrecv_lnc2-trn2': 'b76271aa89ba613fb4611ca36e0dbbffa8327778b560bea438393ee794125232',
}


def _schedule_text(tl) -> str:
    rows = [f"{s.track}|{s.start_ns.hex()}|{s.end_ns.hex()}|{s.flops}|{s.hbm_bytes}|{s.waited_on}|{s.why}"
            for s in tl.spans]
    rows.append(f"{tl.total_ns.hex()}|{tl.peak_flops_per_ns.hex()}|{tl.hbm_bytes_per_ns.hex()}|{tl.lnc}")
    return "\n".join(rows)


def _profile(case, **opts):
    kernel, args, target, lnc = CASES[case]
    return nkisim.profile(kernel, target=target, lnc=lnc, **opts)(*args)


@pytest.mark.parametrize("case", sorted(CASES))
def test_schedule_matches_the_pinned_digest_with_and_without_replay(case):
    plain = _profile(case, compute=False, loop_replay=False)
    text = _schedule_text(plain.timeline)
    assert hashlib.sha256(text.encode()).hexdigest() == PINNED[case]
    replayed = _profile(case, compute=False, loop_replay=True, fast_paths=True)
    assert _schedule_text(replayed.timeline) == text
    assert [str(w) for w in replayed.warnings] == [str(w) for w in plain.warnings]
    assert _schedule_text(_profile(case, compute=True).timeline) == text


@pytest.mark.parametrize("case", sorted(c for c in CASES if not c.startswith("sendrecv")))
def test_schedule_of_a_kernel_equals_the_reference_scheduler(case):
    kernel, args, target, lnc = CASES[case]
    prof = _profile(case, compute=False, loop_replay=False)
    events, t = list(prof.events), arch.get(target)
    want, total, peak = ref_estimate(events, t, lnc, 2)
    got = [(s.track, s.start_ns, s.end_ns, s.flops, s.hbm_bytes, s.waited_on, s.why) for s in prof.timeline.spans]
    assert len(got) == len(want)
    for i, (g, w) in enumerate(zip(got, want)):
        assert g[:5] == w[:5] and g[6] == w[6], (i, events[i], g, w)
        assert (g[5] is None) == (w[5] is None), (i, g, w)
        if g[5] is not None:         # the binding dependency: the same span or one ending as late
            assert got[g[5]][2] == want[w[5]][2], (i, g, w)
    assert prof.timeline.total_ns == total and prof.timeline.peak_flops_per_ns == peak
    assert _schedule_text(estimate(events, t, lnc)) == _schedule_text(prof.timeline)


def test_the_pinned_kernels_exercise_the_rules():
    """The cases cover what the schedule's shortcuts touch (else the digests prove little)."""
    whys, ops = "", set()
    for case in CASES:
        prof = _profile(case, compute=False, loop_replay=False)
        whys += " ".join(s.why for s in prof.timeline.spans)
        ops |= {e.op for e in prof.events}
    for part in ("bandwidth shared", "waited on a dependency", "MM_INIT", "released", "shared port"):
        assert part in whys, part
    assert {"sendrecv", "core_barrier", "dma_transpose", "nc_matmul", "activation"} <= ops


if __name__ == "__main__":           # print the digests (to pin a deliberate rule change)
    for name in sorted(CASES):
        text = _schedule_text(_profile(name, compute=False, loop_replay=False).timeline)
        print(f"    {name!r}: {hashlib.sha256(text.encode()).hexdigest()!r},")
