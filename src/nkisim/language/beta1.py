"""Beta-1 ``nki.language`` (``neuronxcc.nki.language``): the Beta-2 tile functions (``tile``,
``creation``, ``misc``) with Beta-1 signatures -- ``mask=`` on every op (run inside
``indexing.masked``), keyword-only ``dtype=``, comparison/logical results ``bool`` by default,
``buffer=None`` meaning SBUF, ``nl.store`` of a PSUM tile (copied to SBUF first), the SPMD
program ids, grid specs, ``loop_reduce`` and ``static_cast``. Every instruction runs through the
Beta-2 pipeline (same checks, numerics, events). Never imports torch.

Source: aws-neuron-sdk 2.26 general/nki/api/nki/language/__init__.py; programming_model.rst.
"""
from __future__ import annotations

import linecache
import re
import sys

import numpy as np

from .. import dtypes as _d
from .. import state
from ..errors import ArgumentError, UnsupportedError
from .. import isa as _nisa
from ..isa.dispatch import register_token_type
from ..memory.buffers import psum, sbuf, shared_hbm
from ..memory.tensor import NkiTensor
from ..runtime import beta1 as _rt
from . import beta1_isa as _beta1_isa, creation as _creation, misc as _misc, ops as _ops, tile as _tile
from .indexing import arange, masked, mgrid, par_dim

# ---- operator tokens that are also tile functions (``nl.add(x, y, mask=...)``, ``op=nl.add``) ----
_BOOL_RESULT = {"equal", "not_equal", "greater", "greater_equal", "less", "less_equal", "logical_and",
                "logical_or", "logical_xor", "logical_not", "all"}


class Beta1Op(_ops.Op):
    """A Beta-1 operator token: as ``op=`` it is ``nl.<name>``; called, the tile function with
    ``mask=`` and ``dtype=`` (comparisons and logical ops default to ``nl.bool_``)."""
    __slots__ = ()

    def __call__(self, *args, mask=None, dtype=None, **kwargs):
        if dtype is None and self.name in _BOOL_RESULT:
            dtype = _d.bool_
        with masked(mask):
            if len(args) == 2 and self.name in _tile._BINARY:
                args = _partition_broadcast(*args)
            return _tile.call(self.name, *args, dtype=dtype, **kwargs)

    def __repr__(self):
        return f"nl.{self.name}"


def _partition_broadcast(x, y):
    """Beta-1 binary ops broadcast a 1-partition tile along the partition dim too (the docs'
    ``nl.add`` example: (128, 512) + (1, 512)): that operand is first copied to the other's
    partition count with ``nl.broadcast_to`` (one instruction); free dims broadcast as in Beta 2."""
    if isinstance(x, NkiTensor) and isinstance(y, NkiTensor) and x.ndim == y.ndim and x.ndim >= 1:
        px, py = x.shape[0], y.shape[0]
        if px == 1 and py > 1:
            x = _tile.broadcast_to(x, shape=(py,) + tuple(x.shape[1:]))
        elif py == 1 and px > 1:
            y = _tile.broadcast_to(y, shape=(px,) + tuple(y.shape[1:]))
    return x, y


register_token_type(Beta1Op)
TOKENS = {n: Beta1Op(n) for n in _ops.NAMES if n in _tile._FUNCS}
globals().update(TOKENS)


def _masked(fn, api):
    """``fn`` (a Beta-2 tile function) with a keyword-only ``mask=`` (None: no mask)."""
    def beta1(*args, mask=None, **kwargs):
        with masked(mask):
            return fn(*args, **kwargs)
    beta1.__name__ = beta1.__qualname__ = api.split(".")[-1]
    beta1.__doc__ = f"Beta-1 ``{api}(..., mask=None)``: {fn.__doc__ or ''}"
    beta1.__wrapped__ = fn
    return beta1


