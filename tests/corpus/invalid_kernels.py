"""Error corpus (issue 5): small kernels that each break exactly one hardware or API rule.

Plain functions; ``test_corpus.py`` holds the table (inputs, target, error class, message) and
runs every one with ``detect_races=True, uninitialized_reads="raise"``, so no other rule may break
first. The line that makes the bad call ends with the marker ``# <- error``: the error's kernel
location must be exactly that line. Every kernel takes ``x``, a (4, 8) float32 array, unless the
table says otherwise. An op operand with more than 128 partitions cannot be built (allocation
rejects it and no view widens dim 0 of an on-chip tensor), so partition limits show up at
``nl.ndarray`` and as the op-level PE-array row-tile and VectorE-transpose limits.
"""
import nkisim.nki.isa as nisa
import nkisim.nki.language as nl

F32, BF16 = nl.float32, nl.bfloat16


def _psum(shape, dtype=F32):
    return nl.ndarray(shape, dtype=dtype, buffer=nl.psum)


# ---- partition limits ----------------------------------------------------------------------

def sbuf_tile_129_partitions(x):
    nl.ndarray((129, 8), dtype=F32, buffer=nl.sbuf)  # <- error


def psum_tile_129_partitions(x):
    nl.ndarray((129, 8), dtype=F32, buffer=nl.psum)  # <- error


def identity_matrix_129(x):
    nl.shared_identity_matrix(129, dtype=BF16)  # <- error


def matmul_k_exceeds_row_tile(x):
    st, mv = nl.zeros((128, 64), BF16), nl.zeros((128, 64), BF16)
    nisa.nc_matmul(dst=_psum((64, 64)), stationary=st, moving=mv, tile_position=(0, 0),  # <- error
                   tile_size=(64, 128))


def vector_transpose_33_partitions(x):
    a, d = nl.zeros((33, 8), F32), nl.ndarray((8, 33), dtype=F32)
    nisa.nc_transpose(dst=d, data=a, engine=nisa.vector_engine)  # <- error


# ---- free-size limits ----------------------------------------------------------------------

def matmul_stationary_free_129(x):
    st, mv = nl.zeros((128, 129), BF16), nl.zeros((128, 64), BF16)
    nisa.nc_matmul(dst=_psum((128, 64)), stationary=st, moving=mv)  # <- error


def matmul_moving_free_513_trn2(x):
    st, mv = nl.zeros((128, 128), BF16), nl.zeros((128, 513), BF16)
    nisa.nc_matmul(dst=_psum((128, 513)), stationary=st, moving=mv)  # <- error


def matmul_moving_free_4097_trn3(x):
    st, mv = nl.zeros((128, 4), BF16), nl.zeros((128, 4097), BF16)
    nisa.nc_matmul(dst=_psum((4, 512)), stationary=st, moving=mv)  # <- error


def bn_stats_free_513(x):
    data, dst = nl.zeros((4, 513), F32), nl.ndarray((4, 6), dtype=F32)
    nisa.bn_stats(dst=dst, data=data)  # <- error


def vector_transpose_free_33(x):
    a, d = nl.zeros((8, 33), F32), nl.ndarray((33, 8), dtype=F32)
    nisa.nc_transpose(dst=d, data=a, engine=nisa.vector_engine)  # <- error


def tensor_transpose_free_129(x):
    a = nl.zeros((4, 129), BF16)
    nisa.nc_transpose(dst=_psum((128, 4), BF16), data=a, engine=nisa.tensor_engine)  # <- error


def max8_free_7(x):
    src, dst = nl.zeros((4, 7), F32), nl.ndarray((4, 8), dtype=F32)
    nisa.max8(dst=dst, src=src)  # <- error


# ---- element counts and shapes -------------------------------------------------------------

