"""The error corpus of issue 5 ("Catch what the hardware would reject").

``invalid_kernels.py``: each kernel breaks one rule; the table below gives its inputs, target,
exact error class and whole message. The message must end with the kernel line that made the bad
call (marked ``# <- error`` in the kernel source). ``valid_kernels.py``: kernels exactly at each
limit, or on the legal side of each rule, that must pass and match a NumPy reference. Everything
runs with race detection and strict uninitialised reads, so a kernel can break no other rule.
"""
import inspect
import re
import threading
import time
from dataclasses import dataclass
from typing import Callable

import numpy as np
import pytest

import invalid_kernels as bad
import valid_kernels as good
import nkisim.nki as nki
from nkisim.errors import (BoundsError, CapacityError, DeadlockError, DtypeError, EngineError, FindingsError,
                           MemorySpaceError, NkiError, ArgumentError, RaceError, ShapeError, UninitializedReadError,
                           UnsupportedError)

STRICT = dict(detect_races=True, uninitialized_reads="raise")
MARK = "# <- error"
LOC = r"invalid_kernels\.py:\d+"
FP32_MIN = np.float32(-3.4028235e38)


def run(kernel, inputs, target, lnc=1, **options):
    sim = nki.simulate(kernel, target=target, **{**STRICT, **options})
    return (sim[lnc] if lnc != 1 else sim)(*inputs)


def ints(shape, lo=-4, hi=5, dtype=np.float32, seed=0):
    """Small integers: exact in bf16/fp8, and every product sum below is exact in fp32."""
    return np.random.default_rng(seed).integers(lo, hi, shape).astype(dtype)


def floats(shape, seed=0):
    return np.random.default_rng(seed).uniform(-2, 2, shape).astype(np.float32)


def x48():
    return (np.ones((4, 8), np.float32),)


class Re(str):
    """A message given as a regex (the default is a literal with ``{L}`` for any kernel line)."""


# ---- invalid kernels -----------------------------------------------------------------------

@dataclass(frozen=True)
class Bad:
    kernel: Callable
    error: type
    message: str                  # the whole message before the final " (file:line)"
    target: str = "trn2"
    lnc: int = 1
    inputs: Callable = x48

    def regex(self) -> str:
        body = self.message if isinstance(self.message, Re) else \
            re.escape(self.message).replace(re.escape("{L}"), LOC)
        return rf"^{body} \({LOC}\)$"

    def marked_lines(self) -> set:
        lines, start = inspect.getsourcelines(self.kernel)
        return {start + i for i, text in enumerate(lines) if text.rstrip().endswith(MARK)}


_RACE_LOOP = ("and nothing read since: its values are lost. affine_range iterations must not overwrite "
              "each other's unread HBM results (reading them in between is fine); give each iteration "
              "its own elements, or use sequential_range if the last write is meant to win (loop at {L})")
_ALU_NAMES = r"expected one of (\w+, )+\w+"