load = _masked(_tile.load, "nl.load")
load_transpose2d = _masked(_tile.load_transpose2d, "nl.load_transpose2d")
matmul = _masked(_tile.matmul, "nl.matmul")
transpose = _masked(_tile.transpose, "nl.transpose")
softmax = _masked(_tile.softmax, "nl.softmax")
rms_norm = _masked(_tile.rms_norm, "nl.rms_norm")
where = _masked(_tile.where, "nl.where")
gather_flattened = _masked(_tile.gather_flattened, "nl.gather_flattened")
dropout = _masked(_misc.dropout, "nl.dropout")
device_print = _masked(_misc.device_print, "nl.device_print")
broadcast_to = _tile.broadcast_to
expand_dims = _tile.expand_dims
ds, random_seed, no_reorder = _misc.ds, _misc.random_seed, _misc.no_reorder
fp32, bfp16 = _misc.fp32, _misc.bfp16
shared_constant, shared_identity_matrix = _creation.shared_constant, _creation.shared_identity_matrix


def store(dst, value, *, mask=None):
    """``nl.store(dst, value, *, mask=None)``: dst (HBM) = value. A PSUM ``value`` is first copied
    to a new SBUF tile (nisa.tensor_copy), as the Beta-1 docs say ("an extra copy will be
    performed to move the tile to SBUF first"); a scalar fills dst."""
    with masked(mask):
        if not isinstance(value, NkiTensor):            # "store scalar into out_tensor (a memset)"
            value = _creation.full(dst.shape, value, dst.dtype, buffer=sbuf)
        elif value.buffer is psum:
            staged = _creation.ndarray(value.shape, value.dtype, buffer=sbuf)
            _nisa.tensor_copy(staged, value)
            value = staged
        return _tile.store(dst, value)


def rand(shape, dtype=_d.float32, **kwargs):
    """``nl.rand(shape, dtype=nl.float32)``: a new SBUF tile of uniform [0, 1) values."""
    return _misc.rand(shape, dtype, **kwargs)


def static_cast(input_data, dtype):
    """``nl.static_cast(x, dtype)``: a new SBUF tile, x cast into ``dtype`` (one nisa.tensor_copy).
    Decision: on a host array (the SDK's attention tutorial casts its NumPy inputs) it is
    ``numpy.asarray(x).astype(dtype)``, no instruction."""
    if not isinstance(input_data, NkiTensor):
        return np.asarray(input_data).astype(dtype)
    return _tile.copy(input_data, dtype=dtype)


# ---- creation (buffer=None is SBUF; shared_hbm is one tensor per launch across SPMD programs) --
def _alloc(make, shape, dtype, buffer):
    if buffer is shared_hbm:
        return _rt.shared_allocation(make, tuple(int(s) for s in shape), dtype)
    return make()


def ndarray(shape, dtype, *, buffer=None, name="", **kwargs):
    """``nl.ndarray(shape, dtype, *, buffer=None, name='')``: an uninitialised tensor (SBUF by
    default). Decision: the k-th ``shared_hbm`` tensor of every SPMD program is one tensor."""
    buffer = sbuf if buffer is None else buffer
    return _alloc(lambda: _creation.ndarray(shape, dtype, buffer=buffer, name=name, **kwargs), shape, dtype, buffer)


def zeros(shape, dtype, *, buffer=None, name="", **kwargs):
    """``nl.zeros(shape, dtype, *, buffer=None, name='')``."""
    buffer = sbuf if buffer is None else buffer
    return _alloc(lambda: _creation.zeros(shape, dtype, buffer=buffer, name=name, **kwargs), shape, dtype, buffer)


def ones(shape, dtype, *, buffer=None, name="", **kwargs):
    """``nl.ones(shape, dtype, *, buffer=None, name='')``."""
    buffer = sbuf if buffer is None else buffer
    return _alloc(lambda: _creation.ones(shape, dtype, buffer=buffer, name=name, **kwargs), shape, dtype, buffer)


def full(shape, fill_value, dtype, *, buffer=None, name="", **kwargs):
    """``nl.full(shape, fill_value, dtype, *, buffer=None, name='')``."""
    buffer = sbuf if buffer is None else buffer
    return _alloc(lambda: _creation.full(shape, fill_value, dtype, buffer=buffer, name=name, **kwargs),
                  shape, dtype, buffer)


