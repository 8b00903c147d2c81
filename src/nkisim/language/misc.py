"""Small ``nl`` helpers: ``ds``, ``NKIObject``, ``device_print``, ``no_reorder``, fp32/bf16 minima, and
the random-number functions ``rand``, ``dropout``, ``random_seed`` (over ``isa.random``: the Vector
engine's XORWOW lanes; see ``nisa.rng`` for what cannot match hardware bit for bit)."""
from __future__ import annotations

import contextlib
import dataclasses
import types

import numpy as np

from .. import state
from ..errors import NkiError
from ..isa import random as _random
from ..isa.dispatch import Passed, _unknown_keywords, api_function, instruction
from ..isa.enums import engine as _engine
from ..memory import access
from ..memory.buffers import sbuf
from ..memory.tensor import NkiTensor
from .creation import _Keywords, unknown_keyword


def ds(start, size):
    """``nl.ds(start, size)`` is the slice ``start:start + size``; with a runtime start (a register
    or a 1-element tile) a ``DynamicSlice``, whose bounds the using instruction checks."""
    if type(start) is int and type(size) is int:        # the common case, first
        return slice(start, start + size)
    if hasattr(start, "shape") or type(start).__name__ == "VirtualRegister":
        from ..memory.tensor import DynamicSlice
        return DynamicSlice(start, int(size))
    start, size = int(start), int(size)
    return slice(start, start + size)


class NKIObject:
    """Base class for kernel-side classes and dataclasses (configs passed to kernels).

    Construction follows the docs' ``NKIObject.__init__(**kwargs)``: a subclass that defines no
    ``__init__`` of its own, plain or ``@dataclass``, takes its attributes as keywords —
    ``SectionParams(section_idx=0)`` works where ``section_idx = None`` is an un-annotated class
    attribute (which a dataclass would not make a field). Dataclass fields may also come
    positionally, in order; a field left out gets its default (or ``default_factory()``).
    Decision: a field with no default that is left out stays unset (reading it raises
    AttributeError naming it), as the docs' ``**kwargs`` construction allows; nki-library builds
    such objects (``MLPTKGConstantsDimensionSizes`` omits ``remainderIFused``, which it never
    reads). ``__post_init__`` runs after, as in a dataclass.
    Decision: the docs do not say what an undeclared keyword does; a name that is neither a field
    nor a class attribute is most likely a typo, so it raises TypeError (with a suggestion).
    Raises: TypeError (too many positional arguments, an unknown keyword). Source: aws-neuron-sdk nki/api/nki/language/__init__.py (NKIObject).
    """

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        # Only where the class would otherwise get NKIObject's own construction: a hand-written
        # __init__ (here or inherited) wins. ``@dataclass`` keeps an __init__ the class already has.
        if "__init__" not in cls.__dict__ and cls.__init__ is NKIObject.__init__:
            cls.__init__ = NKIObject.__init__

    def __init__(self, *args, **kwargs):
        cls = type(self)
        fields = [f for f in getattr(cls, "__dataclass_fields__", {}).values()
                  if f._field_type is dataclasses._FIELD and f.init]
        if len(args) > len(fields):
            raise TypeError(f"{cls.__name__}() takes {len(fields)} positional arguments but "
                            f"{len(args)} were given")
        values = dict(zip((f.name for f in fields), args))
        for name in kwargs:
            if name in values:
                raise TypeError(f"{cls.__name__}() got multiple values for argument {name!r}")
        values.update(kwargs)
        known = {f.name for f in fields} | _class_attributes(cls)
        for name in values:
            if name not in known:
                _unknown_keywords(_Keywords(f"{cls.__name__}", tuple(sorted(known))), {name: None})
        for f in fields:
            if f.name in values:
                continue
            if f.default is not dataclasses.MISSING:
                values[f.name] = f.default
            elif f.default_factory is not dataclasses.MISSING:
                values[f.name] = f.default_factory()
        for name, value in values.items():
            object.__setattr__(self, name, value)
        post = getattr(self, "__post_init__", None)
        if post is not None:
            post()


def _class_attributes(cls) -> set:
    """Public attribute names a class (and its NKIObject bases) declares: annotations and data
    class attributes (not functions, properties or nested classes)."""
    names = set()
    for klass in cls.__mro__:
        if klass is NKIObject or klass is object:
            continue
        names.update(n for n in getattr(klass, "__annotations__", {}) if not n.startswith("_"))
        for n, v in vars(klass).items():
            if not n.startswith("_") and not callable(v) and not isinstance(v, (property, classmethod,
                                                                              staticmethod)):
                names.add(n)
    return names


def device_print(print_prefix, tensor, **kw):
    """Print a tensor's values with a prefix (on hardware this dumps to NEURON_RT_DEBUG_OUTPUT_DIR;
    "In CPU simulation, this prints immediately to stdout"). Issues no instruction. Under LNC2
    each line starts with ``[core <id>]``. Raises: TypeError (unknown keyword).
    Source: aws-neuron-sdk nki/api/nki/language/__init__.py (device_print).
    """
    from ..memory.tensor import NkiTensor
    if kw:
        unknown_keyword("nl.device_print", device_print, kw)
    c = state.maybe_core()
    core = f"[core {c.core_id}] " if c is not None and c.launch.lnc > 1 else ""
    values = tensor.np() if isinstance(tensor, NkiTensor) else tensor
    print(f"{core}{print_prefix}", np.array(values), flush=True)


