"""The instruction event contract: ``nkisim.trace.record()`` yields one Instruction per executed
instruction with every field matching the kernel's own calls (op, api, engine, core, seq,
location, operands with role/buffer/shape/dtype/nbytes/alloc). Expected values come from the
kernels below (their shapes and the docs' engine of each op), never from nkisim."""
import inspect
import re

import numpy as np
import pytest

import nkisim.nki as nki
import nkisim.nki.isa as nisa
import nkisim.nki.language as nl
from nkisim import trace
from nkisim.errors import ShapeError


_SRC = inspect.getsource(inspect.getmodule(inspect.currentframe()))


def line(tag: str) -> str:
    """``test_events.py:N`` of the line carrying ``# ev:<tag>`` in this file."""
    for i, text in enumerate(_SRC.splitlines(), 1):
        if text.rstrip().endswith(f"# ev:{tag}"):
            return f"test_events.py:{i}"
    raise AssertionError(tag)


def tiled_matmul(lhsT, rhs):
    """out (M, N) = lhsT.T @ rhs, K accumulated in one PSUM tile."""
    K, M = lhsT.shape
    N = rhs.shape[1]
    out = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.shared_hbm)
    acc = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.psum)
    for k in nl.affine_range(K // 128):
        a = nl.ndarray((128, M), dtype=lhsT.dtype, buffer=nl.sbuf)
        b = nl.ndarray((128, N), dtype=rhs.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=a, src=lhsT[k * 128:(k + 1) * 128, :])   # ev:load_a
        nisa.dma_copy(dst=b, src=rhs[k * 128:(k + 1) * 128, :])    # ev:load_b
        nisa.nc_matmul(dst=acc, stationary=a, moving=b)            # ev:mm
    res = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=res, src=acc)                             # ev:evacuate
    nisa.dma_copy(dst=out, src=res)                                # ev:store
    return out


def nl_style(x, y):
    """out = (x + y) * 2 with nl.load / nl.add / nl.multiply / nl.store."""
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    a = nl.load(x)                                                 # ev:nl_load_x
    b = nl.load(y)                                                 # ev:nl_load_y
    c = nl.add(a, b)                                               # ev:nl_add
    d = nl.multiply(c, 2.0)                                        # ev:nl_mul
    nl.store(out, d)                                               # ev:nl_store
    return out


def lnc2_add(a, b):
    """out = a + b; core c takes rows [128 c, 128 c + 128)."""
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    rows = nl.ds(nl.program_id(0) * 128, 128)
    ta = nl.ndarray((128, a.shape[1]), dtype=a.dtype, buffer=nl.sbuf)
    tb = nl.ndarray((128, a.shape[1]), dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=ta, src=a[rows, :])                          # ev:lnc_a
    nisa.dma_copy(dst=tb, src=b[rows, :])                          # ev:lnc_b
    nisa.tensor_tensor(dst=ta, data1=ta, data2=tb, op=nl.add)      # ev:lnc_add
    nisa.dma_copy(dst=out[rows, :], src=ta)                        # ev:lnc_store
    return out


def _roles(ops):
    return [(o.role, o.buffer, o.shape, o.dtype, o.nbytes) for o in ops]


def _record(kernel, *args, **options):
    with trace.record() as events:
        out = nki.simulate(kernel, **options)(*args)
    return out, events


