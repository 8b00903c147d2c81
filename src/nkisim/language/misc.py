"""Small ``nl`` helpers: ``ds``, ``NKIObject``, ``device_print``, ``no_reorder``, fp32/bf16 minima, and
the documented random-number functions nkisim does not simulate (``dropout``, ``random_seed``)."""
from __future__ import annotations

import contextlib
import dataclasses
import types

import numpy as np

from .. import state
from ..errors import UnsupportedError
from ..isa.dispatch import api_function
from ..isa.dispatch import _unknown_keywords
from .creation import _Keywords, unknown_keyword


def ds(start, size):
    """``nl.ds(start, size)`` is the slice ``start:start + size``; with a runtime start (a register
    or a 1-element tile) a ``DynamicSlice``, whose bounds the using instruction checks."""
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
    positionally, in order; a field left out gets its default (or ``default_factory()``), and a
    field with no default is required. ``__post_init__`` runs after, as in a dataclass.
    Decision: the docs do not say what an undeclared keyword does; a name that is neither a field
    nor a class attribute is most likely a typo, so it raises TypeError (with a suggestion).
    Raises: TypeError (too many positional arguments, a missing required field, an unknown
    keyword). Source: aws-neuron-sdk nki/api/nki/language/__init__.py (NKIObject).
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
            else:
                raise TypeError(f"{cls.__name__}() missing required argument {f.name!r}")
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


@api_function("nl.dropout")
def dropout(x, rate, dtype=None):
    """Randomly zero elements of ``x`` with probability ``rate`` (a scalar or an (x.shape[0], 1)
    tile). Not simulated (like nisa.dropout, random numbers are not): raises UnsupportedError;
    an unknown keyword raises TypeError. Source: aws-neuron-sdk nki/api/nki/language/__init__.py
    (dropout)."""
    raise UnsupportedError("nl.dropout", "random numbers are documented but not simulated by nkisim yet")


@api_function("nl.random_seed")
def random_seed(seed):
    """Set the seed of ``nl.rand`` from a (1, 1) SBUF/PSUM tile. Not simulated (random numbers are
    not): raises UnsupportedError. Source: aws-neuron-sdk nki/api/nki/language/__init__.py
    (random_seed)."""
    raise UnsupportedError("nl.random_seed", "random numbers are documented but not simulated by nkisim yet")


fp32 = types.SimpleNamespace(min=float(np.float32(-3.4028235e38)), max=float(np.float32(3.4028235e38)))
bfp16 = types.SimpleNamespace(min=-3.3895313892515355e38, max=3.3895313892515355e38)

__all__ = ["ds", "NKIObject", "device_print", "no_reorder", "fp32", "bfp16", "dropout", "random_seed"]