BAD = [
    # partition limits
    Bad(bad.sbuf_tile_129_partitions, ShapeError,
        "nl.ndarray: partition dim 129 of sbuf tensor (129, 8) exceeds 128 on trn2"),
    Bad(bad.psum_tile_129_partitions, ShapeError,
        "nl.ndarray: partition dim 129 of psum tensor (129, 8) exceeds 128 on trn2"),
    Bad(bad.identity_matrix_129, ShapeError,
        "nl.shared_identity_matrix: n 129 exceeds the partition limit 128 on trn2"),
    Bad(bad.matmul_k_exceeds_row_tile, ShapeError,
        "nisa.nc_matmul: contraction (partition) dim 128 exceeds the row tile size 64 on trn2"),
    Bad(bad.vector_transpose_33_partitions, ShapeError,
        "nisa.nc_transpose: data partition dim 33 exceeds 32 on trn2 (vector engine transpose)"),
    # free-size limits
    Bad(bad.matmul_stationary_free_129, ShapeError,
        "nisa.nc_matmul: stationary free size 129 exceeds 128 on trn2"),
    Bad(bad.matmul_moving_free_513_trn2, ShapeError,
        "nisa.nc_matmul: moving free size 513 exceeds 512 on trn2"),
    Bad(bad.matmul_moving_free_4097_trn3, ShapeError,
        "nisa.nc_matmul: moving free size 4097 exceeds 4096 on trn3", target="trn3"),
    Bad(bad.bn_stats_free_513, ShapeError,
        "nisa.bn_stats: data elements per partition 513 exceeds 512 on trn2"),
    Bad(bad.vector_transpose_free_33, ShapeError,
        "nisa.nc_transpose: data free size 33 exceeds 32 on trn2 (vector engine transpose)"),
    Bad(bad.tensor_transpose_free_129, ShapeError,
        "nisa.nc_transpose: data free size 129 exceeds 128 on trn2 (tensor engine transpose)"),
    Bad(bad.max8_free_7, ShapeError,
        "nisa.max8: src has 7 elements per partition, needs at least 8 on trn2"),
    # element counts and shapes
    Bad(bad.tensor_tensor_free_mismatch, ShapeError,
        "nisa.tensor_tensor: data2 has 4 elements per partition, data1 has 8 (shapes (4, 4) vs (4, 8))"),
    Bad(bad.tensor_tensor_partition_mismatch, ShapeError,
        "nisa.tensor_tensor: data2 partition dim 2 does not match data1 partition dim 4"),
    Bad(bad.tensor_copy_free_mismatch, ShapeError,
        "nisa.tensor_copy: dst has 6 elements per partition, src has 8 (shapes (4, 6) vs (4, 8))"),
    Bad(bad.dma_copy_count_mismatch, ShapeError,
        "nisa.dma_copy: src has 32 elements, dst has 24 (shapes (4, 8) vs (4, 6))"),
    Bad(bad.matmul_k_mismatch, ShapeError,
        "nisa.nc_matmul: moving partition dim 64 does not match stationary partition dim 128 "
        "(the contraction dim)"),
    Bad(bad.matmul_dst_shape_mismatch, ShapeError,
        "nisa.nc_matmul: dst shape (64, 64) must have 64 partitions (stationary free size) and 32 "
        "elements per partition (moving free size)"),
    Bad(bad.tensor_scalar_operand_not_a_column, ShapeError,
        "nisa.tensor_scalar: operand0 must be a scalar or a (4, 1) tensor, got shape (4, 2)"),
    Bad(bad.bn_stats_dst_not_6, ShapeError,
        "nisa.bn_stats: dst has 5 elements per partition, must have 6"),
    Bad(bad.iota_pattern_count_mismatch, ShapeError,
        "nisa.iota: pattern covers 7 elements per partition, dst has 8"),
    Bad(bad.reshape_element_count, ShapeError,
        "NkiTensor.reshape: shape (4, 7) has 28 elements, expected 32"),
    # buffers
    Bad(bad.dma_copy_from_psum, MemorySpaceError,
        "nisa.dma_copy: src is in psum; must be in private_hbm or sbuf or shared_hbm"),
    Bad(bad.matmul_stationary_in_psum, MemorySpaceError,
        "nisa.nc_matmul: stationary is in psum; must be in sbuf"),
    Bad(bad.matmul_moving_in_hbm, MemorySpaceError,
        "nisa.nc_matmul: moving is in shared_hbm (HBM); must be in sbuf"),
    Bad(bad.matmul_dst_in_sbuf, MemorySpaceError, "nisa.nc_matmul: dst is in sbuf; must be in psum"),
    Bad(bad.tensor_copy_gpsimd_reads_psum, MemorySpaceError,
        "nisa.tensor_copy: src is in psum, which the gpsimd engine cannot access"),
    Bad(bad.memset_gpsimd_psum, MemorySpaceError,
        "nisa.memset: dst is in psum, which the gpsimd engine cannot access"),
    Bad(bad.tensor_tensor_two_psum_inputs, MemorySpaceError,
        "nisa.tensor_tensor: data1 and data2 are both in psum; at most one may be"),
    Bad(bad.tensor_tensor_hbm_operand, MemorySpaceError,
        "nisa.tensor_tensor: data2 is in shared_hbm (HBM); must be in psum or sbuf"),
    Bad(bad.iota_dst_in_psum, MemorySpaceError, "nisa.iota: dst is in psum; must be in sbuf"),
    Bad(bad.dma_transpose_dst_in_hbm, MemorySpaceError,
        "nisa.dma_transpose: dst is in shared_hbm (HBM); must be in sbuf"),
    # dtypes
    Bad(bad.bitwise_and_on_floats, DtypeError,
        "nisa.tensor_tensor: data1 dtype float32 is not an integer dtype, which bitvec op bitwise_and needs"),
    Bad(bad.left_shift_on_floats, DtypeError,
        "nisa.tensor_scalar: data dtype float32 is not an integer dtype, which bitvec op left_shift needs"),
    Bad(bad.dma_copy_hwdge_dtype_cast, DtypeError,
        "nisa.dma_copy: dge_mode=hwdge copies bytes and needs equal dtypes, got src float32 and dst "
        "bfloat16"),
    Bad(bad.e4m3fn_tile_on_trn2, DtypeError,
        "nl.ndarray: tensor dtype float8_e4m3fn is not supported on trn2"),
    Bad(bad.matmul_e4m3fn_on_trn2, DtypeError,
        "nisa.nc_matmul: stationary dtype float8_e4m3fn is not a TensorE input dtype on trn2; expected "
        "one of float8_e4m3, float8_e5m2, bfloat16, float16, tfloat32, float32"),
    Bad(bad.matmul_fp32_with_bf16, DtypeError,
        "nisa.nc_matmul: stationary float32 and moving bfloat16: fp32/tf32 pair only with fp32/tf32"),
    Bad(bad.matmul_bf16_psum_dst_trn2, DtypeError,
        "nisa.nc_matmul: dst dtype bfloat16 is not supported on trn2; expected float32"),
    Bad(bad.matmul_e4m3_with_e4m3fn_trn3, DtypeError,
        "nisa.nc_matmul: float8_e4m3fn cannot be mixed with float8_e4m3", target="trn3"),
    Bad(bad.predicate_float32, DtypeError,
        "nisa.tensor_copy_predicated: predicate dtype float32 is not supported on trn2; expected one of "
        "uint8, uint16, uint32"),
    Bad(bad.memset_fraction_into_int, DtypeError,
        "nisa.memset: value 0.5 is not an integer but dst dtype is int32"),
    Bad(bad.dma_transpose_fp32, DtypeError,
        "nisa.dma_transpose: src dtype float32 is 4 bytes; the dge_mode=hwdge transpose needs a 2-byte dtype"),
    # generation gating
    Bad(bad.exponential_on_trn2, UnsupportedError,
        "nisa.exponential: needs trn3 or newer, not supported on trn2"),
    Bad(bad.activation_scalar_bias_on_trn1, UnsupportedError,
        "nisa.activation: a scalar bias needs trn2 or newer; on trn1 pass a (4, 1) tensor", target="trn1"),
    Bad(bad.activation_reduce_max_on_trn1, UnsupportedError,
        "nisa.activation_reduce: reduce_op maximum is not supported on trn1; expected one of add",
        target="trn1"),
    Bad(bad.range_select_on_trn1, UnsupportedError,
        "nisa.range_select: range_select needs trn2 or newer, not trn1", target="trn1"),
    Bad(bad.double_row_on_trn1, UnsupportedError,
        "nisa.nc_matmul: perf_mode=double_row needs trn2 or newer, not trn1", target="trn1"),
    Bad(bad.matmul_tile_32_on_trn1, UnsupportedError,
        "nisa.nc_matmul: tile_size (32, 32): 32-wide tiles need trn2 or newer, not trn1", target="trn1"),
    Bad(bad.core_barrier_on_trn1, UnsupportedError,
        "nisa.core_barrier: needs trn2 or newer (LNC2), not trn1", target="trn1"),
    Bad(bad.core_barrier_under_lnc1, UnsupportedError,
        "nisa.core_barrier: core_barrier needs an LNC2 launch (kernel[2]); this launch has one core"),
    Bad(bad.sendrecv_on_trn1, UnsupportedError,
        "nisa.sendrecv: needs trn2 or newer (LNC2), not trn1", target="trn1"),
    Bad(bad.lnc2_launch_on_trn1, UnsupportedError,
        "nki.jit: LNC2 needs a target with 2 cores per logical core; trn1 has 1", target="trn1", lnc=2),
    Bad(bad.dma_transpose_hwdge_on_trn1, UnsupportedError,
        "nisa.dma_transpose: dge_mode=hwdge needs trn2 or newer, not trn1", target="trn1"),
    # bounds
    Bad(bad.slice_past_the_end, BoundsError,
        "tensor indexing: slice 0:9 on dim 1 of tensor (4, 8) is outside 0:8"),
    Bad(bad.negative_slice_start, BoundsError,
        "tensor indexing: slice -9:8 on dim 1 of tensor (4, 8) is outside 0:8"),
    Bad(bad.ap_reaching_outside, BoundsError,
        "nisa.memset: dst view of tensor (4, 8) reaches element 32, outside its 32 elements"),
    Bad(bad.index_out_of_range, BoundsError,
        "tensor indexing: index 4 on dim 0 of tensor (4, 8) is outside 0:4"),
    Bad(bad.hbm_index_out_of_range, BoundsError,
        "tensor indexing: slice 4:5 on dim 0 of tensor 'argument 0' (4, 8) is outside 0:4"),
    Bad(bad.tensor_slice_method_past_end, BoundsError,
        "NkiTensor.slice: slice(1, 4, 12, 1) of tensor (4, 8) needs 0 <= start < end <= 8 and step >= 1"),
    Bad(bad.select_out_of_range, BoundsError,
        "NkiTensor.select: index 8 on dim 1 of tensor (4, 8) is outside 0:8"),
    # capacity
    Bad(bad.sbuf_over_allocation, CapacityError,
        "nl.ndarray: sbuf allocation (128, 1) uint8 needs 128 partitions x 1 bytes but 27261952 of "
        "27261952 bytes of SBUF (128 partitions x 212984) are live at that point on trn2, however placed; "
        "largest live: (128, 53246) float32 ({L}) 212984 B"),
    Bad(bad.sbuf_single_tile_too_big, CapacityError,
        "nl.ndarray: sbuf tensor (128, 53247) needs 212988 bytes per partition, exceeds 212984 bytes per "
        "partition on trn2"),
    Bad(bad.nine_psum_banks, CapacityError,
        "nl.ndarray: psum allocation (128, 512) float32 needs 2048 bytes per partition (1 bank(s)) "
        "but 16384 of 16384 bytes per partition (8 banks of 2048) are live or fragmented at that point on "
        "trn2; largest live: (128, 512) float32 ({L}) 2048 B, (128, 512) float32 ({L}) 2048 B, "
        "(128, 512) float32 ({L}) 2048 B"),
    Bad(bad.psum_tile_too_big, CapacityError,
        "nl.ndarray: psum tensor (128, 4097) needs 16388 bytes per partition, exceeds 16384 bytes per "
        "partition on trn2"),
    Bad(bad.matmul_dst_crosses_bank_trn2, ShapeError,
        "nisa.nc_matmul: dst spans PSUM bytes 1024..3071 of its tensor, crossing a 2048-byte bank "
        "boundary; a matmul destination must lie within one bank on trn2"),
    # races
    Bad(bad.affine_iterations_overlapping_output_tiles, RaceError,
        "nisa.dma_copy: dst writes 8 element(s) of shared_hbm tensor 'out' (4, 8) float32 in "
        "affine_range iteration 1 that iteration 0 wrote ({L}) " + _RACE_LOOP),
    Bad(bad.affine_iterations_write_same_hbm_rows, RaceError,
        "nisa.dma_copy: dst writes 32 element(s) of shared_hbm tensor 'out' (4, 8) float32 in "
        "affine_range iteration 1 that iteration 0 wrote ({L}) " + _RACE_LOOP),
    Bad(bad.lnc2_shared_hbm_without_barrier, RaceError,
        Re(r"nisa\.dma_copy: core [01] (writes 8 element\(s\) of shared_hbm tensor 'argument 0' \(2, 8\) "
           r"that core [01] read|reads 8 element\(s\) of shared_hbm tensor 'argument 0' \(2, 8\) that "
           rf"core [01] wrote) \({LOC}\) with no core_barrier between"),
        lnc=2, inputs=lambda: (np.ones((2, 8), np.float32),)),
    # uninitialised reads (strict mode)
    Bad(bad.read_never_written_sbuf, UninitializedReadError,
        "nisa.dma_copy: src reads 16 never-written element(s) of sbuf tensor 't' (4, 8) float32, first at "
        "view index (0, 4) (allocated at {L})"),
    Bad(bad.matmul_accumulate_onto_unwritten_psum, UninitializedReadError,
        "nisa.nc_matmul: dst reads 32 never-written element(s) of psum tensor 'ps' (4, 8) float32, first "
        "at view index (0, 0) (allocated at {L})"),
    Bad(bad.read_never_written_hbm, UninitializedReadError,
        "nisa.dma_copy: src reads 32 never-written element(s) of private_hbm tensor 'scratch' (4, 8) "
        "float32, first at view index (0, 0) (allocated at {L})"),
    # LNC2 synchronisation: deadlocks and mismatched exchanges
    Bad(bad.barrier_skipped_by_core1, DeadlockError,
        "nisa.core_barrier: core 0 waits at core_barrier but core 1 finished the kernel without reaching it",
        lnc=2),
    Bad(bad.barrier_meets_sendrecv, DeadlockError,
        "nisa.core_barrier: core 0 is at core_barrier while core 1 is at sendrecv (pipe_id=0); both cores "
        "must reach the same sync points in the same order", lnc=2),
    Bad(bad.sendrecv_shapes_differ_between_cores, ShapeError,
        "nisa.sendrecv: core 1 sent src (1, 4) float32 but dst on core 0 is (1, 8) float32; both cores "
        "must pass equal shapes", lnc=2),
    # engines
    Bad(bad.tensor_tensor_on_scalar_engine, EngineError,
        "nisa.tensor_tensor: engine scalar is not supported on trn2; expected vector, gpsimd or unknown"),
    Bad(bad.tensor_tensor_bitvec_on_gpsimd, EngineError,
        "nisa.tensor_tensor: engine gpsimd is not supported for bitvec op bitwise_and on trn2; expected "
        "vector or unknown"),
    Bad(bad.tensor_scalar_bitvec_on_scalar_engine, EngineError,
        "nisa.tensor_scalar: engine scalar is not supported for bitvec op0 bitwise_and on trn2; expected "
        "vector or unknown"),
    Bad(bad.tensor_scalar_subtract_on_scalar_engine, EngineError,
        "nisa.tensor_scalar: engine scalar is not supported for op0 subtract, op1 None on trn2; expected "
        "vector or unknown"),
    Bad(bad.tensor_scalar_add_on_gpsimd, EngineError,
        "nisa.tensor_scalar: engine gpsimd is not supported for op0 add, op1 None on trn2; expected vector, "
        "scalar or unknown"),
    Bad(bad.memset_on_scalar_engine, EngineError,
        "nisa.memset: engine scalar is not supported on trn2; expected vector, gpsimd or unknown"),
    Bad(bad.tensor_copy_scalar_engine_trn1, EngineError,
        "nisa.tensor_copy: engine scalar is not supported on trn1; expected vector, gpsimd or unknown (use "
        "nisa.activation with op=nl.copy)", target="trn1"),
    Bad(bad.nc_transpose_on_gpsimd, EngineError,
        "nisa.nc_transpose: engine gpsimd is not supported on trn2; expected tensor, vector or unknown"),
    Bad(bad.dma_copy_engine_without_hwdge, EngineError,
        "nisa.dma_copy: engine sync is not supported for dge_mode unknown on trn2; expected unknown (engine "
        "is only valid with dge_mode=hwdge)"),
    Bad(bad.activation_on_vector_engine, EngineError,
        "nisa.activation: engine vector is not supported on trn2; expected scalar or unknown"),
    # operand dtypes
    Bad(bad.tensor_scalar_bf16_operand, DtypeError,
        "nisa.tensor_scalar: operand0 dtype bfloat16 must be float32 for arithmetic op0 multiply"),
    Bad(bad.tensor_scalar_reduce_bf16_reduce_init, DtypeError,
        "nisa.tensor_scalar_reduce: reduce_init dtype bfloat16 must be float32"),
    Bad(bad.activation_bf16_scale, DtypeError, "nisa.activation: scale dtype bfloat16 must be float32"),
    Bad(bad.activation_tf32_bias, DtypeError,
        "nisa.activation: bias dtype tfloat32 is not supported; any dtype but tfloat32"),
    Bad(bad.scan_bf16_initial, DtypeError, "nisa.tensor_tensor_scan: initial dtype bfloat16 must be float32"),
    Bad(bad.exponential_fp16_max_value, DtypeError, "nisa.exponential: max_value dtype float16 must be float32",
        target="trn3"),
    # unknown op tokens and bad enum values
    Bad(bad.unknown_alu_op, ArgumentError,
        Re(r"nisa\.tensor_tensor: op frobnicate is not an ALU operator; " + _ALU_NAMES)),
    Bad(bad.unknown_activation, ArgumentError,
        Re(r"nisa\.activation: op bitwise_xor is not an activation function; " + _ALU_NAMES)),
    Bad(bad.compare_op_as_reduction, ArgumentError,
        "nisa.tensor_reduce: op greater is not a reduction operator; expected one of add, bitwise_and, "
        "bitwise_or, bitwise_xor, logical_and, logical_or, logical_xor, maximum, minimum, multiply, "
        "subtract"),
    Bad(bad.bad_engine_value, ArgumentError,
        "nisa.tensor_copy: 99 is not a valid engine; expected one of ['unknown', 'tensor', 'scalar', "
        "'gpsimd', 'dma', 'vector', 'sync']"),
    Bad(bad.bad_dge_mode_value, ArgumentError,
        "nisa.dma_copy: 7 is not a valid dge_mode; expected one of ['unknown', 'swdge', 'hwdge', 'none']"),
    Bad(bad.bad_reduce_cmd_value, ArgumentError,
        "nisa.activation: 'accumulate' is not a valid reduce_cmd; expected one of ['idle', 'reset', "
        "'reduce', 'reset_reduce', 'load_reduce']"),
    Bad(bad.bad_oob_mode_value, ArgumentError,
        "nisa.dma_copy: 2 is not a valid oob_mode; expected one of ['error', 'skip']"),
    Bad(bad.unknown_op1_token, ArgumentError,
        Re(r"nisa\.tensor_scalar: op1 frobnicate is not an ALU operator; " + _ALU_NAMES)),
]