def tensor_tensor_free_mismatch(x):
    a, b, d = nl.zeros((4, 8), F32), nl.zeros((4, 4), F32), nl.ndarray((4, 8), dtype=F32)
    nisa.tensor_tensor(dst=d, data1=a, data2=b, op=nl.add)  # <- error


def tensor_tensor_partition_mismatch(x):
    a, b, d = nl.zeros((4, 8), F32), nl.zeros((2, 8), F32), nl.ndarray((4, 8), dtype=F32)
    nisa.tensor_tensor(dst=d, data1=a, data2=b, op=nl.add)  # <- error


def tensor_copy_free_mismatch(x):
    src, dst = nl.zeros((4, 8), F32), nl.ndarray((4, 6), dtype=F32)
    nisa.tensor_copy(dst=dst, src=src)  # <- error


def dma_copy_count_mismatch(x):
    t = nl.ndarray((4, 6), dtype=F32)
    nisa.dma_copy(dst=t, src=x)  # <- error


def matmul_k_mismatch(x):
    st, mv = nl.zeros((128, 64), BF16), nl.zeros((64, 64), BF16)
    nisa.nc_matmul(dst=_psum((64, 64)), stationary=st, moving=mv)  # <- error


def matmul_dst_shape_mismatch(x):
    st, mv = nl.zeros((128, 64), BF16), nl.zeros((128, 32), BF16)
    nisa.nc_matmul(dst=_psum((64, 64)), stationary=st, moving=mv)  # <- error


def tensor_scalar_operand_not_a_column(x):
    data, col, d = nl.zeros((4, 8), F32), nl.zeros((4, 2), F32), nl.ndarray((4, 8), dtype=F32)
    nisa.tensor_scalar(dst=d, data=data, op0=nl.multiply, operand0=col)  # <- error


def bn_stats_dst_not_6(x):
    data, dst = nl.zeros((4, 8), F32), nl.ndarray((4, 5), dtype=F32)
    nisa.bn_stats(dst=dst, data=data)  # <- error


def iota_pattern_count_mismatch(x):
    d = nl.ndarray((4, 8), dtype=nl.int32)
    nisa.iota(dst=d, pattern=[[1, 7]])  # <- error


def reshape_element_count(x):
    t = nl.zeros((4, 8), F32)
    t.reshape((4, 7))  # <- error


# ---- buffers -------------------------------------------------------------------------------

def dma_copy_from_psum(x):
    ps = nl.zeros((4, 8), F32, buffer=nl.psum)
    out = nl.ndarray((4, 8), dtype=F32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=ps)  # <- error


def matmul_stationary_in_psum(x):
    st, mv = nl.zeros((128, 64), BF16, buffer=nl.psum), nl.zeros((128, 64), BF16)
    nisa.nc_matmul(dst=_psum((64, 64)), stationary=st, moving=mv)  # <- error


def matmul_moving_in_hbm(x):
    st = nl.zeros((4, 4), F32)
    nisa.nc_matmul(dst=_psum((4, 8)), stationary=st, moving=x)  # <- error


def matmul_dst_in_sbuf(x):
    st, mv = nl.zeros((128, 64), BF16), nl.zeros((128, 64), BF16)
    nisa.nc_matmul(dst=nl.ndarray((64, 64), dtype=F32), stationary=st, moving=mv)  # <- error


def tensor_copy_gpsimd_reads_psum(x):
    ps, d = nl.zeros((4, 8), F32, buffer=nl.psum), nl.ndarray((4, 8), dtype=F32)
    nisa.tensor_copy(dst=d, src=ps, engine=nisa.gpsimd_engine)  # <- error


def memset_gpsimd_psum(x):
    nisa.memset(dst=_psum((4, 8)), value=0.0, engine=nisa.gpsimd_engine)  # <- error


def tensor_tensor_two_psum_inputs(x):
    a, b = nl.zeros((4, 8), F32, buffer=nl.psum), nl.zeros((4, 8), F32, buffer=nl.psum)
    nisa.tensor_tensor(dst=nl.ndarray((4, 8), dtype=F32), data1=a, data2=b, op=nl.add)  # <- error


