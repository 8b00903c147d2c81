"""A Beta-1 kernel and its Beta-2 port give bit-identical outputs and the same instruction events
(every field but the kernel source line), and a Beta-2 kernel annotated through
``neuronxcc.nki.typing`` (as nki-library's kernels are) still runs."""
import dataclasses

import numpy as np

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
