"""nl functions in the instruction pipeline: their events (op, api, engine, operands), findings="all"
for the rules they check themselves, and unknown keywords."""
import inspect

import numpy as np
import pytest

import nkisim.nki as nki
import nkisim.nki.isa as nisa
import nkisim.nki.language as nl
import nkisim.trace as trace
from nkisim.errors import BoundsError, MemorySpaceError, ShapeError
from conftest import sbuf_copy, tile_out

F32 = np.float32
HERE = "test_nl_events.py"


def line_of(fn, text):
    """``test_nl_events.py:<line>`` of the first line of ``fn`` containing ``text``."""
    lines, start = inspect.getsourcelines(fn)
    return f"{HERE}:{start + next(i for i, s in enumerate(lines) if text in s)}"


def recorded(kernel, *arrays, **options):
    with trace.record() as events:
        out = nki.simulate(kernel, **options)(*arrays)
    return out, events


def operands(ops):
    return [(o.role, o.buffer, o.shape, o.dtype) for o in ops]


def summary(e):
    return (e.op, e.api, e.engine, operands(e.reads), operands(e.writes))


# ---- an nl-style kernel ---------------------------------------------------------------------------

def nl_kernel(x, y, w):
    a = nl.load(x)
    b = nl.load(y)
    s = nl.add(a, b)
    p = nl.multiply(s, b)
    m = nl.matmul(p, nl.load(w), transpose_x=True)
    out = nl.ndarray((8, 16), dtype=nl.float32, buffer=nl.shared_hbm)
    nl.store(out, sbuf_copy(m))                   # nl.store takes an SBUF value
    return out


def nl_inputs():
    rng = np.random.default_rng(0)
    return (rng.standard_normal((4, 8), F32), rng.standard_normal((4, 8), F32),
            rng.standard_normal((4, 16), F32))


def test_nl_kernel_result():
    x, y, w = nl_inputs()
    out, _ = recorded(nl_kernel, x, y, w)
    np.testing.assert_allclose(out, ((x + y) * y).T @ w, rtol=1e-5)


def test_nl_kernel_elementwise_events():
    """The events of the instructions converted in this branch (tensor_tensor): api names the nl
    function, engine is the concrete one, operands by role with buffer, shape, dtype, bytes."""
    _, events = recorded(nl_kernel, *nl_inputs())
    tt = [e for e in events if e.op == "tensor_tensor"]
    assert [summary(e) for e in tt] == [
        ("tensor_tensor", "nl.add", "vector",
         [("data1", "sbuf", (4, 8), "float32"), ("data2", "sbuf", (4, 8), "float32")],
         [("dst", "sbuf", (4, 8), "float32")]),
        ("tensor_tensor", "nl.multiply", "vector",
         [("data1", "sbuf", (4, 8), "float32"), ("data2", "sbuf", (4, 8), "float32")],
         [("dst", "sbuf", (4, 8), "float32")]),
    ]
    assert [e.location for e in tt] == [line_of(nl_kernel, "nl.add"), line_of(nl_kernel, "nl.multiply")]
    assert [e.options["op"] for e in tt] == ["add", "multiply"]
    assert all(e.core == 0 for e in tt) and tt[0].seq < tt[1].seq
    assert tt[0].writes[0].nbytes == 4 * 8 * 4 and tt[0].writes[0].partitions == 4
    assert tt[1].reads[0].alloc == tt[0].writes[0].alloc        # multiply reads what add wrote