@pytest.mark.parametrize("fast", [True, False])
def test_tiled_matmul_events_match_the_kernel(fast):
    K, M, N = 256, 128, 512
    rng = np.random.default_rng(1)
    lhsT = rng.standard_normal((K, M), dtype=np.float32)
    rhs = rng.standard_normal((K, N), dtype=np.float32)
    out, ev = _record(tiled_matmul, lhsT, rhs, fast_paths=fast)
    np.testing.assert_allclose(out, lhsT.T @ rhs, rtol=1e-4, atol=1e-3)
    assert [e.op for e in ev] == ["dma_copy", "dma_copy", "nc_matmul"] * 2 + ["tensor_copy", "dma_copy"]
    assert [e.api for e in ev] == ["nisa." + e.op for e in ev]
    assert [e.engine for e in ev] == ["dma", "dma", "tensor"] * 2 + ["vector", "dma"]
    assert [e.core for e in ev] == [0] * 8
    assert [e.seq for e in ev] == list(range(1, 9))
    assert [e.location for e in ev] == [line("load_a"), line("load_b"), line("mm")] * 2 + \
        [line("evacuate"), line("store")]
    f4 = 4
    for k in range(2):
        la, lb, mm = ev[3 * k:3 * k + 3]
        assert _roles(la.reads) == [("src", "shared_hbm", (128, M), "float32", 128 * M * f4)]
        assert la.reads[0].alloc == "arg:lhsT" and lb.reads[0].alloc == "arg:rhs"
        assert _roles(la.writes) == [("dst", "sbuf", (128, M), "float32", 128 * M * f4)]
        assert la.writes[0].partitions == 128 and la.writes[0].contiguous_bytes == M * f4
        assert la.reads[0].contiguous_bytes == 128 * M * f4      # 128 whole rows of lhsT
        assert _roles(lb.writes) == [("dst", "sbuf", (128, N), "float32", 128 * N * f4)]
        assert _roles(mm.reads) == [("stationary", "sbuf", (128, M), "float32", 128 * M * f4),
                                    ("moving", "sbuf", (128, N), "float32", 128 * N * f4)]
        assert _roles(mm.writes) == [("dst", "psum", (M, N), "float32", M * N * f4)]
        # the operands are the tiles the DMAs just wrote
        assert mm.reads[0].alloc == la.writes[0].alloc and mm.reads[1].alloc == lb.writes[0].alloc
    assert ev[2].writes[0].alloc == ev[5].writes[0].alloc            # one accumulator
    assert ev[2].reads[0].alloc != ev[5].reads[0].alloc              # a new stationary tile per k
    ev_copy, ev_store = ev[6], ev[7]
    assert _roles(ev_copy.reads) == [("src", "psum", (M, N), "float32", M * N * f4)]
    assert ev_copy.reads[0].alloc == ev[2].writes[0].alloc
    assert _roles(ev_copy.writes) == [("dst", "sbuf", (M, N), "float32", M * N * f4)]
    assert _roles(ev_store.writes) == [("dst", "shared_hbm", (M, N), "float32", M * N * f4)]


def test_events_are_the_same_with_and_without_fast_paths():
    rng = np.random.default_rng(2)
    lhsT = rng.standard_normal((256, 128), dtype=np.float32)
    rhs = rng.standard_normal((256, 512), dtype=np.float32)
    out1, ev1 = _record(tiled_matmul, lhsT, rhs, fast_paths=True)
    out2, ev2 = _record(tiled_matmul, lhsT, rhs, fast_paths=False)
    assert list(ev1) == list(ev2)
    np.testing.assert_array_equal(out1, out2)
    x = rng.standard_normal((128, 64), dtype=np.float32)
    assert list(_record(nl_style, x, x, fast_paths=True)[1]) == list(_record(nl_style, x, x, fast_paths=False)[1])


def test_nl_style_kernel_events_name_the_nl_call():
    x = np.arange(128 * 64, dtype=np.float32).reshape(128, 64)
    y = np.ones_like(x)
    out, ev = _record(nl_style, x, y)
    np.testing.assert_array_equal(out, (x + y) * 2)
    assert [(e.api, e.op) for e in ev] == [("nl.load", "dma_copy"), ("nl.load", "dma_copy"),
                                           ("nl.add", "tensor_tensor"), ("nl.multiply", "tensor_scalar"),
                                           ("nl.store", "dma_copy")]
    assert [e.engine for e in ev] == ["dma", "dma", "vector", "vector", "dma"]
    assert [e.location for e in ev] == [line("nl_load_x"), line("nl_load_y"), line("nl_add"),
                                        line("nl_mul"), line("nl_store")]
    tile = (128, 64)
    assert _roles(ev[2].reads) == [("data1", "sbuf", tile, "float32", 128 * 64 * 4),
                                   ("data2", "sbuf", tile, "float32", 128 * 64 * 4)]
    assert ev[2].reads[0].alloc == ev[0].writes[0].alloc and ev[2].reads[1].alloc == ev[1].writes[0].alloc
    assert _roles(ev[3].reads) == [("data", "sbuf", tile, "float32", 128 * 64 * 4)]
    assert ev[3].options["op0"] == "multiply" and ev[3].options["operand0"] == 2.0
    assert ev[4].reads[0].alloc == ev[3].writes[0].alloc
    assert ev[4].writes[0].buffer == "shared_hbm"


