"""Tensor add: ``out = a + b`` for 2-D float32 tensors of any row count.

Shows: ``nisa.dma_copy`` (HBM <-> SBUF), ``nisa.tensor_tensor`` (VectorE element-wise add), row
tiling by ``nl.tile_size.pmax`` with a partial last tile (rows need not be a multiple of 128).
"""
import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np

RTOL, ATOL = 0.0, 0.0   # exact: one fp32 add per element, the same operation NumPy does


@nki.jit
def tensor_add_kernel(a, b):
    """out[r, c] = a[r, c] + b[r, c]; a, b: [rows, cols] in HBM, same shape and dtype."""
    assert a.shape == b.shape, f"a {a.shape} and b {b.shape} must have the same shape"
    rows, cols = a.shape
    P = nl.tile_size.pmax
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)

    for i in nl.affine_range((rows + P - 1) // P):
        # The last tile may hold fewer than P rows: use only its first n partitions.
        n = min(P, rows - i * P)
        a_tile = nl.ndarray((P, cols), dtype=a.dtype, buffer=nl.sbuf)
        b_tile = nl.ndarray((P, cols), dtype=b.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=a_tile[0:n, :], src=a[nl.ds(i * P, n), :])
        nisa.dma_copy(dst=b_tile[0:n, :], src=b[nl.ds(i * P, n), :])

        sum_tile = nl.ndarray((P, cols), dtype=a.dtype, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=sum_tile[0:n, :], data1=a_tile[0:n, :], data2=b_tile[0:n, :],
                           op=nl.add)
        nisa.dma_copy(dst=out[nl.ds(i * P, n), :], src=sum_tile[0:n, :])
    return out


KERNEL = tensor_add_kernel


def reference(a, b):
    return a.astype(np.float32) + b.astype(np.float32)


def make_inputs(rng, small=False):
    shape = (300, 96) if small else (4000, 2048)     # 4000 = 31 * 128 + 32: a partial last tile
    a = rng.standard_normal(shape, dtype=np.float32)
    b = rng.standard_normal(shape, dtype=np.float32)
    return a, b
