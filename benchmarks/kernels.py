"""Benchmark kernels written in the public tutorial style (independent of nkisim.examples)."""
import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def matmul_tiled(lhsT, rhs):
    """out[M, N] = lhsT.T @ rhs with 128x512 output tiles accumulated over K in PSUM."""
    K, M = lhsT.shape
    _, N = rhs.shape
    TK, TM, TN = nl.tile_size.pmax, nl.tile_size.gemm_stationary_fmax, nl.tile_size.gemm_moving_fmax
    out = nl.ndarray((M, N), dtype=lhsT.dtype, buffer=nl.shared_hbm)
    for m in nl.affine_range(M // TM):
        for n in nl.affine_range(N // TN):
            acc = nl.ndarray((TM, TN), dtype=nl.float32, buffer=nl.psum)
            for k in nl.affine_range(K // TK):
                lhsT_tile = nl.ndarray((TK, TM), dtype=lhsT.dtype, buffer=nl.sbuf)
                rhs_tile = nl.ndarray((TK, TN), dtype=rhs.dtype, buffer=nl.sbuf)
                nisa.dma_copy(dst=lhsT_tile, src=lhsT[k * TK:(k + 1) * TK, m * TM:(m + 1) * TM])
                nisa.dma_copy(dst=rhs_tile, src=rhs[k * TK:(k + 1) * TK, n * TN:(n + 1) * TN])
                nisa.nc_matmul(dst=acc, stationary=lhsT_tile, moving=rhs_tile)
            res = nl.ndarray((TM, TN), dtype=out.dtype, buffer=nl.sbuf)
            nisa.tensor_copy(dst=res, src=acc)
            nisa.dma_copy(dst=out[m * TM:(m + 1) * TM, n * TN:(n + 1) * TN], src=res)
    return out


@nki.jit
def add_lnc(a, b):
    """out = a + b in 128-row tiles; under LNC2 each core takes every other tile."""
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    P = nl.tile_size.pmax
    n_tiles = a.shape[0] // P
    cores = nl.num_programs(0)
    core = nl.program_id(0)
    for i in nl.affine_range(n_tiles // cores):
        rows = nl.ds((i * cores + core) * P, P)
        ta = nl.ndarray((P, a.shape[1]), dtype=a.dtype, buffer=nl.sbuf)
        tb = nl.ndarray((P, a.shape[1]), dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=ta, src=a[rows, :])
        nisa.dma_copy(dst=tb, src=b[rows, :])
        nisa.tensor_tensor(dst=ta, data1=ta, data2=tb, op=nl.add)
        nisa.dma_copy(dst=out[rows, :], src=ta)
    return out


def trivial(a):
    """Copies a's rows to the output one row at a time, the rows split between the cores (each
    core of an LNC2 launch takes every other row): the same two instructions per row under LNC1
    and LNC2, so the time is what a launch and its cores cost, almost nothing else."""
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    cores = nl.num_programs(0)
    core = nl.program_id(0)
    for i in nl.affine_range(a.shape[0] // cores):
        row = i * cores + core
        t = nl.ndarray((1, a.shape[1]), dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a[row:row + 1, :])
        nisa.dma_copy(dst=out[row:row + 1, :], src=t)
    return out


def tensor_tensor_loop(a, b, n):
    """n tensor_tensor adds of one (128, F) tile pair; returns the last sum."""
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    ta = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    tb = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    tc = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=ta, src=a)
    nisa.dma_copy(dst=tb, src=b)
    for _ in range(n):
        nisa.tensor_tensor(dst=tc, data1=ta, data2=tb, op=nl.add)
    nisa.dma_copy(dst=out, src=tc)
    return out


def partial_tile_loop(a, b, n):
    """n tensor_tensor adds on partial views of one (128, 512) tile pair: even steps add the
    (64, 256) corner, odd steps a (128, 128) column block (one of four, in turn); returns the
    destination tile (never-written elements keep the sentinel, so it is fully written first)."""
    P, F = a.shape
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    ta = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    tb = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    tc = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=ta, src=a)
    nisa.dma_copy(dst=tb, src=b)
    nisa.tensor_tensor(dst=tc, data1=ta, data2=tb, op=nl.subtract)
    W = F // 4
    for i in range(n):
        if i % 2 == 0:
            nisa.tensor_tensor(dst=tc[0:P // 2, 0:F // 2], data1=ta[0:P // 2, 0:F // 2],
                               data2=tb[0:P // 2, 0:F // 2], op=nl.add)
        else:
            j = (i // 2) % 4
            nisa.tensor_tensor(dst=tc[:, j * W:(j + 1) * W], data1=ta[:, j * W:(j + 1) * W],
                               data2=tb[:, j * W:(j + 1) * W], op=nl.add)
    nisa.dma_copy(dst=out, src=tc)
    return out
