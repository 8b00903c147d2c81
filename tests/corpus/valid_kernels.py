"""Error corpus (issue 5), the passing side: kernels that sit exactly at a hardware limit (128
partitions, moving free size 512 on trn2, 8 live PSUM banks, SBUF filled to the byte, ...) or on
the legal side of a rule that ``invalid_kernels.py`` breaks. Plain functions; ``test_corpus.py``
holds the table (inputs, target, NumPy reference) and runs each with ``detect_races=True,
uninitialized_reads="raise"``. Inputs are float32 arrays unless the table says otherwise.
"""
import nkisim.nki.isa as nisa
import nkisim.nki.language as nl

F32, BF16, I32 = nl.float32, nl.bfloat16, nl.int32


def _load(x, dtype=None):
    """HBM -> SBUF (dma_copy casts into ``dtype``)."""
    t = nl.ndarray(x.shape, dtype=dtype or x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    return t


def _store(t, dtype=None):
    """SBUF/PSUM -> a new shared_hbm tensor (PSUM evacuated through SBUF first)."""
    dtype = dtype or t.dtype
    if t.buffer is nl.psum:
        s = nl.ndarray(t.shape, dtype=dtype, buffer=nl.sbuf)
        nisa.tensor_copy(dst=s, src=t)
        t = s
    out = nl.ndarray(t.shape, dtype=dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=t)
    return out


def _matmul(a, b, dtype=BF16, dst_dtype=F32, **kw):
    """dst (M, N) = a.T @ b for HBM a (K, M), b (K, N), loaded as ``dtype``."""
    ps = nl.ndarray((a.shape[1], b.shape[1]), dtype=dst_dtype, buffer=nl.psum)
    nisa.nc_matmul(dst=ps, stationary=_load(a, dtype), moving=_load(b, dtype), **kw)
    return _store(ps, F32)


# ---- partition limits ----------------------------------------------------------------------

def sbuf_tile_128_partitions(x):                      # x (128, 8)
    return _store(_load(x))


def psum_tile_128_partitions(x):                      # x (128, 8)
    ps = nl.ndarray((128, 8), dtype=F32, buffer=nl.psum)
    nisa.tensor_copy(dst=ps, src=_load(x))
    return _store(ps)


def identity_matrix_128(x):
    return _store(nl.shared_identity_matrix(128, dtype=F32))


def matmul_k_equals_row_tile(a, b):                   # a (64, 64), b (64, 32)
    return _matmul(a, b, tile_position=(64, 0), tile_size=(64, 128))


def vector_transpose_32x32(x):                        # x (32, 32)
    d = nl.ndarray((32, 32), dtype=F32)
    nisa.nc_transpose(dst=d, data=_load(x), engine=nisa.vector_engine)
    return _store(d)


def tensor_tensor_128_partitions(a, b):               # a, b (128, 8)
    d = nl.ndarray((128, 8), dtype=F32)
    nisa.tensor_tensor(dst=d, data1=_load(a), data2=_load(b), op=nl.add)
    return _store(d)


# ---- free-size limits ----------------------------------------------------------------------

def matmul_stationary_free_128(a, b):                 # a (128, 128), b (128, 64)
    return _matmul(a, b)


def matmul_moving_free_512(a, b):                     # a (128, 8), b (128, 512); trn1, trn2
    return _matmul(a, b)


def matmul_moving_free_1024_trn3(a, b):               # a (128, 4), b (128, 1024)
    return _matmul(a, b)


def matmul_moving_free_4096_trn3(a, b):               # a (128, 4), b (128, 4096): all 16 KiB of PSUM
    return _matmul(a, b)


def bn_stats_free_512(x):                             # x (4, 512) -> (4, 2) mean, variance
    stats, mv = nl.ndarray((4, 6), dtype=F32), nl.ndarray((4, 2), dtype=F32)
    nisa.bn_stats(dst=stats, data=_load(x))
    nisa.bn_aggr(dst=mv, data=stats)
    return _store(mv)


def bn_stats_128_partitions_by_512(x):               # x (128, 512): both limits at once
    stats = nl.ndarray((128, 6), dtype=F32)
    nisa.bn_stats(dst=stats, data=_load(x))
    return _store(stats)


def vector_transpose_free_32(x):                      # x (8, 32)
    d = nl.ndarray((32, 8), dtype=F32)
    nisa.nc_transpose(dst=d, data=_load(x), engine=nisa.vector_engine)
    return _store(d)


def tensor_transpose_free_128(x):                     # x (4, 128), bf16-exact values
    ps = nl.ndarray((128, 4), dtype=BF16, buffer=nl.psum)
    nisa.nc_transpose(dst=ps, data=_load(x, BF16), engine=nisa.tensor_engine)
    return _store(ps, F32)


def max8_free_8(x):                                   # x (4, 8)
    d = nl.ndarray((4, 8), dtype=F32)
    nisa.max8(dst=d, src=_load(x))
    return _store(d)


# ---- element counts and shapes -------------------------------------------------------------

def tensor_tensor_same_count_other_free_shape(a, b):  # a (4, 8), b (4, 2, 4)
    d = nl.ndarray((4, 8), dtype=F32)
    nisa.tensor_tensor(dst=d, data1=_load(a), data2=_load(b), op=nl.subtract)
    return _store(d)


def tensor_copy_other_free_shape(x):                  # x (4, 8) -> (4, 2, 4)
    d = nl.ndarray((4, 2, 4), dtype=F32)
    nisa.tensor_copy(dst=d, src=_load(x))
    return _store(d)


def dma_copy_equal_counts(x):                         # x (4, 8) -> (2, 16) in flat order
    t = nl.ndarray((2, 16), dtype=F32)
    nisa.dma_copy(dst=t, src=x)
    return _store(t)


def matmul_k_128_both(a, b):                          # a (128, 4), b (128, 8)
    return _matmul(a, b)


def matmul_dst_shape_exact(a, b):                     # a (128, 64), b (128, 32) -> (64, 32)
    return _matmul(a, b)


def tensor_scalar_column_operand(x, c):               # x (4, 8), c (4, 1)
    d = nl.ndarray((4, 8), dtype=F32)
    nisa.tensor_scalar(dst=d, data=_load(x), op0=nl.multiply, operand0=_load(c))
    return _store(d)


def bn_stats_dst_6(x):                                # x (4, 8) -> (4, 6)
    d = nl.ndarray((4, 6), dtype=F32)
    nisa.bn_stats(dst=d, data=_load(x))
    return _store(d)


def iota_pattern_count_matches(x):
    d = nl.ndarray((4, 8), dtype=I32)
    nisa.iota(dst=d, pattern=[[1, 8]], offset=0, channel_multiplier=8)
    return _store(d)


def reshape_same_count(x):                            # x (4, 8) -> (4, 2, 4)
    return _store(_load(x).reshape((4, 2, 4)))


# ---- buffers -------------------------------------------------------------------------------

def dma_copy_from_sbuf_after_psum(x):                 # PSUM evacuated by tensor_copy, then DMA
    ps = nl.ndarray((4, 8), dtype=F32, buffer=nl.psum)
    nisa.tensor_copy(dst=ps, src=_load(x))
    s = nl.ndarray((4, 8), dtype=F32)
    nisa.tensor_copy(dst=s, src=ps)
    out = nl.ndarray((4, 8), dtype=F32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=s)
    return out


def tensor_copy_gpsimd_sbuf(x):
    d = nl.ndarray((4, 8), dtype=F32)
    nisa.tensor_copy(dst=d, src=_load(x), engine=nisa.gpsimd_engine)
    return _store(d)


def memset_gpsimd_sbuf(x):
    d = nl.ndarray((4, 8), dtype=F32)
    nisa.memset(dst=d, value=3.0, engine=nisa.gpsimd_engine)
    return _store(d)


def tensor_tensor_one_psum_input(a, b):               # a via PSUM, b in SBUF
    ps = nl.ndarray((4, 8), dtype=F32, buffer=nl.psum)
    nisa.tensor_copy(dst=ps, src=_load(a))
    d = nl.ndarray((4, 8), dtype=F32)
    nisa.tensor_tensor(dst=d, data1=ps, data2=_load(b), op=nl.multiply)
    return _store(d)


def dma_transpose_into_sbuf(x):                       # x (4, 8), bf16-exact values
    d = nl.ndarray((8, 4), dtype=BF16)
    nisa.dma_transpose(dst=d, src=_load(x, BF16))
    return _store(d, F32)


# ---- dtypes --------------------------------------------------------------------------------

def bitwise_and_on_ints(a, b):                        # int32 (4, 8)
    d = nl.ndarray((4, 8), dtype=I32)
    nisa.tensor_tensor(dst=d, data1=_load(a), data2=_load(b), op=nl.bitwise_and)
    return _store(d)


def left_shift_on_ints(x):                            # int32 (4, 8)
    d = nl.ndarray((4, 8), dtype=I32)
    nisa.tensor_scalar(dst=d, data=_load(x), op0=nl.left_shift, operand0=1)
    return _store(d)


def dma_copy_hwdge_same_dtype(x):
    t = nl.ndarray((4, 8), dtype=F32)
    nisa.dma_copy(dst=t, src=x, dge_mode=nisa.dge_mode.hwdge)
    return _store(t)


def e4m3fn_tile_on_trn3(x):                           # x (4, 8), fp8-exact values
    return _store(_load(x, nl.float8_e4m3fn), F32)


def matmul_e4m3fn_on_trn3(a, b):                      # a (4, 4), b (4, 8)
    return _matmul(a, b, nl.float8_e4m3fn)


def matmul_fp32_with_fp32(a, b):                      # a (4, 4), b (4, 8)
    return _matmul(a, b, F32)


def matmul_bf16_psum_dst_trn3(a, b):                  # a (4, 4), b (4, 8), sums exact in bf16
    return _matmul(a, b, BF16, dst_dtype=BF16)


def matmul_e4m3_with_e5m2(a, b):                      # a (4, 4), b (4, 8)
    ps = nl.ndarray((4, 8), dtype=F32, buffer=nl.psum)
    nisa.nc_matmul(dst=ps, stationary=_load(a, nl.float8_e4m3), moving=_load(b, nl.float8_e5m2))
    return _store(ps)


def predicate_uint8(x, m):                            # x (4, 8) float32, m (4, 8) uint8
    d = nl.zeros((4, 8), F32)
    nisa.tensor_copy_predicated(dst=d, src=_load(x), predicate=_load(m))
    return _store(d)


def memset_integral_into_int(x):
    d = nl.ndarray((4, 8), dtype=I32)
    nisa.memset(dst=d, value=3.0)
    return _store(d)


# ---- generation gating ---------------------------------------------------------------------

def exponential_on_trn3(x):
    d = nl.ndarray((4, 8), dtype=F32)
    nisa.exponential(dst=d, src=_load(x))
    return _store(d)


def activation_tensor_bias_on_trn1(x, b):             # x (4, 8), b (4, 1)
    d = nl.ndarray((4, 8), dtype=F32)
    nisa.activation(dst=d, op=nl.exp, data=_load(x), bias=_load(b))
    return _store(d)


def activation_scalar_bias_on_trn2(x):
    d = nl.ndarray((4, 8), dtype=F32)
    nisa.activation(dst=d, op=nl.exp, data=_load(x), bias=1.0)
    return _store(d)


def activation_reduce_add_on_trn1(x):
    d, r = nl.ndarray((4, 8), dtype=F32), nl.ndarray((4, 1), dtype=F32)
    nisa.activation_reduce(dst=d, op=nl.copy, data=_load(x), reduce_op=nl.add, reduce_res=r)
    return _store(d), _store(r)


def activation_reduce_max_on_trn2(x):
    d, r = nl.ndarray((4, 8), dtype=F32), nl.ndarray((4, 1), dtype=F32)
    nisa.activation_reduce(dst=d, op=nl.copy, data=_load(x), reduce_op=nl.maximum, reduce_res=r)
    return _store(d), _store(r)


def range_select_on_trn2(x):                          # keep free index i with 2 <= i < 6
    d = nl.ndarray((4, 8), dtype=F32)
    b0, b1 = nl.full((4, 1), 2.0, F32), nl.full((4, 1), 6.0, F32)
    nisa.range_select(dst=d, on_true_tile=_load(x), comp_op0=nl.greater_equal, comp_op1=nl.less,
                      bound0=b0, bound1=b1)
    return _store(d)


def double_row_on_trn2(a, b):                         # a (4, 2, 4), b (4, 2, 8), fp8-exact
    ps = nl.ndarray((4, 8), dtype=F32, buffer=nl.psum)
    nisa.nc_matmul(dst=ps, stationary=_load(a, nl.float8_e4m3), moving=_load(b, nl.float8_e4m3),
                   perf_mode=nisa.matmul_perf_mode.double_row)
    return _store(ps)


def matmul_tile_32_on_trn2(a, b):                     # a (32, 32), b (32, 8)
    return _matmul(a, b, tile_position=(0, 0), tile_size=(32, 32))


def core_barrier_lnc2_on_trn2(x):                     # x (2, 8)
    me = nl.program_id(0)
    out = nl.ndarray((2, 8), dtype=F32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out[me:me + 1, :], src=_load(x[me:me + 1, :]))
    nisa.core_barrier(out, (0, 1))
    return out


def sendrecv_lnc2_on_trn2(x):                         # x (2, 8): each core gets the other's row
    me = nl.program_id(0)
    mine, theirs = _load(x[me:me + 1, :]), nl.ndarray((1, 8), dtype=F32)
    nisa.sendrecv(src=mine, dst=theirs, send_to_rank=1 - me, recv_from_rank=1 - me, pipe_id=0)
    out = nl.ndarray((2, 8), dtype=F32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out[me:me + 1, :], src=theirs)
    return out


def sendrecv_two_pipes_in_order(x):                   # x (2, 8): halves over pipes 0 and 1
    me = nl.program_id(0)
    out = nl.ndarray((2, 8), dtype=F32, buffer=nl.shared_hbm)
    for pipe in range(2):
        cols = slice(4 * pipe, 4 * pipe + 4)
        mine, theirs = _load(x[me:me + 1, cols]), nl.ndarray((1, 4), dtype=F32)
        nisa.sendrecv(src=mine, dst=theirs, send_to_rank=1 - me, recv_from_rank=1 - me, pipe_id=pipe)
        nisa.dma_copy(dst=out[me:me + 1, cols], src=theirs)
    return out


def lnc2_launch_on_trn2(x):                           # x (2, 8): core i copies row i
    me = nl.program_id(0)
    out = nl.ndarray((2, 8), dtype=F32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out[me:me + 1, :], src=_load(x[me:me + 1, :]))
    return out


def dma_transpose_hwdge_on_trn2(x):                   # x (16, 128), bf16-exact values
    d = nl.ndarray((128, 16), dtype=BF16)
    nisa.dma_transpose(dst=d, src=_load(x, BF16), dge_mode=nisa.dge_mode.hwdge)
    return _store(d, F32)


# ---- bounds --------------------------------------------------------------------------------

def slice_to_the_end(x):
    d = nl.ndarray((4, 4), dtype=F32)
    nisa.tensor_copy(dst=d, src=_load(x)[:, 4:8])
    return _store(d)


def slice_from_zero(x):
    d = nl.ndarray((4, 4), dtype=F32)
    nisa.tensor_copy(dst=d, src=_load(x)[:, 0:4])
    return _store(d)


def ap_reaching_the_last_element(x):                  # elements 1..31 of a (4, 8) tile
    d = nl.ndarray((4, 7), dtype=F32)
    nisa.tensor_copy(dst=d, src=_load(x).ap([[8, 4], [1, 7]], offset=1))
    return _store(d)


def index_last_partition(x):
    d = nl.ndarray((1, 8), dtype=F32)
    nisa.tensor_copy(dst=d, src=_load(x)[3])
    return _store(d)


def hbm_last_row(x):
    return _store(_load(x[3:4, :]))


def tensor_slice_method_to_the_end(x):                # every other element from 1
    d = nl.ndarray((4, 4), dtype=F32)
    nisa.tensor_copy(dst=d, src=_load(x).slice(1, 1, 8, 2))
    return _store(d)


def select_last_index(x):
    d = nl.ndarray((4, 1), dtype=F32)
    nisa.tensor_copy(dst=d, src=_load(x).select(1, 7))
    return _store(d)


# ---- capacity ------------------------------------------------------------------------------

def sbuf_filled_exactly(x):
    """One tile of exactly total_available_sbuf_size bytes per partition (any target)."""
    big = nl.ndarray((128, nl.tile_size.total_available_sbuf_size // 4), dtype=F32)
    nisa.memset(dst=big[0:4, 0:8], value=2.0)
    out = nl.ndarray((4, 8), dtype=F32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=big[0:4, 0:8])
    return out


def sbuf_two_tiles_fill_exactly(x):                   # 100000 + 112984 = 212984 bytes (trn2)
    a = nl.ndarray((128, 100000), dtype=nl.uint8)
    b = nl.ndarray((128, 112984), dtype=nl.uint8)
    nisa.memset(dst=a[0:4, 0:8], value=1)
    nisa.memset(dst=b[0:4, 0:8], value=2)
    out = nl.ndarray((4, 8), dtype=nl.uint8, buffer=nl.shared_hbm)
    nisa.tensor_tensor(dst=a[0:4, 0:8], data1=a[0:4, 0:8], data2=b[0:4, 0:8], op=nl.add)
    nisa.dma_copy(dst=out, src=a[0:4, 0:8])
    return out


def eight_psum_banks(x):
    banks = [nl.ndarray((128, 512), dtype=F32, buffer=nl.psum) for _ in range(8)]
    for i, bank in enumerate(banks):
        nisa.memset(dst=bank[0:4, 0:8], value=float(i))
    return _store(banks[7][0:4, 0:8])


def psum_bank_freed_then_reused(x):                   # 8 live banks, drop one, take it again
    banks = [nl.ndarray((128, 512), dtype=F32, buffer=nl.psum) for _ in range(8)]
    del banks[3]
    again = nl.ndarray((128, 512), dtype=F32, buffer=nl.psum)
    nisa.memset(dst=again[0:4, 0:8], value=5.0)
    return _store(again[0:4, 0:8])


def psum_tile_16_kib_last_bank(a, b):                 # a (128, 4), b (128, 512) into bank 7
    ps = nl.ndarray((128, 4096), dtype=F32, buffer=nl.psum)
    nisa.nc_matmul(dst=ps[0:4, 3584:4096], stationary=_load(a, BF16), moving=_load(b, BF16))
    return _store(ps[0:4, 3584:4096])


def matmul_dst_within_one_bank(a, b):                 # a (128, 128), b (128, 512) into bank 1
    ps = nl.ndarray((128, 1024), dtype=F32, buffer=nl.psum)
    nisa.nc_matmul(dst=ps[:, 512:1024], stationary=_load(a, BF16), moving=_load(b, BF16))
    return _store(ps[:, 512:1024])


def matmul_dst_crossing_banks_on_trn3(a, b):          # a (128, 128), b (128, 512); legal on trn3
    ps = nl.ndarray((128, 1024), dtype=F32, buffer=nl.psum)
    nisa.nc_matmul(dst=ps[:, 256:768], stationary=_load(a, BF16), moving=_load(b, BF16))
    return _store(ps[:, 256:768])


# ---- races ---------------------------------------------------------------------------------

def affine_iterations_write_distinct_rows(x):         # x (4, 8)
    out = nl.ndarray((4, 8), dtype=F32, buffer=nl.shared_hbm)
    for i in nl.affine_range(4):
        nisa.dma_copy(dst=out[i:i + 1, :], src=_load(x[i:i + 1, :]))
    return out


def sequential_accumulation(x):                       # x (3, 4, 8) -> sum over dim 0
    acc = nl.zeros((4, 8), F32)
    for i in nl.sequential_range(3):
        nisa.tensor_tensor(dst=acc, data1=acc, data2=_load(x[i]), op=nl.add)
    return _store(acc)


def affine_accumulation(x):                           # x (3, 4, 8) -> sum over dim 0
    acc = nl.zeros((4, 8), F32)                       # affine_range is an alias of range
    for i in nl.affine_range(3):
        nisa.tensor_tensor(dst=acc, data1=acc, data2=_load(x[i]), op=nl.add)
    return _store(acc)


def affine_matmul_accumulation(a, b):                 # a (256, 16), b (256, 8): K in 2 tiles
    ps = nl.ndarray((16, 8), dtype=F32, buffer=nl.psum)
    for k in nl.affine_range(2):
        nisa.nc_matmul(dst=ps, stationary=_load(a[k * 128:(k + 1) * 128, :], BF16),
                       moving=_load(b[k * 128:(k + 1) * 128, :], BF16))
    return _store(ps)


def lnc2_shared_hbm_with_barrier(x):                  # x (2, 8): zero my row, barrier, read theirs
    me = nl.program_id(0)
    nisa.dma_copy(dst=x[me:me + 1, :], src=nl.zeros((1, 8), F32))
    nisa.core_barrier(x, (0, 1))
    out = nl.ndarray((2, 8), dtype=F32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out[me:me + 1, :], src=_load(x[1 - me:2 - me, :]))
    return out


# ---- uninitialised reads (strict mode) -----------------------------------------------------

def fully_written_in_two_halves(x):
    t = nl.ndarray((4, 8), dtype=F32, name="t")
    nisa.memset(dst=t[:, 0:4], value=1.0)
    nisa.memset(dst=t[:, 4:8], value=2.0)
    return _store(t)


def matmul_accumulate_after_overwrite(a, b):          # a (4, 4), b (4, 8) -> 2 * a.T @ b
    st, mv = _load(a, BF16), _load(b, BF16)
    ps = nl.ndarray((4, 8), dtype=F32, buffer=nl.psum)
    nisa.nc_matmul(dst=ps, stationary=st, moving=mv, accumulate=False)
    nisa.nc_matmul(dst=ps, stationary=st, moving=mv, accumulate=True)
    return _store(ps)


def hbm_scratch_written_then_read(x):
    scratch = nl.ndarray((4, 8), dtype=F32, buffer=nl.private_hbm, name="scratch")
    nisa.dma_copy(dst=scratch, src=x)
    return _store(_load(scratch))


# ---- synchronisation (LNC2) ----------------------------------------------------------------

def barrier_reached_by_both_cores(x):                 # x (2, 8)
    me = nl.program_id(0)
    out = nl.ndarray((2, 8), dtype=F32, buffer=nl.shared_hbm)
    nisa.core_barrier(out, (0, 1))
    nisa.dma_copy(dst=out[me:me + 1, :], src=_load(x[me:me + 1, :]))
    nisa.core_barrier(out, (0, 1))
    return out


def barrier_then_sendrecv_on_both_cores(x):           # x (2, 8): the same sync points in order
    me = nl.program_id(0)
    out = nl.ndarray((2, 8), dtype=F32, buffer=nl.shared_hbm)
    nisa.core_barrier(out, (0, 1))
    mine, theirs = _load(x[me:me + 1, :]), nl.ndarray((1, 8), dtype=F32)
    nisa.sendrecv(src=mine, dst=theirs, send_to_rank=1 - me, recv_from_rank=1 - me, pipe_id=0)
    nisa.dma_copy(dst=out[me:me + 1, :], src=theirs)
    return out


# ---- engines -------------------------------------------------------------------------------

def tensor_tensor_on_gpsimd(x, y):
    d = nl.ndarray((4, 8), dtype=F32)
    nisa.tensor_tensor(dst=d, data1=_load(x), data2=_load(y), op=nl.add, engine=nisa.gpsimd_engine)
    return _store(d)


def tensor_tensor_bitvec_on_vector(x, y):                # int32 x, y
    d = nl.ndarray((4, 8), dtype=I32)
    nisa.tensor_tensor(dst=d, data1=_load(x), data2=_load(y), op=nl.bitwise_and, engine=nisa.vector_engine)
    return _store(d)


def tensor_scalar_bitvec_on_vector(x):                 # int32 x
    d = nl.ndarray((4, 8), dtype=I32)
    nisa.tensor_scalar(dst=d, data=_load(x), op0=nl.bitwise_and, operand0=3, engine=nisa.vector_engine)
    return _store(d)


def tensor_scalar_multiply_add_on_scalar_engine(x):    # trn1 and trn2: the documented pair
    d = nl.ndarray((4, 8), dtype=F32)
    nisa.tensor_scalar(dst=d, data=_load(x), op0=nl.multiply, operand0=2.0, op1=nl.add, operand1=1.0,
                       engine=nisa.scalar_engine)
    return _store(d)


def tensor_scalar_subtract_on_scalar_engine_trn3(x):   # Decision: trn3 takes the activate2 pairs
    d = nl.ndarray((4, 8), dtype=F32)
    nisa.tensor_scalar(dst=d, data=_load(x), op0=nl.subtract, operand0=1.0, engine=nisa.scalar_engine)
    return _store(d)


def tensor_scalar_rsqrt_on_gpsimd(x):                  # x > 0
    d = nl.ndarray((4, 8), dtype=F32)
    nisa.tensor_scalar(dst=d, data=_load(x), op0=nl.rsqrt, operand0=None, engine=nisa.gpsimd_engine)
    return _store(d)


def memset_on_vector_engine(x):
    d = nl.ndarray((4, 8), dtype=F32)
    nisa.memset(dst=d, value=4.0, engine=nisa.vector_engine)
    return _store(d)


def tensor_copy_scalar_engine_trn2(x):
    d = nl.ndarray((4, 8), dtype=F32)
    nisa.tensor_copy(dst=d, src=_load(x), engine=nisa.scalar_engine)
    return _store(d)


def nc_transpose_on_vector_engine(x):                  # x (4, 8) -> (8, 4)
    d = nl.ndarray((8, 4), dtype=F32)
    nisa.nc_transpose(dst=d, data=_load(x), engine=nisa.vector_engine)
    return _store(d)


def dma_copy_hwdge_on_sync_engine(x):
    t = nl.ndarray((4, 8), dtype=F32)
    nisa.dma_copy(dst=t, src=x, dge_mode=nisa.dge_mode.hwdge, engine=nisa.engine.sync)
    return _store(t)


def activation_on_scalar_engine(x):
    d = nl.ndarray((4, 8), dtype=F32)
    nisa.activation(dst=d, op=nl.copy, data=_load(x), engine=nisa.scalar_engine)
    return _store(d)


# ---- operand dtypes ------------------------------------------------------------------------

def tensor_scalar_fp32_operand_bf16_data(x, c):         # x (4, 8), c (4, 1)
    d = nl.ndarray((4, 8), dtype=F32)
    nisa.tensor_scalar(dst=d, data=_load(x, BF16), op0=nl.multiply, operand0=_load(c))
    return _store(d)


def tensor_scalar_reduce_fp32_reduce_init(x, c):        # x (4, 8), c (4, 1)
    d, r = nl.ndarray((4, 8), dtype=F32), nl.ndarray((4, 1), dtype=F32)
    nisa.tensor_scalar_reduce(dst=d, data=_load(x), op0=nl.add, operand0=1.0, reduce_op=nl.add, reduce_res=r,
                              reduce_cmd=nisa.reduce_cmd.load_reduce, reduce_init=_load(c))
    return _store(r)


def activation_fp32_scale_bf16_bias(x, s, b):            # x (4, 8), s, b (4, 1)
    d = nl.ndarray((4, 8), dtype=F32)
    nisa.activation(dst=d, op=nl.copy, data=_load(x), scale=_load(s), bias=_load(b, BF16))
    return _store(d)


def scan_fp32_initial(x, i):                            # x (4, 8), i (4, 1)
    d = nl.ndarray((4, 8), dtype=F32)
    t = _load(x)
    nisa.tensor_tensor_scan(dst=d, data0=t, data1=t, initial=_load(i), op0=nl.add, op1=nl.add)
    return _store(d)


def exponential_fp32_max_value(x, m):                   # trn3; x (4, 8), m (4, 1)
    d = nl.ndarray((4, 8), dtype=F32)
    nisa.exponential(dst=d, src=_load(x), max_value=_load(m))
    return _store(d)


def scalar_tensor_tensor_bf16_operand0(x, c, y):         # docs: any dtype for every input tile
    d = nl.ndarray((4, 8), dtype=F32)
    nisa.scalar_tensor_tensor(dst=d, data=_load(x), op0=nl.multiply, operand0=_load(c, BF16), op1=nl.add,
                              operand1=_load(y))
    return _store(d)


# ---- op tokens and enum values -------------------------------------------------------------

def alu_op_by_name(a, b):
    d = nl.ndarray((4, 8), dtype=F32)
    nisa.tensor_tensor(dst=d, data1=_load(a), data2=_load(b), op="maximum")
    return _store(d)


def activation_known_function(x):
    d = nl.ndarray((4, 8), dtype=F32)
    nisa.activation(dst=d, op=nl.tanh, data=_load(x))
    return _store(d)


def maximum_as_reduction(x):
    d = nl.ndarray((4, 1), dtype=F32)
    nisa.tensor_reduce(dst=d, op=nl.maximum, data=_load(x), axis=1)
    return _store(d)


def engine_as_raw_int(x):                             # 5 == engine.vector
    d = nl.ndarray((4, 8), dtype=F32)
    nisa.tensor_copy(dst=d, src=_load(x), engine=5)
    return _store(d)


def dge_mode_as_raw_int(x):                           # 2 == dge_mode.hwdge
    t = nl.ndarray((4, 8), dtype=F32)
    nisa.dma_copy(dst=t, src=x, dge_mode=2)
    return _store(t)


def reduce_cmd_by_name(x):
    d, r = nl.ndarray((4, 8), dtype=F32), nl.ndarray((4, 1), dtype=F32)
    nisa.activation(dst=d, op=nl.copy, data=_load(x), reduce_cmd="reset_reduce", reduce_res=r)
    return _store(r)


def oob_mode_as_raw_int(x):                           # 0 == oob_mode.error
    t = nl.ndarray((4, 8), dtype=F32)
    nisa.dma_copy(dst=t, src=x, oob_mode=0)
    return _store(t)


def alu_op_token_for_op1(x):
    d = nl.ndarray((4, 8), dtype=F32)
    nisa.tensor_scalar(dst=d, data=_load(x), op0=nl.add, operand0=1.0, op1="multiply", operand1=2.0)
    return _store(d)
