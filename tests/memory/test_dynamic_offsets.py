"""Dynamic-offset views: ``t.ap(pattern, scalar_offset=..., indirect_dim=d)`` scales the runtime
offset by the stride of dim ``d`` of the tensor ``.ap`` is called on (NkiTensor.ap: "indirect_dim:
dimension in self.shape whose stride scales the indirect scalar/vector offset"); its bounds are
checked by the instruction that uses it, and a DMA with ``oob_mode=skip`` skips the transfer
(nisa.dma_copy: "skip the DMA transfer for a given dynamic address ... when it is out of bound").
References: NumPy's own strides of the same reshapes."""
import re

import numpy as np
import pytest

import nkisim.nki.isa as nisa
import nkisim.nki.language as nl
from nkisim.errors import BoundsError, ShapeError
from conftest import simulate


def err(op, what):
    return rf"^{re.escape(op)}: {re.escape(what)} \(test_dynamic_offsets\.py:\d+\)$"


def _ref_ap(x, view_shape, pattern, value, d):
    """NumPy reference: element (i...) of ``view.ap(pattern, scalar_offset=value, indirect_dim=d)``
    is flat[offset + value * view.strides[d] + sum(step_k * i_k)], strides from NumPy's reshape."""
    v = x.reshape(view_shape)
    stride_d = v.strides[d] // v.itemsize
    counts = [c for _, c in pattern]
    flat = x.reshape(-1)
    idx = np.full(counts, value * stride_d, np.int64)
    for k, (step, count) in enumerate(pattern):
        shape = [1] * len(pattern)
        shape[k] = count
        idx = idx + (np.arange(count) * step).reshape(shape)
    return flat[idx]


def gather_kernel(view_shape, pattern, d, oob=nisa.oob_mode.error, on_chip=False):
    counts = tuple(c for _, c in pattern)

    def kernel(x, off):
        r = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)      # the runtime offset, a 1x1 tile
        nisa.dma_copy(dst=r, src=off)
        src = x
        if on_chip:
            src = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=src, src=x)
        view = src.reshape(view_shape)
        t = nl.ndarray(counts, dtype=x.dtype, buffer=nl.sbuf)
        nisa.memset(dst=t, value=-1.0)
        nisa.dma_copy(dst=t, src=view.ap(pattern, offset=0, scalar_offset=r, indirect_dim=d), oob_mode=oob)
        out = nl.ndarray(counts, dtype=x.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=t)
        return out
    return kernel


CASES = [
    # (base shape, view shape, pattern, indirect_dim, offset value)
    ((8, 12), (8, 12), [[12, 2], [1, 12]], 0, 3),
    ((8, 12), (4, 2, 12), [[12, 2], [1, 12]], 0, 1),        # reshape: dim 0 stride 24, not 96
    ((8, 12), (4, 2, 12), [[12, 2], [1, 12]], 1, 3),
    ((8, 12), (2, 4, 3, 4), [[4, 3], [1, 4]], 2, 5),
    ((6, 16), (6, 4, 4), [[16, 3], [1, 4]], 1, 2),
    ((6, 16), (96,), [[16, 2], [1, 8]], 0, 17),
]


@pytest.mark.parametrize("base,view_shape,pattern,d,value", CASES)
def test_scalar_offset_scales_by_the_views_stride(base, view_shape, pattern, d, value):
    x = np.arange(np.prod(base), dtype=np.float32).reshape(base)
    got = simulate(gather_kernel(view_shape, pattern, d), x, np.array([[value]], np.int32))
    np.testing.assert_array_equal(got, _ref_ap(x, view_shape, pattern, value, d))


def test_scalar_offset_on_chip_reshape_free_dim():
    """On chip: a (4, 24) tile viewed (4, 2, 12); indirect_dim=2 steps by 1 element, dim 1 by 12."""
    x = np.arange(96, dtype=np.float32).reshape(4, 24)
    for d, value in [(1, 1), (2, 5)]:
        pattern = [[24, 4], [1, 6]]
        got = simulate(gather_kernel((4, 2, 12), pattern, d, on_chip=True), x, np.array([[value]], np.int32))
        np.testing.assert_array_equal(got, _ref_ap(x, (4, 2, 12), pattern, value, d))


def test_scalar_offset_out_of_bounds_raises_at_the_dma():
    x = np.zeros((8, 12), np.float32)
    kernel = gather_kernel((4, 2, 12), [[12, 2], [1, 12]], 0)
    with pytest.raises(BoundsError, match=err(
            "nisa.dma_copy", "src view of tensor 'argument 0' (4, 2, 12) reaches element 143, outside its 96 "
                             "elements (dynamic offset 120; oob_mode=error)")):
        simulate(kernel, x, np.array([[5]], np.int32))


