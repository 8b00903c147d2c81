"""tensor_tensor_scan against a step-by-step fp32 reference loop written from the doc pseudocode."""
import sys

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import nkisim.trace
import nkisim.nki.isa as nisa
import nkisim.nki.language as nl
from nkisim.errors import DtypeError, MemorySpaceError, NkiError, ShapeError
from conftest import simulate, tile_out
from _tiles import ps, sb

BF16 = ml_dtypes.bfloat16
LOC = r" \(test_scan\.py:\d+\)$"
F32 = np.float32

# Two-argument fp32 functions for the reference (bypass passes its lhs through).
FNS = {
    "add": lambda a, b: F32(a + b), "subtract": lambda a, b: F32(a - b),
    "multiply": lambda a, b: F32(a * b), "maximum": lambda a, b: np.maximum(a, b),
    "minimum": lambda a, b: np.minimum(a, b), "bypass": lambda a, b: a,
}


def reference(d0, d1, init, op0, op1, reverse0=False, reverse1=False):
    """The doc pseudocode, one fp32 scalar step at a time."""
    p, f = d0.shape
    out = np.empty((p, f), F32)
    f0, f1 = FNS[op0], FNS[op1]
    with np.errstate(all="ignore"):
        _loop(d0, d1, init, f0, f1, reverse0, reverse1, out)
    return out


def _loop(d0, d1, init, f0, f1, reverse0, reverse1, out):
    p, f = d0.shape
    for i in range(p):
        r = F32(init[i])
        for j in range(f):
            a = f0(r, d0[i, j]) if reverse0 else f0(d0[i, j], r)
            r = f1(d1[i, j], a) if reverse1 else f1(a, d1[i, j])
            out[i, j] = r


def scan(d0, d1, initial, op0, op1, dst_dtype=np.float32, dst_shape=None, **kw):
    args = (d0, d1) + ((initial,) if isinstance(initial, np.ndarray) else ())

    def kernel(d0, d1, *init):
        d = nl.ndarray(dst_shape or d0.shape, dtype=dst_dtype, buffer=nl.sbuf)
        nisa.tensor_tensor_scan(d, sb(d0), sb(d1), sb(init[0]) if init else initial, op0, op1, **kw)
        return tile_out(d)
    return simulate(kernel, *args, target="trn2")


PAIRS = [("multiply", "add"), ("add", "add"), ("bypass", "add"), ("subtract", "multiply"),
         ("maximum", "add"), ("add", "minimum"), ("multiply", "subtract")]


@settings(max_examples=60, deadline=None)
@given(pair=st.sampled_from(PAIRS), rev=st.tuples(st.booleans(), st.booleans()),
       p=st.integers(1, 16), f=st.integers(1, 24), scale=st.sampled_from([1e-3, 1.0, 1e4]),
       column=st.booleans(), seed=st.integers(0, 2**16))
def test_scan_matches_reference_bit_for_bit(pair, rev, p, f, scale, column, seed):
    rng = np.random.default_rng(seed)
    d0 = (rng.standard_normal((p, f)) * scale).astype(F32)
    d1 = (rng.standard_normal((p, f)) * rng.choice([1e-4, 1.0, 1e4], (p, f))).astype(F32)
    init = rng.standard_normal((p, 1)).astype(F32) if column else F32(0.75)
    got = scan(d0, d1, init, getattr(nl, pair[0]), getattr(nl, pair[1]), reverse0=rev[0], reverse1=rev[1])
    want = reference(d0, d1, np.broadcast_to(init, (p, 1))[:, 0], *pair, *rev)
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))


def test_scan_linear_recurrence_and_bf16_dst(rng):
    a = rng.uniform(0.5, 1.0, (4, 2, 8)).astype(BF16)
    b = rng.standard_normal((4, 16)).astype(np.float32)
    got = scan(a, b, 1.0, nl.multiply, nl.add, dst_dtype=BF16, dst_shape=(4, 16))
    want = reference(a.reshape(4, 16).astype(F32), b, np.ones(4, F32), "multiply", "add").astype(BF16)
    np.testing.assert_array_equal(got.view(np.uint16), want.view(np.uint16))


def test_scan_cumsum_via_bypass():
    d1 = np.array([[1, 2, 3, 4]], F32)
    got = scan(np.full((1, 4), 100, F32), d1, 10.0, nl.bypass, nl.add, reverse0=True)
    np.testing.assert_array_equal(got, [[11, 13, 16, 20]])
    got = scan(np.full((1, 4), 100, F32), d1, 10.0, nl.bypass, nl.add)    # no carry: data0 + data1
    np.testing.assert_array_equal(got, [[101, 102, 103, 104]])


def test_scan_one_input_in_psum(rng):
    d0, d1 = rng.standard_normal((2, 5)).astype(F32), rng.standard_normal((2, 5)).astype(F32)

    def kernel(d0, d1):
        d = nl.ndarray(d0.shape, dtype=nl.float32, buffer=nl.psum)
        nisa.tensor_tensor_scan(dst=d, data0=ps(d0), data1=sb(d1), initial=0.0, op0=nl.multiply, op1=nl.add)
        return tile_out(d)
    np.testing.assert_array_equal(simulate(kernel, d0, d1), reference(d0, d1, np.zeros(2, F32), "multiply", "add"))


def test_scan_inputs_not_both_psum():
    x = np.ones((2, 3), F32)

    def kernel(x):
        d = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_tensor_scan(d, ps(x), ps(x), 0.0, nl.multiply, nl.add)
    with pytest.raises(MemorySpaceError, match=r"^nisa\.tensor_tensor_scan: data0 and data1 are both in psum; "
                                               r"at most one may be" + LOC):
        simulate(kernel, x)


