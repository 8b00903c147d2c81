"""Beta 1's ``psum += <matmul>`` onto a PSUM tile that other instructions wrote: the sum is
value + product (the documented tensor_tensor-equivalent: fp32 add, rounded once into the PSUM
dtype); only never-written elements count as zero (the accumulation group's start). Fast and
slow paths agree bit for bit, on every target. References are NumPy formulas: integer-valued
operands make every product exact in any summation order, so the one rounding is the add's."""
import contextlib
import os

import ml_dtypes
import numpy as np
import pytest

import neuronxcc.nki as nki1
import neuronxcc.nki.isa as nisa1
import neuronxcc.nki.language as nl1
import nkisim

RNG = np.random.default_rng(15)
A = RNG.integers(-4, 5, (32, 64)).astype(np.float32)            # stationary (K, M)
B = RNG.integers(-4, 5, (32, 96)).astype(np.float32)            # moving (K, N)
BIAS = (RNG.standard_normal((64, 96)) * 1000).astype(np.float32)  # bits that the add must round
P = (A.T.astype(np.float64) @ B).astype(np.float32)              # exact


@contextlib.contextmanager
def _fast_paths(on: bool):
    old = os.environ.get("NKISIM_FAST_PATHS")
    os.environ["NKISIM_FAST_PATHS"] = "1" if on else "0"
    try:
        yield
    finally:
        if old is None:
            del os.environ["NKISIM_FAST_PATHS"]
        else:
            os.environ["NKISIM_FAST_PATHS"] = old


def _run(kernel, *args, target="trn3", fast=True):
    """A Beta-1 launch of the plain function ``kernel`` (``nki.jit(platform_target=...)``)."""
    with _fast_paths(fast):
        return nki1.jit(kernel, mode="simulation", platform_target=target)(*args)


def _both(kernel, *args, target="trn3"):
    """The kernel's result with fast paths on and off (asserted bit-identical)."""
    fast = _run(kernel, *args, target=target, fast=True)
    slow = _run(kernel, *args, target=target, fast=False)
    np.testing.assert_array_equal(fast.view(np.uint32) if fast.dtype == np.float32 else fast,
                                  slow.view(np.uint32) if slow.dtype == np.float32 else slow)
    return fast


def _helper_mm(at, bt):
    return nisa1.nc_matmul(at, bt)      # (not the right-hand side of the ``+=``: a new tile, then an add)


def _writer(kind, ps, bias):
    """``ps`` (the whole PSUM tile) written by one non-matmul instruction; returns what it holds."""
    bt = nl1.load(bias)
    if kind == "load":
        ps[...] = nl1.load(bias)
    elif kind == "copy":
        ps[...] = nl1.copy(bt)
    elif kind == "tensor_tensor":
        ps[...] = nisa1.tensor_tensor(bt, bt, np.add)
    elif kind == "activation":
        ps[...] = nisa1.activation(nl1.copy, bt, scale=2.0)
    elif kind == "sbuf_add":                 # ``psum += <SBUF tile>``: a tensor_tensor into psum
        ps[...] = nl1.load(bias)
        ps += bt
    elif kind == "assign_copy":              # a plain assignment of an SBUF tile into psum
        ps[...] = bt


WRITERS = {"load": 1, "copy": 1, "tensor_tensor": 2, "activation": 2, "sbuf_add": 2, "assign_copy": 1}


def _bias_kernel(writer, mm):
    def kernel(a, b, bias):
        out = nl1.ndarray((64, 96), dtype=nl1.float32, buffer=nl1.shared_hbm)
        ps = nl1.ndarray((64, 96), nl1.float32, buffer=nl1.psum)
        _writer(writer, ps, bias)
        at, bt = nl1.load(a), nl1.load(b)
        if mm == "nc_matmul":               # the matmul accumulates into ps (one instruction)
            ps += nisa1.nc_matmul(at, bt)
        elif mm == "matmul":
            ps += nl1.matmul(at, bt, transpose_x=True)
        else:                               # a new PSUM tile, then the in-place add
            ps += _helper_mm(at, bt)
        nl1.store(out, nl1.copy(ps))
        return out
    return kernel


