"""An unmasked out-of-bounds index-expression load raises BoundsError even after a masked launch
built the same views (the geometry memo must not drop the out-of-bounds mark)."""
import numpy as np
import pytest

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
from nkisim.errors import BoundsError


def _kernel(masked):
    @nki.jit
    def k(a_hbm):
        out = nl.ndarray(a_hbm.shape, dtype=a_hbm.dtype, buffer=nl.shared_hbm)
        P, F = a_hbm.shape
        for i in nl.affine_range((P + 127) // 128):
            ip = i * 128 + nl.arange(128)[:, None]
            jf = nl.arange(F)[None, :]
            m = (ip < P) if masked else None
            t = nl.load(a_hbm[ip, jf], mask=m)
            nl.store(out[ip, jf], value=t, mask=m)
        return out
    return k


def test_unmasked_partial_tile_raises_after_masked_run():
    a = np.random.default_rng(0).random((300, 64), dtype=np.float32)
    before = a.copy()
    np.testing.assert_array_equal(nki.simulate_kernel(_kernel(True), a), before)
    with pytest.raises(BoundsError, match="outside 0:300"):
        nki.simulate_kernel(_kernel(False), a)
    np.testing.assert_array_equal(a, before)