@pytest.mark.parametrize("case", BAD, ids=lambda c: c.kernel.__name__)
def test_invalid_kernel_raises_named_error(case):
    marked = case.marked_lines()
    assert marked, f"{case.kernel.__name__} has no '{MARK}' line"
    with pytest.raises(NkiError) as info:
        run(case.kernel, case.inputs(), case.target, case.lnc)
    exc = info.value
    assert type(exc) is case.error, f"{type(exc).__name__}: {exc}"
    assert re.match(case.regex(), str(exc)), f"message does not match:\n  {exc}\n  {case.regex()}"
    file, line = exc.where.rsplit(":", 1)
    assert file == "invalid_kernels.py" and int(line) in marked, (exc.where, sorted(marked))
    assert str(exc).startswith(f"{exc.op}: ")


@pytest.mark.parametrize("case", BAD, ids=lambda c: c.kernel.__name__)
def test_findings_all_reports_the_same_error(case, capsys):
    """With findings="all" a broken instruction rule is recorded (the instruction skipped) with the
    same class and message; rules outside instructions (allocation, views, launch) still raise,
    the same message saying they are always fatal (``runtime.launch.run``)."""
    sim = nki.simulate(case.kernel, target=case.target, findings="all", **STRICT)
    sim = sim[case.lnc] if case.lnc != 1 else sim
    try:
        sim(*case.inputs())
        found = sim.findings
    except FindingsError as exc:
        found = exc.findings
    except NkiError as exc:
        found = [exc]
    assert found and all(type(e) is case.error for e in found), found
    fatal = '; always fatal, even with findings="all": '
    for e in found:
        assert e.fatal == (fatal in str(e)) and str(e) == f"{e.op}: {e.what} ({e.where})"
    assert any(re.match(case.regex(), f"{e.op}: {e.what.split(fatal)[0]} ({e.where})") for e in found), found