@contextlib.contextmanager
def no_reorder():
    """Keep program order: the simulator always does."""
    yield


def _rand_compute(ins, dst):
    if dst.on_chip:
        u = _random.uniform(_random.draw(ins.core, "vector", dst.shape[0], dst.free_size))
    else:
        pmax, n = ins.target.pmax, dst.size
        u = _random.uniform(_random.draw(ins.core, "vector", pmax, -(-n // pmax))).reshape(-1)[:n]
    access.write(dst, u.reshape(dst.shape))


_ON_CHIP, _HBM = Passed(_engine.vector), Passed(_engine.dma)


@instruction(api="nl.rand", op="rng", writes=("dst",), rules=lambda ins, dst: _ON_CHIP, compute=_rand_compute,
             memo=False)
def _rand_on_chip(dst):
    """dst = uniform [0, 1) values from the Vector engine's PRNG (the instruction nl.rand issues)."""


@instruction(api="nl.rand", op="dma_copy", writes=("dst",), rules=lambda ins, dst: _HBM, compute=_rand_compute,
             memo=False)
def _rand_hbm(dst):
    """dst (HBM) = uniform [0, 1) values from the Vector engine's PRNG, moved by DMA."""


def rand(shape, dtype, buffer=sbuf, name: str = "", **kw) -> NkiTensor:
    """A new tensor of uniform random values in [0, 1) ("Values are sampled from a uniform
    distribution between 0 and 1"), rounded once into ``dtype``.

    The values are those of ``nisa.rand2(min=0, max=1)``: the top 24 bits of one Vector-engine
    XORWOW word times 2**-24 (on every generation: Decision, the docs give no lowering); on chip,
    partition i draws from Vector lane i; ``nl.random_seed`` (or ``nisa.set_rng_seed``) fixes
    them. Decision (docs silent on how nl.rand lowers): one instruction, ``rng`` on the Vector
    engine on chip; into HBM one ``dma_copy`` whose values come from the Vector lanes in turn
    (element k of the flattened tensor from lane k // ceil(size / pmax)). Integer dtypes get the
    rounded values (0 or 1). Raises: ShapeError, DtypeError, CapacityError, TypeError (unknown
    keyword). Source: aws-neuron-sdk nki/api/nki/language/__init__.py (rand).
    """
    if kw:
        unknown_keyword("nl.rand", rand, kw)
    t = access.allocate(shape, dtype, buffer, name, op="nl.rand", fill=False)
    (_rand_on_chip if t.on_chip else _rand_hbm)(t)
    return t


def _dropout_rules(ins, dst, x, rate):
    return _random.dropout_rules(ins.op, ins.target, dst, x, rate, same_dtype=False, names=("x", "rate"))


def _dropout_compute(ins, dst, x, rate):
    _random.dropout_compute(ins, dst, x, rate)


@instruction(api="nl.dropout", op="dropout", reads=("x", "rate"), writes=("dst",), rules=_dropout_rules,
             compute=_dropout_compute)
def _dropout(dst, x, rate):
    """nisa.dropout's instruction, with dst in any dtype (nl.dropout's ``dtype``)."""


def _dropout_placeholder(x, rate, dtype=None):
    try:
        return access.allocate(x.shape, dtype or x.dtype, sbuf, "", op="nl.dropout")
    except (NkiError, AttributeError):
        return None


@api_function("nl.dropout", fallback=_dropout_placeholder)
def dropout(x, rate, dtype=None):
    """A new SBUF tile: ``x`` with each element zeroed with probability ``rate`` (a scalar in [0, 1]
    or an (x.shape[0], 1) tile of per-partition rates), the others unchanged, rounded once into
    ``dtype`` (default ``x.dtype``). One ``nisa.dropout`` instruction (Decision: with another
    ``dtype`` still one instruction, the rounding on its write; survivors are not rescaled, as
    ``nisa.dropout``). Raises: the rules of nisa.dropout (naming nl.dropout), TypeError (unknown
    keyword). Source: aws-neuron-sdk nki/api/nki/language/__init__.py (dropout).
    """
    from ..checks import rules
    rules.tensor("nl.dropout", "x", x)
    out = access.allocate(x.shape, dtype or x.dtype, sbuf, "", op="nl.dropout", fill=False)
    _dropout(out, x, rate)
    return out


@api_function("nl.random_seed")
def random_seed(seed):
    """Seed the random numbers of ``nl.rand`` (and of every Vector-engine draw) from a (1, 1)
    SBUF/PSUM tile holding a 32-bit value: one ``nisa.set_rng_seed`` ("Using the same seed will
    generate the same sequence of random numbers when used with rand()"). Raises: the rules of
    nisa.set_rng_seed. Source: aws-neuron-sdk nki/api/nki/language/__init__.py (random_seed).
    """
    from ..isa.random import set_rng_seed
    set_rng_seed(seed)


fp32 = types.SimpleNamespace(min=float(np.float32(-3.4028235e38)), max=float(np.float32(3.4028235e38)))
bfp16 = types.SimpleNamespace(min=-3.3895313892515355e38, max=3.3895313892515355e38)

__all__ = ["ds", "NKIObject", "device_print", "no_reorder", "fp32", "bfp16", "rand", "dropout", "random_seed"]
