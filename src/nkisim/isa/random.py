"""Random numbers: ``rng``, ``rand2``, ``dropout``, ``set_rng_seed``, ``rand_set_state``,
``rand_get_state``, and the per-core, per-engine XORWOW generator state they share.

The generator is the documented one: XORWOW (Marsaglia 2003, "Xorshift RNGs", the xorwow variant
cuRAND also uses), 6 uint32 words per generator (x, y, z, w, v, d): ``t = x ^ (x >> 2)``;
``x, y, z, w = y, z, w, v``; ``v = (v ^ (v << 4)) ^ (t ^ (t << 1))``; ``d += 362437``; the
output is ``v + d`` (mod 2**32). Each compute lane (partition) of an engine has its own state:
one generator on GpSimd (6 words), four on Vector (24 words, ``arch.RNG_STATE_WORDS``).
What cannot match hardware bit for bit (Decisions, see ``rng``): the power-on state, how
``set_rng_seed`` expands a 32-bit seed into the lanes' states, which of a Vector lane's four
generators makes which element, and how ``rand2``/``dropout`` turn bits into floats.
Source: aws-neuron-sdk nki/api/nki/isa/__init__.py (rng, rand2, dropout, set_rng_seed,
rand_set_state, rand_get_state). Imports arch, memory, checks, dispatch.
"""
from __future__ import annotations

import numpy as np

from .. import arch as _arch
from .. import dtypes as _dt
from ..checks import rules
from ..errors import ArgumentError, DtypeError, ShapeError, UnsupportedError
from ..memory.access import read_f32, read_raw, write
from ..memory.tensor import NkiTensor
from .dispatch import Passed, instruction
from .enums import as_enum, engine as _engine
from .operands import column_f32, pf

F32 = np.float32
U32 = np.uint32
_WEYL = U32(362437)
_ENGINE_CODE = {"gpsimd": 1, "vector": 2}      # SeedSequence spawn keys: one stream per engine
_DEFAULT_ENTROPY = 0x6E6B6973                  # the power-on state's seed (Decision, see rng)
_RNG_DTYPES = ("int8", "int16", "int32", "uint8", "uint16", "uint32")
_RAND2_DTYPES = ("float8_e4m3", "float8_e5m2", "float16", "bfloat16", "float32", "tfloat32",
                 "int8", "int16", "int32", "uint8", "uint16", "uint32")
_SEED_DTYPES = ("int32", "uint32", "float32")


# ---- the generator state (per core, per engine) --------------------------------------------

def _seeded(entropy: int, engine: str, spawn: tuple, pmax: int) -> np.ndarray:
    """(pmax, words) uint32 lane states from numpy's SeedSequence (well-mixed, independent per
    engine, per lane and per spawn key)."""
    words = _arch.RNG_STATE_WORDS[engine]
    seq = np.random.SeedSequence(entropy, spawn_key=(_ENGINE_CODE[engine], *spawn))
    return seq.generate_state(pmax * words, U32).reshape(pmax, words)


def state(core, engine: str) -> np.ndarray:
    """The (pmax, words) uint32 XORWOW state of ``engine`` ("gpsimd" or "vector") on ``core``; a
    launch starts from the power-on state (see ``rng``)."""
    states = core.extras.get("rng")
    if states is None:
        states = core.extras["rng"] = {}
    s = states.get(engine)
    if s is None:
        s = states[engine] = _seeded(_DEFAULT_ENTROPY, engine, (core.core_id,), core.target.pmax)
    return s


def seed_vector(core, seed: int) -> None:
    """``set_rng_seed``: every Vector lane's state from the 32-bit ``seed`` (same seed, same state)."""
    core.extras.setdefault("rng", {})["vector"] = _seeded(seed, "vector", (), core.target.pmax)


def _xorwow(s: np.ndarray, steps: int) -> np.ndarray:
    """``steps`` outputs of each generator of ``s`` ((m, 6) uint32, advanced in place): (steps, m)."""
    x, y, z, w, v, d = (s[:, i].copy() for i in range(6))
    out = np.empty((steps, len(s)), U32)
    two, one, four = U32(2), U32(1), U32(4)
    for i in range(steps):
        t = x ^ (x >> two)
        x, y, z, w = y, z, w, v
        v = (v ^ (v << four)) ^ (t ^ (t << one))
        d = d + _WEYL
        np.add(v, d, out=out[i])
    s[:] = np.stack((x, y, z, w, v, d), axis=1)
    return out