def test_nl_kernel_every_event():
    """Every instruction of the kernel, in issue order: loads and stores are dma_copy on the DMA
    engines, matmul(transpose_x=True) one nc_matmul on the Tensor engine, storing its PSUM result
    first copies it to SBUF (a nisa.tensor_copy: nl.store takes SBUF values)."""
    _, events = recorded(nl_kernel, *nl_inputs())
    assert [summary(e) for e in events] == [
        ("dma_copy", "nl.load", "dma", [("src", "shared_hbm", (4, 8), "float32")],
         [("dst", "sbuf", (4, 8), "float32")]),
        ("dma_copy", "nl.load", "dma", [("src", "shared_hbm", (4, 8), "float32")],
         [("dst", "sbuf", (4, 8), "float32")]),
        ("tensor_tensor", "nl.add", "vector",
         [("data1", "sbuf", (4, 8), "float32"), ("data2", "sbuf", (4, 8), "float32")],
         [("dst", "sbuf", (4, 8), "float32")]),
        ("tensor_tensor", "nl.multiply", "vector",
         [("data1", "sbuf", (4, 8), "float32"), ("data2", "sbuf", (4, 8), "float32")],
         [("dst", "sbuf", (4, 8), "float32")]),
        ("dma_copy", "nl.load", "dma", [("src", "shared_hbm", (4, 16), "float32")],
         [("dst", "sbuf", (4, 16), "float32")]),
        ("nc_matmul", "nl.matmul", "tensor",
         [("stationary", "sbuf", (4, 8), "float32"), ("moving", "sbuf", (4, 16), "float32")],
         [("dst", "psum", (8, 16), "float32")]),
        ("tensor_copy", "nisa.tensor_copy", "vector", [("src", "psum", (8, 16), "float32")],
         [("dst", "sbuf", (8, 16), "float32")]),
        ("dma_copy", "nl.store", "dma", [("src", "sbuf", (8, 16), "float32")],
         [("dst", "shared_hbm", (8, 16), "float32")]),
    ]
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    assert events[0].location == line_of(nl_kernel, "a = nl.load")
    assert events[-1].location == line_of(nl_kernel, "nl.store")


# ---- the instructions nl functions declare themselves --------------------------------------------

def own_kernel(x, idx):
    a = nl.load(x)
    z = nl.zeros((4, 8), dtype=nl.float32)
    h = nl.full((4, 8), 2.0, dtype=nl.bfloat16, buffer=nl.shared_hbm)
    z += a
    z *= 3.0
    f = nl.floor(z)
    c = nl.copy(f)
    wh = nl.where(nl.greater(a, 0.0), a, 0.0)
    bf = nl.broadcast_to(a[:, 0:1], (4, 8))
    bp = nl.broadcast_to(a[0:1, :], (4, 8))
    g = nl.gather_flattened(a, nl.load(idx))
    eye = nl.shared_identity_matrix(4, dtype=nl.float32)
    return tile_out(h, c, wh, bf, bp, g, eye)


def own_inputs():
    x = np.arange(32, dtype=F32).reshape(4, 8) / 4 - 3
    idx = np.tile(np.array([[7, 0, 3]], np.int32), (4, 1))
    return x, idx


def own_events(events):
    """The events of the instructions declared in language/ (api = the nl function)."""
    ours = ("nl.zeros", "nl.full", "nl.add (in place)", "nl.multiply (in place)", "nl.floor", "nl.copy",
            "nl.where", "nl.broadcast_to", "nl.gather_flattened", "nl.shared_identity_matrix")
    return [e for e in events if e.api in ours]