def tensor_tensor_hbm_operand(x):
    a = nl.zeros((4, 8), F32)
    nisa.tensor_tensor(dst=nl.ndarray((4, 8), dtype=F32), data1=a, data2=x, op=nl.add)  # <- error


def iota_dst_in_psum(x):
    nisa.iota(dst=_psum((4, 8), nl.int32), pattern=[[1, 8]])  # <- error


def dma_transpose_dst_in_hbm(x):
    src = nl.zeros((4, 8), BF16)
    out = nl.ndarray((8, 4), dtype=BF16, buffer=nl.shared_hbm)
    nisa.dma_transpose(dst=out, src=src)  # <- error


# ---- dtypes --------------------------------------------------------------------------------

def bitwise_and_on_floats(x):
    a, b = nl.zeros((4, 8), F32), nl.zeros((4, 8), F32)
    nisa.tensor_tensor(dst=nl.ndarray((4, 8), dtype=F32), data1=a, data2=b,  # <- error
                       op=nl.bitwise_and)


def left_shift_on_floats(x):
    a, d = nl.zeros((4, 8), F32), nl.ndarray((4, 8), dtype=F32)
    nisa.tensor_scalar(dst=d, data=a, op0=nl.left_shift, operand0=1)  # <- error


def dma_copy_hwdge_dtype_cast(x):
    t = nl.ndarray((4, 8), dtype=BF16)
    nisa.dma_copy(dst=t, src=x, dge_mode=nisa.dge_mode.hwdge)  # <- error


def e4m3fn_tile_on_trn2(x):
    nl.ndarray((4, 8), dtype=nl.float8_e4m3fn)  # <- error


def matmul_e4m3fn_on_trn2(x):
    st = nl.zeros((4, 4), nl.int8).view(nl.float8_e4m3fn)
    mv = nl.zeros((4, 8), nl.float8_e5m2)
    nisa.nc_matmul(dst=_psum((4, 8)), stationary=st, moving=mv)  # <- error


def matmul_fp32_with_bf16(x):
    st, mv = nl.zeros((4, 4), F32), nl.zeros((4, 8), BF16)
    nisa.nc_matmul(dst=_psum((4, 8)), stationary=st, moving=mv)  # <- error


def matmul_bf16_psum_dst_trn2(x):
    st, mv = nl.zeros((4, 4), BF16), nl.zeros((4, 8), BF16)
    nisa.nc_matmul(dst=_psum((4, 8), BF16), stationary=st, moving=mv)  # <- error


def matmul_e4m3_with_e4m3fn_trn3(x):
    st, mv = nl.zeros((4, 4), nl.float8_e4m3), nl.zeros((4, 8), nl.float8_e4m3fn)
    nisa.nc_matmul(dst=_psum((4, 8)), stationary=st, moving=mv)  # <- error


def predicate_float32(x):
    src, pred, d = nl.zeros((4, 8), F32), nl.zeros((4, 8), F32), nl.zeros((4, 8), F32)
    nisa.tensor_copy_predicated(dst=d, src=src, predicate=pred)  # <- error


def memset_fraction_into_int(x):
    nisa.memset(dst=nl.ndarray((4, 8), dtype=nl.int32), value=0.5)  # <- error


def dma_transpose_fp32(x):
    src, d = nl.zeros((16, 8), F32), nl.ndarray((8, 16), dtype=F32)
    nisa.dma_transpose(dst=d, src=src, dge_mode=nisa.dge_mode.hwdge)  # <- error


# ---- generation gating ---------------------------------------------------------------------

def exponential_on_trn2(x):
    a, d = nl.zeros((4, 8), F32), nl.ndarray((4, 8), dtype=F32)
    nisa.exponential(dst=d, src=a)  # <- error


