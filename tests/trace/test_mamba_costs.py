"""The fused-Mamba tutorial's three kernel structures (nki/guides/tutorials/fused_mamba.rst), written
here from the tutorial's description (not its code), estimated on trn1 with the documented cost
rules: what each structure's instructions cost, which step the rules make faster, and the one
step they cannot (the exact contradiction with the tutorial's published figures).

The structures, per channel tile of 128 partitions and per state (a "pair"):
  exp(delta * A) on ScalarE (activation with a scale), delta * u, (delta * u) * B broadcast over
  the partitions, the scan (tensor_tensor_scan), scan * C broadcast, accumulate into the sum.
- ``reload`` (v1): delta and u loaded again for every state;
- ``hoisted`` (v2): delta and u loaded once per channel tile, reused across the states;
- ``seq_tiled`` (v3): v2 with the sequence cut into 512-element tiles, the scan carried across
  tiles through a one-column ``initial``.
Every number below is worked out by hand from the doc pages, not read off the code under test.
"""
import numpy as np
import pytest

import nkisim
import nkisim.nki.isa as nisa
import nkisim.nki.language as nl
import nkisim.trace as trace
from nkisim import arch
from nkisim.trace.cost import cost

F32 = np.float32
P = 128
SEQ_TILE = 512


def _load(src, shape):
    t = nl.ndarray(shape, F32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=src)
    return t


def _pair(acc, d, uu, a_col, b_row, c_row, init=0.0):
    """One (channel tile, state) of the selective scan on tiles of n = d.shape[1] elements."""
    n = d.shape[1]
    decay = nl.ndarray((P, n), F32, buffer=nl.sbuf)
    nisa.activation(dst=decay, op=nl.exp, data=d, scale=a_col)                  # ScalarE
    du = nl.ndarray((P, n), F32, buffer=nl.sbuf)
    nisa.tensor_tensor(dst=du, data1=d, data2=uu, op=nl.multiply)               # 2N (SBUF, SBUF)
    dbu = nl.ndarray((P, n), F32, buffer=nl.sbuf)
    nisa.tensor_tensor(dst=dbu, data1=du, data2=nl.broadcast_to(b_row, (P, n)), op=nl.multiply)
    h = nl.ndarray((P, n), F32, buffer=nl.sbuf)
    nisa.tensor_tensor_scan(dst=h, data0=decay, data1=dbu, initial=init, op0=nl.multiply, op1=nl.add)
    y = nl.ndarray((P, n), F32, buffer=nl.sbuf)
    nisa.tensor_tensor(dst=y, data1=h, data2=nl.broadcast_to(c_row, (P, n)), op=nl.multiply)
    nisa.tensor_tensor(dst=acc, data1=acc, data2=y, op=nl.add)                  # 2N (SBUF, SBUF)
    return h


