"""Beta-1 ``nki.jit(mode=...)`` with framework arrays: "torchxla" takes and returns torch CPU tensors
(through the torch layer), "jax" takes NumPy or jax arrays (duck-typed, nkisim imports no jax) and
returns jax arrays through the caller's own ``jax.numpy``. References are NumPy formulas."""
import sys
import types

import numpy as np
import pytest

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
from nkisim.errors import UnsupportedError


def _exp_add(a, b):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    nl.store(out, nl.add(nl.exp(nl.load(a)), nl.load(b)))
    return out


def _copy_into(a, out):
    nl.store(out, nl.load(a))


X = np.linspace(-2, 2, 32, dtype=np.float32).reshape(4, 8)
Y = np.arange(32, dtype=np.float32).reshape(4, 8)


class FakeJaxArray:
    """What nkisim relies on of a jax array: its type's module (``jaxlib``) and ``__array__``
    giving a read-only NumPy array (jax arrays are immutable)."""
    __module__ = "jaxlib._jax"

    def __init__(self, values):
        self.values = np.array(values)
        self.values.flags.writeable = False

    def __array__(self, dtype=None, copy=None):
        return self.values

    shape = property(lambda self: self.values.shape)
    dtype = property(lambda self: self.values.dtype)


def test_torchxla_mode_takes_and_returns_torch_cpu_tensors():
    torch = pytest.importorskip("torch")
    k = nki.jit(_exp_add, mode="torchxla")
    got = k(torch.from_numpy(X), torch.from_numpy(Y))
    assert isinstance(got, torch.Tensor)
    np.testing.assert_allclose(got.numpy(), np.exp(X) + Y, rtol=1e-6)
    out = torch.zeros(4, 8)
    nki.jit(_copy_into, mode="torchxla")(torch.from_numpy(X), out)
    np.testing.assert_array_equal(out.numpy(), X)


def test_jax_mode_with_numpy_arrays_returns_numpy():
    got = nki.jit(_exp_add, mode="jax")(X, Y)
    assert type(got) is np.ndarray
    np.testing.assert_allclose(got, np.exp(X) + Y, rtol=1e-6)


def test_jax_arrays_convert_in_and_come_back_through_the_callers_jax_numpy(monkeypatch):
    made = []
    fake_jnp = types.ModuleType("jax.numpy")
    fake_jnp.asarray = lambda a: made.append(np.array(a)) or FakeJaxArray(a)
    monkeypatch.setitem(sys.modules, "jax.numpy", fake_jnp)
    a, b = FakeJaxArray(X), FakeJaxArray(Y)
    got = nki.jit(_exp_add, mode="jax")(a, b)
    assert isinstance(got, FakeJaxArray) and len(made) == 1
    np.testing.assert_allclose(np.asarray(got), np.exp(X) + Y, rtol=1e-6)
    np.testing.assert_array_equal(a.values, X)


def test_a_kernel_writing_a_jax_array_argument_raises_and_leaves_it_unchanged():
    out = FakeJaxArray(np.zeros((4, 8), np.float32))
    with pytest.raises(UnsupportedError, match=r"^nki\.jit: the kernel wrote a jax array argument \(shape \[4, 8\], "
                                               r"float32\); jax arrays are immutable, so the write cannot reach the "
                                               r"caller: return the output from the kernel \(nl\.ndarray\(\.\.\., "
                                               r"buffer=nl\.shared_hbm\)\) or pass a NumPy array \(.+\)$"):
        nki.jit(_copy_into, mode="jax")(FakeJaxArray(X), out)
    np.testing.assert_array_equal(out.values, 0)


def test_jax_arrays_need_no_jax_import(monkeypatch):
    monkeypatch.setitem(sys.modules, "jax", None)           # any ``import jax`` now raises ImportError
    monkeypatch.delitem(sys.modules, "jax.numpy", raising=False)
    got = nki.jit(_exp_add, mode="jax")(FakeJaxArray(X), FakeJaxArray(Y))
    assert type(got) is np.ndarray                           # no jax.numpy loaded: NumPy comes back
    np.testing.assert_allclose(got, np.exp(X) + Y, rtol=1e-6)


def test_real_jax_arrays_round_trip():
    jnp = pytest.importorskip("jax.numpy")
    got = nki.jit(_exp_add, mode="jax")(jnp.asarray(X), jnp.asarray(Y))
    assert type(got).__module__.startswith("jaxlib")
    np.testing.assert_allclose(np.asarray(got), np.exp(X) + Y, rtol=1e-6)