def test_scan_rejects_bitvec_and_unary_ops():
    x = np.ones((2, 3), F32)
    with pytest.raises(DtypeError, match=r"^nisa\.tensor_tensor_scan: op1 bitwise_or is a bitvec operator; only "
                                         r"arithmetic operators are supported" + LOC):
        scan(x, x, 0.0, nl.add, nl.bitwise_or)
    with pytest.raises(NkiError, match=r"^nisa\.tensor_tensor_scan: op0 abs is a unary operator; a binary "
                                       r"operator is required" + LOC):
        scan(x, x, 0.0, nl.abs, nl.add)


def test_scan_initial_tile_must_be_fp32(rng):
    """Decision: the docs name no dtype for an ``initial`` tile; fp32 like every per-partition operand."""
    d0, d1 = rng.standard_normal((2, 5)).astype(F32), rng.standard_normal((2, 5)).astype(F32)
    init = np.array([[0.5], [-2.0]], F32)
    got = scan(d0, d1, init, nl.multiply, nl.add)
    np.testing.assert_array_equal(got, reference(d0, d1, init[:, 0], "multiply", "add"))

    def kernel(d0, d1, init):
        d = nl.ndarray(d0.shape, dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_tensor_scan(d, sb(d0), sb(d1), sb(init, nl.bfloat16), nl.multiply, nl.add)
    with pytest.raises(DtypeError, match=r"^nisa\.tensor_tensor_scan: initial dtype bfloat16 must be "
                                         r"float32" + LOC):
        simulate(kernel, d0, d1, init)


def test_scan_unknown_op_names_the_parameter():
    x = np.ones((2, 3), F32)
    with pytest.raises(NkiError, match=r"^nisa\.tensor_tensor_scan: op1 frobnicate is not an ALU operator; "
                                       r"expected one of abs, .*, subtract" + LOC):
        scan(x, x, 0.0, nl.add, "frobnicate")


def test_scan_shape_rules():
    with pytest.raises(ShapeError, match=r"^nisa\.tensor_tensor_scan: data1 has 4 elements per partition, data0 "
                                         r"has 3 \(shapes \(2, 4\) vs \(2, 3\)\)" + LOC):
        scan(np.ones((2, 3), F32), np.ones((2, 4), F32), 0.0, nl.add, nl.add)
    with pytest.raises(ShapeError, match=r"^nisa\.tensor_tensor_scan: initial must be a scalar or a \(2, 1\) "
                                         r"tensor, got shape \(2, 3\)" + LOC):
        scan(np.ones((2, 3), F32), np.ones((2, 3), F32), np.ones((2, 3), F32), nl.add, nl.add)


# ---- the instruction events and the documented signature ----------------------------------------

def _next_line():
    """The line after the caller's: where the instruction under test is called."""
    return sys._getframe(1).f_lineno + 1


def _operands(ops):
    return [(o.role, o.buffer, o.shape, o.dtype, o.nbytes) for o in ops]


def _scan_kernel(lines):
    def kernel(x):
        t = sb(x)
        init = nl.ndarray((4, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.memset(dst=init, value=1.0)
        d = nl.ndarray((4, 8), dtype=nl.bfloat16, buffer=nl.sbuf)
        lines.append(_next_line())
        nisa.tensor_tensor_scan(dst=d, data0=t, data1=t, initial=init, op0=nl.add, op1=nl.add)
        return tile_out(d)
    return kernel


def test_scan_events_match_the_kernel_calls():
    lines = []
    with nkisim.trace.record() as events:
        simulate(_scan_kernel(lines), np.ones((4, 8), np.float32))
    (e,) = [e for e in events if e.op == "tensor_tensor_scan"]
    assert (e.api, e.engine, e.core, e.location) == ("nisa.tensor_tensor_scan", "vector", 0,
                                                     f"test_scan.py:{lines[0]}")
    assert _operands(e.reads) == [("data0", "sbuf", (4, 8), "float32", 128),
                                  ("data1", "sbuf", (4, 8), "float32", 128),
                                  ("initial", "sbuf", (4, 1), "float32", 16)]
    assert _operands(e.writes) == [("dst", "sbuf", (4, 8), "bfloat16", 64)]
    assert e.options == {"op0": "add", "op1": "add", "reverse0": False, "reverse1": False}


@pytest.mark.parametrize("fast", ["1", "0"])
def test_scan_add_add_fast_path_fires_only_with_fast_paths_on(monkeypatch, fast):
    monkeypatch.setenv("NKISIM_FAST_PATHS", fast)
    x = np.arange(32, dtype=np.float32).reshape(4, 8)
    with nkisim.trace.record() as events:
        got = simulate(_scan_kernel([]), x)
    assert events.fast_paths["scan_accumulate"] == (1 if fast == "1" else 0)
    want = (1 + np.cumsum(2 * x, axis=1)).astype(BF16)          # small integers: exact in fp32
    np.testing.assert_array_equal(got, want)


def test_scan_misspelt_keyword_is_a_type_error():
    lines = []

    def kernel(x):
        t = sb(x)
        d = nl.ndarray((4, 8), dtype=nl.float32, buffer=nl.sbuf)
        lines.append(_next_line())
        nisa.tensor_tensor_scan(d, t, t, 0.0, nl.multiply, nl.add, revers0=True)
    with pytest.raises(TypeError) as info:
        simulate(kernel, np.ones((4, 8), np.float32))
    assert str(info.value) == (f"nisa.tensor_tensor_scan() got an unexpected keyword argument 'revers0'; "
                               f"did you mean 'reverse0'? (test_scan.py:{lines[0]})")
