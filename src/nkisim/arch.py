"""Per-generation hardware facts: one frozen ``Target`` per NeuronCore generation.

Checks and the cost model read hardware numbers only from here. Imports nothing from nkisim.
Sources: aws-neuron-sdk nki/guides/architecture/{trainium_inferentia2_arch,trainium2_arch,
trainium3_arch}.rst; nki/api/nki.language.tile_size.rst; nki/api/nki.api.shared.rst.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, kw_only=True, eq=False)   # identity equality and hash: cheap memo keys
class Target:
    """Hardware description of one NeuronCore generation (per core)."""
    name: str                         # trn1 | trn2 | trn3
    nc_version: int                   # 2 (v2), 3 (v3), 4 (v4)
    pmax: int = 128                   # partitions of SBUF / PSUM
    sbuf_partition_bytes: int         # physical SBUF bytes per partition
    sbuf_usable_bytes: int            # tile_size.total_available_sbuf_size (per partition)
    psum_partition_bytes: int = 16384  # 8 banks x 2 KiB
    psum_bank_bytes: int = 2048
    psum_num_banks: int = 8
    psum_min_align: int = 4           # tile_size.psum_min_align: PSUM allocations align to 4 bytes
    sbuf_min_align: int = 1           # tile_size.sbuf_min_align (bytes)
    gemm_stationary_fmax: int = 128   # stationary free size limit (elements)
    gemm_moving_fmax: int = 512       # tile_size.gemm_moving_fmax (documented tile size)
    matmul_moving_fmax_fp32: int = 512   # nc_matmul moving free size limit, fp32 PSUM dst
    matmul_moving_fmax_bf16: int = 512   # ... bf16 PSUM dst (trn3 only)
    bn_stats_fmax: int = 512
    act_reduce_ops: tuple = ("add", "maximum", "minimum")   # activation_reduce reduce_op (ScalarE)
    # tensor_scalar (op0, op1) pairs the Scalar engine runs (op1 None = one operator); docs: trn2 list
    act_tensor_scalar_ops: tuple = (("multiply", "add"), ("multiply", None), ("add", None))
    act_tensor_copy: bool = True      # tensor_copy may run on the Scalar engine (not NeuronCore-v2)
    act_reciprocal_bias: bool = True  # activation(op=reciprocal) takes a bias (not NeuronCore-v2)
    # ALU operators this generation lacks (nl.abs_max/abs_min: "Available only on NeuronCore-v4
    # (trn3) and newer")
    alu_ops_excluded: tuple = ()
    vector_transpose_max: int = 32    # VectorE nc_transpose: at most 32 x 32
    engine_free_dims: int = 4         # engine instruction operand: free-dim access pattern dims (max)
    dma_transpose_itemsize: int = 2   # dma_transpose hwdge / indirect: element width (bytes)
    dma_transpose_hwdge_rows: int = 16     # dma_transpose hwdge: 2-D src.shape[0] (3-D/4-D: a divisor)
    dma_transpose_fmax: int = 128     # dma_transpose hwdge / indirect: src.shape[-1] at most this
    search_fmin: int = 8              # max8 / nc_find_index8: min elements per partition
    search_fmax: int = 16384          # max8 / nc_find_index8 / nc_match_replace8: max elements
    lnc_max: int = 1                  # logical NeuronCore degree (cores sharing HBM)
    # gather family (nki.isa nc_stream_shuffle, local_gather, nonzero_with_count, topk, dma_compute)
    shuffle_quadrant: int = 32        # VectorE reshape bank: partitions per nc_stream_shuffle quadrant
    gpsimd_group: int = 16            # SBUF partitions each of the 8 GpSimd cores connects to
    local_gather_elems: tuple = (1, 2, 4, 8, 16, 32)   # local_gather num_elem_per_idx values
    local_gather_indices_max: int = 4096   # local_gather indices per GpSimd core
    nonzero_with_count: bool = True   # nonzero_with_count ("Available only on NeuronCore-v3 and newer")
    topk_n_range: tuple = (8, 65536)  # topk: 8 <= n < 65536
    topk_k_max: int = 32768           # topk: 1 <= K < 32768
    dma_compute_srcs_max: int = 16    # dma_compute: most source tensors
    # sendrecv(dma_engine=gpsimd_dma): most bytes per partition, by element size in bytes
    # (nki.isa.sendrecv: 1024 bytes for 32-bit types, 512 for 16-bit, 256 for 8-bit)
    sendrecv_gpsimd_dma_partition_bytes: tuple = ((4, 1024), (2, 512), (1, 256))
    # MX (microscaling): quantize_mx / nc_matmul_mx "Available only on NeuronCore-v4 and newer";
    # a scaling group is 8 partitions x 4 elements per partition (32 values, one e8m0 scale);
    # scales sit in the first rows of the group's 32-partition quadrant, at a start offset of
    # 0, 4, 8 or 12 within it; nc_matmul_mx row tiles (mxfp-matmul.rst, nisa docstrings)
    mx_ops: bool = False
    mx_group_partitions: int = 8
    mx_quadrant_partitions: int = 32
    mx_scale_offsets: tuple = (0, 4, 8, 12)
    mx_tile_rows: tuple = (32, 64, 128)
    psum_dst_dtypes: tuple = ("float32",)
    # nc_matmul accumulate=True onto PSUM "value-initialized by a non-matmul instruction (e.g.,
    # memset, tensor_copy)": "not supported and is undefined behavior on hardware" on
    # NeuronCore-v2 and NeuronCore-v3 (nki.isa.nc_matmul, Accumulation mode)
    matmul_accumulates_onto_values: bool = False
    matmul_input_dtypes: tuple = ("float8_e4m3", "float8_e5m2", "bfloat16", "float16",
                                  "tfloat32", "float32")
    dtypes: tuple = ("bool", "int8", "int16", "int32", "uint8", "uint16", "uint32", "float16",
                     "bfloat16", "tfloat32", "float32", "float8_e4m3", "float8_e5m2")

    # ---- cost model (trace.cost, trace.schedule): engine clocks, instruction costs, DMA -------------
    # Engine clocks, GHz: "Compute Engine Specifications" tables of
    # nki/guides/architecture/{trainium_inferentia2_arch,trainium2_arch,trainium3_arch}.rst.
    tensor_ghz: float                 # 2.8 (trn1), 2.4 (trn2, trn3)
    vector_ghz: float                 # 1.12, 0.96, 1.2
    scalar_ghz: float                 # 1.4, 1.2, 1.2
    gpsimd_ghz: float                 # 1.4, 1.2, 1.2
    # Decision: the Sync engine's clock is not in the tables; it runs at the Scalar engine's clock.
    pe_rows: int = 128                # systolic array 128 x 128 PEs (trainium_inferentia2_arch.rst)
    pe_cols: int = 128
    # MM_INIT_LATENCY: "64 TensorE cycles on NeuronCore-v2" (trainium_inferentia2_arch.rst, TensorE
    # cost model); also the min(64, N_stationary) term of nc_matmul's estimated cost (nki.isa
    # docstring at aws-neuron-sdk cca37847). Decision: the same on v3/v4 (no other value given).
    mm_init_cycles: int = 64
    mm_fp32_factor: int = 4           # "For FP32 input ... roughly 4x higher" (same page)
    mm_fp8_double_row: bool = True    # FP8 double_row perf mode: 2x K per instruction (trainium2_arch.rst)
    # explicit transpose mode (v3+): "2x speedup in FP32 transpose" (trainium2_arch.rst)
    pe_transpose_fp32_speedup: int = 2
    mm_mx_factor: int = 4             # MX matmul: "4x the throughput compared to a BF16/FP16 matmul"
    #                                   (trainium3_arch.rst): K = 4 x partitions per instruction
    # MIN_II "is roughly 64 engine cycles" (every Vector/Scalar "Estimated instruction cost" note,
    # nki.isa docstrings at cca37847); MIN_II_DYNAMIC "roughly 600 engine cycles" (tensor_copy_dynamic_*)
    min_ii_cycles: int = 64
    min_ii_dynamic_cycles: int = 600
    # "static instruction overhead of 100 engine cycles" for back-to-back dependent instructions
    # (trainium_inferentia2_arch.rst, VectorE cost model; the perf guide's "~100 cycles")
    static_overhead_cycles: int = 100
    act_read_accumulator_cycles: int = 64   # ActReadAccumulator "roughly 64 ScalarE cycles" (same page)
    gpsimd_start_cycles: int = 150    # GPSIMD_START "roughly 150 engine cycles" (affine_select, iota)
    # VectorE performance mode (trainium2_arch.rst "Vector Engine Performance Mode"): 4x for
    # tensor_copy/tensor_scalar, all SBUF, BF16/FP16, contiguous; 2x for those non-contiguous or with
    # one PSUM operand, and for tensor_tensor with both inputs in SBUF, all BF16/FP16. None on v2.
    vector_perf_mode: bool = True
    # ScalarE tensor_scalar / tensor_copy "up to 2x performance uplift for BF16/FP16" (trainium3_arch.rst)
    scalar_perf_mode: bool = False
    # DMA (nki/deep-dives/nki-dma-bandwidth-guide.rst): 16 engines (queues) per NeuronCore, each
    # "BW / Engine" 17 / 23 / 33 B/ns; "semaphore-to-start latency (~1300 ns cross-engine)" per transfer.
    dma_engines: int = 16
    dma_engine_bytes_per_ns: float
    dma_fixed_ns: float = 1300.0
    # Decision: the guide gives the payload curve only in words (< 256 B per partition "severely
    # overhead-bound", 256 B - 2 KiB "improving", >= 2 KiB "approaches peak", >= 4 KiB saturates);
    # we model each contiguous run as costing this many bytes of overhead: efficiency b / (b + 256)
    # (50 % at 256 B, 89 % at 2 KiB, 94 % at 4 KiB).
    dma_run_overhead_bytes: int = 256
    # "DMA transpose on Trainium2 can achieve up to 90% DMA throughput"; "SBUF2SBUF transpose can
    # achieve up to 50% of DMA throughput" (trainium2_arch.rst). Decision: the same on trn1/trn3.
    dma_transpose_hbm_fraction: float = 0.9
    dma_transpose_sbuf_fraction: float = 0.5
    # HBM bandwidth of one device, bytes/ns, and the NeuronCores sharing it: "820 GB/s", "3TB/s",
    # "4.7 TB/s"; "2 NeuronCores (v2)", "8 NeuronCores (v3)", "8 NeuronCores (v4)" (NKI architecture
    # guides). Decision: the NKI guides' figures; the chip pages in about-neuron/arch/neuron-hardware
    # say 2.9 TB/s (trn2) and 4.9 TB/s (trn3).
    hbm_device_bytes_per_ns: float
    cores_per_device: int
    # SBUF/PSUM port sharing (trainium_inferentia2_arch.rst "Concurrent SBUF/PSUM accesses by
    # engines"): on NeuronCore-v2 VectorE and GpSimdE cannot access SBUF in parallel, VectorE and
    # ScalarE cannot access PSUM in parallel; NeuronCore-v3 lifts both "as long as their accesses do
    # not collide on the same PSUM bank" (trainium2_arch.rst).
    shared_sbuf_vector_gpsimd: bool = False
    shared_psum_vector_scalar: bool = False

    def engine_ghz(self, engine: str) -> float:
        """Clock of a compute engine (tensor, vector, scalar, gpsimd; sync runs at scalar's), GHz."""
        return {"tensor": self.tensor_ghz, "vector": self.vector_ghz, "scalar": self.scalar_ghz,
                "gpsimd": self.gpsimd_ghz}.get(engine, self.scalar_ghz)

    @property
    def dma_core_bytes_per_ns(self) -> float:
        """Aggregate DMA bandwidth of one core: engines x per-engine bandwidth (272 / 368 / 528 GB/s)."""
        return self.dma_engines * self.dma_engine_bytes_per_ns

    @property
    def hbm_core_bytes_per_ns(self) -> float:
        """One core's share of the device's HBM bandwidth, bytes/ns."""
        return self.hbm_device_bytes_per_ns / self.cores_per_device

    @property
    def sbuf_size_bytes(self) -> int:
        return self.sbuf_partition_bytes * self.pmax

    @property
    def psum_bank_fmax(self) -> int:
        return self.psum_bank_bytes // 4

    @property
    def hbm_bytes(self) -> int:
        """Device memory (HBM) of one NeuronDevice, shared by all its cores (``HBM_BYTES``)."""
        return HBM_BYTES[self.name]


# Device memory per NeuronDevice: "2 HBM stacks with a total device memory capacity of 32GiB"
# (trn1/inf2), 96GiB (trn2), 144 GiB (trn3), from the three architecture guides.
HBM_BYTES = {"trn1": 32 * 2**30, "trn2": 96 * 2**30, "trn3": 144 * 2**30}

# Pseudo random number generators: the XORWOW state of one compute lane, in uint32 words, by
# engine ("src_seeds element count for XORWOW must be 6 elements (GpSimd) or 24 elements
# (Vector)", nki.isa.rand_set_state / rand_get_state); one XORWOW generator holds 6 words.
RNG_STATE_WORDS = {"gpsimd": 6, "vector": 24}
XORWOW_WORDS = 6

# DMA efficiency (the profiler's small-DMA warning): ">= 2 KiB per partition (minimum
# recommended): approaches peak bandwidth. The kernel efficiency guide recommends at least 2 KiB
# of contiguous data per partition for all data types" (nki/deep-dives/nki-dma-bandwidth-guide.rst,
# "Bandwidth vs. Payload Size"); the same for every generation.
DMA_EFFICIENT_PARTITION_BYTES = 2048


TRN1 = Target(name="trn1", nc_version=2, sbuf_partition_bytes=192 * 1024,
              tensor_ghz=2.8, vector_ghz=1.12, scalar_ghz=1.4, gpsimd_ghz=1.4,
              mm_fp8_double_row=False, pe_transpose_fp32_speedup=1, vector_perf_mode=False,
              dma_engine_bytes_per_ns=17.0, hbm_device_bytes_per_ns=820.0, cores_per_device=2,
              shared_sbuf_vector_gpsimd=True, shared_psum_vector_scalar=True,
              sbuf_usable_bytes=180224, act_reduce_ops=("add",), act_tensor_copy=False,
              nonzero_with_count=False,
              act_reciprocal_bias=False, alu_ops_excluded=("abs_max", "abs_min"))
TRN2 = Target(name="trn2", nc_version=3, sbuf_partition_bytes=224 * 1024,
              tensor_ghz=2.4, vector_ghz=0.96, scalar_ghz=1.2, gpsimd_ghz=1.2,
              dma_engine_bytes_per_ns=23.0, hbm_device_bytes_per_ns=3000.0, cores_per_device=8,
              sbuf_usable_bytes=212984, lnc_max=2, alu_ops_excluded=("abs_max", "abs_min"))
TRN3 = Target(name="trn3", nc_version=4, sbuf_partition_bytes=256 * 1024,
              tensor_ghz=2.4, vector_ghz=1.2, scalar_ghz=1.2, gpsimd_ghz=1.2, scalar_perf_mode=True,
              dma_engine_bytes_per_ns=33.0, hbm_device_bytes_per_ns=4700.0, cores_per_device=8,
              sbuf_usable_bytes=245752, lnc_max=2,
              matmul_moving_fmax_fp32=4096, matmul_moving_fmax_bf16=8192,
              psum_dst_dtypes=("float32", "bfloat16"),
              act_tensor_scalar_ops=(("multiply", "add"), ("multiply", "subtract"), ("multiply", None),
                                     ("add", None), ("subtract", None), ("bypass", None)),
              matmul_input_dtypes=TRN2.matmul_input_dtypes + ("float8_e4m3fn",),
              # the MX dtypes: "custom data type for nki.isa.nc_matmul_mx on NeuronCore-v4"
              dtypes=TRN2.dtypes + ("float8_e4m3fn", "float8_e8m0fnu", "float8_e4m3fn_x4",
                                    "float8_e5m2_x4", "float4_e2m1fn_x4"),
              mx_ops=True, matmul_accumulates_onto_values=True)

TARGETS = {t.name: t for t in (TRN1, TRN2, TRN3)}

# The most on-chip memory (SBUF + PSUM, all partitions, every core of a logical core) one launch
# can hold, over all targets: the host memory the storage pool keeps for reuse (memory.capacity).
LAUNCH_ON_CHIP_BYTES_MAX = max(t.lnc_max * t.pmax * (t.sbuf_partition_bytes + t.psum_partition_bytes)
                               for t in TARGETS.values())


def get(name: str) -> Target:
    """The ``Target`` for trn1/trn2/trn3 (already normalised by ``config.normalize_target``)."""
    return TARGETS[name]


__all__ = ["Target", "TARGETS", "TRN1", "TRN2", "TRN3", "HBM_BYTES", "DMA_EFFICIENT_PARTITION_BYTES", "get", "LAUNCH_ON_CHIP_BYTES_MAX"]
