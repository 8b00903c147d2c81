"""Registers, dynamic loops, and documented-but-unsimulated ops."""
import numpy as np
import pytest

import nkisim.nki as nki
import nkisim.nki.isa as nisa
import nkisim.nki.language as nl
from nkisim.errors import NkiError, UnsupportedError


def test_register_load_store_and_dynamic_loops():
    def kernel(n_hbm, x):
        out = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.shared_hbm)
        r = nisa.register_alloc()
        nisa.register_load(r, n_hbm)                   # r = 5
        acc = nisa.register_alloc(0)
        for i in nl.dynamic_range(r):
            nisa.register_move(acc, int(acc) + int(i))   # 0+1+2+3+4
        total = [0]
        nl.fori_loop(0, 3, lambda i: total.__setitem__(0, total[0] + int(i)))
        left = nisa.register_alloc(3)
        while left:                                     # deprecated `while reg:` form
            nisa.register_move(left, int(left) - 1)
        ended = nl.while_loop(4, lambda v: v - 1)
        nisa.register_move(acc, int(acc) * 100 + total[0] * 10 + ended)
        nisa.register_store(out, acc)
        return out
    got = nki.simulate(kernel)(np.array([[5]], np.int32), np.zeros((1, 1), np.float32))
    assert got.tolist() == [[1030]]


def test_scalar_offset_from_a_register():
    def kernel(x):
        r = nisa.register_alloc(2)
        t = nl.ndarray((1, 4), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x.ap([[4, 1], [1, 4]], offset=0, scalar_offset=r, indirect_dim=0))
        out = nl.ndarray((1, 4), dtype=x.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=t)
        return out
    x = np.arange(16, dtype=np.float32).reshape(4, 4)
    np.testing.assert_array_equal(nki.simulate(kernel)(x), x[2:3])


def test_induction_register_is_read_only():
    def kernel(x):
        for i in nl.dynamic_range(2):
            nisa.register_move(i, 7)
    with pytest.raises(NkiError, match=r"^nisa\.register_move: dst is a loop induction register, which is "
                                       r"read-only \(test_registers\.py:\d+\)$"):
        nki.simulate(kernel)(np.zeros((1, 1), np.float32))


@pytest.mark.parametrize("name", ["activate2", "nc_stream_shuffle", "dma_compute", "quantize_mx", "topk"])
def test_documented_unsimulated_ops_raise_unsupported(name):
    def kernel(x):
        getattr(nisa, name)(x)
    with pytest.raises(UnsupportedError, match=rf"^nisa\.{name}: this instruction is documented but not "
                                               rf"simulated by nkisim yet \(test_registers\.py:\d+\)$"):
        nki.simulate(kernel)(np.zeros((1, 1), np.float32))