# ---- valid kernels -------------------------------------------------------------------------

@dataclass(frozen=True)
class Good:
    kernel: Callable
    inputs: Callable
    expect: Callable              # NumPy reference: expect(*inputs) -> array or tuple of arrays
    target: str = "trn2"
    lnc: int = 1
    rtol: float = 0.0             # 0: bit-exact
    atol: float = 0.0


def at(*shapes, **kw):
    """Inputs: small-integer float32 arrays of the given shapes (different seed per operand)."""
    return lambda: tuple(ints(s, seed=i, **kw) for i, s in enumerate(shapes))


def mm(a, b):
    return a.T @ b


def same(x, *rest):
    return x


def bn_stats_ref(x):
    out = []
    for part in (x[:, 0::2].astype(np.float64), x[:, 1::2].astype(np.float64)):
        mean = part.mean(axis=1)
        out += [np.full(len(x), part.shape[1]), mean, ((part - mean[:, None]) ** 2).sum(axis=1)]
    return np.stack(out, axis=1)


def ap_ref(x):
    flat = x.reshape(-1)
    return np.array([[flat[1 + 8 * i + j] for j in range(7)] for i in range(4)])


def select_in_range(x):
    i = np.arange(x.shape[1])
    return np.where((i >= 2) & (i < 6), x, FP32_MIN)


