"""A Beta-1 kernel and its Beta-2 port give bit-identical outputs and the same instruction events
(every field but the kernel source line), and a Beta-2 kernel annotated through
``neuronxcc.nki.typing`` (as nki-library's kernels are) still runs."""
import dataclasses

import ml_dtypes
import numpy as np
import pytest

import neuronxcc.nki as nki1
import neuronxcc.nki.isa as nisa1
import neuronxcc.nki.language as nl1
import neuronxcc.nki.typing as nt1
import nkisim
import nkisim.nki as nki2
import nkisim.nki.isa as nisa2
import nkisim.nki.language as nl2

RNG = np.random.default_rng(3)


@nki1.jit(mode="simulation")
def beta1_kernel(a, b, g):
    out = nl1.ndarray((64, 96), dtype=nl1.float32, buffer=nl1.shared_hbm)
    at, bt, gt = nl1.load(a), nl1.load(b), nl1.load(g)
    r = nisa1.nc_matmul(at, bt)
    s = nisa1.tensor_scalar(r, np.multiply, 0.125, op1=np.add, operand1=1.0)
    e = nisa1.activation(np.tanh, s, bias=gt, scale=2.0)
    m = nisa1.tensor_reduce(np.max, e, axis=1, keepdims=True)
    d = nisa1.tensor_scalar(e, np.subtract, m)
    nl1.store(out, nl1.exp(d))
    return out


def beta2_port(a, b, g):
    out = nl2.ndarray((64, 96), dtype=nl2.float32, buffer=nl2.shared_hbm)
    at, bt, gt = nl2.load(a), nl2.load(b), nl2.load(g)
    r = nl2.ndarray((64, 96), dtype=nl2.float32, buffer=nl2.psum)
    nisa2.nc_matmul(r, at, bt)
    s = nl2.ndarray((64, 96), dtype=nl2.float32, buffer=nl2.sbuf)
    nisa2.tensor_scalar(s, r, nl2.multiply, 0.125, op1=nl2.add, operand1=1.0)
    e = nl2.ndarray((64, 96), dtype=nl2.float32, buffer=nl2.sbuf)
    nisa2.activation(e, nl2.tanh, s, bias=gt, scale=2.0)
    m = nl2.ndarray((64, 1), dtype=nl2.float32, buffer=nl2.sbuf)
    nisa2.tensor_reduce(m, nl2.maximum, e, axis=1, keepdims=True)
    d = nl2.ndarray((64, 96), dtype=nl2.float32, buffer=nl2.sbuf)
    nisa2.tensor_scalar(d, e, nl2.subtract, m)
    nl2.store(out, nl2.exp(d))
    return out


def _events(run):
    with nkisim.trace.record() as events:
        result = run()
    return result, [dataclasses.replace(e, location="") for e in events]


def test_beta1_kernel_and_beta2_port_agree_bit_for_bit_and_event_for_event():
    a = RNG.standard_normal((32, 64)).astype(np.float32)
    b = RNG.standard_normal((32, 96)).astype(np.float32)
    g = RNG.standard_normal((64, 1)).astype(np.float32)
    got1, ev1 = _events(lambda: nki1.simulate_kernel(beta1_kernel, a, b, g))
    got2, ev2 = _events(lambda: nki2.simulate(beta2_port)(a, b, g))
    np.testing.assert_array_equal(got1, got2)
    assert [e.op for e in ev1] == ["dma_copy"] * 3 + ["nc_matmul", "tensor_scalar", "activation", "tensor_reduce",
                                                      "tensor_scalar", "activation", "dma_copy"]
    assert [e.engine for e in ev1] == [e.engine for e in ev2]
    assert ev1 == ev2
    want = np.tanh(((a.T @ b) * 0.125 + 1.0) * 2.0 + g)
    np.testing.assert_allclose(got1, np.exp(want - want.max(axis=1, keepdims=True)), rtol=1e-4, atol=1e-5)


