"""trace.cost: every rule against its documented formula, numbers computed by hand from the doc
pages (clocks, 64-cycle MIN_II / MM init, 150-cycle GpSimd start, DMA 1300 ns and B/ns per engine)."""
import math

import pytest

from nkisim import arch
from nkisim.trace.cost import RULED_OPS, cost, pe_peak_flops_per_ns
from nkisim.trace.events import Instruction, Operand

_SIZE = {"float32": 4, "bfloat16": 2, "float16": 2, "float8_e4m3": 1, "int32": 4, "uint8": 1,
         "float8_e4m3fn_x4": 4}


def opnd(role, buffer, shape, dtype="float32", contiguous=None, alloc="a"):
    n = math.prod(shape) * _SIZE[dtype]
    on_chip = buffer in ("sbuf", "psum")
    row = (math.prod(shape[1:]) if on_chip else math.prod(shape)) * _SIZE[dtype]
    return Operand(role=role, buffer=buffer, shape=tuple(shape), dtype=dtype, nbytes=n, alloc=alloc,
                   partitions=shape[0] if on_chip else 1,
                   contiguous_bytes=row if contiguous is None else contiguous)


def ins(name, engine, reads=(), writes=(), **options):
    return Instruction(op=name, api=f"nisa.{name}", engine=engine, core=0, seq=1, location="k.py:1",
                       reads=tuple(reads), writes=tuple(writes), options=options)


def matmul(k, m, n, dtype="bfloat16", **options):
    return ins("nc_matmul", "tensor",
               [opnd("stationary", "sbuf", (k, m), dtype), opnd("moving", "sbuf", (k, n), dtype)],
               [opnd("dst", "psum", (m, n))], perf_mode="none", **options)


# ---- engine clocks (architecture guides' tables) ------------------------------------------------

def test_engine_clocks_from_the_architecture_guides():
    assert (arch.TRN1.tensor_ghz, arch.TRN1.vector_ghz, arch.TRN1.scalar_ghz, arch.TRN1.gpsimd_ghz) == \
        (2.8, 1.12, 1.4, 1.4)
    assert (arch.TRN2.tensor_ghz, arch.TRN2.vector_ghz, arch.TRN2.scalar_ghz, arch.TRN2.gpsimd_ghz) == \
        (2.4, 0.96, 1.2, 1.2)
    assert (arch.TRN3.tensor_ghz, arch.TRN3.vector_ghz, arch.TRN3.scalar_ghz, arch.TRN3.gpsimd_ghz) == \
        (2.4, 1.2, 1.2, 1.2)


def test_pe_peak_matches_the_documented_tflops():
    # "79 BF16 ... 20 FP32 dense TFLOPS" (trn2), "158 FP8"; NC-v2 92 BF16; trn3 "315 MXFP8"
    assert pe_peak_flops_per_ns(arch.TRN2) / 1000 == pytest.approx(79, rel=0.01)
    assert pe_peak_flops_per_ns(arch.TRN2, "fp32") / 1000 == pytest.approx(20, rel=0.02)
    assert pe_peak_flops_per_ns(arch.TRN2, "fp8x2") / 1000 == pytest.approx(158, rel=0.01)
    assert pe_peak_flops_per_ns(arch.TRN1) / 1000 == pytest.approx(92, rel=0.01)
    assert pe_peak_flops_per_ns(arch.TRN3, "mx") / 1000 == pytest.approx(315, rel=0.01)


# ---- TensorE -----------------------------------------------------------------------------------

@pytest.mark.parametrize("m,n,cycles", [(128, 512, 512), (128, 32, 64), (16, 32, 32), (64, 128, 128)])
def test_nc_matmul_max_min64_stationary_moving(m, n, cycles):
    c = cost(matmul(128, m, n), arch.TRN2)
    assert c.kind == "tensor"
    assert c.cycles == max(min(64, m), n) == cycles
    assert c.duration_ns == pytest.approx(cycles / 2.4)
    assert c.flops == 2 * 128 * m * n
    assert c.wait_overhead_ns == pytest.approx(64 / 2.4)        # MM_INIT, added by the schedule
    assert "max(min(64, " in c.why