def test_lnc2_events_per_core_in_issue_order():
    a = np.arange(256 * 32, dtype=np.float32).reshape(256, 32)
    b = np.full_like(a, 3)
    out, ev = _record(nki.jit(lnc2_add)[2], a, b)
    np.testing.assert_array_equal(out, a + b)
    assert [e.core for e in ev] == [0] * 4 + [1] * 4
    assert [e.seq for e in ev] == [1, 2, 3, 4] * 2
    want = [("dma_copy", "dma", line("lnc_a")), ("dma_copy", "dma", line("lnc_b")),
            ("tensor_tensor", "vector", line("lnc_add")), ("dma_copy", "dma", line("lnc_store"))]
    assert [(e.op, e.engine, e.location) for e in ev] == want * 2
    for core in (0, 1):
        la, lb, add, st = ev[4 * core:4 * core + 4]
        assert _roles(add.reads) == [("data1", "sbuf", (128, 32), "float32", 128 * 32 * 4),
                                     ("data2", "sbuf", (128, 32), "float32", 128 * 32 * 4)]
        assert la.reads[0].buffer == "shared_hbm" and la.reads[0].alloc == "arg:a"
        assert lb.reads[0].alloc == "arg:b"
        assert add.writes[0].alloc.startswith(f"c{core}.")
        assert st.writes[0].alloc == ev[3].writes[0].alloc          # the one shared output
    # the same kernel under LNC1 traces like core 0 (only its row range differs: none here)
    _, ev1 = _record(nki.jit(lnc2_add), a[:128], b[:128])

    def whole(e):
        ops = [(o.role, o.buffer, o.shape, o.dtype, o.nbytes, o.alloc, o.partitions, o.contiguous_bytes)
               for o in e.reads + e.writes]
        return (e.op, e.api, e.engine, e.core, e.seq, e.location, ops, e.options)
    assert [whole(e) for e in ev1] == [whole(e) for e in ev[:4]]     # every field, ids included


def test_no_recording_no_events_and_nested_recordings_are_separate():
    x = np.ones((128, 8), np.float32)
    nki.simulate(nl_style)(x, x)                       # nobody records: nothing to see, no error
    with trace.record() as outer:
        nki.simulate(nl_style)(x, x)
        with trace.record() as inner:
            nki.simulate(nl_style)(x, x)
    assert len(outer) == 5 and len(inner) == 5


def test_failed_launch_still_hands_over_its_events():
    def bad(x):
        t = nl.ndarray((128, 8), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x)
        nisa.tensor_tensor(dst=t, data1=t, data2=t[:, 0:4], op=nl.add)
    x = np.ones((128, 8), np.float32)
    with trace.record() as ev:
        with pytest.raises(ShapeError):
            nki.simulate(bad)(x)
    assert [e.op for e in ev] == ["dma_copy"]


def test_unknown_keyword_raises_type_error_with_suggestion_and_line():
    def k(x):
        t = nl.ndarray((128, 8), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=t, data1=t, data2=t, op=nl.add, egnine=nisa.engine.vector)  # ev:kw
    with pytest.raises(TypeError, match=re.escape(
            "nisa.tensor_tensor() got an unexpected keyword argument 'egnine'; did you mean "
            f"'engine'? ({line('kw')})")):
        nki.simulate(k)(np.ones((128, 8), np.float32))