OWN = [
    ("memset", "nl.zeros", "vector", [], [("dst", "sbuf", (4, 8), "float32")]),
    ("dma_copy", "nl.full", "dma", [], [("dst", "shared_hbm", (4, 8), "bfloat16")]),
    ("tensor_tensor", "nl.add (in place)", "vector", [("y", "sbuf", (4, 8), "float32")],
     [("x", "sbuf", (4, 8), "float32")]),
    ("tensor_scalar", "nl.multiply (in place)", "vector", [], [("x", "sbuf", (4, 8), "float32")]),
    ("tensor_scalar", "nl.floor", "vector", [("x", "sbuf", (4, 8), "float32")],
     [("dst", "sbuf", (4, 8), "float32")]),
    ("tensor_copy", "nl.copy", "vector", [("src", "sbuf", (4, 8), "float32")],
     [("dst", "sbuf", (4, 8), "float32")]),
    ("select", "nl.where", "vector",
     [("condition", "sbuf", (4, 8), "float32"), ("x", "sbuf", (4, 8), "float32")],
     [("dst", "sbuf", (4, 8), "float32")]),
    ("tensor_copy", "nl.broadcast_to", "vector", [("x", "sbuf", (4, 1), "float32")],
     [("dst", "sbuf", (4, 8), "float32")]),
    # a partition broadcast: the TensorE matmul into PSUM (trainium_inferentia2_arch.rst, TensorE
    # "Alternative Use Case": NKI invokes nc_matmul(ones, x) under the hood for broadcast_to)
    ("nc_matmul", "nl.broadcast_to", "tensor", [("x", "sbuf", (1, 8), "float32")],
     [("dst", "psum", (4, 8), "float32")]),
    ("dma_copy", "nl.gather_flattened", "dma",
     [("data", "sbuf", (4, 8), "float32"), ("indices", "sbuf", (4, 3), "int32")],
     [("dst", "sbuf", (4, 3), "float32")]),
    ("dma_copy", "nl.shared_identity_matrix", "dma", [], [("dst", "sbuf", (4, 4), "float32")]),
]


def test_own_instructions_compute_as_documented():
    x, idx = own_inputs()
    (h, c, wh, bf, bp, g, eye), _ = recorded(own_kernel, x, idx)
    np.testing.assert_array_equal(h.astype(F32), np.full((4, 8), 2, F32))
    np.testing.assert_array_equal(c, np.floor(x * 3))
    np.testing.assert_array_equal(wh, np.where(x > 0, x, 0))
    np.testing.assert_array_equal(bf, np.repeat(x[:, 0:1], 8, axis=1))
    np.testing.assert_array_equal(bp, np.repeat(x[0:1, :], 4, axis=0))
    np.testing.assert_array_equal(g, x[:, [7, 0, 3]])
    np.testing.assert_array_equal(eye, np.eye(4, dtype=F32))


def test_own_instruction_events():
    _, events = recorded(own_kernel, *own_inputs())
    ours = own_events(events)
    assert [summary(e) for e in ours] == OWN
    assert [e.location for e in ours] == [
        line_of(own_kernel, t) for t in ("nl.zeros", "nl.full", "z += a", "z *= 3.0", "nl.floor", "nl.copy",
                                         "nl.where", "a[:, 0:1]", "a[0:1, :]", "nl.gather_flattened",
                                         "nl.shared_identity_matrix")]
    assert ours[0].options == {"value": 0} and ours[1].options == {"value": 2.0}


def test_own_instruction_events_are_the_same_without_fast_paths(monkeypatch):
    """nl.copy's fp32 copy is deferred with fast paths on (and nl.zeros' fill): the events do not
    change when the fast paths are off."""
    monkeypatch.setenv("NKISIM_FAST_PATHS", "1")
    _, fast = recorded(own_kernel, *own_inputs())
    assert fast.fast_paths["deferred_copy"] >= 1 and fast.fast_paths["deferred_fill"] >= 1
    monkeypatch.setenv("NKISIM_FAST_PATHS", "0")
    with trace.record() as slow:
        nki.simulate(own_kernel)(*own_inputs())
    assert not slow.fast_paths
    assert own_events(slow) == own_events(fast)


def test_nested_nl_functions_name_the_outer_one():
    """rms_norm lowers through nl.multiply: those instructions say api="nl.rms_norm"."""
    def kernel(x, w):
        r = nl.rms_norm(nl.load(x), nl.load(w), axis=1, n=8)
        out = nl.ndarray(r.shape, dtype=r.dtype, buffer=nl.shared_hbm)
        nl.store(out, r)
        return out
    x, w = np.arange(32, dtype=F32).reshape(4, 8) / 8, np.full((4, 8), 2.0, F32)
    out, events = recorded(kernel, x, w)
    np.testing.assert_allclose(out, x / np.sqrt((x * x).sum(1, keepdims=True) / 8 + 1e-6) * w, rtol=1e-6)
    tt = [e for e in events if e.op == "tensor_tensor"]
    assert [(e.api, e.options["op"]) for e in tt] == [("nl.rms_norm", "multiply")] * 2
    assert {e.location for e in tt} == {line_of(kernel, "nl.rms_norm")}