def mask_inputs():
    return ints((4, 8)), ints((4, 8), 0, 2, np.uint8, seed=1)


GOOD = [
    # partition limits
    Good(good.sbuf_tile_128_partitions, at((128, 8)), same),
    Good(good.psum_tile_128_partitions, at((128, 8)), same),
    Good(good.identity_matrix_128, x48, lambda x: np.eye(128)),
    Good(good.matmul_k_equals_row_tile, at((64, 64), (64, 32)), mm),
    Good(good.vector_transpose_32x32, at((32, 32)), np.transpose),
    Good(good.tensor_tensor_128_partitions, at((128, 8), (128, 8)), np.add),
    # free-size limits
    Good(good.matmul_stationary_free_128, at((128, 128), (128, 64)), mm),
    Good(good.matmul_moving_free_512, at((128, 8), (128, 512)), mm),
    Good(good.matmul_moving_free_512, at((128, 8), (128, 512)), mm, target="trn1"),
    Good(good.matmul_moving_free_1024_trn3, at((128, 4), (128, 1024)), mm, target="trn3"),
    Good(good.matmul_moving_free_4096_trn3, at((128, 4), (128, 4096)), mm, target="trn3"),
    Good(good.bn_stats_free_512, lambda: (floats((4, 512)),),
         lambda x: np.stack([x.mean(axis=1), x.var(axis=1)], axis=1), rtol=1e-5, atol=1e-6),
    Good(good.bn_stats_128_partitions_by_512, lambda: (floats((128, 512)),), bn_stats_ref, rtol=1e-5,
         atol=1e-5),
    Good(good.vector_transpose_free_32, at((8, 32)), np.transpose),
    Good(good.tensor_transpose_free_128, at((4, 128)), np.transpose),
    Good(good.max8_free_8, lambda: (floats((4, 8)),), lambda x: -np.sort(-x, axis=1)),
    # element counts and shapes
    Good(good.tensor_tensor_same_count_other_free_shape, at((4, 8), (4, 2, 4)),
         lambda a, b: a - b.reshape(4, 8)),
    Good(good.tensor_copy_other_free_shape, at((4, 8)), lambda x: x.reshape(4, 2, 4)),
    Good(good.dma_copy_equal_counts, at((4, 8)), lambda x: x.reshape(2, 16)),
    Good(good.matmul_k_128_both, at((128, 4), (128, 8)), mm),
    Good(good.matmul_dst_shape_exact, at((128, 64), (128, 32)), mm),
    Good(good.tensor_scalar_column_operand, at((4, 8), (4, 1)), np.multiply),
    Good(good.bn_stats_dst_6, lambda: (floats((4, 8)),), bn_stats_ref, rtol=1e-5, atol=1e-6),
    Good(good.iota_pattern_count_matches, x48, lambda x: np.arange(32, dtype=np.int32).reshape(4, 8)),
    Good(good.reshape_same_count, at((4, 8)), lambda x: x.reshape(4, 2, 4)),
    # buffers
    Good(good.dma_copy_from_sbuf_after_psum, at((4, 8)), same),
    Good(good.tensor_copy_gpsimd_sbuf, at((4, 8)), same),
    Good(good.memset_gpsimd_sbuf, x48, lambda x: np.full((4, 8), 3.0)),
    Good(good.tensor_tensor_one_psum_input, at((4, 8), (4, 8)), np.multiply),
    Good(good.dma_transpose_into_sbuf, at((4, 8)), np.transpose),
    # dtypes
    Good(good.bitwise_and_on_ints, at((4, 8), (4, 8), lo=-1000, hi=1000, dtype=np.int32), np.bitwise_and),
    Good(good.left_shift_on_ints, at((4, 8), lo=-1000, hi=1000, dtype=np.int32), lambda x: x * 2),
    Good(good.dma_copy_hwdge_same_dtype, at((4, 8)), same),
    Good(good.e4m3fn_tile_on_trn3, at((4, 8)), same, target="trn3"),
    Good(good.matmul_e4m3fn_on_trn3, at((4, 4), (4, 8)), mm, target="trn3"),
    Good(good.matmul_fp32_with_fp32, at((4, 4), (4, 8)), mm),
    Good(good.matmul_bf16_psum_dst_trn3, at((4, 4), (4, 8)), mm, target="trn3"),
    Good(good.matmul_e4m3_with_e5m2, at((4, 4), (4, 8)), mm),
    Good(good.predicate_uint8, mask_inputs, lambda x, m: np.where(m != 0, x, 0)),
    Good(good.memset_integral_into_int, x48, lambda x: np.full((4, 8), 3, np.int32)),
    # generation gating
    Good(good.exponential_on_trn3, lambda: (floats((4, 8)),), np.exp, target="trn3", rtol=1e-6),
    Good(good.activation_tensor_bias_on_trn1, lambda: (floats((4, 8)), floats((4, 1), seed=1)),
         lambda x, b: np.exp(x + b), target="trn1", rtol=1e-6),
    Good(good.activation_scalar_bias_on_trn2, lambda: (floats((4, 8)),), lambda x: np.exp(x + 1),
         rtol=1e-6),
    Good(good.activation_reduce_add_on_trn1, at((4, 8)), lambda x: (x, x.sum(axis=1, keepdims=True)),
         target="trn1"),
    Good(good.activation_reduce_max_on_trn2, at((4, 8)), lambda x: (x, x.max(axis=1, keepdims=True))),
    Good(good.range_select_on_trn2, at((4, 8)), select_in_range),
    Good(good.double_row_on_trn2, at((4, 2, 4), (4, 2, 8)),
         lambda a, b: np.einsum("kjm,kjn->mn", a, b)),
    Good(good.matmul_tile_32_on_trn2, at((32, 32), (32, 8)), mm),
    Good(good.core_barrier_lnc2_on_trn2, at((2, 8)), same, lnc=2),
    Good(good.sendrecv_lnc2_on_trn2, at((2, 8)), lambda x: x[::-1], lnc=2),
    Good(good.sendrecv_two_pipes_in_order, at((2, 8)), lambda x: x[::-1], lnc=2),
    Good(good.lnc2_launch_on_trn2, at((2, 8)), same, lnc=2),
    Good(good.dma_transpose_hwdge_on_trn2, at((16, 128)), np.transpose),
    # bounds
    Good(good.slice_to_the_end, at((4, 8)), lambda x: x[:, 4:]),
    Good(good.slice_from_zero, at((4, 8)), lambda x: x[:, :4]),
    Good(good.ap_reaching_the_last_element, at((4, 8)), ap_ref),
    Good(good.index_last_partition, at((4, 8)), lambda x: x[3:]),
    Good(good.hbm_last_row, at((4, 8)), lambda x: x[3:]),
    Good(good.tensor_slice_method_to_the_end, at((4, 8)), lambda x: x[:, 1::2]),
    Good(good.select_last_index, at((4, 8)), lambda x: x[:, 7:]),
    # capacity
    Good(good.sbuf_filled_exactly, x48, lambda x: np.full((4, 8), 2.0), target="trn1"),
    Good(good.sbuf_filled_exactly, x48, lambda x: np.full((4, 8), 2.0)),
    Good(good.sbuf_filled_exactly, x48, lambda x: np.full((4, 8), 2.0), target="trn3"),
    Good(good.sbuf_two_tiles_fill_exactly, x48, lambda x: np.full((4, 8), 3, np.uint8)),
    Good(good.eight_psum_banks, x48, lambda x: np.full((4, 8), 7.0)),
    Good(good.psum_bank_freed_then_reused, x48, lambda x: np.full((4, 8), 5.0)),
    Good(good.psum_tile_16_kib_last_bank, at((128, 4), (128, 512)), mm),
    Good(good.matmul_dst_within_one_bank, at((128, 128), (128, 512)), mm),
    Good(good.matmul_dst_crossing_banks_on_trn3, at((128, 128), (128, 512)), mm, target="trn3"),
    # races
    Good(good.affine_iterations_write_distinct_rows, at((4, 8)), same),
    Good(good.sequential_accumulation, at((3, 4, 8)), lambda x: x.sum(axis=0)),
    Good(good.affine_accumulation, at((3, 4, 8)), lambda x: x.sum(axis=0)),
    Good(good.affine_matmul_accumulation, at((256, 16), (256, 8)), mm),
    Good(good.lnc2_shared_hbm_with_barrier, at((2, 8)), lambda x: np.zeros((2, 8)), lnc=2),
    # uninitialised reads
    Good(good.fully_written_in_two_halves, x48, lambda x: np.repeat([[1.0] * 4 + [2.0] * 4], 4, axis=0)),
    Good(good.matmul_accumulate_after_overwrite, at((4, 4), (4, 8)), lambda a, b: 2 * mm(a, b)),
    Good(good.hbm_scratch_written_then_read, at((4, 8)), same),
    # synchronisation
    Good(good.barrier_reached_by_both_cores, at((2, 8)), same, lnc=2),
    Good(good.barrier_then_sendrecv_on_both_cores, at((2, 8)), lambda x: x[::-1], lnc=2),
    # engines
    Good(good.tensor_tensor_on_gpsimd, at((4, 8), (4, 8)), np.add),
    Good(good.tensor_tensor_bitvec_on_vector, at((4, 8), (4, 8), lo=-1000, hi=1000, dtype=np.int32),
         np.bitwise_and),
    Good(good.tensor_scalar_bitvec_on_vector, at((4, 8), lo=-1000, hi=1000, dtype=np.int32),
         lambda x: x & 3),
    Good(good.tensor_scalar_multiply_add_on_scalar_engine, at((4, 8)), lambda x: x * 2 + 1),
    Good(good.tensor_scalar_multiply_add_on_scalar_engine, at((4, 8)), lambda x: x * 2 + 1, target="trn1"),
    Good(good.tensor_scalar_subtract_on_scalar_engine_trn3, at((4, 8)), lambda x: x - 1, target="trn3"),
    Good(good.tensor_scalar_rsqrt_on_gpsimd, lambda: (np.full((4, 8), 4.0, np.float32),),
         lambda x: np.full((4, 8), 0.5)),
    Good(good.memset_on_vector_engine, x48, lambda x: np.full((4, 8), 4.0)),
    Good(good.tensor_copy_scalar_engine_trn2, at((4, 8)), same),
    Good(good.nc_transpose_on_vector_engine, at((4, 8)), np.transpose),
    Good(good.dma_copy_hwdge_on_sync_engine, at((4, 8)), same),
    Good(good.activation_on_scalar_engine, at((4, 8)), same),
    # operand dtypes
    Good(good.tensor_scalar_fp32_operand_bf16_data, at((4, 8), (4, 1)), np.multiply),
    Good(good.tensor_scalar_reduce_fp32_reduce_init, at((4, 8), (4, 1)),
         lambda x, c: c + (x + 1).sum(axis=1, keepdims=True)),
    Good(good.activation_fp32_scale_bf16_bias, at((4, 8), (4, 1), (4, 1)), lambda x, s, b: x * s + b),
    Good(good.scan_fp32_initial, at((4, 8), (4, 1)), lambda x, i: i + np.cumsum(2 * x, axis=1)),
    Good(good.exponential_fp32_max_value, lambda: (floats((4, 8)), floats((4, 1), seed=1)),
         lambda x, m: np.exp(x - m), target="trn3", rtol=1e-6),
    Good(good.scalar_tensor_tensor_bf16_operand0, at((4, 8), (4, 1), (4, 8)), lambda x, c, y: x * c + y),
    # op tokens and enum values
    Good(good.alu_op_by_name, at((4, 8), (4, 8)), np.maximum),
    Good(good.activation_known_function, lambda: (floats((4, 8)),), np.tanh, rtol=1e-6),
    Good(good.maximum_as_reduction, at((4, 8)), lambda x: x.max(axis=1, keepdims=True)),
    Good(good.engine_as_raw_int, at((4, 8)), same),
    Good(good.dge_mode_as_raw_int, at((4, 8)), same),
    Good(good.reduce_cmd_by_name, at((4, 8)), lambda x: x.sum(axis=1, keepdims=True)),
    Good(good.oob_mode_as_raw_int, at((4, 8)), same),
    Good(good.alu_op_token_for_op1, at((4, 8)), lambda x: (x + 1) * 2),
]


