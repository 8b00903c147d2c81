"""Beta-1 kernels through the torch layer: ``wrap_nki`` reads the parameter list (``kernel.sign``)
and runs the kernel on torch CPU tensors."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")

import neuronxcc.nki as nki  # noqa: E402
import neuronxcc.nki.language as nl  # noqa: E402
from nkisim.torch import wrap_nki  # noqa: E402


@nki.jit
def add_scaled(a, b, alpha=2.0):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    nl.store(out, nl.add(nl.load(a), nl.multiply(nl.load(b), alpha)))
    return out


def test_wrap_nki_runs_a_beta1_kernel_on_torch_tensors(monkeypatch):
    monkeypatch.setenv("NKI_SIMULATOR", "1")
    w = wrap_nki(add_scaled)
    assert w.arg_names == tuple(add_scaled.sign.parameters) == ("a", "b", "alpha")
    a, b = torch.arange(8.0).reshape(2, 4), torch.ones(2, 4)
    got = w(a, b, alpha=3.0)
    assert isinstance(got, torch.Tensor)
    np.testing.assert_array_equal(got.numpy(), a.numpy() + 3.0 * b.numpy())


def test_a_beta1_kernel_called_with_torch_tensors_gives_torch_tensors():
    a, b = torch.arange(8.0).reshape(2, 4), torch.ones(2, 4)
    got = add_scaled(a, b)
    assert isinstance(got, torch.Tensor)
    np.testing.assert_array_equal(got.numpy(), a.numpy() + 2.0)


def test_wrap_nki_rejects_an_spmd_grid_it_cannot_launch():
    with pytest.raises(ValueError, match=r"wrap_nki: .*SPMD grid \[4\]"):
        wrap_nki(add_scaled[4])