def test_beta2_kernel_annotated_with_neuronxcc_typing_runs():
    def kernel(x: nt1.tensor[4, 8], out: nt1.mutable_tensor):
        nisa2.dma_copy(dst=out, src=x)
        return out

    x = RNG.standard_normal((4, 8)).astype(np.float32)
    np.testing.assert_array_equal(nki2.simulate(kernel)(x, np.zeros_like(x)), x)


# ---- ``t[key] = <Beta-1 call>`` writes t[key] itself, as its Beta-2 port's dst= does --------------
def _same(ev1, ev2):
    """Events equal in op, engine, operands (allocation, view, bytes) and options; ``api`` differs
    where the Beta-1 spelling is an ``nl`` function, and a Beta-1 masked instruction carries the
    ``mask`` option its port (a sliced view) does not."""
    def key(e):
        return dataclasses.replace(e, api="", options={k: v for k, v in e.options.items() if k != "mask"})
    assert len(ev1) == len(ev2), ([e.op for e in ev1], [e.op for e in ev2])
    for e1, e2 in zip(ev1, ev2):
        assert key(e1) == key(e2), (e1, e2)


@nki1.jit
def b1_add(a, b):
    out = nl1.ndarray((64, 96), dtype=nl1.float32, buffer=nl1.shared_hbm)
    at, bt = nl1.load(a), nl1.load(b)
    t = nl1.ndarray((64, 96), dtype=nl1.float32, buffer=nl1.sbuf)
    t[...] = nl1.add(at, bt)
    nl1.store(out, t)
    return out


def b2_add(a, b):
    out = nl2.ndarray((64, 96), dtype=nl2.float32, buffer=nl2.shared_hbm)
    at, bt = nl2.load(a), nl2.load(b)
    t = nl2.ndarray((64, 96), dtype=nl2.float32, buffer=nl2.sbuf)
    nisa2.tensor_tensor(t, at, bt, nl2.add)
    nl2.store(out, t)
    return out


@nki1.jit
def b1_matmul(a, b):
    out = nl1.ndarray((64, 96), dtype=nl1.float32, buffer=nl1.shared_hbm)
    at, bt = nl1.load(a), nl1.load(b)
    ps = nl1.ndarray((64, 96), dtype=nl1.float32, buffer=nl1.psum)
    ps[...] = nisa1.nc_matmul(at, bt)
    ps[...] = nisa1.nc_matmul(at, bt)            # overwrites (``+=`` would accumulate)
    q = nl1.ndarray((64, 96), dtype=nl1.float32, buffer=nl1.psum)
    q[...] = nl1.matmul(at, bt, transpose_x=True)
    qs = nl1.ndarray((64, 96), dtype=nl1.float32, buffer=nl1.sbuf)
    qs[...] = nisa1.tensor_copy(q)
    s = nl1.ndarray((64, 96), dtype=nl1.float32, buffer=nl1.sbuf)
    s[...] = nisa1.tensor_tensor(ps, qs, np.add)
    nl1.store(out, s)
    return out


def b2_matmul(a, b):
    out = nl2.ndarray((64, 96), dtype=nl2.float32, buffer=nl2.shared_hbm)
    at, bt = nl2.load(a), nl2.load(b)
    ps = nl2.ndarray((64, 96), dtype=nl2.float32, buffer=nl2.psum)
    nisa2.nc_matmul(ps, at, bt, accumulate=False)
    nisa2.nc_matmul(ps, at, bt, accumulate=False)
    q = nl2.ndarray((64, 96), dtype=nl2.float32, buffer=nl2.psum)
    nisa2.nc_matmul(q, at, bt, accumulate=False)
    qs = nl2.ndarray((64, 96), dtype=nl2.float32, buffer=nl2.sbuf)
    nisa2.tensor_copy(qs, q)
    s = nl2.ndarray((64, 96), dtype=nl2.float32, buffer=nl2.sbuf)
    nisa2.tensor_tensor(s, ps, qs, nl2.add)
    nl2.store(out, s)
    return out


