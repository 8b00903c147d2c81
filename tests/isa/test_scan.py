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


# ---- tensor_scalar_cumulative -------------------------------------------------------------------

RCMD = nisa.reduce_cmd
IDENT = {"add": 0.0, "subtract": 0.0, "multiply": 1.0, "maximum": -np.inf, "minimum": np.inf}


def cumulative_ref(src, imm0, op0, op1, init):
    """The doc pseudocode, one fp32 scalar step at a time: reg = op1(op0(src[i], imm0), reg)."""
    p, f = src.shape
    out = np.empty((p, f), F32)
    imm0 = np.broadcast_to(np.asarray(imm0, F32).reshape(-1, 1), (p, 1))
    with np.errstate(all="ignore"):
        for i in range(p):
            r = F32(init[i])
            for j in range(f):
                r = FNS[op1](FNS[op0](F32(src[i, j]), imm0[i, 0]), r)
                out[i, j] = r
    return out


def cumulative(src, op0, op1, imm0, imm1=None, dst_dtype=np.float32, src_dtype=None, target="trn2", **kw):
    arrays = [v for v in (imm0, imm1) if isinstance(v, np.ndarray)]

    def kernel(src, *cols):
        it = iter(sb(c) for c in cols)
        i0 = next(it) if isinstance(imm0, np.ndarray) else imm0
        i1 = next(it) if isinstance(imm1, np.ndarray) else imm1
        d = nl.ndarray(src.shape, dtype=dst_dtype, buffer=nl.sbuf)
        nisa.tensor_scalar_cumulative(dst=d, src=sb(src, src_dtype), op0=op0, op1=op1, imm0=i0, imm1=i1, **kw)
        return tile_out(d)
    return simulate(kernel, src, *arrays, target=target)


def test_cumulative_doc_examples():
    """The docs' examples on a (128, 64) tile of ones, with their NumPy goldens."""
    src = np.ones((128, 64), F32)
    col = np.ones((128, 1), F32)
    zeros = np.zeros((128, 1), F32)
    np.testing.assert_array_equal(cumulative(src, nl.add, nl.add, F32(0)), np.add.accumulate(src, axis=-1))
    np.testing.assert_array_equal(cumulative(src, nl.add, nl.multiply, F32(0)), np.ones_like(src))
    np.testing.assert_array_equal(cumulative(src, nl.add, nl.add, col), np.add.accumulate(src + col, axis=-1))
    np.testing.assert_array_equal(cumulative(src, nl.add, nl.multiply, col), np.multiply.accumulate(src + col, axis=-1))
    np.testing.assert_array_equal(cumulative(src, nl.add, nl.max, col), np.full_like(src, 2))
    np.testing.assert_array_equal(cumulative(src, nl.add, nl.add, col, col, reduce_cmd=RCMD.load_reduce),
                                  np.add.accumulate(src + col, axis=-1) + col)
    np.testing.assert_array_equal(cumulative(src, nl.add, nl.multiply, col, zeros, reduce_cmd=RCMD.load_reduce),
                                  np.zeros_like(src))
    np.testing.assert_array_equal(cumulative(src, nl.add, nl.min, col, zeros, reduce_cmd=RCMD.load_reduce),
                                  np.zeros_like(src))
    np.testing.assert_array_equal(cumulative(src, nl.add, nl.add, F32(0), F32(2.0), reduce_cmd=RCMD.load_reduce),
                                  np.add.accumulate(src, axis=-1) + 2)


@pytest.mark.parametrize("imm1, cmd, offset", [(None, RCMD.reset_reduce, 64), (F32(1.0), RCMD.load_reduce, 65)])
def test_cumulative_chain_continues_the_accumulator(imm1, cmd, offset):
    """The docs' chain example: a second call with reduce_cmd=reduce starts where the first ended
    (imm1 passed again and ignored)."""
    src = np.ones((128, 64), F32)

    def kernel(src):
        s = sb(src)
        d = nl.ndarray(src.shape, dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar_cumulative(dst=d, src=s, op0=nl.add, op1=nl.add, imm0=F32(0), imm1=imm1, reduce_cmd=cmd)
        nisa.tensor_scalar_cumulative(dst=d, src=s, op0=nl.add, op1=nl.add, imm0=F32(0), imm1=imm1,
                                      reduce_cmd=RCMD.reduce)
        return tile_out(d)
    np.testing.assert_array_equal(simulate(kernel, src), np.add.accumulate(src, axis=-1) + offset)


@pytest.mark.parametrize("fast", ["1", "0"])
@pytest.mark.parametrize("op1", ["add", "subtract", "multiply", "maximum", "minimum"])
@pytest.mark.parametrize("op0", ["add", "multiply", "subtract", "maximum"])
def test_cumulative_matches_reference_bit_for_bit(monkeypatch, rng, op0, op1, fast):
    monkeypatch.setenv("NKISIM_FAST_PATHS", fast)
    src = (rng.standard_normal((5, 3, 7)) * rng.choice([1e-3, 1.0, 1e3], (5, 3, 7))).astype(F32)
    if op1 == "multiply":
        src = rng.uniform(0.5, 1.5, (5, 3, 7)).astype(F32)
    imm0 = rng.standard_normal((5, 1)).astype(F32)
    got = cumulative(src, getattr(nl, op0), getattr(nl, op1), imm0)
    want = cumulative_ref(src.reshape(5, 21), imm0, op0, op1, np.full(5, IDENT[op1], F32)).reshape(5, 3, 7)
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))


