"""Launch edge cases (issue 11, item 6): 0-d arguments, list arguments, tensors larger than HBM,
self-overlapping output views, NumPy warnings, on-chip results, nl.store from PSUM."""
import inspect
import re
import warnings

import ml_dtypes
import numpy as np
import pytest

import nkisim.nki as nki
import nkisim.nki.isa as nisa
import nkisim.nki.language as nl
from nkisim.errors import (CapacityError, KernelArgumentError, MemorySpaceError, NkiError, ShapeError)
from conftest import simulate

F32 = np.float32
BF16 = ml_dtypes.bfloat16
HERE = "test_launch_edges.py"


def line_of(fn, text):
    lines, start = inspect.getsourcelines(fn)
    return f"{HERE}:{start + next(i for i, s in enumerate(lines) if text in s)}"


def def_line(fn):
    return f"{HERE}:{inspect.getsourcelines(fn)[1]}"


def doubled(x):
    """A new HBM output of x's shape holding 2 * x."""
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nl.store(out, nl.multiply(nl.load(x), 2.0, dtype=x.dtype))
    return out


def doubled_in_place(x):
    nl.store(x, nl.multiply(nl.load(x), 2.0, dtype=x.dtype))


# ---- 0-d arguments -----------------------------------------------------------------------------

@pytest.mark.parametrize("value, dtype", [(3.0, F32), (1.5, BF16), (-7, np.int32), (0.25, np.float16)])
def test_zero_d_argument_output_comes_back_zero_d(value, dtype):
    x = np.array(value, dtype)
    out = simulate(doubled, x)
    assert out.shape == () and out.dtype == x.dtype
    assert out == (np.float32(value) * 2).astype(dtype)


@pytest.mark.parametrize("value, dtype", [(3.0, F32), (1.5, BF16), (-7, np.int32)])
def test_zero_d_argument_written_stays_zero_d(value, dtype):
    x = np.array(value, dtype)
    assert simulate(doubled_in_place, x) is None
    assert x.shape == () and x == (np.float32(value) * 2).astype(dtype)


def test_zero_d_argument_returned_is_the_callers_array():
    def kernel(x):
        doubled_in_place(x)
        return x
    x = np.array(5.0, F32)
    assert simulate(kernel, x) is x and x.shape == () and x == 10


def test_zero_d_argument_has_shape_empty_in_the_kernel_and_reshapes_to_a_tile():
    seen = {}

    def kernel(x):
        seen["shape"] = x.shape
        t = nl.ndarray((1, 1), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x.reshape((1, 1)))
        out = nl.ndarray((), dtype=x.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=t)
        return out
    out = simulate(kernel, np.array(4.0, F32))
    assert seen["shape"] == () and out.shape == () and out == 4


def test_zero_d_on_chip_tensor_is_still_rejected():
    def kernel(x):
        nl.ndarray((), dtype=nl.float32, buffer=nl.sbuf)
        return x
    with pytest.raises(ShapeError, match=r"^nl\.ndarray: shape \(\) must have at least one dim"):
        simulate(kernel, np.ones((1, 1), F32))


def test_zero_d_torch_tensor_comes_back_zero_d():
    torch = pytest.importorskip("torch")
    x = torch.tensor(3.0)
    out = simulate(doubled, x)
    assert isinstance(out, torch.Tensor) and out.shape == () and out.item() == 6.0
    simulate(doubled_in_place, x)
    assert x.shape == () and x.item() == 6.0


# ---- list arguments ------------------------------------------------------------------------------

def strided(x, stride, cfg=(1, 2)):
    return doubled(x)


@pytest.mark.parametrize("args, kwargs, name", [
    ((np.ones((2, 2), F32), [1, 1]), {}, "'stride'"),
    ((np.ones((2, 2), F32),), {"stride": [1.0]}, "'stride'"),
    ((np.ones((2, 2), F32), (1, 1), (1, [2, 3])), {}, "'cfg[1]'"),
    ((np.ones((2, 2), F32), (1, 1)), {"cfg": {"k": []}}, "\"cfg['k']\""),
])
def test_list_argument_of_values_is_a_type_error_naming_the_parameter(args, kwargs, name):
    with pytest.raises(KernelArgumentError) as err:
        nki.simulate(strided)(*args, **kwargs)                      # located at this call
    assert isinstance(err.value, TypeError) and isinstance(err.value, NkiError)
    assert re.fullmatch(rf"kernel argument: argument {re.escape(name)} is a list; NKI kernels do not take "
                        rf"list arguments: pass a tuple instead \({HERE}:\d+\)", str(err.value)), str(err.value)