@nki1.jit
def b1_activation(a, g):
    out = nl1.ndarray((64, 96), dtype=nl1.float32, buffer=nl1.shared_hbm)
    at, gt = nl1.load(a), nl1.load(g)
    t = nl1.ndarray((64, 96), dtype=nl1.float32, buffer=nl1.sbuf)
    t[...] = nisa1.memset((64, 96), 0.0, nl1.float32)
    t[:, nl1.ds(32, 48)] = nisa1.activation(np.tanh, at[:, 0:48], bias=gt, scale=2.0)
    nl1.store(out, t)
    return out


def b2_activation(a, g):
    out = nl2.ndarray((64, 96), dtype=nl2.float32, buffer=nl2.shared_hbm)
    at, gt = nl2.load(a), nl2.load(g)
    t = nl2.ndarray((64, 96), dtype=nl2.float32, buffer=nl2.sbuf)
    nisa2.memset(t, 0.0)
    nisa2.activation(t[:, 32:80], nl2.tanh, at[:, 0:48], bias=gt, scale=2.0)
    nl2.store(out, t)
    return out


@nki1.jit
def b1_reduce(a):
    out = nl1.ndarray((64, 1), dtype=nl1.float32, buffer=nl1.shared_hbm)
    at = nl1.load(a)
    m = nl1.ndarray((64, 1), dtype=nl1.float32, buffer=nl1.sbuf)
    m[...] = nisa1.tensor_reduce(np.max, at, axis=1, keepdims=True)
    nl1.store(out, m)
    return out


def b2_reduce(a):
    out = nl2.ndarray((64, 1), dtype=nl2.float32, buffer=nl2.shared_hbm)
    at = nl2.load(a)
    m = nl2.ndarray((64, 1), dtype=nl2.float32, buffer=nl2.sbuf)
    nisa2.tensor_reduce(m, nl2.maximum, at, axis=1, keepdims=True)
    nl2.store(out, m)
    return out


@nki1.jit
def b1_masked(a):
    out = nl1.ndarray((64, 96), dtype=nl1.float32, buffer=nl1.shared_hbm)
    at = nl1.load(a)
    i_p, i_f = nl1.arange(64)[:, None], nl1.arange(96)[None, :]
    t = nl1.ndarray((64, 96), dtype=nl1.float32, buffer=nl1.sbuf)
    t[...] = nisa1.memset((64, 96), 0.0, nl1.float32)
    t[i_p, i_f] = nl1.exp(at[i_p, i_f], mask=(i_p < 48))
    nl1.store(out, t)
    return out


def b2_masked(a):
    out = nl2.ndarray((64, 96), dtype=nl2.float32, buffer=nl2.shared_hbm)
    at = nl2.load(a)
    t = nl2.ndarray((64, 96), dtype=nl2.float32, buffer=nl2.sbuf)
    nisa2.memset(t, 0.0)
    nisa2.activation(t[0:48, :], nl2.exp, at[0:48, :])
    nl2.store(out, t)
    return out


@nki1.jit
def b1_load(a):
    out = nl1.ndarray((64, 96), dtype=nl1.float32, buffer=nl1.shared_hbm)
    t = nl1.ndarray((64, 96), dtype=nl1.float32, buffer=nl1.sbuf)
    t[:, 0:48] = nl1.load(a[:, 48:96])
    t[:, 48:96] = nl1.load(a[:, 0:48])
    nl1.store(out, t)
    return out


def b2_load(a):
    out = nl2.ndarray((64, 96), dtype=nl2.float32, buffer=nl2.shared_hbm)
    t = nl2.ndarray((64, 96), dtype=nl2.float32, buffer=nl2.sbuf)
    nisa2.dma_copy(dst=t[:, 0:48], src=a[:, 48:96])
    nisa2.dma_copy(dst=t[:, 48:96], src=a[:, 0:48])
    nl2.store(out, t)
    return out