def test_nc_matmul_fp32_costs_four_times():
    c = cost(matmul(128, 128, 512, "float32"), arch.TRN1)
    assert c.cycles == 4 * 512
    assert c.duration_ns == pytest.approx(2048 / 2.8)
    assert c.peak_flops_per_ns == pytest.approx(2 * 128 * 128 * 2.8 / 4)


def test_nc_matmul_fp8_double_row_doubles_k():
    e = ins("nc_matmul", "tensor", [opnd("stationary", "sbuf", (128, 2, 128), "float8_e4m3"),
                                    opnd("moving", "sbuf", (128, 2, 512), "float8_e4m3")],
            [opnd("dst", "psum", (128, 512))], perf_mode="double_row")
    c = cost(e, arch.TRN2)
    assert c.cycles == 512                                      # max(min(64, 128), 512)
    assert c.flops == 2 * 256 * 128 * 512
    assert c.peak_flops_per_ns == pytest.approx(2 * 2 * 128 * 128 * 2.4)


def test_nc_matmul_transpose_mode_fp32_twice_faster_no_flops():
    c = cost(matmul(128, 128, 128, "float32", is_transpose=True), arch.TRN2)
    assert c.cycles == 128 * 4 // 2
    assert c.flops == 0


def test_nc_matmul_mx_k_is_four_partitions():
    e = ins("nc_matmul_mx", "tensor", [opnd("stationary", "sbuf", (128, 128), "float8_e4m3fn_x4"),
                                       opnd("moving", "sbuf", (128, 512), "float8_e4m3fn_x4")],
            [opnd("dst", "psum", (128, 512))])
    c = cost(e, arch.TRN3)
    assert c.cycles == 512 and c.flops == 2 * 512 * 128 * 512


def test_nc_transpose_on_pe_and_vector():
    data = opnd("data", "sbuf", (32, 128), "bfloat16")
    c = cost(ins("nc_transpose", "tensor", [data], [opnd("dst", "psum", (128, 32), "bfloat16")]), arch.TRN2)
    assert c.kind == "tensor" and c.cycles == max(32, min(64, 128))
    d = opnd("data", "sbuf", (32, 32), "float32")
    c = cost(ins("nc_transpose", "vector", [d], [opnd("dst", "sbuf", (32, 32))]), arch.TRN2)
    assert c.kind == "vector" and c.cycles == max(64, 32)


def test_partition_broadcast_matmul_cost():
    """nl.broadcast_to's TensorE matmul (ones[1, M] stationary, x[1, N] moving; trainium_inferentia2_arch.rst
    "Alternative Use Case"): the nc_matmul formula max(min(64, M), N) cycles, x4 for fp32 ("For FP32
    input ... roughly 4x higher", TensorE cost model, same page), at TensorE's 2.8 GHz on trn1
    ("Compute Engine Specifications"); no FLOPs (a data move). [1, 512] -> [128, 512] fp32:
    512 x 4 = 2048 cycles = 731.4 ns; [1, 32] -> [16, 32]: max(16, 32) x 4 = 128 cycles."""
    def bcast(m, n, dtype="float32"):
        return Instruction(op="nc_matmul", api="nl.broadcast_to", engine="tensor", core=0, seq=1,
                           location="k.py:1", reads=(opnd("x", "sbuf", (1, n), dtype),),
                           writes=(opnd("dst", "psum", (m, n), dtype),))
    c = cost(bcast(128, 512), arch.TRN1)
    assert c.kind == "tensor" and c.cycles == 2048 and c.flops == 0
    assert c.duration_ns == pytest.approx(2048 / 2.8)
    assert cost(bcast(16, 32), arch.TRN1).cycles == 128
    assert cost(bcast(128, 40), arch.TRN2).cycles == 64 * 4


# ---- VectorE -----------------------------------------------------------------------------------

def test_tensor_tensor_two_inputs_2n():
    e = ins("tensor_tensor", "vector", [opnd("data1", "sbuf", (128, 512)), opnd("data2", "sbuf", (128, 512))],
            [opnd("dst", "sbuf", (128, 512))], op="add")
    c = cost(e, arch.TRN2)
    assert c.cycles == 2 * 512 and c.duration_ns == pytest.approx(1024 / 0.96)
    assert c.wait_overhead_ns == pytest.approx(100 / 0.96)       # static overhead