def draw(core, engine: str, p: int, n: int) -> np.ndarray:
    """(p, n) uint32 random words from lanes 0..p-1 of ``engine`` (each lane advances only its own
    state). Element j of a lane: GpSimd its one generator's j-th output; Vector generator j % 4's
    (j // 4)-th output, all four advancing ceil(n / 4) steps."""
    s = state(core, engine)
    k = _arch.RNG_STATE_WORDS[engine] // _arch.XORWOW_WORDS
    steps = -(-n // k)
    lanes = s[:p].reshape(p * k, _arch.XORWOW_WORDS)
    out = _xorwow(lanes, steps)                    # (steps, p * k)
    s[:p] = lanes.reshape(p, k * _arch.XORWOW_WORDS)
    return out.reshape(steps, p, k).transpose(1, 0, 2).reshape(p, steps * k)[:, :n]


def uniform(bits: np.ndarray) -> np.ndarray:
    """fp32 in [0, 1) from uint32 words: the top 24 bits times 2**-24 (exact in fp32)."""
    return (bits >> U32(8)).astype(F32) * F32(2.0 ** -24)


def _engine_or(opn, engine, default):
    e = as_enum(_engine, engine, opn)
    return default if e is _engine.unknown else e


def _needs(opn, t, version: int, name: str):
    if t.nc_version < version:
        raise UnsupportedError(opn, f"needs {name} or newer, not supported on {t.name}")


# ---- rng -----------------------------------------------------------------------------------------

def _rng_rules(ins, dst, engine, name):
    """rng's rules (see its docstring)."""
    opn, t = ins.op, ins.target
    e = _engine_or(opn, engine, _engine.vector)
    rules.engine_in(opn, e, (_engine.vector,) if t.nc_version < 3 else (_engine.gpsimd, _engine.vector), t)
    rules.tiles(opn, t, dst=dst)
    if e is _engine.gpsimd:
        rules.sbuf_only(opn, "dst", dst)
    rules.dtype_in(opn, "dst", dst, _RNG_DTYPES, t)
    return Passed(e)


def _rng_compute(ins, dst, engine, name):
    p = dst.shape[0]
    bits = draw(ins.core, ins.engine.name, p, dst.free_size)
    write(dst, bits.astype(dst.dtype).reshape(dst.shape))      # the least significant bits


@instruction(writes=("dst",), rules=_rng_rules, compute=_rng_compute)
def rng(dst, engine=_engine.vector, name=None):
    """dst = 32 random bits per element from the engine's PRNG, truncated to dst's dtype (the least
    significant bits: "truncates each 32-bit random value ... taking the least significant bits").

    Shapes: dst (P, F...), P <= pmax. Dtypes: dst int8, int16, int32, uint8, uint16 or uint32.
    Buffers: SBUF or PSUM; SBUF only on GpSimd ("GpSimd Engine cannot access PSUM").
    Engine: Vector (default) on every generation; GpSimd too on trn2 and newer ("NeuronCore-v2:
    Vector. NeuronCore-v3+: GpSimd, Vector"). Decision: ``engine.unknown`` is the default, Vector.
    Generator: XORWOW per compute lane (see the module docstring); lane i is the i-th partition of
    the operand (Decision: tile-relative, not the physical SBUF partition). The elements of a
    partition take the lane's outputs in row-major order; on Vector, element j comes from the
    lane's generator j % 4 (Decision). Each call advances the state, so two calls differ.
    Decision (what cannot match hardware bit for bit): the power-on state is derived with NumPy's
    ``SeedSequence`` from a fixed constant, the core id, the engine and the lane, so every launch
    starts from the same state (the same kernel gives the same numbers every run), the engines
    and the lanes of one core, and the cores of an LNC2 launch, draw independent streams.
    ``set_rng_seed`` and ``rand_set_state`` replace it. Given a state set by ``rand_set_state``,
    the GpSimd stream is plain XORWOW; whether the hardware emits the same words is not verified.
    Raises: EngineError, MemorySpaceError, ShapeError, DtypeError.
    Source: aws-neuron-sdk nki/api/nki/isa/__init__.py (rng).
    """


# ---- rand2 ---------------------------------------------------------------------------------------

def _rand2_rules(ins, dst, min, max, name):   # noqa: A002 (documented parameter names)
    """rand2's rules (see its docstring)."""
    opn, t = ins.op, ins.target
    _needs(opn, t, 4, "trn3")
    rules.tiles(opn, t, dst=dst)
    rules.dtype_in(opn, "dst", dst, _RAND2_DTYPES, t)
    p = dst.shape[0]
    for what, v in (("min", min), ("max", max)):
        rules.column(opn, what, v, p, t)
        rules.float32_operand(opn, what, v)
    if not isinstance(min, NkiTensor) and not isinstance(max, NkiTensor) and not F32(min) < F32(max):
        raise ArgumentError(opn, f"min {min} must be less than max {max}")
    return Passed(_engine.vector)


def _rand2_compute(ins, dst, min, max, name):   # noqa: A002
    p = dst.shape[0]
    lo, hi = column_f32(min, 2), column_f32(max, 2)
    bad = ~(np.broadcast_to(lo, (p, 1)) < np.broadcast_to(hi, (p, 1)))
    if bad.any():
        i = int(np.argmax(bad[:, 0]))
        raise ArgumentError(ins.op, f"min must be less than max; partition {i} has min "
                                    f"{float(np.broadcast_to(lo, (p, 1))[i, 0])} and max "
                                    f"{float(np.broadcast_to(hi, (p, 1))[i, 0])}")
    u = uniform(draw(ins.core, "vector", p, dst.free_size))
    with np.errstate(over="ignore", invalid="ignore"):
        y = lo + u * (hi - lo)
    write(dst, y.reshape(dst.shape))


@instruction(reads=("min", "max"), writes=("dst",), rules=_rand2_rules, compute=_rand2_compute)
def rand2(dst, min, max, name=None):   # noqa: A002
    """dst = min + u * (max - min), u uniform in [0, 1), in fp32, rounded once into dst.dtype.

    ``min``/``max``: fp32 scalars or (P, 1) float32 tensors (per partition); min < max ("min <
    max for valid range"): ArgumentError otherwise (for tensors, at run time, naming the first
    partition). Shapes: dst (P, F...), P <= pmax. Dtypes: dst float8_e4m3, float8_e5m2, float16,
    bfloat16, float32, tfloat32, int8, int16, int32, uint8, uint16 or uint32. Buffers: SBUF or
    PSUM. Engine: Vector, trn3 and newer ("Available only on NeuronCore-v4 and newer";
    UnsupportedError elsewhere). Generator: the Vector engine's XORWOW lanes (see ``rng``; seeded
    by ``set_rng_seed``). Decision (not bit-exact with hardware): u is the top 24 bits of one
    32-bit word times 2**-24, so fp32 results lie in [min, max) (rounding into a narrower dtype
    may reach max); the docs say "[min, max] range".
    Raises: UnsupportedError, ShapeError, MemorySpaceError, DtypeError, ArgumentError.
    Source: aws-neuron-sdk nki/api/nki/isa/__init__.py (rand2).
    """


# ---- dropout -------------------------------------------------------------------------------------

def dropout_rules(opn, t, dst, data, prob, same_dtype: bool = True, names=("data", "prob")):
    """dropout's rules (see its docstring); for ``nl.dropout``: ``same_dtype=False`` (its
    ``dtype``) and its parameter names ``names`` (x, rate)."""
    dn, pn = names
    rules.tiles(opn, t, **{"dst": dst, dn: data})
    rules.same_tile(opn, dn, data, "dst", dst)
    if same_dtype and dst.dtype != data.dtype:
        raise DtypeError(opn, f"dst dtype {_dt.name(dst.dtype)} must match {dn} dtype {_dt.name(data.dtype)}")
    p = data.shape[0]
    rules.column(opn, pn, prob, p, t)
    if isinstance(prob, NkiTensor):
        if not _dt.is_float(data.dtype):
            rules.float32_operand(opn, pn, prob, f"for {_dt.name(data.dtype)} {dn}")
        elif not _dt.is_float(prob.dtype):
            raise DtypeError(opn, f"{pn} dtype {_dt.name(prob.dtype)} must be a float dtype")
    elif prob is None or not 0.0 <= float(prob) <= 1.0:
        raise ArgumentError(opn, f"{pn} {prob} is outside [0, 1]")
    return Passed(_engine.vector)


def dropout_compute(ins, dst, data, prob):
    """Zero the elements whose uniform draw is below ``prob``; keep the others unchanged."""
    p = data.shape[0]
    u = uniform(draw(ins.core, "vector", p, data.free_size))
    keep = u >= column_f32(prob, 2)
    if _dt.is_float(data.dtype):
        y = np.where(keep, pf(read_f32(data)), F32(0))
    else:
        raw = pf(read_raw(data))
        y = np.where(keep, raw, np.zeros((), raw.dtype))
    write(dst, y.reshape(dst.shape))


def _dropout_rules(ins, dst, data, prob, name):
    return dropout_rules(ins.op, ins.target, dst, data, prob)


def _dropout_compute(ins, dst, data, prob, name):
    dropout_compute(ins, dst, data, prob)


@instruction(reads=("data", "prob"), writes=("dst",), rules=_dropout_rules, compute=_dropout_compute)
def dropout(dst, data, prob, name=None):
    """dst = data with each element replaced by 0 with probability ``prob`` (per partition).

    An element is dropped when its uniform draw u in [0, 1) (see ``rand2``) is below ``prob``: prob
    1.0 drops every element, 0.0 keeps every one, as the docs say. The kept elements are copied
    unchanged. Decision: they are not rescaled by 1 / (1 - prob) (the docs say only "replace ...
    with zeros"). ``prob``: a scalar in [0, 1] (ArgumentError otherwise) or a (P, 1) tensor (its
    values are used as they are: below 0 keeps all, above 1 drops all).
    Shapes: data, dst (P, F...), same P (<= pmax) and elements per partition. Dtypes: data any;
    dst.dtype must equal data.dtype; a tensor ``prob`` must be float32 for integer data, any float
    dtype for float data. Integer data is copied exactly (no fp32 round trip). Buffers: SBUF or
    PSUM. Engine: Vector; draws from the Vector engine's XORWOW lanes (seeded by
    ``set_rng_seed``; see ``rng`` for what cannot match hardware).
    Raises: ShapeError, MemorySpaceError, DtypeError, ArgumentError.
    Source: aws-neuron-sdk nki/api/nki/isa/__init__.py (dropout).
    """


# ---- seeds and states ----------------------------------------------------------------------------

def _seed_rules(ins, src_seeds, name):
    """set_rng_seed's rules (see its docstring)."""
    opn = ins.op
    rules.tensor(opn, "src_seeds", src_seeds)
    rules.on_chip(opn, "src_seeds", src_seeds)
    if src_seeds.shape[0] != 1 or src_seeds.free_size != 1:
        raise ShapeError(opn, f"src_seeds must be a [1, 1] tensor, got shape {src_seeds.shape}")
    if _dt.name(src_seeds.dtype) not in _SEED_DTYPES:
        raise DtypeError(opn, f"src_seeds dtype {_dt.name(src_seeds.dtype)} is not a 32-bit value; expected "
                              f"one of {', '.join(_SEED_DTYPES)}")
    return Passed(_engine.vector)


def _seed_compute(ins, src_seeds, name):
    word = np.ascontiguousarray(read_raw(src_seeds)).reshape(-1)[:1].view(U32)
    seed_vector(ins.core, int(word[0]))


@instruction(reads=("src_seeds",), rules=_seed_rules, compute=_seed_compute)
def set_rng_seed(src_seeds, name=None):
    """Seed the Vector engine's PRNG (every lane) with the 32-bit value in ``src_seeds``.

    The same seed gives the same numbers afterwards (``rng`` on Vector, ``rand2``, ``dropout``,
    ``nl.rand``). The state persists for the rest of the kernel. Shapes: src_seeds [1, 1].
    Dtypes: a 32-bit value: int32, uint32 or float32 (Decision: its 32 bits are the seed).
    Buffers: SBUF or PSUM. Engine: Vector. Decision (not bit-exact with hardware, whose seeding
    function is undocumented): lane i's 24 state words come from NumPy's ``SeedSequence`` of
    (seed, Vector, i): the lanes are independent streams, and the seed alone fixes them (the
    cores of an LNC2 launch seeded alike draw alike). The GpSimd state is untouched.
    Raises: ShapeError, MemorySpaceError, DtypeError.
    Source: aws-neuron-sdk nki/api/nki/isa/__init__.py (set_rng_seed).
    """


def _state_rules(opn, t, what, tensor, engine, psum_ok):
    """The rules rand_set_state and rand_get_state share: Passed(engine)."""
    e = _engine_or(opn, engine, _engine.gpsimd)
    _needs(opn, t, 3, "trn2")
    rules.engine_in(opn, e, (_engine.gpsimd,) if t.nc_version < 4 else (_engine.gpsimd, _engine.vector), t)
    rules.tiles(opn, t, **{what: tensor})
    if e is _engine.gpsimd or not psum_ok:
        rules.sbuf_only(opn, what, tensor)
    if len(tensor.shape) != 2:
        raise ShapeError(opn, f"{what} must be a 2D tensor (lanes, state words), got shape {tensor.shape}")
    words = _arch.RNG_STATE_WORDS[e.name]
    if tensor.shape[1] != words:
        raise ShapeError(opn, f"{what} must hold {words} XORWOW state words per partition on the {e.name} "
                              f"engine, got {tensor.shape[1]}")
    if tensor.dtype != _dt.uint32:
        raise DtypeError(opn, f"{what} dtype {_dt.name(tensor.dtype)} must be uint32")
    return Passed(e)


def _set_state_rules(ins, src_seeds, engine, name):
    return _state_rules(ins.op, ins.target, "src_seeds", src_seeds, engine, psum_ok=False)


def _set_state_compute(ins, src_seeds, engine, name):
    p = src_seeds.shape[0]
    state(ins.core, ins.engine.name)[:p] = np.asarray(read_raw(src_seeds), U32)


@instruction(reads=("src_seeds",), rules=_set_state_rules, compute=_set_state_compute)
def rand_set_state(src_seeds, engine=_engine.gpsimd, name=None):
    """Set the PRNG state of lanes 0..P-1 of the engine from ``src_seeds`` (P, words): partition i
    holds lane i's XORWOW state ("Each partition in the source tensor seeds the PRNG states for
    the corresponding compute lane"); the other lanes keep theirs.

    Words: 6 on GpSimd (x, y, z, w, v, d of one generator), 24 on Vector (four generators, 6
    words each, in that order) (``arch.RNG_STATE_WORDS``). ``rand_get_state`` then ``rand_set_state``
    of the same words replays the stream. Shapes: src_seeds 2D (P, words), P <= pmax. Dtypes:
    uint32. Buffers: SBUF. Engine: GpSimd (default) on trn2, GpSimd or Vector on trn3 and newer
    ("NeuronCore-v3: GpSimd. NeuronCore-v4+: GpSimd, Vector"); not on trn1 (UnsupportedError).
    Decision: ``engine.unknown`` is the default, GpSimd. Decision: an all-zero x..v state is
    taken as given (XORWOW then yields only the Weyl sequence d).
    Raises: UnsupportedError, EngineError, ShapeError, MemorySpaceError, DtypeError.
    Source: aws-neuron-sdk nki/api/nki/isa/__init__.py (rand_set_state).
    """


def _get_state_rules(ins, dst, engine, name):
    return _state_rules(ins.op, ins.target, "dst", dst, engine, psum_ok=ins.target.nc_version >= 4)


def _get_state_compute(ins, dst, engine, name):
    p = dst.shape[0]
    write(dst, state(ins.core, ins.engine.name)[:p].copy())


@instruction(writes=("dst",), rules=_get_state_rules, compute=_get_state_compute)
def rand_get_state(dst, engine=_engine.gpsimd, name=None):
    """dst = the PRNG state of lanes 0..P-1 of the engine: partition i gets lane i's XORWOW words
    (6 on GpSimd, 24 on Vector; layout as ``rand_set_state``).

    Shapes: dst 2D (P, words), P <= pmax. Dtypes: uint32. Buffers: SBUF on trn2; SBUF or PSUM on
    trn3 and newer; SBUF only with GpSimd ("GpSimd Engine cannot access PSUM"). Engine: GpSimd
    (default) on trn2, GpSimd or Vector on trn3 and newer; not on trn1 (UnsupportedError).
    Before any seeding it reads the power-on state (see ``rng``).
    Raises: UnsupportedError, EngineError, ShapeError, MemorySpaceError, DtypeError.
    Source: aws-neuron-sdk nki/api/nki/isa/__init__.py (rand_get_state).
    """


__all__ = ["rng", "rand2", "dropout", "set_rng_seed", "rand_set_state", "rand_get_state"]