def test_cumulative_rounds_once_and_takes_small_ints(rng):
    src = rng.integers(-100, 100, (4, 32)).astype(np.int16)
    got = cumulative(src, nl.multiply, nl.add, F32(0.37), dst_dtype=BF16)
    want = cumulative_ref(src.astype(F32), F32(0.37), "multiply", "add", np.zeros(4, F32)).astype(BF16)
    np.testing.assert_array_equal(got.view(np.uint16), want.view(np.uint16))


def test_cumulative_shares_the_vector_accumulator():
    """reg ends in the VectorE accumulator, which tensor_scalar_reduce(reduce_cmd=reduce) continues."""
    src = np.ones((4, 6), F32)

    def kernel(src):
        s = sb(src)
        d = nl.ndarray(src.shape, dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar_cumulative(d, s, nl.multiply, nl.add, 2.0)        # reg = 12
        r = nl.ndarray((4, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar_reduce(dst=d, data=s, op0=nl.multiply, operand0=1.0, reduce_op=nl.add, reduce_res=r,
                                  reduce_cmd=RCMD.reduce)
        return tile_out(r)
    np.testing.assert_array_equal(simulate(kernel, src), np.full((4, 1), 18, F32))


def test_cumulative_rules():
    x = np.ones((2, 3), F32)
    tsc = r"^nisa\.tensor_scalar_cumulative: "
    with pytest.raises(DtypeError, match=tsc + r"src dtype int32 is not supported on trn2; expected one of bfloat16, "
                                           r"float16, float32, float8_e4m3, float8_e5m2, uint8, uint16, int8, "
                                           r"int16" + LOC):
        cumulative(x, nl.add, nl.add, 0.0, src_dtype=nl.int32)
    with pytest.raises(DtypeError, match=tsc + r"dst dtype uint32 is not supported on trn3; expected one of "
                                           r"bfloat16, float16, float32, float8_e4m3, float8_e4m3fn, float8_e5m2, "
                                           r"uint8, uint16, int8, int16" + LOC):
        cumulative(x, nl.add, nl.add, 0.0, dst_dtype=nl.uint32, target="trn3")
    with pytest.raises(NkiError, match=tsc + r"op1 divide is not a cumulative operator; expected one of add, "
                                         r"subtract, multiply, maximum, minimum" + LOC):
        cumulative(x, nl.add, nl.divide, 0.0)
    with pytest.raises(DtypeError, match=tsc + r"op0 bitwise_and is a bitvec operator; only arithmetic operators "
                                           r"are supported" + LOC):
        cumulative(x, nl.bitwise_and, nl.add, 0.0)
    with pytest.raises(NkiError, match=tsc + r"op0 abs is a unary operator; a binary operator is required" + LOC):
        cumulative(x, nl.abs, nl.add, 0.0)
    with pytest.raises(NkiError, match=tsc + r"reduce_cmd idle is not supported; expected one of reset_reduce, "
                                         r"reduce, load_reduce" + LOC):
        cumulative(x, nl.add, nl.add, 0.0, reduce_cmd=RCMD.idle)
    with pytest.raises(NkiError, match=tsc + r"imm1 is required when reduce_cmd is load_reduce" + LOC):
        cumulative(x, nl.add, nl.add, 0.0, reduce_cmd=RCMD.load_reduce)
    with pytest.raises(ShapeError, match=tsc + r"dst has 4 elements per partition, src has 3 \(shapes \(2, 4\) vs "
                                           r"\(2, 3\)\)" + LOC):
        def kernel(x):
            d = nl.ndarray((2, 4), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_scalar_cumulative(d, sb(x), nl.add, nl.add, 0.0)
        simulate(kernel, x)

    def kernel(x, c):
        d = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar_cumulative(d, sb(x), nl.add, nl.add, sb(c, nl.bfloat16))
    with pytest.raises(DtypeError, match=tsc + r"imm0 dtype bfloat16 must be float32" + LOC):
        simulate(kernel, x, np.ones((2, 1), F32))


@pytest.mark.parametrize("fast", ["1", "0"])
def test_cumulative_event_and_fast_path(monkeypatch, fast):
    monkeypatch.setenv("NKISIM_FAST_PATHS", fast)
    lines = []

    def kernel(x):
        t = sb(x)
        d = nl.ndarray((4, 8), dtype=nl.bfloat16, buffer=nl.sbuf)
        lines.append(_next_line())
        nisa.tensor_scalar_cumulative(dst=d, src=t, op0=nl.multiply, op1=nl.add, imm0=2.0)
        return tile_out(d)
    x = np.arange(32, dtype=F32).reshape(4, 8)
    with nkisim.trace.record() as events:
        got = simulate(kernel, x)
    np.testing.assert_array_equal(got, np.cumsum(2 * x, axis=1).astype(BF16))
    (e,) = [e for e in events if e.op == "tensor_scalar_cumulative"]
    assert (e.api, e.engine, e.location) == ("nisa.tensor_scalar_cumulative", "vector", f"test_scan.py:{lines[0]}")
    assert _operands(e.reads) == [("src", "sbuf", (4, 8), "float32", 128)]
    assert _operands(e.writes) == [("dst", "sbuf", (4, 8), "bfloat16", 64)]
    assert e.options == {"op0": "multiply", "op1": "add", "imm0": 2.0, "reduce_cmd": "reset_reduce"}
    assert events.fast_paths["cumulative_accumulate"] == (1 if fast == "1" else 0)