def test_tensor_tensor_psum_plus_sbuf_is_n():
    e = ins("tensor_tensor", "vector", [opnd("data1", "psum", (128, 512)), opnd("data2", "sbuf", (128, 512))],
            [opnd("dst", "sbuf", (128, 512))], op="add")
    assert cost(e, arch.TRN2).cycles == 512


def test_tensor_tensor_bf16_sbuf_perf_mode_v3_only():
    e = ins("tensor_tensor", "vector", [opnd("data1", "sbuf", (128, 512), "bfloat16", contiguous=2),
                                        opnd("data2", "sbuf", (128, 512), "bfloat16", contiguous=2)],
            [opnd("dst", "sbuf", (128, 512), "bfloat16", contiguous=2)], op="maximum")
    assert cost(e, arch.TRN2).cycles == 2 * 512 / 2
    assert cost(e, arch.TRN1).cycles == 2 * 512


def test_tensor_tensor_min_ii():
    e = ins("tensor_tensor", "vector", [opnd("data1", "sbuf", (128, 8)), opnd("data2", "sbuf", (128, 8))],
            [opnd("dst", "sbuf", (128, 8))], op="add")
    assert cost(e, arch.TRN2).cycles == 64


@pytest.mark.parametrize("dtype,buf,contig,factor", [
    ("bfloat16", "sbuf", None, 4),        # SBUF, 16-bit, contiguous: 4x
    ("bfloat16", "sbuf", 2, 2),           # not contiguous: 2x
    ("bfloat16", "psum", None, 2),        # one operand in PSUM: 2x
    ("float32", "sbuf", None, 1),
])
def test_tensor_copy_vector_perf_mode(dtype, buf, contig, factor):
    e = ins("tensor_copy", "vector", [opnd("src", buf, (128, 2048), dtype, contiguous=contig)],
            [opnd("dst", "sbuf", (128, 2048), "bfloat16")])
    assert cost(e, arch.TRN2).cycles == max(64, 2048 / factor)
    assert cost(e, arch.TRN1).cycles == 2048


def test_tensor_scalar_one_input_n():
    e = ins("tensor_scalar", "vector", [opnd("data", "sbuf", (128, 300)), opnd("operand0", "sbuf", (128, 1))],
            [opnd("dst", "sbuf", (128, 300))], op0="multiply")
    assert cost(e, arch.TRN1).cycles == 300
    assert cost(e, arch.TRN1).duration_ns == pytest.approx(300 / 1.12)


def test_tensor_scalar_on_scalar_engine_trn3_perf_mode():
    e = ins("tensor_scalar", "scalar", [opnd("data", "sbuf", (128, 1024), "bfloat16")],
            [opnd("dst", "sbuf", (128, 1024), "bfloat16")], op0="multiply")
    assert cost(e, arch.TRN3).cycles == 512 and cost(e, arch.TRN3).kind == "scalar"


def test_tensor_reduce_bf16_add_half():
    e = ins("tensor_reduce", "vector", [opnd("data", "sbuf", (128, 1024), "bfloat16")],
            [opnd("dst", "sbuf", (128, 1), "bfloat16")], op="add")
    assert cost(e, arch.TRN2).cycles == 512
    e = ins("tensor_reduce", "vector", [opnd("data", "sbuf", (128, 1024))], [opnd("dst", "sbuf", (128, 1))],
            op="add")
    assert cost(e, arch.TRN2).cycles == 1024


def test_scalar_tensor_tensor_rules():
    r = [opnd("data", "sbuf", (128, 256), "bfloat16"), opnd("operand0", "sbuf", (128, 1)),
         opnd("operand1", "sbuf", (128, 256), "bfloat16")]
    w = [opnd("dst", "sbuf", (128, 256), "bfloat16")]
    assert cost(ins("scalar_tensor_tensor", "vector", r, w, op0="subtract", op1="multiply"), arch.TRN2).cycles == 256
    assert cost(ins("scalar_tensor_tensor", "vector", r, w, op0="add", op1="multiply"), arch.TRN2).cycles == 512