def ssm_reload(delta, u, A, B, C):
    ch, seq = delta.shape
    out = nl.ndarray((ch, seq), F32, buffer=nl.shared_hbm)
    for t in nl.affine_range(ch // P):
        rows = slice(t * P, (t + 1) * P)
        acc = nl.zeros((P, seq), F32)
        for s in nl.affine_range(A.shape[1]):
            d, uu = _load(delta[rows, 0:seq], (P, seq)), _load(u[rows, 0:seq], (P, seq))
            _pair(acc, d, uu, _load(A[rows, s:s + 1], (P, 1)), _load(B[s:s + 1, 0:seq], (1, seq)),
                  _load(C[s:s + 1, 0:seq], (1, seq)))
        nisa.dma_copy(dst=out[rows, 0:seq], src=acc)
    return out


def ssm_hoisted(delta, u, A, B, C):
    ch, seq = delta.shape
    out = nl.ndarray((ch, seq), F32, buffer=nl.shared_hbm)
    for t in nl.affine_range(ch // P):
        rows = slice(t * P, (t + 1) * P)
        acc = nl.zeros((P, seq), F32)
        d, uu = _load(delta[rows, 0:seq], (P, seq)), _load(u[rows, 0:seq], (P, seq))
        for s in nl.affine_range(A.shape[1]):
            _pair(acc, d, uu, _load(A[rows, s:s + 1], (P, 1)), _load(B[s:s + 1, 0:seq], (1, seq)),
                  _load(C[s:s + 1, 0:seq], (1, seq)))
        nisa.dma_copy(dst=out[rows, 0:seq], src=acc)
    return out


def ssm_seq_tiled(delta, u, A, B, C):
    ch, seq = delta.shape
    out = nl.ndarray((ch, seq), F32, buffer=nl.shared_hbm)
    for t in nl.affine_range(ch // P):
        rows = slice(t * P, (t + 1) * P)
        acc = nl.zeros((P, seq), F32)
        d, uu = _load(delta[rows, 0:seq], (P, seq)), _load(u[rows, 0:seq], (P, seq))
        for s in nl.affine_range(A.shape[1]):
            a_col = _load(A[rows, s:s + 1], (P, 1))
            carry = nl.zeros((P, 1), F32)
            for j in nl.sequential_range(seq // SEQ_TILE):
                cols = slice(j * SEQ_TILE, (j + 1) * SEQ_TILE)
                h = _pair(acc[0:P, cols], d[0:P, cols], uu[0:P, cols], a_col,
                          _load(B[s:s + 1, cols], (1, SEQ_TILE)), _load(C[s:s + 1, cols], (1, SEQ_TILE)),
                          init=carry)
                nisa.tensor_copy(dst=carry, src=h[0:P, SEQ_TILE - 1:SEQ_TILE])
        nisa.dma_copy(dst=out[rows, 0:seq], src=acc)
    return out


def inputs(channels, seq, states, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.random((channels, seq), dtype=F32), rng.random((channels, seq), dtype=F32),
            -rng.random((channels, states), dtype=F32), rng.random((states, seq), dtype=F32),
            rng.random((states, seq), dtype=F32))


def reference(delta, u, A, B, C):
    """NumPy: h_t = exp(delta_t A) h_(t-1) + delta_t u_t B_t; y_t = sum over states of C_t h_t."""
    d64, u64, A64, B64, C64 = (x.astype(np.float64) for x in (delta, u, A, B, C))
    y = np.zeros_like(d64)
    for s in range(A.shape[1]):
        decay = np.exp(d64 * A64[:, s:s + 1])
        drive = d64 * u64 * B64[s]
        h = np.zeros(d64.shape[0])
        for t in range(d64.shape[1]):
            h = decay[:, t] * h + drive[:, t]
            y[:, t] += C64[s, t] * h
    return y


def profiled(kernel, args, compute=False):
    """(Profile on trn1, the launch's instruction events)."""
    with trace.record(timing_only=not compute) as events:
        prof = nkisim.profile(kernel, target="trn1", compute=compute)(*args)
    return prof, list(events)


def cycles(events, engine):
    """Documented cycles (each instruction's own cost rule, before the schedule's waits and
    overheads) of the events that run on ``engine`` (trn1)."""
    return sum(c.cycles for c in (cost(e, arch.TRN1) for e in events) if c.kind == engine)


@pytest.mark.parametrize("kernel", [ssm_reload, ssm_hoisted, ssm_seq_tiled])
def test_each_structure_computes_the_selective_scan(kernel):
    args = inputs(256, 1024, 2, seed=1)
    got = profiled(kernel, args, compute=True)[0].outputs
    np.testing.assert_allclose(np.asarray(got, np.float64), reference(*args), rtol=2e-5, atol=1e-5)


def test_reload_and_hoisted_do_the_same_documented_vector_work():
    """Per pair at seq_len N = 512, both structures issue the same VectorE instructions; their
    documented costs (nki.isa cost notes at aws-neuron-sdk v2.26.0; trainium_inferentia2_arch.rst
    VectorE cost model):
      delta * u            tensor_tensor, both inputs in SBUF          2N = 1024 cycles
      (delta u) * B_bcast  tensor_tensor, "one input tile is in PSUM and the other is in SBUF":
                           N = 512 (the broadcast is TensorE's matmul into PSUM, arch guide
                           "Alternative Use Case")
      scan                 tensor_tensor_scan "max(MIN_II, 2N)"         1024
      scan * C_bcast       tensor_tensor, one input in PSUM             512
      acc + y              tensor_tensor, both in SBUF                  1024
    = 8N = 4096 cycles per pair, plus one memset of the (128, N) sum per channel tile: max(MIN_II,
    N) = 512. 2 channel tiles x 4 states: 8 x 4096 + 2 x 512 = 33792 cycles for either.

    The exact contradiction with the tutorial (fused_mamba.rst), at its shape [1, 512, 4096, 16]
    (512 pairs): these rules give v1 and v2 the same VectorE time, 512 x 4096 cycles / 1.12 GHz
    = 1872 us (2075 us once the 100-cycle static overhead of each dependent instruction is added),
    and v1's reloads (2 x 256 KiB per pair at 16 DMA engines x 17 B/ns x 2048/2304 = 242 B/ns:
    2.2 us per pair, nki-dma-bandwidth-guide.rst) hide behind the pair's 3.7-4.0 us of VectorE
    work, so the documented rules give v1 = v2. The tutorial publishes v1 2.34 ms with "VectorE
    active duration ... 92.16%" (2.157 ms of VectorE activity) and v2 1.61 ms at "99.63%" (1.604
    ms): the hardware ran 0.553 ms (1210 VectorE cycles per pair, about one more 2N instruction)
    more VectorE activity in v1 than in v2 for the same instructions; no documented rule makes an
    instruction's cost depend on the loop order or on DMA traffic beside it. The rules do see the
    mechanism the tutorial names (v1 moves 16 x more delta/u bytes); the tutorial's own idle time
    (7.84 % of 2.34 ms = 0.18 ms) is the most waiting on those loads could account for.

    Decision: the estimate follows the documented rules, so v1 and v2 estimate alike and the
    tutorial's v1 -> v2 gain is not reproduced. The one reading that fits both published figures
    (the compiler issuing v2's state-invariant delta*u once per channel tile) is undocumented, and
    nkisim models the instructions a kernel issues, not a compiler's rewrite of them.
    """
    args = inputs(256, 512, 4)
    (reload, ev_reload), (hoisted, ev_hoisted) = profiled(ssm_reload, args), profiled(ssm_hoisted, args)
    assert cycles(ev_reload, "vector") == 8 * 4096 + 2 * 512
    assert cycles(ev_hoisted, "vector") == 8 * 4096 + 2 * 512
    hbm = {name: sum(r.hbm_bytes for r in p.records if r.engine == "dma")
           for name, p in (("reload", reload), ("hoisted", hoisted))}
    pair_bytes = 2 * P * 512 * 4                      # delta and u, one channel tile
    assert hbm["reload"] - hbm["hoisted"] == 2 * (4 - 1) * pair_bytes
    # both VectorE-bound (the rest is the first loads and the last store): the estimates agree to
    # 1 % (the tutorial measured v2 31 % faster than v1)
    assert reload.total_us == pytest.approx(hoisted.total_us, rel=0.01)
    assert reload.engine_busy["core0.vector"] > 0.85 and hoisted.engine_busy["core0.vector"] > 0.85


def test_partition_broadcasts_run_on_tensor_engine():
    """Each pair's two broadcasts are TensorE matmuls (ones[1, 128] stationary, the [1, 512] row
    moving): max(min(64, 128), 512) x 4 (fp32) = 2048 cycles at 2.8 GHz = 0.731 us each
    (trainium_inferentia2_arch.rst, TensorE cost model)."""
    _, events = profiled(ssm_hoisted, inputs(128, 512, 2))
    tensor = [e for e in events if e.engine == "tensor"]
    assert len(tensor) == 2 * 2 and all(e.api == "nl.broadcast_to" for e in tensor)
    assert all(cost(e, arch.TRN1).duration_ns == pytest.approx(2048 / 2.8) for e in tensor)


def test_sequence_tiles_beat_whole_rows_at_long_sequences():
    """At seq_len 2048 a whole-row broadcast is 8 KiB per partition, more than one PSUM bank (2 KiB,
    "512 FP32 elements per PSUM partition"), so it is one DMA into SBUF and its tensor_tensor
    costs 2N; the 512-element tiles' broadcasts fit a bank (TensorE, PSUM, N). Per pair of one
    state: hoisted 5 x 2 x 2048 = 20480 VectorE cycles; seq_tiled 4 tiles x 4096 + 4 MIN_II
    tensor_copy of the carry + 1 MIN_II memset of it = 16704. With the sums' memsets (2048 each)
    for one channel tile and 2 states: 43008 vs 35456 cycles.
    Decision noted: the tutorial attributes v3's gain at long seq_len to the compiler's spills,
    which are not modelled; here it comes from the PSUM broadcasts only the shorter tiles get."""
    args = inputs(128, 2048, 2)
    (whole, ev_whole), (tiled, ev_tiled) = profiled(ssm_hoisted, args), profiled(ssm_seq_tiled, args)
    assert cycles(ev_whole, "vector") == 2 * 20480 + 2048
    assert cycles(ev_tiled, "vector") == 2 * 16704 + 2048
    assert tiled.total_us < whole.total_us * 0.99
