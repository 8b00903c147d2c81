"""The cost model: one ``Cost`` (engine, duration, FLOPs, HBM bytes, the rule applied) per event.

``cost(ev, target)`` applies the documented per-instruction cost rules; every number comes from
``arch`` (its "cost model" block cites the doc pages). The schedule (``trace.schedule``) places the
costs on engines and DMA queues. Imports ``arch`` and ``trace.events`` only.

Rules (cycles of the issuing engine unless said; N = elements per partition of the instruction's
largest on-chip operand; MIN_II = ``min_ii_cycles``). Sources: the "Estimated instruction cost"
notes of the nki.isa docstrings (aws-neuron-sdk commit cca37847) and the architecture guides.

- ``nc_matmul``: ``max(min(MM_INIT, N_stationary), N_moving)`` x4 for fp32 inputs; FLOPs
  2 x K x M x N; FP8 ``perf_mode=double_row`` (v3+): K is 2 x partitions, the free sizes are half
  the operands' (their major free dim is 2); ``is_transpose`` counts no FLOPs and fp32 costs x2 on
  v3+ (transpose mode); ``nc_matmul_mx``: K is 4 x partitions (x4-packed dtypes), same cycles.
  The schedule adds MM_INIT when TensorE was idle (the pipeline is not back to back).
- ``nl.broadcast_to`` along the partition dim (its TensorE matmul, ones[1, M] stationary):
  ``max(min(MM_INIT, M), N)`` x4 fp32, no FLOPs; its PSUM result makes the reading
  ``tensor_tensor`` cost N (one input in PSUM).
- ``nc_transpose``: TensorE ``max(P, min(64, F))`` (fp32 x4 on v2, x2 on v3+); VectorE ``max(MIN_II, N)``.
- VectorE / GpSimd / ScalarE elementwise: one input ``max(MIN_II, N)``, two inputs ``max(MIN_II, 2N)``
  with the documented exceptions and perf modes (see each function); the schedule adds the static
  overhead (100 cycles) when an instruction waits on a dependency.
- ScalarE ``activation``: ``max(MIN_II, N)``; ``activation_reduce`` + ActReadAccumulator (64).
- GpSimd ``iota`` / ``affine_select`` / gathers: ``GPSIMD_START + N`` (``local_gather``: its formula).
- ``memset``: ``max(MIN_II, N)``, ``max(MIN_II, N/2)`` when zeroing bf16/fp16.
- DMA: ``fixed + bytes / rate``; rate = engines used (``ceil(P / (pmax / 16))``, at most 16) x
  per-engine bandwidth x payload efficiency ``b / (b + 256)`` (b = contiguous bytes per
  partition / row, the smallest over the operands); DMA transposes run at their documented
  fraction (0.9 from HBM, 0.5 SBUF to SBUF) without the payload curve. The schedule caps the
  queues of a core at 16 x engine bandwidth and the launch's HBM bytes at its HBM share.
  Decision: one fixed latency for every DGE mode (nki-dge.rst's ~600 ns per hardware-DGE
  instruction lies within the 1300 ns; software DGE's GpSimd cycles are not documented and not
  modelled).
- Decision: PE tiling (``tile_position`` / ``tile_size``) is not modelled: a tiled matmul costs
  the formula and takes TensorE alone (an upper bound on its time).
- sync (``core_barrier``): MIN_II on its engine; the schedule waits for every core and adds the
  semaphore latency (``dma_fixed_ns``).
- Anything else: the generic shape of its engine (``max(MIN_II, N)``; GpSimd ``GPSIMD_START + N``;
  DMA as a copy), ``why`` says "generic".
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from .. import arch
from .events import Instruction

HBM_BUFFERS = frozenset(("hbm", "shared_hbm", "private_hbm"))
_ON_CHIP = frozenset(("sbuf", "psum"))
_HALF = frozenset(("bfloat16", "float16"))
_FP8 = frozenset(("float8_e4m3", "float8_e5m2", "float8_e4m3fn"))
_DMA_OPS = frozenset(("dma_copy", "dma_transpose", "dma_compute", "sendrecv"))


@dataclass(frozen=True, slots=True)
class Cost:
    """What one instruction costs on its own.

    ``kind``: the track kind (tensor, vector, scalar, gpsimd, sync, dma); ``duration_ns``: time on
    its engine / queue with nothing else running; ``flops``: TensorE floating-point operations
    (2 per multiply-add); ``hbm_bytes``: HBM bytes read plus written; ``why``: the rule and its
    numbers. Compute engines: ``cycles`` at ``ghz``; ``wait_overhead_ns``: added by the schedule
    when the instruction had to wait on a dependency (the static instruction overhead; TensorE:
    the MM init latency of a pipeline that is not back to back). DMA: ``fixed_ns`` latency, then
    ``dma_bytes`` at ``rate`` bytes/ns (this transfer alone). ``peak_flops_per_ns``: TensorE peak
    in this instruction's mode (0 off TensorE)."""
    kind: str
    duration_ns: float
    flops: int = 0
    hbm_bytes: int = 0
    why: str = ""
    cycles: float = 0.0
    ghz: float = 0.0
    wait_overhead_ns: float = 0.0
    fixed_ns: float = 0.0
    dma_bytes: int = 0
    rate: float = 0.0
    peak_flops_per_ns: float = 0.0