@pytest.mark.parametrize("mm", ["nc_matmul", "matmul", "helper"])
@pytest.mark.parametrize("writer", sorted(WRITERS))
def test_a_matmul_added_onto_values_another_instruction_wrote_keeps_them(writer, mm):
    got = _both(_bias_kernel(writer, mm), A, B, BIAS)
    held = BIAS * np.float32(WRITERS[writer])        # exact (a power of two)
    np.testing.assert_array_equal(got, held + P)     # fp32 add, rounded once


def test_a_memset_into_psum_then_a_matmul_sum_adds_to_the_fill_value():
    def kernel(a, b):
        out = nl1.ndarray((64, 96), dtype=nl1.float32, buffer=nl1.shared_hbm)
        ps = nl1.full((64, 96), 0.375, nl1.float32, buffer=nl1.psum)
        ps += nisa1.nc_matmul(nl1.load(a), nl1.load(b))
        nl1.store(out, nl1.copy(ps))
        return out
    np.testing.assert_array_equal(_both(kernel, A, B), P + np.float32(0.375))


@pytest.mark.parametrize("target", ["trn1", "trn2", "trn3"])
def test_the_beta1_sum_onto_a_bias_is_one_accumulating_matmul_on_every_target(target):
    """The Beta-1 compiler lowers ``+=``: no UnsupportedError on trn1/trn2 (where a Beta-2
    accumulate=True onto such values is one); the instruction is the accumulating matmul."""
    kernel = _bias_kernel("load", "nc_matmul")
    with nkisim.trace.record() as events:
        got = _run(kernel, A, B, BIAS, target=target)
    np.testing.assert_array_equal(got, BIAS + P)
    mm = [e for e in events if e.op == "nc_matmul"]
    assert [e.options["accumulate"] for e in mm] == [True]
    assert not any(e.op == "tensor_tensor" for e in events)


def b1_overlap(a, b, bias):
    """Columns 0:32 bias-written, 32:64 matmul-written, 64:96 never written; then ``+=`` over
    all of them, then ``+=`` over the slice 16:48."""
    out = nl1.ndarray((64, 96), dtype=nl1.float32, buffer=nl1.shared_hbm)
    ps = nl1.ndarray((64, 96), nl1.float32, buffer=nl1.psum)
    at, bt = nl1.load(a), nl1.load(b)
    ps[:, 0:32] = nl1.load(bias[:, 0:32])
    ps[:, 32:64] = nisa1.nc_matmul(at, bt[:, 0:32])
    ps += nisa1.nc_matmul(at, bt)
    ps[:, 16:48] += nl1.matmul(at, bt[:, 48:80], transpose_x=True)
    nl1.store(out, nl1.copy(ps))
    return out


def _overlap_ref():
    want = P.copy()
    want[:, 0:32] = BIAS[:, 0:32] + P[:, 0:32]
    want[:, 32:64] = P[:, 0:32] + P[:, 32:64]
    want[:, 16:48] = want[:, 16:48] + P[:, 48:80]
    return want


@pytest.mark.parametrize("target", ["trn1", "trn3"])
def test_bias_matmul_and_never_written_elements_of_one_tile_each_take_their_rule(target):
    np.testing.assert_array_equal(_both(b1_overlap, A, B, BIAS, target=target), _overlap_ref())


def b1_slice_sum(a, b, bias):
    out = nl1.ndarray((64, 96), dtype=nl1.float32, buffer=nl1.shared_hbm)
    ps = nl1.ndarray((64, 96), nl1.float32, buffer=nl1.psum)
    ps[...] = nl1.load(bias)
    at, bt = nl1.load(a), nl1.load(b)
    for j in nl1.affine_range(3):
        ps[:, nl1.ds(j * 32, 32)] += nisa1.nc_matmul(at, bt[:, nl1.ds(j * 32, 32)])
    ps[:, 0:32] += nisa1.nc_matmul(at, bt[:, 0:32])
    nl1.store(out, nl1.copy(ps))
    return out


def test_slice_targets_add_onto_the_bias_then_accumulate():
    want = BIAS + P
    want[:, 0:32] = want[:, 0:32] + P[:, 0:32]
    np.testing.assert_array_equal(_both(b1_slice_sum, A, B, BIAS), want)


