"""Cumulative sum along each row: ``out[r, j] = sum(x[r, :j + 1])``, float32.

Shows: ``nisa.tensor_tensor_scan`` as the recurrence ``r[j] = 1 * r[j - 1] + x[j]`` (op0 multiply
by a ones tile, op1 add), carried across free-dim tiles through its ``initial`` column in a
``nl.sequential_range`` loop; ``nisa.memset``; ``nisa.tensor_copy``; a partial last row tile.
"""
import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np

# fp32 running sums of up to 4096 terms: order-dependent rounding ~ sqrt(n) * eps * |sum|.
RTOL, ATOL = 1e-4, 2e-3

F_TILE = 2048   # columns scanned per instruction


@nki.jit
def cumsum_kernel(x):
    """x: [rows, cols] in HBM; out: [rows, cols] running sums along each row."""
    rows, cols = x.shape
    P = nl.tile_size.pmax
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    n_f_tiles = (cols + F_TILE - 1) // F_TILE

    ones = nl.ndarray((P, F_TILE), dtype=nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=ones, value=1.0)

    for i in nl.affine_range((rows + P - 1) // P):
        n = min(P, rows - i * P)
        carry = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.memset(dst=carry, value=0.0)

        # each free tile starts from the last running sum of the one before: a true dependency
        for j in nl.sequential_range(n_f_tiles):
            width = min(F_TILE, cols - j * F_TILE)
            x_sb = nl.ndarray((P, F_TILE), dtype=x.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=x_sb[0:n, 0:width], src=x[nl.ds(i * P, n), nl.ds(j * F_TILE, width)])

            sums = nl.ndarray((P, F_TILE), dtype=x.dtype, buffer=nl.sbuf)
            nisa.tensor_tensor_scan(dst=sums[0:n, 0:width], data0=ones[0:n, 0:width],
                                    data1=x_sb[0:n, 0:width], initial=carry[0:n, :],
                                    op0=nl.multiply, op1=nl.add)
            nisa.dma_copy(dst=out[nl.ds(i * P, n), nl.ds(j * F_TILE, width)], src=sums[0:n, 0:width])
            nisa.tensor_copy(dst=carry[0:n, :], src=sums[0:n, width - 1:width])
    return out


KERNEL = cumsum_kernel


def reference(x):
    return np.cumsum(x.astype(np.float32), axis=1, dtype=np.float32)


def make_inputs(rng, small=False):
    shape = (200, 3000) if small else (1000, 4096)    # 1000 rows: a partial last tile of 104
    return (rng.uniform(-1.0, 1.0, shape).astype(np.float32),)