def cost(ev: Instruction, target: arch.Target) -> Cost:
    """The ``Cost`` of instruction event ``ev`` on ``target`` (an ``arch.Target``).

    Deterministic, pure: reads only the event's op, engine, operands and options. Ops without a
    documented rule get their engine's generic rule (``why`` starts with "generic")."""
    rule = _RULES.get(ev.op)
    if rule is None:
        return _generic(ev, target)
    return rule(ev, target)


# ---- helpers ----------------------------------------------------------------------------------

def _free(o) -> int:
    """Elements per partition of an on-chip operand (all elements of an HBM one)."""
    s = o.shape
    if o.buffer in _ON_CHIP:
        return math.prod(s[1:]) if len(s) > 1 else 1
    return math.prod(s)


def _n(ev) -> int:
    """N: elements per partition of the instruction's largest on-chip tensor operand."""
    n = 0
    for o in ev.reads:
        if o.buffer in _ON_CHIP and not o.role.endswith(".index"):
            f = _free(o)
            if f > n:
                n = f
    if n == 0:
        for o in ev.writes:
            f = _free(o)
            if f > n:
                n = f
    return n


def _hbm_bytes(ev) -> int:
    return sum(o.nbytes for o in ev.reads if o.buffer in HBM_BUFFERS) + \
        sum(o.nbytes for o in ev.writes if o.buffer in HBM_BUFFERS)


def _role(ops, role):
    for o in ops:
        if o.role == role:
            return o
    return None


def _engine(ev, default="vector") -> str:
    e = ev.engine
    return e if e in ("tensor", "vector", "scalar", "gpsimd", "sync") else default


def _compute(ev, t, engine, cycles, why, flops=0, peak=0.0) -> Cost:
    ghz = t.engine_ghz(engine)
    wait = (t.mm_init_cycles if engine == "tensor" else t.static_overhead_cycles) / ghz
    return Cost(kind=engine, duration_ns=cycles / ghz, flops=flops, hbm_bytes=_hbm_bytes(ev),
                why=f"{why} @ {ghz:g} GHz", cycles=cycles, ghz=ghz, wait_overhead_ns=wait,
                peak_flops_per_ns=peak)


def _min_ii(ev, t, work, formula, engine=None, factor=1):
    """``max(MIN_II, work / factor)`` cycles on the event's engine."""
    eng = engine or _engine(ev)
    cycles = max(t.min_ii_cycles, work / factor)
    tail = f" / {factor} perf mode" if factor != 1 else ""
    return _compute(ev, t, eng, cycles, f"{ev.op} max(MIN_II {t.min_ii_cycles}, {formula}{tail})"
                    f" = {cycles:g} cycles")


def pe_peak_flops_per_ns(t: arch.Target, mode: str = "bf16") -> float:
    """TensorE peak FLOPs per ns of one core: 2 x pe_rows x pe_cols x clock, x2 FP8 double_row,
    x4 MX, /4 fp32 (mode: bf16, fp8x2, mx, fp32)."""
    base = 2 * t.pe_rows * t.pe_cols * t.tensor_ghz
    return base * {"bf16": 1, "fp8x2": 2, "mx": t.mm_mx_factor, "fp32": 1 / t.mm_fp32_factor}[mode]


# ---- TensorE ----------------------------------------------------------------------------------