def b1_bf16(a, b, bias):
    """A bf16 PSUM tile (the matmul cannot take it: a new fp32 tile, then the in-place add)."""
    out = nl1.ndarray((64, 96), dtype=nl1.bfloat16, buffer=nl1.shared_hbm)
    h = nl1.ndarray((64, 96), nl1.bfloat16, buffer=nl1.psum)
    h[:, 0:48] = nl1.load(bias[:, 0:48])          # columns 48:96 are never written
    h += nisa1.nc_matmul(nl1.load(a), nl1.load(b))
    nl1.store(out, nl1.copy(h))
    return out


def test_a_bf16_psum_sum_adds_onto_the_bias_in_fp32_and_rounds_once():
    bias = BIAS.astype(ml_dtypes.bfloat16)
    got = _both(b1_bf16, A, B, bias)
    want = P.copy()
    want[:, 0:48] = bias[:, 0:48].astype(np.float32) + P[:, 0:48]
    np.testing.assert_array_equal(got.view(np.uint16), want.astype(ml_dtypes.bfloat16).view(np.uint16))


def b1_nan_bias(a, b, bias):
    out = nl1.ndarray((64, 96), dtype=nl1.float32, buffer=nl1.shared_hbm)
    ps = nl1.ndarray((64, 96), nl1.float32, buffer=nl1.psum)
    ps[:, 0:48] = nl1.load(bias[:, 0:48])
    ps += nisa1.nc_matmul(nl1.load(a), nl1.load(b))
    nl1.store(out, nl1.copy(ps))
    return out


def test_a_written_nan_is_kept_and_a_never_written_element_is_not_taken_for_one():
    bias = BIAS.copy()
    bias[:, 0:48] = np.nan
    got = _both(b1_nan_bias, A, B, bias)
    assert np.isnan(got[:, 0:48]).all()
    np.testing.assert_array_equal(got[:, 48:], P[:, 48:])


def b1_loop_bias(a, b, bias):
    """The tiled form: a bias in PSUM, then a K loop of ``+=`` (later steps accumulate)."""
    out = nl1.ndarray((64, 96), dtype=nl1.float32, buffer=nl1.shared_hbm)
    ps = nl1.ndarray((64, 96), nl1.float32, buffer=nl1.psum)
    ps[...] = nl1.load(bias)
    for k in nl1.affine_range(2):
        ps += nisa1.nc_matmul(nl1.load(a[k]), nl1.load(b[k]))
    nl1.store(out, nl1.copy(ps))
    return out


def test_a_k_loop_of_sums_onto_a_bias_adds_every_product_in_order():
    a2, b2 = np.stack([A, A[::-1]]), np.stack([B, B[::-1]])
    p2 = (a2[1].T.astype(np.float64) @ b2[1]).astype(np.float32)
    with nkisim.trace.record() as events:
        got = _both(b1_loop_bias, a2, b2, BIAS)
    np.testing.assert_array_equal(got, (BIAS + P) + p2)
    assert [e.options["accumulate"] for e in events if e.op == "nc_matmul"] == [True, True] * 2


def b1_many_views(a, b, bias):
    """40 one-column writes (more views than the never-written marks keep as a list), then a
    matmul sum over the whole tile, then a column written again and summed again."""
    out = nl1.ndarray((64, 96), dtype=nl1.float32, buffer=nl1.shared_hbm)
    ps = nl1.ndarray((64, 96), nl1.float32, buffer=nl1.psum)
    for j in nl1.sequential_range(40):
        ps[:, nl1.ds(j * 2, 1)] = nl1.load(bias[:, nl1.ds(j * 2, 1)])      # even columns 0..78
    at, bt = nl1.load(a), nl1.load(b)
    ps += nisa1.nc_matmul(at, bt)
    ps[:, 95:96] = nl1.load(bias[:, 95:96])
    ps[:, 94:96] += nisa1.nc_matmul(at, bt[:, 0:2])
    nl1.store(out, nl1.copy(ps))
    return out


@pytest.mark.parametrize("target", ["trn1", "trn3"])
def test_many_partial_writes_keep_every_never_written_mark(target):
    want = P.copy()
    want[:, 0:80:2] = BIAS[:, 0:80:2] + P[:, 0:80:2]
    want[:, 94] = P[:, 94] + P[:, 0]
    want[:, 95] = BIAS[:, 95] + P[:, 1]
    np.testing.assert_array_equal(_both(b1_many_views, A, B, BIAS, target=target), want)