def _tanh_ref(a, g):
    want = np.zeros((64, 96), np.float32)
    want[:, 32:80] = np.tanh(a[:, :48].astype(np.float32) * 2.0 + g)
    return want


def _masked_ref(a):
    want = np.zeros((64, 96), np.float32)
    want[:48] = np.exp(a[:48])
    return want


A = RNG.standard_normal((64, 96)).astype(np.float32)
B = RNG.standard_normal((64, 96)).astype(np.float32)
G = RNG.standard_normal((64, 1)).astype(np.float32)
K, N = RNG.standard_normal((32, 64)).astype(np.float32), RNG.standard_normal((32, 96)).astype(np.float32)
PAIRS = {
    "add": (b1_add, b2_add, (A, B), lambda a, b: a + b, 0.0),
    "matmul": (b1_matmul, b2_matmul, (K, N), lambda a, b: 2.0 * (a.T.astype(np.float64) @ b), 1e-4),
    "activation": (b1_activation, b2_activation, (A, G), _tanh_ref, 1e-5),
    "reduce": (b1_reduce, b2_reduce, (A,), lambda a: a.max(axis=1, keepdims=True), 0.0),
    "masked": (b1_masked, b2_masked, (A,), _masked_ref, 1e-5),
    "load": (b1_load, b2_load, (A,), lambda a: np.concatenate([a[:, 48:], a[:, :48]], 1), 0.0),
}


@pytest.mark.parametrize("name", list(PAIRS))
def test_assigning_a_beta1_result_writes_the_target_as_the_port_does(name):
    k1, k2, args, ref, rtol = PAIRS[name]
    got1, ev1 = _events(lambda: k1(*args))
    got2, ev2 = _events(lambda: nki2.simulate(k2)(*args))
    np.testing.assert_array_equal(got1, got2)
    _same(ev1, ev2)
    store = ev1[-1]
    assert store.api == "nl.store"
    # the last compute event wrote the allocation the store reads: no copy in between
    assert ev1[-2].writes[0].alloc == store.reads[0].alloc
    np.testing.assert_allclose(got1, ref(*args), rtol=rtol, atol=rtol)


def test_masked_beta1_instruction_keeps_its_mask_flag():
    _, ev1 = _events(lambda: b1_masked(A))
    assert [e.options.get("mask") for e in ev1 if e.op == "activation"] == [True]


@nki1.jit
def b1_other_dtype(a):
    out = nl1.ndarray((64, 96), dtype=nl1.float32, buffer=nl1.shared_hbm)
    at = nl1.load(a)
    t = nl1.ndarray((64, 96), dtype=nl1.float32, buffer=nl1.sbuf)
    t[...] = nisa1.activation(np.exp, at, dtype=nl1.bfloat16)     # a bf16 result, then assigned
    u = nl1.ndarray((64, 96), dtype=nl1.float32, buffer=nl1.sbuf)
    u[...] = nl1.exp(at)
    u[:, 0:48] = nl1.exp(u[:, 24:72])                             # reads part of its own target
    nl1.store(out, nl1.add(t, u))
    return out


def test_a_result_of_another_dtype_or_overlapping_its_target_is_still_assigned_by_value():
    got = b1_other_dtype(A)
    t = np.exp(A).astype(ml_dtypes.bfloat16).astype(np.float32)
    u = np.exp(A)
    u[:, 0:48] = np.exp(u[:, 24:72].copy())
    np.testing.assert_allclose(got, t + u, rtol=1e-5)
    with nkisim.trace.record() as events:
        b1_other_dtype(A)
    act = [e for e in events if e.op == "activation"]
    assert [e.writes[0].dtype for e in act] == ["bfloat16", "float32", "float32"]
    # the bf16 result and exp(u[:, 24:72]) each went to a new tile, not to their targets
    assert act[1].writes[0].alloc != act[0].writes[0].alloc
    assert act[2].writes[0].alloc != act[2].reads[0].alloc


