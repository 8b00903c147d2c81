"""2-D transpose: ``out = x.T`` for a float32 matrix of any shape.

Shows: ``nisa.nc_transpose`` on TensorE (a 128 x 128 SBUF block into PSUM), ``nisa.tensor_copy``
(PSUM -> SBUF), ``nisa.dma_copy``; partial blocks on both dims when a size is not a multiple of 128.
"""
import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np

RTOL, ATOL = 0.0, 0.0   # exact: a transpose only moves values


@nki.jit
def transpose_kernel(x):
    """out[c, r] = x[r, c]; x: [rows, cols] in HBM."""
    rows, cols = x.shape
    P = nl.tile_size.pmax
    out = nl.ndarray((cols, rows), dtype=x.dtype, buffer=nl.shared_hbm)

    for i in nl.affine_range((rows + P - 1) // P):
        n_rows = min(P, rows - i * P)
        # One strip of P rows, all columns, then transpose it block by block.
        strip = nl.ndarray((P, cols), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=strip[0:n_rows, :], src=x[nl.ds(i * P, n_rows), :])

        for j in nl.affine_range((cols + P - 1) // P):
            n_cols = min(P, cols - j * P)
            block_t = nl.ndarray((P, P), dtype=x.dtype, buffer=nl.psum)
            nisa.nc_transpose(dst=block_t[0:n_cols, 0:n_rows],
                              data=strip[0:n_rows, nl.ds(j * P, n_cols)],
                              engine=nisa.engine.tensor)
            block_sb = nl.ndarray((P, P), dtype=x.dtype, buffer=nl.sbuf)
            nisa.tensor_copy(dst=block_sb[0:n_cols, 0:n_rows], src=block_t[0:n_cols, 0:n_rows])
            nisa.dma_copy(dst=out[nl.ds(j * P, n_cols), nl.ds(i * P, n_rows)],
                          src=block_sb[0:n_cols, 0:n_rows])
    return out


KERNEL = transpose_kernel


def reference(x):
    return np.ascontiguousarray(x.astype(np.float32).T)


def make_inputs(rng, small=False):
    shape = (200, 300) if small else (2048, 2000)    # 2000 = 15 * 128 + 80: partial column blocks
    return (rng.standard_normal(shape, dtype=np.float32),)