def test_python_operators_run_as_their_nl_function():
    def kernel(x):
        t = nl.load(x)
        u = t + t
        v = u * t
        return tile_out(v)
    _, events = recorded(kernel, np.ones((2, 4), F32))
    assert [(e.op, e.api) for e in events if e.op == "tensor_tensor"] == [
        ("tensor_tensor", "nl.add"), ("tensor_tensor", "nl.multiply")]


# ---- findings="all" ----------------------------------------------------------------------------

def test_nl_rule_is_a_finding_and_the_kernel_goes_on(capsys):
    """nl.add of non-broadcastable shapes: recorded; the placeholder has the first tile operand's
    shape and dtype (the broadcast shape cannot be computed) and holds the NaN sentinel."""
    def kernel(x):
        t = nl.load(x)
        bad = nl.add(t, t[:, 0:3])
        assert bad.shape == (4, 8) and bad.dtype == nl.bfloat16 and bad.buffer is nl.sbuf
        good = nl.multiply(t, 2.0, dtype=nl.float32)
        out = nl.ndarray((2, 4, 8), dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out[0], bad)
        nl.store(out[1], good)
        return out
    x = np.ones((4, 8), F32).astype(nl.bfloat16)
    with pytest.raises(ShapeError, match=r"^nl\.add: x shape \(4, 8\) and y shape \(4, 3\) are not "
                                         r"broadcastable"):
        nki.simulate(kernel)(x)
    sim = nki.simulate(kernel, findings="warn")
    out = sim(x)
    assert np.isnan(out[0]).all()
    np.testing.assert_array_equal(out[1], np.full((4, 8), 2, F32))
    assert [type(e) for e in sim.findings] == [ShapeError]
    assert str(sim.findings[0]) == (
        "nl.add: x shape (4, 8) and y shape (4, 3) are not broadcastable (same rank, equal partition "
        f"dims, free dims equal or 1) ({line_of(kernel, 'bad = nl.add')})")
    assert "nkisim: 1 finding(s) in kernel kernel" in capsys.readouterr().err


def test_placeholders_have_the_shape_the_call_would_have_produced():
    shapes = {}

    def kernel(x):
        t = nl.load(x)
        shapes["load"] = nl.load(t)                              # src in SBUF: MemorySpaceError
        shapes["matmul"] = nl.matmul(t, x, transpose_x=True)    # y in HBM
        shapes["sum"] = nl.sum(x, axis=1, keepdims=True)        # x in HBM
        shapes["softmax"] = nl.softmax(t, axis=0)               # the partition dim
        shapes["where"] = nl.where(t, x, 1.0)                    # x in HBM
        return x
    sim = nki.simulate(kernel, findings="warn")
    sim(np.ones((4, 8), F32))
    assert [type(e) for e in sim.findings] == [MemorySpaceError] * 3 + [ShapeError, MemorySpaceError]
    got = {k: (v.shape, v.dtype, v.buffer) for k, v in shapes.items()}
    assert got == {"load": ((4, 8), np.dtype(F32), nl.sbuf), "matmul": ((8, 8), np.dtype(F32), nl.psum),
                   "sum": ((4, 1), np.dtype(F32), nl.sbuf), "softmax": ((4, 8), np.dtype(F32), nl.sbuf),
                   "where": ((4, 8), np.dtype(F32), nl.sbuf)}