@nki1.jit
def b1_in_place(a, b):
    out = nl1.ndarray((64, 96), dtype=nl1.float32, buffer=nl1.shared_hbm)
    acc = nl1.load(a)
    for _ in nl1.sequential_range(2):
        acc[...] = nl1.add(acc, nl1.load(b))
    acc[...] = nl1.exp(acc)
    nl1.store(out, acc)
    return out


def b2_in_place(a, b):
    out = nl2.ndarray((64, 96), dtype=nl2.float32, buffer=nl2.shared_hbm)
    acc = nl2.load(a)
    for _ in nl2.sequential_range(2):
        bt = nl2.load(b)
        nisa2.tensor_tensor(acc, acc, bt, nl2.add)
    nisa2.activation(acc, nl2.exp, acc)
    nl2.store(out, acc)
    return out


def test_assigning_over_the_operand_itself_writes_in_place_as_the_port_does():
    got1, ev1 = _events(lambda: b1_in_place(A, B))
    got2, ev2 = _events(lambda: nki2.simulate(b2_in_place)(A, B))
    np.testing.assert_array_equal(got1, got2)
    _same(ev1, ev2)
    np.testing.assert_allclose(got1, np.exp(A + B + B), rtol=1e-5)
    assert {e.writes[0].alloc for e in ev1[1:-1] if e.op != "dma_copy"} == {ev1[0].writes[0].alloc}


# ---- ``psum += <Beta-1 matmul>`` is one accumulating matmul, as its port's accumulate=True ------
@nki1.jit
def b1_sum(a, b):
    out = nl1.ndarray((3, 64, 96), dtype=nl1.float32, buffer=nl1.shared_hbm)
    ps = nl1.zeros((64, 96), nl1.float32, buffer=nl1.psum)
    q = nl1.zeros((64, 96), nl1.float32, buffer=nl1.psum)
    r = nl1.zeros((64, 96), nl1.float32, buffer=nl1.psum)
    i = nl1.mgrid[0:32, 0:48]
    for k in nl1.affine_range(4):
        at, bt = nl1.load(a[k]), nl1.load(b[k])
        ps += nisa1.nc_matmul(at, bt)                           # a name target
        q[...] += nl1.matmul(at, bt, transpose_x=True)          # a subscript target, nl.matmul
        r[:, nl1.ds(32, 48)] += nisa1.nc_matmul(at, bt[i.p, i.x])   # part of the tile
    for j, t in enumerate((ps, q, r)):
        nl1.store(out[j], nl1.copy(t))
    return out


def b2_sum(a, b):
    out = nl2.ndarray((3, 64, 96), dtype=nl2.float32, buffer=nl2.shared_hbm)
    # ps, q: the zeros fold into their first matmul (an overwrite); r's partial sum keeps its memset
    ps = nl2.ndarray((64, 96), nl2.float32, buffer=nl2.psum)
    q = nl2.ndarray((64, 96), nl2.float32, buffer=nl2.psum)
    r = nl2.zeros((64, 96), nl2.float32, buffer=nl2.psum)
    for k in nl2.affine_range(4):
        at, bt = nl2.load(a[k]), nl2.load(b[k])
        nisa2.nc_matmul(ps, at, bt, accumulate=k != 0)
        nisa2.nc_matmul(q, at, bt, accumulate=k != 0)
        nisa2.nc_matmul(r[:, 32:80], at, bt[:, 0:48], accumulate=True)
    for j, t in enumerate((ps, q, r)):
        nl2.store(out[j], nl2.copy(t))
    return out


def _sum_ref(a, b):
    p = sum(a[k].T.astype(np.float64) @ b[k] for k in range(a.shape[0]))
    r = np.zeros_like(p)
    r[:, 32:80] = p[:, :48]
    return np.stack([p, p, r])