def _partition_broadcast(ev, t) -> Cost:
    """nl.broadcast_to's TensorE matmul: ones[1, M] stationary (K = 1, M = the result's partitions),
    x[1, N] moving: ``max(min(MM_INIT, M), N)`` x4 fp32 cycles. Decision: no FLOPs (a data move,
    as a transpose)."""
    x = _role(ev.reads, "x")
    dst = ev.writes[0] if ev.writes else None
    if x is None or dst is None:
        return _generic(ev, t)
    m, n = dst.partitions, _free(x)
    factor = t.mm_fp32_factor if "float32" in (x.dtype, dst.dtype) else 1
    cycles = max(min(t.mm_init_cycles, m), n) * factor
    return _compute(ev, t, "tensor", cycles, f"partition broadcast matmul ones[1, {m}] x [1, {n}]: "
                    f"max(min({t.mm_init_cycles}, {m}), {n}) cycles x{factor}", peak=pe_peak_flops_per_ns(t))


def _nc_matmul(ev, t) -> Cost:
    if ev.api == "nl.broadcast_to":
        return _partition_broadcast(ev, t)
    st, mv = _role(ev.reads, "stationary"), _role(ev.reads, "moving")
    if st is None or mv is None:
        return _generic(ev, t)
    opts = ev.options
    k, ns, nm = st.partitions, _free(st), _free(mv)
    fp32 = "float32" in (st.dtype, mv.dtype)
    mode, note = ("fp32" if fp32 else "bf16"), ""
    if opts.get("perf_mode") not in (None, "none") and t.mm_fp8_double_row:
        k, ns, nm, mode, note = 2 * k, max(1, ns // 2), max(1, nm // 2), "fp8x2", " double_row"
    transpose = bool(opts.get("is_transpose"))
    factor = 1
    if fp32:
        factor = t.mm_fp32_factor // (t.pe_transpose_fp32_speedup if transpose else 1)
    cycles = max(min(t.mm_init_cycles, ns), nm) * factor
    flops = 0 if transpose else 2 * k * ns * nm
    return _compute(ev, t, "tensor", cycles,
                    f"matmul{note} max(min({t.mm_init_cycles}, {ns}), {nm}) cycles x{factor}",
                    flops=flops, peak=pe_peak_flops_per_ns(t, mode))


def _nc_matmul_mx(ev, t) -> Cost:
    st, mv = _role(ev.reads, "stationary"), _role(ev.reads, "moving")
    if st is None or mv is None:
        return _generic(ev, t)
    k, ns, nm = st.partitions * t.mm_mx_factor, _free(st), _free(mv)
    cycles = max(min(t.mm_init_cycles, ns), nm)
    return _compute(ev, t, "tensor", cycles,
                    f"matmul_mx max(min({t.mm_init_cycles}, {ns}), {nm}) cycles, K = {k}",
                    flops=2 * k * ns * nm, peak=pe_peak_flops_per_ns(t, "mx"))


def _nc_transpose(ev, t) -> Cost:
    data = _role(ev.reads, "data")
    if data is None:
        return _generic(ev, t)
    if ev.engine == "tensor":
        p, f = data.partitions, _free(data)
        factor = 1
        if data.dtype == "float32":
            factor = t.mm_fp32_factor // t.pe_transpose_fp32_speedup
        cycles = max(p, min(t.mm_init_cycles, f)) * factor
        return _compute(ev, t, "tensor", cycles, f"PE transpose max({p}, min({t.mm_init_cycles}, {f}))"
                        f" cycles x{factor}", peak=pe_peak_flops_per_ns(t))
    return _min_ii(ev, t, _free(data), f"N {_free(data)}")


# ---- VectorE / ScalarE / GpSimd ---------------------------------------------------------------

def _contiguous(o) -> bool:
    """Physically contiguous inner free dim (stride 1 element: runs longer than one element)."""
    itemsize = o.nbytes // max(1, math.prod(o.shape))
    return o.contiguous_bytes > itemsize or _free(o) <= 1


def _perf_copy_factor(ev, t, eng) -> int:
    """tensor_copy / tensor_scalar perf mode: 4x (all SBUF, 16-bit, contiguous), 2x (16-bit and
    non-contiguous or one PSUM operand) on VectorE v3+; 2x 16-bit on ScalarE (v4)."""
    ops = [o for o in (*ev.reads, *ev.writes) if _free(o) > 1 or o.role in ("src", "data", "dst")]
    if not ops or any(o.dtype not in _HALF for o in ops):
        return 1
    if eng == "scalar":
        return 2 if t.scalar_perf_mode else 1
    if eng != "vector" or not t.vector_perf_mode:
        return 1
    sbuf = all(o.buffer == "sbuf" for o in ops)
    contiguous = all(_contiguous(o) for o in ops)
    if sbuf and contiguous:
        return 4
    if sbuf or contiguous:
        return 2
    return 1


def _tensor_copy(ev, t) -> Cost:
    eng = _engine(ev)
    if eng == "gpsimd":
        return _gpsimd(ev, t, _n(ev))
    n = _n(ev)
    return _min_ii(ev, t, n, f"N {n}", engine=eng, factor=_perf_copy_factor(ev, t, eng))


def _tensor_scalar(ev, t) -> Cost:
    return _tensor_copy(ev, t)


def _tensor_tensor(ev, t) -> Cost:
    eng = _engine(ev)
    if eng == "gpsimd":
        return _gpsimd(ev, t, 2 * _n(ev))
    ins = [o for o in ev.reads if o.role in ("data1", "data2")]
    n = _n(ev)
    bufs = {o.buffer for o in ins}
    if bufs == {"sbuf", "psum"}:
        return _min_ii(ev, t, n, f"N {n} (one input in PSUM, one in SBUF)", engine=eng)
    half = all(o.dtype in _HALF for o in (*ins, *ev.writes))
    if half and bufs == {"sbuf"} and t.vector_perf_mode and eng == "vector":
        return _min_ii(ev, t, 2 * n, f"2N {2 * n}", engine=eng, factor=2)
    if (half and bufs == {"sbuf"} and all(o.dtype == "bfloat16" for o in (*ins, *ev.writes))
            and ev.options.get("op") in ("add", "multiply", "subtract") and all(map(_contiguous, ins))):
        return _min_ii(ev, t, n, f"N {n} (bf16 add/multiply/subtract, SBUF, contiguous)", engine=eng)
    return _min_ii(ev, t, 2 * n, f"2N {2 * n}", engine=eng)


def _scalar_tensor_tensor(ev, t) -> Cost:
    n = _n(ev)
    data, op1 = _role(ev.reads, "data"), _role(ev.reads, "operand1")
    o = ev.options
    if (data is not None and op1 is not None and data.dtype == op1.dtype == "bfloat16"
            and o.get("op0") == "subtract" and o.get("op1") == "multiply" and n % 2 == 0):
        return _compute(ev, t, _engine(ev), n, f"scalar_tensor_tensor N {n} (bf16 subtract, multiply)")
    return _compute(ev, t, _engine(ev), 2 * n, f"scalar_tensor_tensor 2N {2 * n}")


def _tensor_reduce(ev, t) -> Cost:
    n = _n(ev)
    data = _role(ev.reads, "data")
    if (data is not None and data.dtype == "bfloat16" and all(w.dtype == "bfloat16" for w in ev.writes)
            and ev.options.get("op") in ("add", "maximum")):
        return _min_ii(ev, t, n / 2, f"N/2 {n / 2:g} (bf16 add/maximum)")
    return _min_ii(ev, t, n, f"N {n}")


def _plus_min_ii(ev, t, engine=None, what="+ MIN_II") -> Cost:
    n = _n(ev)
    eng = engine or _engine(ev)
    extra = t.act_read_accumulator_cycles if eng == "scalar" else t.min_ii_cycles
    cycles = max(t.min_ii_cycles, n) + extra
    return _compute(ev, t, eng, cycles, f"{ev.op} max(MIN_II {t.min_ii_cycles}, N {n}) {what} {extra}"
                    f" = {cycles:g} cycles")


def _activation(ev, t) -> Cost:
    if _role(ev.writes, "reduce_res") is not None:      # Activate + ActReadAccumulator
        return _plus_min_ii(ev, t, "scalar", "+ ActReadAccumulator")
    n = _n(ev)
    return _min_ii(ev, t, n, f"N {n}", engine="scalar")


def _tensor_copy_predicated(ev, t) -> Cost:
    n = _n(ev)
    src, pred = _role(ev.reads, "src"), _role(ev.reads, "predicate")
    if src is not None and pred is not None and {src.buffer, pred.buffer} == {"sbuf", "psum"}:
        return _min_ii(ev, t, n, f"N {n} (src and predicate in SBUF and PSUM)")
    return _min_ii(ev, t, 2 * n, f"2N {2 * n}")


def _times(k, label=None):
    def rule(ev, t):
        n = _n(ev)
        return _min_ii(ev, t, k * n, f"{label or str(k) + 'N'} {k * n:g}")
    return rule


def _bn_aggr(ev, t) -> Cost:
    n = _n(ev)
    return _min_ii(ev, t, 13 * (n / 3), f"13*(N/3) {13 * (n / 3):g}")


def _max8(ev, t) -> Cost:
    n = _n(ev)
    return _compute(ev, t, _engine(ev), n, f"{ev.op} N {n} cycles")


def _memset(ev, t) -> Cost:
    eng = _engine(ev)
    dst = ev.writes[0] if ev.writes else None
    n = _free(dst) if dst is not None else 1
    if dst is not None and dst.dtype in _HALF and ev.options.get("value") in (0, 0.0):
        return _min_ii(ev, t, n / 2, f"N/2 {n / 2:g} (zero, {dst.dtype})", engine=eng)
    return _min_ii(ev, t, n, f"N {n}", engine=eng)


def _exponential(ev, t) -> Cost:
    # nisa.exponential on VectorE: "4x the throughput compared to nisa.activation (op=nl.exp)"
    # (trainium3_arch.rst). Decision: max(MIN_II, N / 4) VectorE cycles.
    n = _n(ev)
    return _min_ii(ev, t, n, f"N {n}", engine="vector", factor=4)


def _quantize_mx(ev, t) -> Cost:
    # "quantize four input elements per partition, per cycle (i.e., 4x Vector performance mode)"
    n = _n(ev)
    return _min_ii(ev, t, n, f"N {n}", engine="vector", factor=4)


def _gpsimd(ev, t, n=None) -> Cost:
    n = _n(ev) if n is None else n
    cycles = t.gpsimd_start_cycles + n
    return _compute(ev, t, "gpsimd", cycles,
                    f"{ev.op} GPSIMD_START {t.gpsimd_start_cycles} + N {n} = {cycles:g} cycles")


def _iota(ev, t) -> Cost:
    dst = ev.writes[0] if ev.writes else None
    return _gpsimd(ev, t, _free(dst) if dst is not None else 1)


def _local_gather(ev, t) -> Cost:
    src = _role(ev.reads, "src_buffer")
    idx = _role(ev.reads, "index")
    e = ev.options.get("num_elem_per_idx") or 1
    valid = ev.options.get("num_valid_indices")
    if not isinstance(valid, int):
        valid = _free(idx) * max(1, idx.partitions) // 8 if idx is not None else 1   # per GpSimd core
    size = {"float32": 4, "int32": 4, "uint32": 4, "bfloat16": 2, "float16": 2, "int16": 2,
            "uint16": 2}.get(src.dtype if src is not None else "float32", 1)
    tt = 4      # "Currently, t is a constant 4"
    c = ((28 + tt * e) / (tt * e)) / min(4 / size, e)
    cycles = t.gpsimd_start_cycles + (valid * e) / c
    return _compute(ev, t, "gpsimd", cycles, f"local_gather {t.gpsimd_start_cycles} + "
                    f"({valid} x {e}) / C {c:.3g} = {cycles:.0f} cycles")


def _control(ev, t) -> Cost:
    # Decision: register and PRNG-state instructions have no documented cost: MIN_II on their engine.
    eng = _engine(ev, "sync")
    return _compute(ev, t, eng, t.min_ii_cycles, f"generic control {ev.op} MIN_II {t.min_ii_cycles} cycles")


def _core_barrier(ev, t) -> Cost:
    # Decision: the barrier moves no data (its tensor names the memory it orders): no HBM bytes.
    eng = _engine(ev, "gpsimd")
    c = _compute(ev, t, eng, t.min_ii_cycles, f"core_barrier MIN_II {t.min_ii_cycles} cycles"
                 f" + semaphore {t.dma_fixed_ns:g} ns after the last core arrives")
    return dataclasses.replace(c, hbm_bytes=0)


# ---- DMA --------------------------------------------------------------------------------------

def _dma(ev, t, transpose: bool = False) -> Cost:
    tensors = [o for o in (*ev.reads, *ev.writes) if not o.role.endswith(".index")]
    writes = [o for o in ev.writes]
    reads = [o for o in ev.reads if not o.role.endswith(".index")]
    moved = max(sum(o.nbytes for o in writes), sum(o.nbytes for o in reads), 1)
    chip = [o.partitions for o in tensors if o.buffer in _ON_CHIP]
    rows = max(chip) if chip else (writes[0].shape[0] if writes and writes[0].shape else 1)
    per_engine = max(1, t.pmax // t.dma_engines)
    engines = max(1, min(t.dma_engines, -(-rows // per_engine)))
    if transpose:
        src = reads[0] if reads else None
        frac = t.dma_transpose_hbm_fraction if src is not None and src.buffer in HBM_BUFFERS \
            else t.dma_transpose_sbuf_fraction
        rate = engines * t.dma_engine_bytes_per_ns * frac
        curve = f"transpose x{frac:g}"
    else:
        run = min((o.contiguous_bytes for o in tensors), default=moved) or 1
        eff = run / (run + t.dma_run_overhead_bytes)
        rate = engines * t.dma_engine_bytes_per_ns * eff
        curve = f"{run} B runs: eff {run}/({run}+{t.dma_run_overhead_bytes}) = {eff:.2f}"
    dur = t.dma_fixed_ns + moved / rate
    return Cost(kind="dma", duration_ns=dur, hbm_bytes=_hbm_bytes(ev), fixed_ns=t.dma_fixed_ns,
                dma_bytes=moved, rate=rate,
                why=f"{ev.op} {t.dma_fixed_ns:g} ns + {moved} B / ({engines} engines x "
                    f"{t.dma_engine_bytes_per_ns:g} B/ns, {curve}) = {dur:.0f} ns")


def _dma_copy(ev, t) -> Cost:
    return _dma(ev, t)


def _dma_transpose(ev, t) -> Cost:
    return _dma(ev, t, transpose=True)


# ---- fallback ---------------------------------------------------------------------------------

def _generic(ev, t) -> Cost:
    if ev.engine == "dma" or ev.op in _DMA_OPS:
        c = _dma(ev, t)
        return dataclasses.replace(c, why="generic " + c.why)
    eng = _engine(ev)
    n = _n(ev)
    if eng == "gpsimd":
        c = _gpsimd(ev, t, n)
    elif eng == "tensor":
        cycles = max(t.mm_init_cycles, n)
        c = _compute(ev, t, "tensor", cycles, f"{ev.op} max({t.mm_init_cycles}, N {n}) cycles")
    else:
        c = _min_ii(ev, t, n, f"N {n}", engine=eng)
    return dataclasses.replace(c, why="generic " + c.why)


_RULES = {
    "nc_matmul": _nc_matmul,
    "nc_matmul_mx": _nc_matmul_mx,
    "nc_transpose": _nc_transpose,
    "tensor_copy": _tensor_copy,
    "tensor_scalar": _tensor_scalar,
    "tensor_tensor": _tensor_tensor,
    "scalar_tensor_tensor": _scalar_tensor_tensor,
    "tensor_reduce": _tensor_reduce,
    "tensor_scalar_reduce": lambda ev, t: _plus_min_ii(ev, t),
    "tensor_tensor_scan": _times(2),
    "tensor_copy_predicated": _tensor_copy_predicated,
    "bn_stats": _times(1, "N"),
    "bn_aggr": _bn_aggr,
    "reciprocal": _times(8),
    "max8": _max8,
    "nc_find_index8": _max8,
    # nc_match_replace8: the docstring's "min(MIN_II, N)"; Decision: read as max(MIN_II, N), the
    # shape of every other VectorE note (a min would make it cost at most 64 cycles).
    "nc_match_replace8": _times(1, "N"),
    "range_select": _times(1, "N"),
    "dropout": _times(1, "N"),
    "nc_stream_shuffle": _times(1, "N"),
    "memset": _memset,
    "activation": _activation,
    "activate2": _activation,
    "activation_reduce": _activation,
    "exponential": _exponential,
    "quantize_mx": _quantize_mx,
    "iota": _iota,
    "affine_select": lambda ev, t: _gpsimd(ev, t),
    "local_gather": _local_gather,
    "register_load": _control,
    "register_store": _control,
    "register_move": _control,
    "set_rng_seed": _control,
    "rand_set_state": _control,
    "rand_get_state": _control,
    "core_barrier": _core_barrier,
    "dma_copy": _dma_copy,
    "dma_transpose": _dma_transpose,
    "dma_compute": _dma_copy,
    "sendrecv": _dma_copy,
}

# Ops with a documented rule (the rest take ``_generic``), for tests and ``nkisim ops``.
RULED_OPS = frozenset(_RULES)

__all__ = ["Cost", "cost", "pe_peak_flops_per_ns", "HBM_BUFFERS", "RULED_OPS"]