def test_tuple_arguments_and_lists_of_arrays_still_work():
    x = np.arange(4, dtype=F32).reshape(2, 2)
    np.testing.assert_array_equal(simulate(strided, x, (1, 1), cfg=(3, (4, 5))), 2 * x)

    def add_all(xs):
        out = nl.ndarray(xs[0].shape, dtype=xs[0].dtype, buffer=nl.shared_hbm)
        acc = nl.load(xs[0])
        for t in xs[1:]:
            acc = nl.add(acc, nl.load(t))
        nl.store(out, acc)
        return out
    parts = [x, x + 1, x * 3]
    np.testing.assert_array_equal(simulate(add_all, parts), x + (x + 1) + x * 3)
    np.testing.assert_array_equal(simulate(add_all, tuple(parts)), x + (x + 1) + x * 3)


# ---- tensors larger than the target's HBM ---------------------------------------------------------

GIB = 2 ** 30
HBM_DOC = {"trn1": 32 * GIB, "trn2": 96 * GIB, "trn3": 144 * GIB}     # the architecture guides


@pytest.mark.parametrize("target", ["trn1", "trn2", "trn3"])
def test_argument_larger_than_hbm_is_a_capacity_error(target):
    n = HBM_DOC[target] // 4 + 1                      # one float32 more than the device holds
    x = np.broadcast_to(np.zeros((), F32), (n,))     # a few bytes of host memory
    with pytest.raises(CapacityError) as err:
        simulate(doubled, x, target=target)
    assert isinstance(err.value, MemoryError)
    assert str(err.value) == (f"kernel argument: argument 'x' needs {4 * n} bytes, exceeds the {HBM_DOC[target]} "
                              f"bytes ({HBM_DOC[target] // GIB} GiB) of HBM on {target} ({err.value.where})")


@pytest.mark.parametrize("make", [
    lambda: nl.ndarray((2 ** 20, 2 ** 20, 16), dtype=nl.float32, buffer=nl.shared_hbm),
    lambda: nl.ndarray((40 * GIB,), dtype=nl.int8, buffer=nl.hbm),
    lambda: nl.zeros((2 ** 16, 2 ** 16, 2 ** 8), dtype=nl.bfloat16, buffer=nl.shared_hbm),
])
def test_hbm_allocation_larger_than_hbm_is_a_capacity_error(make):
    def kernel(x):
        make()
        return x
    with pytest.raises(CapacityError, match=r"bytes \(32 GiB\) of HBM on trn1 \("):
        simulate(kernel, np.ones((1, 1), F32), target="trn1")
    with pytest.raises(CapacityError, match=r"of HBM on trn1"):          # also under findings="all"
        nki.simulate(kernel, target="trn1", findings="all")(np.ones((1, 1), F32))


def test_hbm_allocation_within_hbm_on_a_larger_target():
    def kernel(x):
        nl.ndarray((40 * GIB,), dtype=nl.int8, buffer=nl.shared_hbm)   # not touched: never filled
        return x
    with pytest.raises(CapacityError):
        simulate(kernel, np.ones((1, 1), F32), target="trn1")
    from nkisim.memory.access import check_hbm_size
    from nkisim import arch
    check_hbm_size("op", "t", HBM_DOC["trn2"], arch.get("trn2"))          # exactly full: fits
    with pytest.raises(CapacityError):
        check_hbm_size("op", "t", HBM_DOC["trn2"] + 1, arch.get("trn2"))


# ---- self-overlapping output views -------------------------------------------------------------

def copy_into(x, out):
    nl.store(out, nl.load(x))