SA = RNG.standard_normal((4, 32, 64)).astype(np.float32)
SB = RNG.standard_normal((4, 32, 96)).astype(np.float32)


def test_accumulating_a_beta1_matmul_into_psum_is_one_matmul_as_the_port_does():
    got1, ev1 = _events(lambda: b1_sum(SA, SB))
    got2, ev2 = _events(lambda: nki2.simulate(b2_sum)(SA, SB))
    np.testing.assert_array_equal(got1, got2)
    _same(ev1, ev2)
    mm = [e for e in ev1 if e.op == "nc_matmul"]
    assert [e.options["accumulate"] for e in mm] == [False, False, True] + [True] * 9
    assert not any(e.op == "tensor_tensor" for e in ev1)        # no separate add on the Vector engine
    # each accumulates into its target: ps, q, r (q[...] and r[:, 32:80] are views of q and r);
    # only r (whose first += covers part of it) is zeroed by a memset
    zeros = [e.writes[0] for e in ev1 if e.op == "memset"]
    assert [z.alloc for z in zeros] == [mm[2].writes[0].alloc] != [mm[0].writes[0].alloc]
    np.testing.assert_allclose(got1, _sum_ref(SA, SB), rtol=1e-4, atol=1e-4)
    est1 = nkisim.profile(b1_sum, compute=False)(SA, SB).total_us
    est2 = nkisim.profile(nki2.jit(b2_sum), compute=False)(SA, SB).total_us
    assert est1 == est2 > 0


@nki1.jit
def b1_sum_fallbacks(a, b):
    out = nl1.ndarray((3, 64, 96), dtype=nl1.float32, buffer=nl1.shared_hbm)
    ps = nl1.ndarray((64, 96), nl1.float32, buffer=nl1.psum)       # never written: counts as zero
    h = nl1.zeros((64, 96), nl1.bfloat16, buffer=nl1.psum)          # another dtype: a new tile, then an add
    s = nl1.zeros((64, 96), nl1.float32, buffer=nl1.sbuf)           # SBUF: a new PSUM tile, then an add
    for k in nl1.sequential_range(2):
        at, bt = nl1.load(a[k]), nl1.load(b[k])
        ps += nisa1.nc_matmul(at, bt)
        h += nisa1.nc_matmul(at, bt)
        s += nl1.matmul(at, bt, transpose_x=True)
    for j, t in enumerate((ps, h, s)):
        nl1.store(out[j], nl1.copy(t, dtype=nl1.float32))
    return out


def test_an_accumulated_matmul_the_target_cannot_take_is_still_added_and_fresh_psum_counts_as_zero():
    a, b = SA[:2], SB[:2]
    got, ev = _events(lambda: b1_sum_fallbacks(a, b))
    p = a[0].T.astype(np.float64) @ b[0] + a[1].T.astype(np.float64) @ b[1]
    np.testing.assert_allclose(got[0], p, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got[1], p, rtol=2e-2, atol=5e-2)     # bf16 sums
    np.testing.assert_allclose(got[2], p, rtol=1e-5, atol=1e-5)
    mm = [e for e in ev if e.op == "nc_matmul"]
    assert [e.options["accumulate"] for e in mm] == [True, False, False] * 2
    assert sum(e.op == "tensor_tensor" for e in ev) == 4             # the bf16 and the SBUF sums, twice


# ---- the Beta-1 tutorials' ``t = nl.zeros(psum)`` then ``t += matmul``: no memset ---------------
@nki1.jit
def b1_tutorial(a, b):              # the v2.26.0 matmul tutorial's pattern (zeros in the tile loop)
    out = nl1.ndarray((2, 64, 96), dtype=nl1.float32, buffer=nl1.shared_hbm)
    for m in nl1.affine_range(2):
        res = nl1.zeros((64, 96), nl1.float32, buffer=nl1.psum)
        for k in nl1.affine_range(4):
            at, bt = nl1.load(a[k]), nl1.load(b[k])
            res[...] += nisa1.nc_matmul(at, bt)
        nl1.store(out[m], nl1.copy(res))
    return out