def activation_scalar_bias_on_trn1(x):
    a, d = nl.zeros((4, 8), F32), nl.ndarray((4, 8), dtype=F32)
    nisa.activation(dst=d, op=nl.exp, data=a, bias=1.0)  # <- error


def activation_reduce_max_on_trn1(x):
    a, d, r = nl.zeros((4, 8), F32), nl.ndarray((4, 8), dtype=F32), nl.ndarray((4, 1), dtype=F32)
    nisa.activation_reduce(dst=d, op=nl.exp, data=a, reduce_op=nl.maximum, reduce_res=r)  # <- error


def range_select_on_trn1(x):
    a, d = nl.zeros((4, 8), F32), nl.ndarray((4, 8), dtype=F32)
    b0, b1 = nl.zeros((4, 1), F32), nl.full((4, 1), 4.0, F32)
    nisa.range_select(dst=d, on_true_tile=a, comp_op0=nl.greater_equal, comp_op1=nl.less,  # <- error
                      bound0=b0, bound1=b1)


def double_row_on_trn1(x):
    st, mv = nl.zeros((4, 2, 4), nl.float8_e4m3), nl.zeros((4, 2, 8), nl.float8_e4m3)
    nisa.nc_matmul(dst=_psum((4, 8)), stationary=st, moving=mv,  # <- error
                   perf_mode=nisa.matmul_perf_mode.double_row)


def matmul_tile_32_on_trn1(x):
    st, mv = nl.zeros((32, 32), BF16), nl.zeros((32, 8), BF16)
    nisa.nc_matmul(dst=_psum((32, 8)), stationary=st, moving=mv, tile_position=(0, 0),  # <- error
                   tile_size=(32, 32))


def core_barrier_on_trn1(x):
    out = nl.ndarray((4, 8), dtype=F32, buffer=nl.shared_hbm)
    nisa.core_barrier(out, (0, 1))  # <- error


def core_barrier_under_lnc1(x):
    out = nl.ndarray((4, 8), dtype=F32, buffer=nl.shared_hbm)
    nisa.core_barrier(out, (0, 1))  # <- error


def sendrecv_on_trn1(x):
    a, d = nl.zeros((4, 8), F32), nl.ndarray((4, 8), dtype=F32)
    nisa.sendrecv(src=a, dst=d, send_to_rank=1, recv_from_rank=1, pipe_id=0)  # <- error


def lnc2_launch_on_trn1(x):  # <- error
    nl.zeros((4, 8), F32)


def dma_transpose_hwdge_on_trn1(x):
    src, d = nl.zeros((16, 128), BF16), nl.ndarray((128, 16), dtype=BF16)
    nisa.dma_transpose(dst=d, src=src, dge_mode=nisa.dge_mode.hwdge)  # <- error


# ---- bounds --------------------------------------------------------------------------------

def slice_past_the_end(x):
    t = nl.zeros((4, 8), F32)
    nisa.memset(dst=t[:, 0:9], value=1.0)  # <- error


def negative_slice_start(x):
    t = nl.zeros((4, 8), F32)
    nisa.memset(dst=t[:, -9:8], value=1.0)  # <- error


def ap_reaching_outside(x):
    t = nl.zeros((4, 8), F32)
    nisa.memset(dst=t.ap([[8, 4], [1, 8]], offset=1), value=1.0)  # <- error


def index_out_of_range(x):
    t = nl.zeros((4, 8), F32)
    nisa.memset(dst=t[4], value=1.0)  # <- error


def hbm_index_out_of_range(x):
    t = nl.ndarray((1, 8), dtype=F32)
    nisa.dma_copy(dst=t, src=x[4:5, :])  # <- error


def tensor_slice_method_past_end(x):
    t = nl.zeros((4, 8), F32)
    nisa.memset(dst=t.slice(1, 4, 12), value=1.0)  # <- error


def select_out_of_range(x):
    t = nl.zeros((4, 8), F32)
    t.select(1, 8)  # <- error