def test_a_misspelt_required_keyword_is_named_before_the_missing_argument():
    def k(x):
        t = nl.ndarray((128, 8), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=t, data1=t, dat2=t, op=nl.add)  # ev:kw2
    with pytest.raises(TypeError, match=re.escape(
            "nisa.tensor_tensor() got an unexpected keyword argument 'dat2'; did you mean "
            f"'data2'? ({line('kw2')})")):
        nki.simulate(k)(np.ones((128, 8), np.float32))

    def k2(x):
        t = nl.ndarray((128, 8), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_tensor(t, t, op=nl.add)  # ev:kw3
    with pytest.raises(TypeError, match=re.escape(
            f"nisa.tensor_tensor() missing 1 required argument: 'data2' ({line('kw3')})")):
        nki.simulate(k2)(np.ones((128, 8), np.float32))

    def k3(x):
        nisa.nc_matmul(dst=x)  # ev:kw4
    with pytest.raises(TypeError, match=re.escape(
            f"nisa.nc_matmul() missing 2 required arguments: 'stationary', 'moving' ({line('kw4')})")):
        nki.simulate(k3)(np.ones((128, 8), np.float32))


def test_too_many_positional_arguments_name_the_op_and_the_line():
    def k(x):
        t = nl.ndarray((128, 8), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_tensor(t, t, t, nl.add, nisa.engine.vector, None, 3)  # ev:pos
    with pytest.raises(TypeError, match=re.escape(
            f"nisa.tensor_tensor() takes 6 positional arguments but 7 were given ({line('pos')})")):
        nki.simulate(k)(np.ones((128, 8), np.float32))


def test_generated_ops_keep_the_documented_signature():
    sig = inspect.signature(nisa.tensor_tensor)
    assert list(sig.parameters) == ["dst", "data1", "data2", "op", "engine", "name"]
    assert sig.parameters["engine"].default is nisa.engine.unknown
    assert "dst = op(data1, data2)" in nisa.tensor_tensor.__doc__


def test_argument_allocation_ids_name_the_kernel_parameters():
    def kernel(x, pair, *, scale_tile):
        a = nl.load(x)
        b = nl.load(pair[1])
        c = nl.load(scale_tile)
        nl.store(pair[0], value=nl.add(nl.add(a, b), c))
        return pair[0]
    ones = np.ones((128, 4), np.float32)
    out = np.zeros_like(ones)
    with trace.record() as rec:
        nki.simulate(kernel)(ones, (out, ones * 2), scale_tile=ones * 3)
    np.testing.assert_array_equal(out, ones * 6)
    loads = [e.reads[0].alloc for e in rec if e.api == "nl.load"]
    assert loads == ["arg:x", "arg:pair[1]", "arg:scale_tile"]
    assert [e.writes[0].alloc for e in rec if e.api == "nl.store"] == ["arg:pair[0]"]


def test_operand_view_is_offset_and_strides_of_the_allocation():
    """``Operand.view``: (offset, strides) in elements; equal for two loads of the same slice."""
    def k(a):
        out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
        t = nl.load(a[128:256, 64:128])
        t = nl.load(a[128:256, 64:128])
        u = nl.load(a[0:128, 0:64])
        nl.store(out, t + u)
        return out

    with trace.record() as events:
        nki.simulate(k)(np.ones((256, 256), np.float32))
    srcs = [e.reads[0] for e in events if e.api == "nl.load"]
    # row-major (256, 256) fp32: element (128, 64) is at 128 * 256 + 64
    assert [o.view for o in srcs] == [(128 * 256 + 64, (256, 1)), (128 * 256 + 64, (256, 1)), (0, (256, 1))]


def sliced_views(x):
    """x (8, 32) fp32 in HBM; a (128, 1024) fp32 SBUF tile, written then read in slices."""
    t = nl.ndarray((128, 1024), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t[32:40, 256:288], src=x[0:8, 0:32])
    u = nl.ndarray((8, 16), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=u, src=t[32:40, 256:288:2])
    out = nl.ndarray((8, 32), dtype=nl.float32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out[2:4, 8:16], src=u[0:2, 0:8])
    return out


def test_operands_carry_the_partitions_and_bytes_they_touch():
    _, events = _record(sliced_views, np.ones((8, 32), np.float32))
    load, copy, store = events
    dst = load.writes[0]
    assert (dst.part_start, dst.part_end, dst.byte_start, dst.byte_end) == (32, 40, 256 * 4, 288 * 4)
    src = load.reads[0]
    assert (src.part_start, src.part_end, src.byte_start, src.byte_end) == (0, 1, 0, 8 * 32 * 4)
    strided = copy.reads[0]                        # every other element of 256..287
    assert (strided.part_start, strided.part_end) == (32, 40)
    assert (strided.byte_start, strided.byte_end) == (256 * 4, (256 + 30 + 1) * 4)
    hbm = store.writes[0]                          # rows 2..3, columns 8..15 of (8, 32)
    assert (hbm.byte_start, hbm.byte_end) == ((2 * 32 + 8) * 4, (3 * 32 + 15 + 1) * 4)


@pytest.mark.parametrize("fast", [True, False])
def test_allocation_ids_in_events(fast):
    """Operand ``alloc`` ids: ``arg:<name>`` for arguments, ``shared<k>`` for the k-th shared_hbm
    allocation (the same tensor on both cores), ``c<core>.<n>`` for the n-th core-local one, n
    counting that core's SBUF/PSUM/private-HBM allocations in program order (shared ones skipped)."""
    a = np.arange(256 * 32, dtype=np.float32).reshape(256, 32)
    b = np.full_like(a, 3)
    out, ev = _record(nki.jit(lnc2_add)[2], a, b, fast_paths=fast)
    np.testing.assert_array_equal(out, a + b)
    for core in (0, 1):
        la, lb, add, st = ev[4 * core:4 * core + 4]
        assert [o.alloc for o in la.reads + la.writes] == ["arg:a", f"c{core}.1"]
        assert [o.alloc for o in lb.reads + lb.writes] == ["arg:b", f"c{core}.2"]
        assert [o.alloc for o in add.reads + add.writes] == [f"c{core}.1", f"c{core}.2", f"c{core}.1"]
        assert [o.alloc for o in st.reads + st.writes] == [f"c{core}.1", "shared0"]

    @nki.jit
    def mixed(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)      # shared0
        scratch = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.private_hbm)  # c0.1
        t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)              # c0.2
        more = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)     # shared1
        u = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)              # c0.3
        nisa.dma_copy(dst=scratch, src=x)
        nisa.dma_copy(dst=t, src=scratch)
        nisa.dma_copy(dst=more, src=t)
        nisa.dma_copy(dst=u, src=more)
        nisa.dma_copy(dst=out, src=u)
        return out

    x = np.arange(128 * 4, dtype=np.float32).reshape(128, 4)
    out, ev = _record(mixed, x, fast_paths=fast)
    np.testing.assert_array_equal(out, x)
    assert [[o.alloc for o in e.reads + e.writes] for e in ev] == [
        ["arg:x", "c0.1"], ["c0.1", "c0.2"], ["c0.2", "shared1"], ["shared1", "c0.3"], ["c0.3", "shared0"]]