def b2_tutorial(a, b):              # its Beta-2 port (aws-neuron-sdk HEAD's tutorial form)
    out = nl2.ndarray((2, 64, 96), dtype=nl2.float32, buffer=nl2.shared_hbm)
    for m in nl2.affine_range(2):
        res = nl2.ndarray((64, 96), nl2.float32, buffer=nl2.psum)
        for k in nl2.affine_range(4):
            at, bt = nl2.load(a[k]), nl2.load(b[k])
            nisa2.nc_matmul(dst=res, stationary=at, moving=bt, accumulate=k > 0)
        nl2.store(out[m], nl2.copy(res))
    return out


def _products_sum(a, b):
    """NumPy's sum, in order, of the per-k fp32 products (the first taken as it is)."""
    acc = None
    for k in range(a.shape[0]):
        p = np.add.reduce(a[k][:, :, None] * b[k][:, None, :], axis=0, dtype=np.float32)
        acc = p if acc is None else acc + p
    return acc


def test_a_zeroed_psum_tile_folds_into_its_first_accumulating_matmul_as_the_port_overwrites():
    got1, ev1 = _events(lambda: b1_tutorial(SA, SB))
    got2, ev2 = _events(lambda: nki2.simulate(b2_tutorial)(SA, SB))
    np.testing.assert_array_equal(got1, got2)
    _same(ev1, ev2)
    assert not any(e.op == "memset" for e in ev1)
    assert [e.options["accumulate"] for e in ev1 if e.op == "nc_matmul"] == ([False] + [True] * 3) * 2
    np.testing.assert_allclose(got1, np.stack([_products_sum(SA, SB)] * 2), rtol=1e-5, atol=1e-5)
    est1 = nkisim.profile(b1_tutorial, target="trn1", compute=False)(SA, SB).total_us
    est2 = nkisim.profile(nki2.jit(b2_tutorial), target="trn1", compute=False)(SA, SB).total_us
    assert est1 == est2 > 0


def test_a_folded_zero_fill_gives_the_first_products_bits():
    a = np.full((2, 1, 64), -0.0, np.float32)             # every product is -0.0 * 1.0
    a[1] = 0.5
    b = np.ones((2, 1, 96), np.float32)
    b[0, 0, :48] = -1.0
    got = nki1.simulate_kernel(b1_sum_one, a, b)
    want = _products_sum(a, b)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(np.signbit(got), np.signbit(want))


@nki1.jit
def b1_sum_one(a, b):
    out = nl1.ndarray((64, 96), dtype=nl1.float32, buffer=nl1.shared_hbm)
    ps = nl1.zeros((64, 96), nl1.float32, buffer=nl1.psum)
    for k in nl1.affine_range(a.shape[0]):
        ps += nisa1.nc_matmul(nl1.load(a[k]), nl1.load(b[k]))
    nl1.store(out, nl1.copy(ps))
    return out


@nki1.jit
def b1_zeros_kept(a, b):
    """Each zeroed tile's next use is not ``t += <matmul>`` over all of it: its memset stays."""
    out = nl1.ndarray((5, 64, 96), dtype=nl1.float32, buffer=nl1.shared_hbm)
    r = nl1.zeros((64, 96), nl1.float32, buffer=nl1.psum)      # read first
    nl1.store(out[0], nl1.copy(r))
    w = nl1.zeros((64, 96), nl1.float32, buffer=nl1.psum)      # a non-matmul += first
    at, bt = nl1.load(a[0]), nl1.load(b[0])
    w += nl1.copy(r)
    p = nl1.zeros((64, 96), nl1.float32, buffer=nl1.psum)      # a partial-region matmul first
    p[:, 0:48] += nisa1.nc_matmul(at, bt[:, 0:48])
    h = nl1.zeros((64, 96), nl1.bfloat16, buffer=nl1.psum)     # another dtype
    h += nisa1.nc_matmul(at, bt)
    c = nl1.zeros((64, 96), nl1.float32, buffer=nl1.psum)      # a write (a copy) first
    c[...] = nl1.copy(w)
    c += nisa1.nc_matmul(at, bt)
    for j, t in enumerate((w, p, h, c)):
        nl1.store(out[j + 1], nl1.copy(t, dtype=nl1.float32))
    return out