def overlapping_views():
    base = np.zeros(16, F32)
    return {
        "broadcast_to": np.broadcast_to(np.zeros((1, 4), F32), (3, 4)),
        "as_strided stride 0": np.lib.stride_tricks.as_strided(base[:4], (3, 4), (0, 4)),
        "as_strided windows": np.lib.stride_tricks.as_strided(base, (3, 4), (4, 4)),
        "as_strided half-element steps": np.lib.stride_tricks.as_strided(
            np.zeros(16, np.uint8).view(np.int16)[:3], (3, 4), (2, 1)).view(np.int16)[:, :2],
    }


@pytest.mark.parametrize("kind", list(overlapping_views()))
def test_writing_a_self_overlapping_view_is_rejected(kind):
    out = overlapping_views()[kind]
    x = np.ones(out.shape, out.dtype)
    before = out.copy()
    with pytest.raises(MemorySpaceError) as err:
        simulate(copy_into, x, out)
    assert str(err.value) == (
        f"nisa.dma_copy: dst is argument 1, a view whose elements overlap in memory (a stride-0 or "
        f"overlapping view such as np.broadcast_to, as_strided or torch expand): more than one element "
        f"of the written-to tensor refers to a single memory location; the kernel cannot write it "
        f"(pass a copy: .copy() / .clone()) ({line_of(copy_into, 'nl.store')})")
    np.testing.assert_array_equal(out, before)


def test_reading_a_self_overlapping_view_is_fine():
    row = np.arange(4, dtype=F32)
    x = np.broadcast_to(row, (3, 4))
    np.testing.assert_array_equal(simulate(doubled, x), np.tile(2 * row, (3, 1)))


@pytest.mark.parametrize("make", [
    lambda: np.zeros((4, 6), F32)[:, ::2],
    lambda: np.zeros((4, 3), F32).T,
    lambda: np.zeros((4, 6), F32)[::-1, 1:5],
    lambda: np.lib.stride_tricks.as_strided(np.zeros(32, F32), (4, 4), (32, 4)),  # gaps, no overlap
])
def test_non_overlapping_strided_outputs_are_written(make):
    out = make()
    x = np.arange(out.size, dtype=F32).reshape(out.shape)
    simulate(copy_into, x, out)
    np.testing.assert_array_equal(out, x)


def _overlaps_reference(a):
    """Brute force: do two elements' byte ranges intersect?"""
    starts = sorted(sum(i * s for i, s in zip(idx, a.strides)) for idx in np.ndindex(*a.shape))
    return any(b - s < a.itemsize for s, b in zip(starts, starts[1:]))


def test_overlap_check_matches_brute_force():
    from nkisim.runtime.launch import _self_overlapping
    rng = np.random.default_rng(0)
    base = np.zeros(4096, np.uint8)
    for _ in range(400):
        ndim = int(rng.integers(1, 4))
        shape = tuple(int(n) for n in rng.integers(1, 5, ndim))
        itemsize = int(rng.choice([1, 2, 4]))
        strides = tuple(int(s) * int(rng.choice([1, itemsize])) for s in rng.integers(-3, 9, ndim))
        first = base[2048:2048 + itemsize].view(f"u{itemsize}")        # room on both sides
        a = np.lib.stride_tricks.as_strided(first, shape, strides)
        assert _self_overlapping(a) == _overlaps_reference(a), (shape, strides, itemsize)


def test_torch_expand_output_is_rejected_as_torch_rejects_it():
    torch = pytest.importorskip("torch")
    out = torch.zeros(1, 4).expand(3, 4)
    with pytest.raises(RuntimeError, match="more than one element of the written-to tensor refers to a "
                                           "single memory location"):
        out.add_(1)                                # the reference: torch's own in-place rule
    with pytest.raises(MemorySpaceError, match="more than one element of the written-to tensor refers to "
                                               "a single memory location"):
        simulate(copy_into, torch.ones(3, 4), out)
    assert out.eq(0).all()
    got = simulate(doubled, torch.arange(4.0).expand(3, 4))     # reading an expanded tensor is fine
    assert torch.equal(got, (2 * torch.arange(4.0)).expand(3, 4))