def _id(case):
    return f"{case.kernel.__name__}-{case.target}"


@pytest.mark.parametrize("case", GOOD, ids=_id)
def test_valid_kernel_at_the_limit_passes(case):
    inputs = case.inputs()
    want = case.expect(*(np.copy(a) for a in inputs))
    got = run(case.kernel, inputs, case.target, case.lnc)
    got, want = (got, want) if isinstance(want, tuple) else ((got,), (want,))
    assert len(got) == len(want)
    for g, w in zip(got, want):
        g = np.asarray(g)
        assert g.shape == np.shape(w)
        if case.rtol or case.atol:
            np.testing.assert_allclose(g.astype(np.float64), w, rtol=case.rtol, atol=case.atol)
        else:
            np.testing.assert_array_equal(g.astype(np.asarray(w).dtype), w)


# ---- the corpus as a whole -----------------------------------------------------------------

def _kernels(module):
    return {f for name, f in vars(module).items()
            if inspect.isfunction(f) and not name.startswith("_") and f.__module__ == module.__name__}


def test_corpus_covers_every_kernel_and_is_large_enough():
    assert {c.kernel for c in BAD} == _kernels(bad)
    assert len({c.kernel for c in BAD}) == len(BAD)           # one rule, one kernel
    assert {c.kernel for c in GOOD} == _kernels(good)
    assert len(BAD) >= 50 and len(_kernels(good)) >= len(_kernels(bad))


def test_every_error_class_is_exercised():
    kinds = {c.error for c in BAD}
    assert kinds == {ShapeError, MemorySpaceError, DtypeError, UnsupportedError, BoundsError,
                     CapacityError, RaceError, UninitializedReadError, DeadlockError, EngineError,
                     ArgumentError}         # no case is a bare NkiError: every rule has its class


def test_deadlocks_never_hang():
    """The deadlock cases, with the default barrier timeout (30 s), end in well under 5 s: a core
    that finished or waits elsewhere is detected at once, not by timing out."""
    cases = [c for c in BAD if c.error is DeadlockError]
    assert cases
    for case in cases:
        caught: list = []

        def go():
            try:
                nki.simulate(case.kernel, target=case.target)[2](*case.inputs())
            except DeadlockError as exc:
                caught.append(exc)

        start = time.monotonic()
        worker = threading.Thread(target=go, daemon=True)
        worker.start()
        worker.join(5.0)
        assert not worker.is_alive(), f"{case.kernel.__name__} still running after 5 s"
        assert len(caught) == 1 and time.monotonic() - start < 5.0