def test_instruction_finding_inside_an_nl_function_skips_that_instruction():
    """gather_flattened's index bound is checked at run time by its instruction: the finding is
    recorded, the instruction skipped, the result keeps the sentinel."""
    def kernel(x, idx):
        g = nl.gather_flattened(nl.load(x), nl.load(idx))
        out = nl.ndarray(g.shape, dtype=g.dtype, buffer=nl.shared_hbm)
        nl.store(out, g)
        return out
    x, idx = np.ones((2, 4), F32), np.array([[0, 9], [1, 2]], np.int32)
    with pytest.raises(BoundsError, match=r"^nl\.gather_flattened: index 9 is outside 0:4"):
        nki.simulate(kernel)(x, idx)
    sim = nki.simulate(kernel, findings="warn")
    assert np.isnan(sim(x, idx)).all()
    assert [type(e) for e in sim.findings] == [BoundsError]


def test_inplace_finding_keeps_x():
    def kernel(x):
        t = nl.load(x)
        before = t
        t += t[:, 0:3]
        assert t is before
        out = nl.ndarray(t.shape, dtype=t.dtype, buffer=nl.shared_hbm)
        nl.store(out, t)
        return out
    x = np.arange(32, dtype=F32).reshape(4, 8)
    sim = nki.simulate(kernel, findings="warn")
    np.testing.assert_array_equal(sim(x), x)
    assert [str(e).split(":")[0] for e in sim.findings] == ["nl.add (in place)"]


# ---- unknown keywords -------------------------------------------------------------------------

def call_kernel(body):
    def kernel(x):
        body(x)
        return x
    return kernel


def test_unknown_keyword_of_ndarray():
    body = lambda x: nl.ndarray((4, 8), dtype=nl.float32, bufer=nl.sbuf)  # noqa: E731
    with pytest.raises(TypeError, match=r"^nl\.ndarray\(\) got an unexpected keyword argument 'bufer'; "
                                        r"did you mean 'buffer'\? \(test_nl_events\.py:\d+\)$"):
        nki.simulate(call_kernel(body))(np.ones((4, 8), F32))


def test_unknown_keyword_of_load():
    body = lambda x: nl.load(x, dtyp=nl.bfloat16)  # noqa: E731
    with pytest.raises(TypeError, match=r"^nl\.load\(\) got an unexpected keyword argument 'dtyp'; did "
                                        r"you mean 'dtype'\? \(test_nl_events\.py:\d+\)$"):
        nki.simulate(call_kernel(body))(np.ones((4, 8), F32))


@pytest.mark.parametrize("body, message", [
    (lambda x: nl.add(nl.load(x), 1.0, dtpye=nl.float32), r"^nl\.add\(\) got an unexpected keyword "
                                                          r"argument 'dtpye'; did you mean 'dtype'\?"),
    (lambda x: nl.zeros((2, 2), nl.float32, nam="z"), r"^nl\.zeros\(\) got an unexpected keyword argument "
                                                      r"'nam'; did you mean 'name'\?"),
    (lambda x: nl.shared_constant(np.ones(2), dtype=nl.float32, address=0),
     r"^nl\.shared_constant\(\) got an unexpected keyword argument 'address' \("),
    (lambda x: nl.device_print("x", x, mask=None), r"^nl\.device_print\(\) got an unexpected keyword "
                                                   r"argument 'mask' \("),
    (lambda x: nl.sum(nl.load(x), axis=1, keepdim=True), r"^nl\.sum\(\) got an unexpected keyword argument "
                                                         r"'keepdim'; did you mean 'keepdims'\?"),
])
def test_unknown_keywords_of_other_nl_functions(body, message):
    with pytest.raises(TypeError, match=message):
        nki.simulate(call_kernel(body))(np.ones((4, 8), F32))


def test_documented_keywords_still_work(capsys):
    def kernel(x):
        t = nl.ndarray((4, 8), dtype=nl.float32, buffer=nl.sbuf, name="t", address=(0, 0))
        nisa.dma_copy(dst=t, src=x)
        nl.device_print(print_prefix="t=", tensor=t)
        return x
    nki.simulate(kernel)(np.zeros((4, 8), F32))
    assert capsys.readouterr().out.startswith("t= [[0. 0.")