def test_vector_misc_formulas():
    d = [opnd("data", "sbuf", (128, 300))]
    w = [opnd("dst", "sbuf", (128, 300))]
    t = arch.TRN2
    assert cost(ins("tensor_tensor_scan", "vector", [*d, opnd("data1", "sbuf", (128, 300))], w), t).cycles == 600
    assert cost(ins("reciprocal", "vector", d, w), t).cycles == 8 * 300
    assert cost(ins("bn_aggr", "vector", [opnd("data", "sbuf", (128, 6 * 30))], [opnd("dst", "sbuf", (128, 2))]),
                t).cycles == pytest.approx(13 * (180 / 3))
    assert cost(ins("bn_stats", "vector", d, [opnd("dst", "sbuf", (128, 6))]), t).cycles == 300
    assert cost(ins("max8", "vector", d, [opnd("dst", "sbuf", (128, 8))]), t).cycles == 300
    assert cost(ins("tensor_scalar_reduce", "vector", d, w), t).cycles == 300 + 64
    assert cost(ins("tensor_copy_predicated", "vector", [opnd("src", "sbuf", (128, 300)),
                                                         opnd("predicate", "psum", (128, 300))], w), t).cycles == 300
    assert cost(ins("tensor_copy_predicated", "vector", [opnd("src", "sbuf", (128, 300)),
                                                         opnd("predicate", "sbuf", (128, 300))], w), t).cycles == 600


def test_memset_zero_bf16_half():
    w = [opnd("dst", "sbuf", (128, 1024), "bfloat16")]
    assert cost(ins("memset", "vector", (), w, value=0.0), arch.TRN2).cycles == 512
    assert cost(ins("memset", "vector", (), w, value=1.0), arch.TRN2).cycles == 1024
    assert cost(ins("memset", "vector", (), [opnd("dst", "sbuf", (128, 16))], value=0.0), arch.TRN2).cycles == 64


# ---- ScalarE -----------------------------------------------------------------------------------

def test_activation_max_64_n():
    e = ins("activation", "scalar", [opnd("data", "sbuf", (128, 30))], [opnd("dst", "sbuf", (128, 30))], op="exp")
    c = cost(e, arch.TRN1)
    assert c.kind == "scalar" and c.cycles == 64 and c.duration_ns == pytest.approx(64 / 1.4)
    e = ins("activation", "scalar", [opnd("data", "sbuf", (128, 700))], [opnd("dst", "sbuf", (128, 700))], op="exp")
    assert cost(e, arch.TRN1).cycles == 700


def test_activation_reduce_adds_act_read_accumulator():
    e = ins("activation_reduce", "scalar", [opnd("data", "sbuf", (128, 700))],
            [opnd("dst", "sbuf", (128, 700)), opnd("reduce_res", "sbuf", (128, 1))], op="exp")
    assert cost(e, arch.TRN1).cycles == 700 + 64


# ---- GpSimd ------------------------------------------------------------------------------------

def test_iota_and_affine_select_150_plus_n():
    c = cost(ins("iota", "gpsimd", (), [opnd("dst", "sbuf", (128, 512), "int32")]), arch.TRN2)
    assert c.kind == "gpsimd" and c.cycles == 150 + 512 and c.duration_ns == pytest.approx(662 / 1.2)
    c = cost(ins("affine_select", "gpsimd", [opnd("on_true_tile", "sbuf", (128, 100))],
                 [opnd("dst", "sbuf", (128, 100))]), arch.TRN2)
    assert c.cycles == 250


def test_local_gather_formula():
    e = ins("local_gather", "gpsimd", [opnd("src_buffer", "sbuf", (128, 64), "float32"),
                                       opnd("index", "sbuf", (128, 4), "int32")],
            [opnd("dst", "sbuf", (128, 16))], num_elem_per_idx=4, num_valid_indices=32)
    c_ = ((28 + 4 * 4) / (4 * 4)) / min(4 / 4, 4)
    assert cost(e, arch.TRN2).cycles == pytest.approx(150 + (32 * 4) / c_)