# ---- capacity ------------------------------------------------------------------------------

def sbuf_over_allocation(x):
    keep = [nl.ndarray((128, 212984 // 4), dtype=F32)]
    keep.append(nl.ndarray((128, 1), dtype=nl.uint8))  # <- error
    for t in keep:
        nisa.memset(dst=t[:, 0:1], value=0)
    for t in keep + keep:                              # both read, then again: both live
        nisa.tensor_copy(dst=t[:, 0:1], src=t[:, 0:1])


def sbuf_single_tile_too_big(x):
    nl.ndarray((128, 212984 // 4 + 1), dtype=F32)  # <- error


def nine_psum_banks(x):
    banks = [_psum((128, 512)) for _ in range(8)]
    banks.append(nl.ndarray((128, 512), dtype=F32, buffer=nl.psum))  # <- error
    for t in banks:
        nisa.memset(dst=t[:, 0:1], value=0.0)
    for t in banks + banks:                         # all read, then again: all live together
        nisa.tensor_copy(dst=t[:, 0:1], src=t[:, 0:1])


def psum_tile_too_big(x):
    nl.ndarray((128, 4097), dtype=F32, buffer=nl.psum)  # <- error


def matmul_dst_crosses_bank_trn2(x):
    st, mv = nl.zeros((128, 128), BF16), nl.zeros((128, 512), BF16)
    ps = _psum((128, 1024))
    nisa.nc_matmul(dst=ps[:, 256:768], stationary=st, moving=mv)  # <- error


# ---- races ---------------------------------------------------------------------------------

def affine_iterations_overlapping_output_tiles(x):
    out = nl.ndarray((4, 8), dtype=F32, buffer=nl.shared_hbm, name="out")
    for i in nl.affine_range(2):
        t = nl.zeros((4, 5), F32)
        nisa.dma_copy(dst=out[:, 3 * i:3 * i + 5], src=t)  # <- error


def affine_iterations_write_same_hbm_rows(x):
    out = nl.ndarray((4, 8), dtype=F32, buffer=nl.shared_hbm, name="out")
    for i in nl.affine_range(2):
        t = nl.zeros((4, 8), F32)
        nisa.dma_copy(dst=out, src=t)  # <- error


def lnc2_shared_hbm_without_barrier(x):
    """x (2, 8) is shared_hbm under LNC2: each core writes its row, then reads the other core's row.
    Which of the two accesses is second (and so reported) depends on thread timing."""
    me = nl.program_id(0)
    nisa.dma_copy(dst=x[me:me + 1, :], src=nl.zeros((1, 8), F32))  # <- error
    other = nl.ndarray((1, 8), dtype=F32)
    nisa.dma_copy(dst=other, src=x[1 - me:2 - me, :])  # <- error


# ---- uninitialised reads (strict mode) -----------------------------------------------------

def read_never_written_sbuf(x):
    t = nl.ndarray((4, 8), dtype=F32, name="t")
    nisa.memset(dst=t[:, 0:4], value=1.0)
    out = nl.ndarray((4, 8), dtype=F32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=t)  # <- error


def matmul_accumulate_onto_unwritten_psum(x):
    st, mv = nl.zeros((4, 4), BF16), nl.zeros((4, 8), BF16)
    ps = nl.ndarray((4, 8), dtype=F32, buffer=nl.psum, name="ps")
    nisa.nc_matmul(dst=ps, stationary=st, moving=mv, accumulate=True)  # <- error


def read_never_written_hbm(x):
    scratch = nl.ndarray((4, 8), dtype=F32, buffer=nl.private_hbm, name="scratch")
    t = nl.ndarray((4, 8), dtype=F32)
    nisa.dma_copy(dst=t, src=scratch)  # <- error


# ---- deadlocks (LNC2) ----------------------------------------------------------------------

def barrier_skipped_by_core1(x):
    out = nl.ndarray((4, 8), dtype=F32, buffer=nl.shared_hbm)
    if nl.program_id(0) == 0:
        nisa.core_barrier(out, (0, 1))  # <- error


def barrier_meets_sendrecv(x):
    out = nl.ndarray((4, 8), dtype=F32, buffer=nl.shared_hbm)
    a, d = nl.zeros((4, 8), F32), nl.ndarray((4, 8), dtype=F32)
    if nl.program_id(0) == 0:
        nisa.core_barrier(out, (0, 1))  # <- error
    else:
        nisa.sendrecv(src=a, dst=d, send_to_rank=0, recv_from_rank=0, pipe_id=0)


def sendrecv_shapes_differ_between_cores(x):
    n = 8 if nl.program_id(0) == 0 else 4
    a, d = nl.zeros((1, n), F32), nl.ndarray((1, n), dtype=F32)
    nisa.sendrecv(src=a, dst=d, send_to_rank=1 - nl.program_id(0),  # <- error
                  recv_from_rank=1 - nl.program_id(0), pipe_id=0)


# ---- engines -------------------------------------------------------------------------------

def tensor_tensor_on_scalar_engine(x):
    a, d = nl.zeros((4, 8), F32), nl.ndarray((4, 8), dtype=F32)
    nisa.tensor_tensor(dst=d, data1=a, data2=a, op=nl.add, engine=nisa.scalar_engine)  # <- error


def tensor_tensor_bitvec_on_gpsimd(x):
    a, d = nl.zeros((4, 8), nl.int32), nl.ndarray((4, 8), dtype=nl.int32)
    nisa.tensor_tensor(dst=d, data1=a, data2=a, op=nl.bitwise_and, engine=nisa.gpsimd_engine)  # <- error


def tensor_scalar_bitvec_on_scalar_engine(x):
    a, d = nl.zeros((4, 8), nl.int32), nl.ndarray((4, 8), dtype=nl.int32)
    nisa.tensor_scalar(dst=d, data=a, op0=nl.bitwise_and, operand0=3, engine=nisa.scalar_engine)  # <- error


def tensor_scalar_subtract_on_scalar_engine(x):
    a, d = nl.zeros((4, 8), F32), nl.ndarray((4, 8), dtype=F32)
    nisa.tensor_scalar(dst=d, data=a, op0=nl.subtract, operand0=1.0, engine=nisa.scalar_engine)  # <- error


def tensor_scalar_add_on_gpsimd(x):
    a, d = nl.zeros((4, 8), F32), nl.ndarray((4, 8), dtype=F32)
    nisa.tensor_scalar(dst=d, data=a, op0=nl.add, operand0=1.0, engine=nisa.gpsimd_engine)  # <- error


def memset_on_scalar_engine(x):
    nisa.memset(dst=nl.ndarray((4, 8), dtype=F32), value=0.0, engine=nisa.scalar_engine)  # <- error


def tensor_copy_scalar_engine_trn1(x):
    a, d = nl.zeros((4, 8), F32), nl.ndarray((4, 8), dtype=F32)
    nisa.tensor_copy(dst=d, src=a, engine=nisa.scalar_engine)  # <- error


def nc_transpose_on_gpsimd(x):
    a, d = nl.zeros((4, 8), F32), nl.ndarray((8, 4), dtype=F32)
    nisa.nc_transpose(dst=d, data=a, engine=nisa.gpsimd_engine)  # <- error


def dma_copy_engine_without_hwdge(x):
    t = nl.ndarray((4, 8), dtype=F32)
    nisa.dma_copy(dst=t, src=x, engine=nisa.engine.sync)  # <- error


def activation_on_vector_engine(x):
    a, d = nl.zeros((4, 8), F32), nl.ndarray((4, 8), dtype=F32)
    nisa.activation(dst=d, op=nl.exp, data=a, engine=nisa.vector_engine)  # <- error


# ---- operand dtypes ------------------------------------------------------------------------

def tensor_scalar_bf16_operand(x):
    a, c, d = nl.zeros((4, 8), BF16), nl.zeros((4, 1), BF16), nl.ndarray((4, 8), dtype=F32)
    nisa.tensor_scalar(dst=d, data=a, op0=nl.multiply, operand0=c)  # <- error


def tensor_scalar_reduce_bf16_reduce_init(x):
    a, c, d = nl.zeros((4, 8), F32), nl.zeros((4, 1), BF16), nl.ndarray((4, 8), dtype=F32)
    nisa.tensor_scalar_reduce(dst=d, data=a, op0=nl.add, operand0=1.0, reduce_op=nl.add,  # <- error
                              reduce_cmd=nisa.reduce_cmd.load_reduce, reduce_init=c)


def activation_bf16_scale(x):
    a, s, d = nl.zeros((4, 8), F32), nl.zeros((4, 1), BF16), nl.ndarray((4, 8), dtype=F32)
    nisa.activation(dst=d, op=nl.exp, data=a, scale=s)  # <- error


def activation_tf32_bias(x):
    a, b, d = nl.zeros((4, 8), F32), nl.ndarray((4, 1), dtype=nl.tfloat32), nl.ndarray((4, 8), dtype=F32)
    nisa.memset(dst=b, value=0.0)
    nisa.activation(dst=d, op=nl.exp, data=a, bias=b)  # <- error


def scan_bf16_initial(x):
    a, i, d = nl.zeros((4, 8), F32), nl.zeros((4, 1), BF16), nl.ndarray((4, 8), dtype=F32)
    nisa.tensor_tensor_scan(dst=d, data0=a, data1=a, initial=i, op0=nl.multiply, op1=nl.add)  # <- error


def exponential_fp16_max_value(x):
    a, m, d = nl.zeros((4, 8), F32), nl.zeros((4, 1), nl.float16), nl.ndarray((4, 8), dtype=F32)
    nisa.exponential(dst=d, src=a, max_value=m)  # <- error


# ---- unknown op tokens and bad enum values -------------------------------------------------

def unknown_alu_op(x):
    a, d = nl.zeros((4, 8), F32), nl.ndarray((4, 8), dtype=F32)
    nisa.tensor_tensor(dst=d, data1=a, data2=a, op="frobnicate")  # <- error


def unknown_activation(x):
    a, d = nl.zeros((4, 8), F32), nl.ndarray((4, 8), dtype=F32)
    nisa.activation(dst=d, op=nl.bitwise_xor, data=a)  # <- error


def compare_op_as_reduction(x):
    a, d = nl.zeros((4, 8), F32), nl.ndarray((4, 1), dtype=F32)
    nisa.tensor_reduce(dst=d, op=nl.greater, data=a, axis=1)  # <- error


def bad_engine_value(x):
    a, d = nl.zeros((4, 8), F32), nl.ndarray((4, 8), dtype=F32)
    nisa.tensor_copy(dst=d, src=a, engine=99)  # <- error


def bad_dge_mode_value(x):
    t = nl.ndarray((4, 8), dtype=F32)
    nisa.dma_copy(dst=t, src=x, dge_mode=7)  # <- error


def bad_reduce_cmd_value(x):
    a, d = nl.zeros((4, 8), F32), nl.ndarray((4, 8), dtype=F32)
    nisa.activation(dst=d, op=nl.exp, data=a, reduce_cmd="accumulate")  # <- error


def bad_oob_mode_value(x):
    t = nl.ndarray((4, 8), dtype=F32)
    nisa.dma_copy(dst=t, src=x, oob_mode=2)  # <- error


def unknown_op1_token(x):
    a, d = nl.zeros((4, 8), F32), nl.ndarray((4, 8), dtype=F32)
    nisa.tensor_scalar(dst=d, data=a, op0=nl.add, operand0=1.0, op1="frobnicate", operand1=1.0)  # <- error
