"""Tiled matmul kernels written the way the public NKI matmul tutorial writes them
(aws-neuron-sdk nki/examples/matrix_multiplication), independent of nkisim's own kernels.

All three compute ``out[M, N] = lhsT.T @ rhs`` from ``lhsT`` (K, M) and ``rhs`` (K, N), with 128 x 512
output tiles accumulated over K in PSUM:

- ``tiled_matmul``: per (m, n) tile, DMA one lhsT and one rhs tile per K step (``nisa`` ops).
- ``hoisted_matmul``: the lhsT column of tiles is DMA'd once per m, the rhs column once per n.
- ``nl_matmul``: the older ``nki.language`` style: ``nl.zeros(..., buffer=nl.psum)``, ``nl.load``,
  ``acc += nl.matmul(..., transpose_x=True)``, a tensor_copy to SBUF, ``nl.store``.

Shapes: K and M multiples of 128, N a multiple of 512 (the tile sizes come from ``nl.tile_size``).
"""
import nki
import nki.isa as nisa
import nki.language as nl


def _tiles(lhsT, rhs):
    """(K, M, N, TK, TM, TN) after checking the tutorial's divisibility assumptions."""
    K, M = lhsT.shape
    K2, N = rhs.shape
    TK = nl.tile_size.pmax                    # contraction tile: partitions
    TM = nl.tile_size.gemm_stationary_fmax    # stationary free size
    TN = nl.tile_size.gemm_moving_fmax        # moving free size
    assert K == K2, f"contraction dims differ: lhsT has {K}, rhs has {K2}"
    assert K % TK == 0 and M % TM == 0 and N % TN == 0, \
        f"need K % {TK} == M % {TM} == N % {TN} == 0, got K={K} M={M} N={N}"
    return K, M, N, TK, TM, TN


@nki.jit
def tiled_matmul(lhsT, rhs):
    """Basic tiled matmul: both operand tiles are re-loaded for every (m, n, k)."""
    K, M, N, TK, TM, TN = _tiles(lhsT, rhs)
    out = nl.ndarray((M, N), dtype=lhsT.dtype, buffer=nl.shared_hbm)
    for mi in nl.affine_range(M // TM):
        rows = slice(mi * TM, (mi + 1) * TM)
        for ni in nl.affine_range(N // TN):
            cols = slice(ni * TN, (ni + 1) * TN)
            psum_tile = nl.ndarray((TM, TN), nl.float32, buffer=nl.psum)
            for ki in nl.affine_range(K // TK):
                ks = slice(ki * TK, (ki + 1) * TK)
                a_sb = nl.ndarray((TK, TM), dtype=lhsT.dtype, buffer=nl.sbuf)
                b_sb = nl.ndarray((TK, TN), dtype=rhs.dtype, buffer=nl.sbuf)
                nisa.dma_copy(dst=a_sb, src=lhsT[ks, rows])
                nisa.dma_copy(dst=b_sb, src=rhs[ks, cols])
                nisa.nc_matmul(dst=psum_tile, stationary=a_sb, moving=b_sb)
            out_sb = nl.ndarray((TM, TN), dtype=out.dtype, buffer=nl.sbuf)
            nisa.tensor_copy(dst=out_sb, src=psum_tile)
            nisa.dma_copy(dst=out[rows, cols], src=out_sb)
    return out


@nki.jit
def hoisted_matmul(lhsT, rhs):
    """Tiled matmul with the loads hoisted: K/128 lhsT tiles per m, K/128 rhs tiles per (m, n)."""
    K, M, N, TK, TM, TN = _tiles(lhsT, rhs)
    out = nl.ndarray((M, N), dtype=lhsT.dtype, buffer=nl.shared_hbm)
    n_k = K // TK
    for mi in nl.affine_range(M // TM):
        rows = slice(mi * TM, (mi + 1) * TM)
        a_tiles = []
        for ki in nl.affine_range(n_k):
            a_sb = nl.ndarray(shape=(TK, TM), dtype=lhsT.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=a_sb, src=lhsT[ki * TK:(ki + 1) * TK, rows])
            a_tiles.append(a_sb)
        for ni in nl.affine_range(N // TN):
            cols = slice(ni * TN, (ni + 1) * TN)
            b_tiles = []
            for ki in nl.affine_range(n_k):
                b_sb = nl.ndarray(shape=(TK, TN), dtype=rhs.dtype, buffer=nl.sbuf)
                nisa.dma_copy(dst=b_sb, src=rhs[ki * TK:(ki + 1) * TK, cols])
                b_tiles.append(b_sb)
            psum_tile = nl.ndarray(shape=(TM, TN), dtype=nl.float32, buffer=nl.psum)
            for ki in nl.affine_range(n_k):
                nisa.nc_matmul(dst=psum_tile, stationary=a_tiles[ki], moving=b_tiles[ki])
            out_sb = nl.ndarray(shape=(TM, TN), dtype=out.dtype, buffer=nl.sbuf)
            nisa.tensor_copy(dst=out_sb, src=psum_tile)
            nisa.dma_copy(dst=out[rows, cols], src=out_sb)
    return out


@nki.jit
def nl_matmul(lhsT, rhs):
    """Tiled matmul in the older nki.language style (nl.load / nl.matmul / nl.store)."""
    K, M, N, TK, TM, TN = _tiles(lhsT, rhs)
    out = nl.ndarray((M, N), dtype=lhsT.dtype, buffer=nl.shared_hbm)
    for mi in nl.affine_range(M // TM):
        for ni in nl.affine_range(N // TN):
            acc = nl.zeros((TM, TN), nl.float32, buffer=nl.psum)
            for ki in nl.affine_range(K // TK):
                a_sb = nl.load(lhsT[ki * TK:(ki + 1) * TK, mi * TM:(mi + 1) * TM])
                b_sb = nl.load(rhs[ki * TK:(ki + 1) * TK, ni * TN:(ni + 1) * TN])
                acc += nl.matmul(a_sb, b_sb, transpose_x=True)
            res = nl.ndarray((TM, TN), dtype=out.dtype, buffer=nl.sbuf)   # PSUM -> SBUF: nl.store
            nisa.tensor_copy(dst=res, src=acc)                              # takes SBUF values
            nl.store(out[mi * TM:(mi + 1) * TM, ni * TN:(ni + 1) * TN], value=res)
    return out


KERNELS = {"tiled": tiled_matmul, "hoist": hoisted_matmul, "nl": nl_matmul}