def test_allocation_errors_raise_also_under_findings_all():
    """Allocating is not an instruction: nl.zeros' shape error raises as nl.ndarray's does."""
    def kernel(x):
        nl.zeros((200, 8), dtype=nl.float32)
        return x
    with pytest.raises(ShapeError, match=r"^nl\.zeros: "):
        nki.simulate(kernel, findings="all")(np.ones((1, 1), F32))


# ---- nl.broadcast_to along the partition dim: TensorE into PSUM, or a DMA --------------------------

def _bcast_kernel(x, y, z):
    a = nl.load(x)                                   # (1, 512) fp32: one PSUM bank of fp32 results
    b = nl.load(y)                                   # (1, 513) fp32: more than one bank
    c = nl.load(z)                                   # (1, 8) bf16: TensorE writes fp32 only
    return tile_out(nl.broadcast_to(a, (128, 512)), nl.broadcast_to(b, (128, 513)),
                    nl.broadcast_to(c, (3, 8)))


def test_partition_broadcast_is_a_tensor_engine_matmul_into_psum_when_one_bank_holds_it():
    """trainium_inferentia2_arch.rst, TensorE "Alternative Use Case": "we can broadcast a vector
    occupying a single partition to M (M <= 128) partitions using nki.isa.nc_matmul(ones,
    broadcast_input, is_stationary_onezero=True) ... NKI invokes such matmul under the hood when
    broadcast_input.broadcast_to((M, broadcast_input.shape[1])) is called"; a matmul writes one
    PSUM bank ("512 FP32 elements per PSUM partition", same page). Decision: a result wider than
    one bank, or not fp32, is one DMA into SBUF. Values: x repeated (NumPy's broadcast)."""
    rng = np.random.default_rng(5)
    x = rng.standard_normal((1, 512)).astype(np.float32)
    y = rng.standard_normal((1, 513)).astype(np.float32)
    import ml_dtypes
    z = rng.standard_normal((1, 8)).astype(ml_dtypes.bfloat16)
    (a, b, c), events = recorded(_bcast_kernel, x, y, z)
    got = [summary(e) for e in events if e.api == "nl.broadcast_to"]
    assert got == [
        ("nc_matmul", "nl.broadcast_to", "tensor", [("x", "sbuf", (1, 512), "float32")],
         [("dst", "psum", (128, 512), "float32")]),
        ("dma_copy", "nl.broadcast_to", "dma", [("x", "sbuf", (1, 513), "float32")],
         [("dst", "sbuf", (128, 513), "float32")]),
        ("dma_copy", "nl.broadcast_to", "dma", [("x", "sbuf", (1, 8), "bfloat16")],
         [("dst", "sbuf", (3, 8), "bfloat16")]),
    ]
    np.testing.assert_array_equal(a, np.repeat(x, 128, axis=0))
    np.testing.assert_array_equal(b, np.repeat(y, 128, axis=0))
    np.testing.assert_array_equal(np.asarray(c).view(np.uint16), np.repeat(z, 3, axis=0).view(np.uint16))


def test_partition_broadcast_in_psum_feeds_vector_and_scalar_instructions():
    """The PSUM broadcast is an operand Vector/Scalar instructions read (tensor_tensor with one
    input in PSUM, activation); the product equals NumPy's."""
    def kernel(x, row):
        out = nl.ndarray((128, 512), nl.float32, buffer=nl.shared_hbm)
        t = nl.load(x)
        r = nl.broadcast_to(nl.load(row), (128, 512))
        prod = nl.ndarray((128, 512), nl.float32, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=prod, data1=t, data2=r, op=nl.multiply)
        nl.store(out, prod)
        return out
    rng = np.random.default_rng(6)
    x = rng.standard_normal((128, 512)).astype(np.float32)
    row = rng.standard_normal((1, 512)).astype(np.float32)
    got, events = recorded(kernel, x, row)
    np.testing.assert_array_equal(np.asarray(got), x * row)
    tt = [e for e in events if e.op == "tensor_tensor"]
    assert [o.buffer for o in tt[0].reads] == ["sbuf", "psum"]
