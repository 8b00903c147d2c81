"""Arguments that share memory share HBM (runtime.launch): NumPy views passed to one launch.

The same view twice is one HBM tensor; overlapping but different views of one buffer are views of
ONE allocation, so every write is seen through every argument, as on hardware.
"""
import ml_dtypes
import numpy as np
import pytest

import nkisim.nki as nki
import nkisim.nki.language as nl
from nkisim.errors import ShapeError
from nkisim.runtime.launch import _alias_plan
from nki_torch_kernels import add_into, clean_env, write_y_read_x  # noqa: F401


def _add_into_ref(x, *views):
    """x with 1 added through each view in turn (the kernel's formula)."""
    want = x.astype(np.float32).copy()
    for sl in views:
        want[sl] += 1
    return want


def test_same_strided_view_object_twice_gets_both_writes():
    x = np.zeros((2, 8), np.float32)
    v = x[:, ::2]
    nki.simulate(add_into)(v, v)
    np.testing.assert_array_equal(x, _add_into_ref(np.zeros((2, 8)), np.s_[:, ::2], np.s_[:, ::2]))


def test_two_objects_viewing_the_same_memory_get_both_writes():
    x = np.zeros((2, 8), np.float32)
    nki.simulate(add_into)(x[:, ::2], x[:, ::2])
    np.testing.assert_array_equal(x, _add_into_ref(np.zeros((2, 8)), np.s_[:, ::2], np.s_[:, ::2]))


@pytest.mark.parametrize("a, b", [(np.s_[:, 0:4], np.s_[:, 2:6]),        # overlapping column blocks
                                  (np.s_[:, 0::2], np.s_[:, 0::4]),       # interleaved strides
                                  (np.s_[:, ::-2], np.s_[:, 1:7]),        # a negative stride
                                  (np.s_[0, :], np.s_[:, 3])])            # a row and a column
def test_overlapping_views_see_each_others_writes(a, b):
    x = np.zeros((2, 8), np.float32)
    nki.simulate(add_into)(x[a], x[b])
    np.testing.assert_array_equal(x, _add_into_ref(np.zeros((2, 8)), a, b))


def test_overlapping_bf16_views_in_fp32_storage_mode(monkeypatch):
    """NKI_PRECISE_FP=0 copies the shared span (not in place) and copies it back after success."""
    monkeypatch.setenv("NKI_PRECISE_FP", "0")
    x = np.zeros((2, 8), ml_dtypes.bfloat16)
    nki.simulate(add_into)(x[:, 0:4], x[:, 2:6])
    want = _add_into_ref(np.zeros((2, 8)), np.s_[:, 0:4], np.s_[:, 2:6]).astype(ml_dtypes.bfloat16)
    np.testing.assert_array_equal(x.view(np.uint16), want.view(np.uint16))


def test_read_after_write_through_an_alias():
    x = np.zeros((2, 8), np.float32)
    out = nki.simulate(write_y_read_x)(x[:, 0:4], x[:, 2:6])
    want = np.zeros((2, 8), np.float32)
    want[:, 2:6] += 1
    np.testing.assert_array_equal(out, want[:, 0:4])
    np.testing.assert_array_equal(x, want)


def test_failed_kernel_restores_every_aliased_view():
    def write_then_fail(x, y):
        add_into.func(x, y)
        nl.ndarray((129, 1), dtype=nl.float32, buffer=nl.sbuf)

    x = np.arange(16, dtype=np.float32).reshape(2, 8)
    with pytest.raises(ShapeError, match="partition dim 129"):
        nki.simulate(write_then_fail)(x[:, 0:4], x[:, 2:6])
    np.testing.assert_array_equal(x, np.arange(16, dtype=np.float32).reshape(2, 8))


def test_alias_plan_groups_arrays_whose_byte_extents_overlap():
    x = np.zeros((2, 8), np.float32)
    assert _alias_plan([x[0], x[1]]) == {}                            # disjoint bytes: separate
    a, b = x[:, 0:4], x[:, 2:6]
    plan = _alias_plan([a, b])
    assert plan[id(a)][0] == plan[id(b)][0] == "span" and plan[id(a)][1] is plan[id(b)][1]
    assert plan[id(a)][2:] == ((2, 4), (8, 1), 0) and plan[id(b)][2:] == ((2, 4), (8, 1), 2)
    c, d = x[:, ::2], x[:, ::2]
    assert _alias_plan([c, d]) == {id(d): ("same", c)}
    xi = x.view(np.int32)                                             # dtypes differ: not one span
    assert _alias_plan([x, xi]) == {id(x): ("apart",), id(xi): ("apart",)}
    e, f = x[:, :4], x[:, 4:]                                          # interleaved rows: one span
    assert _alias_plan([e, f])[id(f)][2:] == ((2, 4), (8, 1), 4)