def b2_zeros_kept(a, b):
    out = nl2.ndarray((5, 64, 96), dtype=nl2.float32, buffer=nl2.shared_hbm)
    r = nl2.zeros((64, 96), nl2.float32, buffer=nl2.psum)
    nl2.store(out[0], nl2.copy(r))
    w = nl2.zeros((64, 96), nl2.float32, buffer=nl2.psum)
    at, bt = nl2.load(a[0]), nl2.load(b[0])
    w += nl2.copy(r)
    p = nl2.zeros((64, 96), nl2.float32, buffer=nl2.psum)
    nisa2.nc_matmul(p[:, 0:48], at, bt[:, 0:48], accumulate=True)
    h = nl2.zeros((64, 96), nl2.bfloat16, buffer=nl2.psum)
    hm = nl2.ndarray((64, 96), nl2.float32, buffer=nl2.psum)
    nisa2.nc_matmul(hm, at, bt)
    h += hm
    c = nl2.zeros((64, 96), nl2.float32, buffer=nl2.psum)
    c[...] = nl2.copy(w)
    nisa2.nc_matmul(c, at, bt, accumulate=True)
    for j, t in enumerate((w, p, h, c)):
        nl2.store(out[j + 1], nl2.copy(t, dtype=nl2.float32))
    return out


def test_a_zeroed_psum_tile_first_used_otherwise_keeps_its_memset_where_it_was():
    got1, ev1 = _events(lambda: b1_zeros_kept(SA, SB))
    got2, ev2 = _events(lambda: nki2.simulate(b2_zeros_kept)(SA, SB))
    np.testing.assert_array_equal(got1, got2)
    _same(ev1, ev2)
    assert sum(e.op == "memset" for e in ev1) == 5
    p = SA[0].T.astype(np.float64) @ SB[0]
    half = np.zeros_like(p)
    half[:, :48] = p[:, :48]
    np.testing.assert_allclose(got1, np.stack([0 * p, 0 * p, half, p, p]), rtol=2e-2, atol=5e-2)


@nki1.jit
def b1_zeros_owed(a, eye):
    """``t += <a matmul t cannot take>`` (a transpose: a new tile, then the add): the memset is
    issued late, at the add; a ``+=`` never reached (a loop of no iterations): none, still zeros."""
    out = nl1.ndarray((2, 64, 32), dtype=nl1.float32, buffer=nl1.shared_hbm)
    t = nl1.zeros((64, 32), nl1.float32, buffer=nl1.psum)
    at = nl1.load(a)
    t += nisa1.nc_matmul(at, nl1.load(eye), is_transpose=True)
    u = nl1.zeros((64, 32), nl1.float32, buffer=nl1.psum)
    for k in nl1.affine_range(0):
        u += nisa1.nc_matmul(at, at)
    nl1.store(out[0], nl1.copy(t))
    nl1.store(out[1], nl1.copy(u))
    return out


def test_a_folded_zero_fill_the_matmul_does_not_take_is_issued_at_the_add():
    a = RNG.standard_normal((32, 64)).astype(np.float32)
    with nkisim.trace.record() as ev:
        got = b1_zeros_owed(a, np.eye(32, dtype=np.float32))
    assert [e.op for e in ev if e.op in ("memset", "nc_matmul", "tensor_tensor")] == [
        "nc_matmul", "memset", "tensor_tensor"]
    np.testing.assert_array_equal(got[0], a.T)
    np.testing.assert_array_equal(got[1], np.zeros((64, 32), np.float32))