@pytest.mark.parametrize("value", [4, 5, 100, -1])
def test_oob_skip_skips_the_dynamic_transfer(value):
    """oob_mode=skip: the destination keeps its values (the memset -1) for an out-of-bounds offset."""
    x = np.arange(96, dtype=np.float32).reshape(8, 12)
    kernel = gather_kernel((4, 2, 12), [[12, 2], [1, 12]], 0, oob=nisa.oob_mode.skip)
    got = simulate(kernel, x, np.array([[value]], np.int32))
    np.testing.assert_array_equal(got, np.full((2, 12), -1, np.float32))


def test_oob_skip_in_bounds_still_copies():
    x = np.arange(96, dtype=np.float32).reshape(8, 12)
    kernel = gather_kernel((4, 2, 12), [[12, 2], [1, 12]], 0, oob=nisa.oob_mode.skip)
    got = simulate(kernel, x, np.array([[3]], np.int32))
    np.testing.assert_array_equal(got, x[6:8])


def test_oob_skip_for_a_dynamic_destination():
    """A scatter to a dynamic HBM address out of bounds is skipped; the output keeps its values."""
    def kernel(x, off):
        r = nisa.register_alloc()
        it = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
        nisa.dma_copy(dst=it, src=off)
        nisa.register_load(r, it)                                   # the runtime offset in a register
        out = nl.ndarray((4, 6), dtype=x.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=x)
        t = nl.ndarray((1, 6), dtype=x.dtype, buffer=nl.sbuf)
        nisa.memset(dst=t, value=9.0)
        nisa.dma_copy(dst=out.ap([[6, 1], [1, 6]], offset=0, scalar_offset=r, indirect_dim=0), src=t,
                      oob_mode=nisa.oob_mode.skip)
        return out
    x = np.arange(24, dtype=np.float32).reshape(4, 6)
    np.testing.assert_array_equal(simulate(kernel, x, np.array([[7]], np.int32)), x)
    want = x.copy()
    want[2] = 9
    np.testing.assert_array_equal(simulate(kernel, x, np.array([[2]], np.int32)), want)


def test_dynamic_select_out_of_bounds_deferred_to_the_dma():
    """``t.select(0, idx)`` with a runtime index: checked by the DMA, skipped with oob_mode=skip."""
    def kernel(x, idx, mode):
        it = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
        nisa.dma_copy(dst=it, src=idx)
        t = nl.ndarray((1, 5), dtype=x.dtype, buffer=nl.sbuf)
        nisa.memset(dst=t, value=-2.0)
        nisa.dma_copy(dst=t, src=x.select(0, it), oob_mode=mode)
        out = nl.ndarray((1, 5), dtype=x.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=t)
        return out
    x = np.arange(15, dtype=np.float32).reshape(3, 5)
    skip, error = nisa.oob_mode.skip, nisa.oob_mode.error
    np.testing.assert_array_equal(simulate(kernel, x, np.array([[1]], np.int32), skip), x[1:2])
    np.testing.assert_array_equal(simulate(kernel, x, np.array([[3]], np.int32), skip), np.full((1, 5), -2.0))
    with pytest.raises(BoundsError, match=err(
            "nisa.dma_copy", "src dynamic index 3 on dim 0 of tensor 'argument 0' (3, 5) is outside 0:3 "
                             "(oob_mode=error)")):
        simulate(kernel, x, np.array([[3]], np.int32), error)


