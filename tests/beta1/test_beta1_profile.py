"""nkisim.profile of a neuronxcc.nki.jit kernel runs it in Beta-1 semantics, as its own launch
does (the v2.26.0 LayerNorm tutorial subtracts a (128,) mean from a (128, F) tile)."""
import numpy as np

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl

import nkisim


@nki.jit
def centre_rows(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.load(x)
    m = nl.mean(t, axis=1)              # Beta 1: (128,), broadcast along the free dim below
    nl.store(out, t - m)
    return out


def test_profile_of_a_beta1_kernel_uses_beta1_semantics():
    x = np.random.default_rng(3).random((128, 64), dtype=np.float32)
    want = x - x.mean(axis=1, keepdims=True)
    np.testing.assert_allclose(np.asarray(centre_rows(x)), want, rtol=1e-6, atol=1e-6)   # its launch
    p = nkisim.profile(centre_rows, target="trn1")(x)
    np.testing.assert_allclose(np.asarray(p.outputs), want, rtol=1e-6, atol=1e-6)
    assert p.total_us > 0 and p.records
