"""Tiled matrix multiplication: ``out = lhsT.T @ rhs`` with bf16 inputs and an fp32 result.

Shows: ``nisa.nc_matmul`` accumulating 128 x 512 output tiles over K in one PSUM tile (the first
matmul into a fresh PSUM tile overwrites, later ones add), ``nisa.tensor_copy`` (PSUM -> SBUF),
``nisa.dma_copy``; the left operand arrives transposed (K on the partition dim), as TensorE wants.
"""
import nki
import nki.isa as nisa
import nki.language as nl
import ml_dtypes
import numpy as np

# fp32 accumulation of exact bf16 products: only the summation order differs from NumPy's.
RTOL, ATOL = 1e-4, 1e-3


@nki.jit
def matmul_kernel(lhsT, rhs):
    """out[M, N] = lhsT[K, M].T @ rhs[K, N]; K and M multiples of 128, N a multiple of 512."""
    K, M = lhsT.shape
    K_, N = rhs.shape
    assert K == K_, f"contraction dims differ: lhsT has K={K}, rhs has K={K_}"
    TILE_K = nl.tile_size.pmax                    # 128: contraction rows per matmul
    TILE_M = nl.tile_size.gemm_stationary_fmax    # 128: output partitions per tile
    TILE_N = nl.tile_size.gemm_moving_fmax        # 512: output columns per tile (one PSUM bank)
    assert K % TILE_K == 0 and M % TILE_M == 0 and N % TILE_N == 0, \
        f"K={K}, M={M} must be multiples of {TILE_K}, N={N} a multiple of {TILE_N}"

    out = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.shared_hbm)

    for m in nl.affine_range(M // TILE_M):
        # This strip of lhsT is reused by every output tile of row block m: load it once.
        lhsT_tiles = []
        for k in nl.affine_range(K // TILE_K):
            lhsT_tile = nl.ndarray((TILE_K, TILE_M), dtype=lhsT.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=lhsT_tile,
                          src=lhsT[k * TILE_K:(k + 1) * TILE_K, m * TILE_M:(m + 1) * TILE_M])
            lhsT_tiles.append(lhsT_tile)

        for n in nl.affine_range(N // TILE_N):
            res_psum = nl.ndarray((TILE_M, TILE_N), dtype=nl.float32, buffer=nl.psum)
            for k in nl.affine_range(K // TILE_K):
                rhs_tile = nl.ndarray((TILE_K, TILE_N), dtype=rhs.dtype, buffer=nl.sbuf)
                nisa.dma_copy(dst=rhs_tile,
                              src=rhs[k * TILE_K:(k + 1) * TILE_K, n * TILE_N:(n + 1) * TILE_N])
                nisa.nc_matmul(dst=res_psum, stationary=lhsT_tiles[k], moving=rhs_tile)

            res_sb = nl.ndarray((TILE_M, TILE_N), dtype=out.dtype, buffer=nl.sbuf)
            nisa.tensor_copy(dst=res_sb, src=res_psum)
            nisa.dma_copy(dst=out[m * TILE_M:(m + 1) * TILE_M, n * TILE_N:(n + 1) * TILE_N],
                          src=res_sb)
    return out


KERNEL = matmul_kernel


def reference(lhsT, rhs):
    return lhsT.astype(np.float32).T @ rhs.astype(np.float32)


def make_inputs(rng, small=False):
    K, M, N = (256, 128, 512) if small else (1024, 1024, 1024)
    lhsT = rng.standard_normal((K, M), dtype=np.float32).astype(ml_dtypes.bfloat16)
    rhs = rng.standard_normal((K, N), dtype=np.float32).astype(ml_dtypes.bfloat16)
    return lhsT, rhs