def test_out_of_bounds_dynamic_view_in_a_compute_op_raises():
    """Only a DMA reads oob_mode; any other instruction using the view raises BoundsError."""
    with pytest.raises(BoundsError, match=r"^nisa\.tensor_copy: src view of tensor \(2, 8\) reaches "
                                          r"element 18, outside its 16 elements \(dynamic offset 3; "
                                          r"oob_mode=error\) \(test_dynamic_offsets\.py:\d+\)$"):
        def kernel2(x):
            r = nisa.register_alloc(3)
            t = nl.ndarray((2, 8), dtype=nl.float32, buffer=nl.sbuf)
            nisa.dma_copy(dst=t, src=x)
            u = nl.ndarray((2, 8), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_copy(dst=u, src=t.ap([[8, 2], [1, 8]], scalar_offset=r, indirect_dim=1))
        simulate(kernel2, np.zeros((2, 8), np.float32))


def test_dynamic_views_are_indirect_and_cannot_be_re_indirected():
    """NkiTensor.is_indirect: "Indirect views cannot be re-indirected"; "only one dynamic select
    per tensor (no chaining)"; view(dtype) "Not supported after dynamic / vector select"."""
    seen = {}

    def kernel(x, mode):
        it = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
        nisa.memset(dst=it, value=1)
        v = x.select(0, it)
        w = x.ap([[4, 1], [1, 4]], scalar_offset=it, indirect_dim=0)
        seen["flags"] = (x.is_indirect(), v.is_indirect(), w.is_indirect(), x.select(0, 1).is_indirect(),
                         v[0:2].is_indirect())
        if mode == "select":
            v.select(0, it)
        elif mode == "ap":
            w.ap([[4, 1], [1, 4]], scalar_offset=it)
        elif mode == "view":
            w.view(nl.int32)
    x = np.zeros((3, 4, 4), np.float32)
    simulate(kernel, x, None)
    assert seen["flags"] == (False, True, True, False, True)
    for mode, op, what in [("select", "NkiTensor.select", "a dynamic select"),
                           ("ap", "NkiTensor.ap", "a scalar_offset/vector_offset access pattern"),
                           ("view", "NkiTensor.view", "a dtype reinterpretation")]:
        label = "(4, 4)" if mode == "select" else "(1, 4)"
        with pytest.raises(ShapeError, match=err(op, f"{what} of tensor 'argument 0' {label}, which is already "
                                                     f"an indirect (dynamic-offset) view; indirect views cannot "
                                                     f"be re-indirected")):
            simulate(kernel, x, mode)


def test_dma_transpose_skips_an_out_of_bounds_dynamic_src():
    """nisa.dma_transpose: oob_mode=skip with a dynamic src address (src.ap(scalar_offset=...))."""
    def kernel(x, off, mode):
        r = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
        nisa.dma_copy(dst=r, src=off)
        t = nl.ndarray((4, 2), dtype=x.dtype, buffer=nl.sbuf)
        nisa.memset(dst=t, value=5.0)
        nisa.dma_transpose(dst=t, src=x.ap([[4, 2], [1, 4]], offset=0, scalar_offset=r, indirect_dim=0),
                           oob_mode=mode)
        out = nl.ndarray((4, 2), dtype=x.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=t)
        return out
    x = np.arange(24, dtype=np.float16).reshape(6, 4)
    skip = nisa.oob_mode.skip
    np.testing.assert_array_equal(simulate(kernel, x, np.array([[2]], np.int32), skip), x[2:4].T)
    np.testing.assert_array_equal(simulate(kernel, x, np.array([[5]], np.int32), skip), np.full((4, 2), 5.0))
    with pytest.raises(BoundsError, match="reaches element 27, outside its 24 elements"):
        simulate(kernel, x, np.array([[5]], np.int32), nisa.oob_mode.error)


def test_dynamic_address_needs_a_dge_mode_that_makes_descriptors_at_run_time():
    """nisa.dma_copy: "When either sw_dge or hw_dge mode is used, the src and dst tensors can have
    a dynamic start address"; dge_mode=none makes descriptors before execution."""
    from nkisim.errors import UnsupportedError

    def kernel(x, mode):
        r = nisa.register_alloc(1)
        t = nl.ndarray((1, 4), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x.ap([[4, 1], [1, 4]], offset=0, scalar_offset=r, indirect_dim=0),
                      dge_mode=mode)
        out = nl.ndarray((1, 4), dtype=x.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=t)
        return out
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    for mode in (nisa.dge_mode.unknown, nisa.dge_mode.swdge, nisa.dge_mode.hwdge):
        np.testing.assert_array_equal(simulate(kernel, x, mode, target="trn2"), x[1:2])
    with pytest.raises(UnsupportedError, match=err(
            "nisa.dma_copy", "src has a dynamic (runtime) address, which needs dge_mode swdge or hwdge (with "
                             "dge_mode=none the descriptors are made before execution)")):
        simulate(kernel, x, nisa.dge_mode.none, target="trn2")


def test_ds_with_a_register_start_is_a_dynamic_view():
    """``x[nl.ds(reg, n)]`` ("dynamic slice", NkiTensor.__getitem__): checked where it is used."""
    def kernel(x, off, mode):
        r = nisa.register_alloc()
        it = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
        nisa.dma_copy(dst=it, src=off)
        nisa.register_load(r, it)
        v = x[nl.ds(r, 2), 1:4]
        assert v.is_indirect() and v.shape == (2, 3)
        t = nl.ndarray((2, 3), dtype=x.dtype, buffer=nl.sbuf)
        nisa.memset(dst=t, value=-3.0)
        nisa.dma_copy(dst=t, src=v, oob_mode=mode)
        out = nl.ndarray((2, 3), dtype=x.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=t)
        return out
    x = np.arange(30, dtype=np.float32).reshape(5, 6)
    skip, error = nisa.oob_mode.skip, nisa.oob_mode.error
    for start in range(4):
        np.testing.assert_array_equal(simulate(kernel, x, np.array([[start]], np.int32), error),
                                      x[start:start + 2, 1:4])
    np.testing.assert_array_equal(simulate(kernel, x, np.array([[4]], np.int32), skip), np.full((2, 3), -3.0))
    with pytest.raises(BoundsError, match=err(
            "nisa.dma_copy", "src dynamic slice 4:6 on dim 0 of tensor 'argument 0' (5, 6) is outside 0:5 "
                             "(oob_mode=error)")):
        simulate(kernel, x, np.array([[4]], np.int32), error)