def _like(fn):
    def like(a, dtype=None, *, buffer=None, name="", **kwargs):
        buf = buffer if buffer is not None else (a.buffer if isinstance(a, NkiTensor) else sbuf)
        dt = dtype if dtype is not None else a.dtype
        return _alloc(lambda: fn(a, dtype=dtype, buffer=buf, name=name, **kwargs), a.shape, dt, buf)
    like.__name__ = like.__qualname__ = fn.__name__
    like.__doc__ = f"``nl.{fn.__name__}(a, dtype=None, *, buffer=None, name='')``: {fn.__doc__ or ''}"
    return like


empty_like, zeros_like = _like(_creation.empty_like), _like(_creation.zeros_like)
ones_like, full_like = _like(_creation.ones_like), None
del full_like


# ---- loop_reduce ---------------------------------------------------------------------------------
_TARGET = re.compile(r"^\s*([A-Za-z_]\w*)\s*(?:\[[^=]*\])?\s*=(?!=)")


def _assigned_value(frame):
    """The value the caller's statement ``name = nl.loop_reduce(...)`` (or ``name[...] = ...``)
    assigns over: ``name`` in the caller's locals, or None."""
    line = linecache.getline(frame.f_code.co_filename, frame.f_lineno)
    m = _TARGET.match(line)
    return frame.f_locals.get(m.group(1)) if m else None


def loop_reduce(x, op, loop_indices, *, dtype=None, mask=None, **kwargs):
    """``b = nl.loop_reduce(x, op, loop_indices, *, dtype=None, mask=None)``: ``b = op(b, x)``
    where ``b`` is the tile the statement assigns to (the docs: "the destination tile is also the
    rhs input to op", ``b = nisa.tensor_tensor(data1=b, data2=x, op=op)``). One Vector engine
    tensor_tensor into a new SBUF tile (``dtype`` or x's dtype).
    Decision: ``b`` is found as the name the calling statement assigns (``b = ...`` /
    ``b[...] = ...``, read from the kernel's source line); when there is none (or it is not a
    tile) the reduction starts from ``x`` (a copy of x), which is ``op(identity, x)``.
    ``loop_indices`` only tells the compiler which loops reduce; it is not used."""
    if kwargs:
        raise TypeError(f"nl.loop_reduce() got an unexpected keyword argument {next(iter(kwargs))!r}")
    prev = _assigned_value(sys._getframe(1))
    out_dtype = dtype if dtype is not None else x.dtype
    with masked(mask):
        if isinstance(prev, NkiTensor) and tuple(prev.shape) == tuple(x.shape):
            dst = _creation.ndarray(x.shape, out_dtype, buffer=sbuf)
            _nisa.tensor_tensor(dst, prev, x, _beta1_isa._tok(op))
            return dst
        return _tile.copy(x, dtype=out_dtype)


# ---- what Beta 1 documents but nkisim does not run ------------------------------------------------
_MISSING = {
    "atomic_rmw": "nisa.dma_compute(dst, (value, dst), nl.add) on the indexed rows",
    "all_reduce": "nki.collectives (all_reduce over ranks)",
    "gemm_grid": None, "gemm_stationary_grid": None,
    "finfo": "numpy.finfo / ml_dtypes.finfo of the dtype",
}


def __getattr__(name):
    if name in _MISSING:
        alt = _MISSING[name]
        raise UnsupportedError(f"nl.{name}", "is a Beta 1 (neuronxcc.nki.language) function nkisim does not "
                                             "simulate" + (f"; in Beta 2 use {alt}" if alt else ""), where="?")
    raise AttributeError(f"module 'neuronxcc.nki.language' has no attribute {name!r}")


program_id, num_programs, program_ndim = _rt.program_id, _rt.num_programs, _rt.program_ndim
spmd_dim, nc = _rt.spmd_dim, _rt.nc

__all__ = sorted(set(TOKENS) | {
    "Beta1Op", "load", "store", "load_transpose2d", "matmul", "transpose", "softmax", "rms_norm", "where",
    "gather_flattened", "dropout", "device_print", "broadcast_to", "expand_dims", "ds", "rand",
    "random_seed", "no_reorder", "fp32", "bfp16", "shared_constant", "shared_identity_matrix",
    "static_cast", "ndarray", "zeros", "ones", "full", "empty_like", "zeros_like", "ones_like",
    "loop_reduce", "program_id", "num_programs", "program_ndim", "spmd_dim", "nc", "arange", "mgrid",
    "par_dim", "masked"})