# ---- DMA ---------------------------------------------------------------------------------------

def test_dma_fixed_latency_plus_bytes_over_bandwidth():
    e = ins("dma_copy", "dma", [opnd("src", "hbm", (128, 2048))], [opnd("dst", "sbuf", (128, 2048))])
    c = cost(e, arch.TRN2)
    run = 2048 * 4
    rate = 16 * 23 * run / (run + 256)
    assert c.kind == "dma" and c.dma_bytes == 128 * 2048 * 4 and c.rate == pytest.approx(rate)
    assert c.duration_ns == pytest.approx(1300 + 128 * 2048 * 4 / rate)
    assert c.hbm_bytes == 128 * 2048 * 4


@pytest.mark.parametrize("run", [64, 256, 2048, 4096])
def test_dma_efficiency_curve_by_contiguous_bytes(run):
    e = ins("dma_copy", "dma", [opnd("src", "hbm", (128, 1024), contiguous=run)],
            [opnd("dst", "sbuf", (128, 1024))])
    c = cost(e, arch.TRN1)
    assert c.rate == pytest.approx(16 * 17 * run / (run + 256))
    # the guide's bands: < 256 B severely bound, 2 KiB approaching peak, 4 KiB saturating
    eff = c.rate / (16 * 17)
    assert {64: eff < 0.25, 256: 0.45 < eff < 0.55, 2048: eff > 0.85, 4096: eff > 0.9}[run]


def test_dma_fewer_partitions_fewer_engines():
    e = ins("dma_copy", "dma", [opnd("src", "hbm", (32, 4096))], [opnd("dst", "sbuf", (32, 4096))])
    assert cost(e, arch.TRN3).rate == pytest.approx(4 * 33 * 16384 / (16384 + 256))


def test_dma_transpose_fractions():
    src = opnd("src", "hbm", (128, 128), "bfloat16")
    c = cost(ins("dma_transpose", "dma", [src], [opnd("dst", "sbuf", (128, 128), "bfloat16")]), arch.TRN2)
    assert c.rate == pytest.approx(16 * 23 * 0.9)
    src = opnd("src", "sbuf", (128, 128), "bfloat16")
    c = cost(ins("dma_transpose", "dma", [src], [opnd("dst", "sbuf", (128, 128), "bfloat16")]), arch.TRN2)
    assert c.rate == pytest.approx(16 * 23 * 0.5)


def test_dma_bandwidth_per_core_from_the_guide():
    assert [t.dma_core_bytes_per_ns for t in (arch.TRN1, arch.TRN2, arch.TRN3)] == [272, 368, 528]


# ---- fallback and coverage ---------------------------------------------------------------------

def test_generic_fallback_says_so():
    c = cost(ins("nc_n_gather", "gpsimd", [opnd("data", "sbuf", (128, 100))], [opnd("dst", "sbuf", (128, 10))]),
             arch.TRN2)
    assert c.cycles == 150 + 100 and c.why.startswith("generic")
    c = cost(ins("something_new", "vector", [opnd("data", "sbuf", (128, 10))], [opnd("dst", "sbuf", (128, 10))]),
             arch.TRN2)
    assert c.cycles == 64 and c.why.startswith("generic")


def test_every_simulated_op_gets_a_cost():
    from nkisim.isa.dispatch import SPECS
    from nkisim.isa import enums  # noqa: F401  (the op modules register their specs on import)
    ops = {s.op for s in SPECS.values()}
    assert ops
    for op in sorted(ops):
        spec = next(s for s in SPECS.values() if s.op == op)
        reads = [opnd(r, "sbuf", (128, 64)) for r in spec.reads]
        writes = [opnd(r, "sbuf", (128, 64)) for r in spec.writes]
        engine = "dma" if op.startswith("dma") or op == "sendrecv" else "vector"
        c = cost(ins(op, engine, reads, writes), arch.TRN2)
        assert c.duration_ns > 0 and c.why, op
    assert {"nc_matmul", "activation", "iota", "dma_copy", "memset"} <= RULED_OPS