# ---- NumPy floating-point warnings -------------------------------------------------------------

def nan_kernel(x):
    out = nl.ndarray((4,) + x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.load(x)
    nl.store(out[0], nl.log(nl.multiply(t, 0.0)))     # log(0), 0 * inf
    nl.store(out[1], nl.divide(t, nl.multiply(t, 0.0)))   # x / 0, inf / nan
    nl.store(out[2], nl.exp(nl.multiply(t, 1e30)))    # overflow
    nl.store(out[3], nl.sqrt(nl.subtract(t, 10.0)))   # sqrt of negatives
    return out


def _nan_reference(x):
    with np.errstate(all="ignore"):
        z = x * F32(0)
        return np.stack([np.log(z), x / z, np.exp(x * F32(1e30)), np.sqrt(x - F32(10))])


@pytest.mark.parametrize("lnc", [1, 2])
def test_nan_arithmetic_does_not_warn(lnc):
    x = np.array([[np.inf, -1.0, 0.0, 2.0], [np.nan, 1.0, -np.inf, 3.0]], F32)
    before = np.geterr()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = simulate(nan_kernel, x, lnc=lnc)
    np.testing.assert_allclose(out, _nan_reference(x), rtol=1e-6)
    assert np.geterr() == before


def test_callers_errstate_is_restored_after_launch():
    with np.errstate(divide="raise"):
        simulate(nan_kernel, np.ones((1, 4), F32))
        with pytest.raises(FloatingPointError):
            np.float32(1) / np.float32(0)


# ---- kernels return HBM tensors ---------------------------------------------------------------

@pytest.mark.parametrize("buffer", ["sbuf", "psum"])
@pytest.mark.parametrize("wrap", [lambda t: t, lambda t: (t,), lambda t: {"y": [t]}])
def test_returning_an_on_chip_tile_raises(buffer, wrap):
    def kernel(x):
        doubled_in_place(x)
        t = nl.ndarray((2, 3), dtype=nl.float32, buffer=getattr(nl, buffer))
        nisa.memset(dst=t, value=1.0)
        return wrap(t)
    x = np.ones((2, 3), F32)
    with pytest.raises(MemorySpaceError) as err:
        simulate(kernel, x)
    assert str(err.value) == (f"kernel result: the kernel returned an on-chip tensor [2, 3] in {buffer}; kernels "
                              f"return HBM tensors: store it into an nl.ndarray(..., buffer=nl.shared_hbm) "
                              f"and return that ({def_line(kernel)})")
    np.testing.assert_array_equal(x, np.ones((2, 3), F32))       # the failed kernel's write undone


def test_a_sub_kernel_may_return_a_tile():
    @nki.jit
    def load_twice(x):
        return nl.multiply(nl.load(x), 2.0)

    def kernel(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        nl.store(out, load_twice(x))
        return out
    x = np.arange(6, dtype=F32).reshape(2, 3)
    np.testing.assert_array_equal(simulate(kernel, x), 2 * x)


# ---- nl.store takes SBUF values ----------------------------------------------------------------

def test_nl_store_from_psum_raises():
    def kernel(x):
        out = nl.ndarray((4, 4), dtype=nl.float32, buffer=nl.shared_hbm)
        m = nl.matmul(nl.load(x), nl.load(x), transpose_x=True)       # a PSUM tile
        nl.store(out, m)
        return out
    x = np.eye(4, dtype=F32)
    with pytest.raises(MemorySpaceError) as err:
        simulate(kernel, x)
    assert str(err.value) == f"nl.store: value is in psum; must be in sbuf ({line_of(kernel, 'nl.store(out, m)')})"

    def fixed(x):
        out = nl.ndarray((4, 4), dtype=nl.float32, buffer=nl.shared_hbm)
        m = nl.matmul(nl.load(x), nl.load(x), transpose_x=True)
        s = nl.ndarray(m.shape, dtype=m.dtype, buffer=nl.sbuf)
        nisa.tensor_copy(dst=s, src=m)                                 # PSUM -> SBUF first
        nl.store(out, s)
        return out
    np.testing.assert_array_equal(simulate(fixed, x), x.T @ x)
