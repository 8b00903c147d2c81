"""Tensor creation: ``ndarray``, ``zeros``, ``ones``, ``full``, ``*_like``, ``shared_constant``,
``shared_identity_matrix``.

Allocation is not an instruction: its errors (shape, dtype) raise at once, also under
``findings="all"``. Filling a tensor is one instruction (``isa.dispatch`` spec, api the nl
function called). Decision (docs silent on how fills lower): an on-chip fill is a Vector engine
``memset``; an HBM fill a ``dma_copy`` (only DMA writes HBM). An unknown keyword raises the
dispatcher's TypeError naming the function, the keyword and the closest parameter.
Source: aws-neuron-sdk nki/api/nki/language/__init__.py (creation functions).
"""
from __future__ import annotations

import inspect
import weakref
from typing import NamedTuple

import numpy as np

from .. import dtypes as _dt
from .. import state
from ..errors import DtypeError, ShapeError, UnsupportedError
from ..isa.dispatch import Passed, _unknown_keywords, instruction
from ..isa.enums import engine as _engine
from ..memory import access
from ..memory.affine import ParDim
from ..memory.blocks import BlockTensor
from ..memory.buffers import ON_CHIP, sbuf, shared_hbm
from ..memory.tensor import NkiTensor


class _Keywords(NamedTuple):
    """What ``dispatch._unknown_keywords`` needs of an nl function: its name and parameters."""
    api: str
    names: tuple


def unknown_keyword(api: str, fn, kw: dict):
    """Raise the dispatcher's TypeError for the first of ``kw`` (keywords ``fn``'s ``**kw``
    caught: ``fn`` takes no others), naming ``api`` and suggesting the closest parameter."""
    names = tuple(n for n, p in inspect.signature(fn).parameters.items() if p.kind is not p.VAR_KEYWORD)
    _unknown_keywords(_Keywords(api, names), kw)


def ndarray(shape, dtype, buffer=sbuf, name: str = "", address=None, **kw) -> NkiTensor:
    """An uninitialised tensor (NaN for floats, 4 for integers) of ``shape`` and ``dtype``.

    On SBUF/PSUM dim 0 is the partition dim (<= 128). ``shape`` holds integers (a float such as
    128.5 raises ShapeError, never truncated); ``buffer`` is a buffer object (``'sbuf'`` raises
    ArgumentError: strings are "no longer supported", nki/migration/index.rst).
    ``address`` ("optional memory address (partition_offset, free_offset)") places an SBUF/PSUM
    tensor by hand, the free offset in bytes: checked against the partitions, the per-partition
    size of the target, PSUM bank starts and other live placed tensors (``access.check_address``,
    ``capacity.CoreMemory``); ``t.address`` gives it back. Every allocation still has its own
    storage in simulation (placed tensors never alias each other's values). Issues no instruction.
    Raises: ShapeError, DtypeError, CapacityError, ArgumentError, TypeError (unknown keyword).
    Source: aws-neuron-sdk nki/api/nki/language/__init__.py (ndarray), nki/migration/index.rst
    ("Improved allocation API"), nki/library/kernel-utils/allocator.rst.
    """
    if kw:
        unknown_keyword("nl.ndarray", ndarray, kw)
    if type(shape) is tuple:        # the common case, without a call: no nl.par_dim in the shape
        for s in shape:
            if type(s) is ParDim:
                break
        else:
            return access.allocate(shape, dtype, buffer, name, op="nl.ndarray", address=address)
    split = _block_split(shape, buffer)
    if split is not None:
        return _block_tensor("nl.ndarray", split, dtype, buffer, name, address)
    return access.allocate(shape, dtype, buffer, name, op="nl.ndarray", address=address)


def _block_split(shape, buffer):
    """(block dims, tile shape) of an SBUF/PSUM ``shape`` with ``nl.par_dim`` after dim 0 (Beta 1),
    else None (``par_dim`` first, or in an HBM shape, is its plain size)."""
    if type(shape) not in (tuple, list) or buffer not in ON_CHIP:
        return None
    for i, s in enumerate(shape):
        if type(s) is ParDim and i > 0:
            return tuple(shape[:i]), tuple(shape[i:])
    return None


def _block_tensor(api, split, dtype, buffer, name, address=None, fill=None) -> BlockTensor:
    """A Beta-1 block tensor ``(B..., par_dim(P), F...)``: each block its own (P, F...) allocation
    (``memory.blocks``), made when first indexed; block 0 is made now, so a bad shape, dtype or
    capacity raises here. ``fill`` (a scalar): every block is made and filled now (one fill
    instruction per block). Raises UnsupportedError for ``address=`` (blocks are placed by the
    compiler), and what ``nl.ndarray`` raises."""
    blocks, tile = split
    if address is not None:
        raise UnsupportedError(api, "address= on a tensor with block dimensions: each block is placed "
                                    "separately; allocate each tile with its own address")
    if any(isinstance(b, (bool, np.bool_)) or not isinstance(b, (int, np.integer)) or b < 1 for b in blocks):
        raise ShapeError(api, f"block dims {blocks} must be positive integers")
    on_chip, _ = _FILL[api] if fill is not None else (None, None)

    def make(label):
        t = access.allocate(tile, dtype, buffer, label, op=api, fill=fill is None)
        if fill is not None:
            on_chip(t, fill)
        return t
    bt = BlockTensor(tuple(int(b) for b in blocks), tuple(int(s) for s in tile), None, buffer, name, make)
    first = bt.block((0,) * len(blocks))
    bt.dtype = first.dtype
    if fill is not None:
        for idx in np.ndindex(*bt.blocks):
            bt.block(tuple(int(i) for i in idx))
    return bt


def _fill_compute(ins, dst, value):
    scalar = np.asarray(value, np.int64 if _dt.is_int(dst.dtype) else np.float32)
    if not access.fill_deferred(dst, scalar):
        access.write(dst, np.broadcast_to(scalar, dst.shape))     # a stride-0 view: no temporary tile


_ON_CHIP, _HBM = Passed(_engine.vector), Passed(_engine.dma)


def _on_chip_rules(ins, dst, value):
    return _ON_CHIP


def _hbm_rules(ins, dst, value):
    return _HBM


def _fill_instructions(api: str):
    """(on-chip, HBM) fill instructions of nl function ``api``: dst[...] = value, rounded once."""
    def stub(dst, value):
        pass
    stub.__name__ = stub.__qualname__ = f"_{api[3:]}_fill"
    stub.__doc__ = (f"dst[...] = value, rounded once into dst.dtype (the instruction {api} issues; "
                    f"memset on the Vector engine on chip, dma_copy into HBM).")
    return (instruction(api=api, op="memset", writes=("dst",), rules=_on_chip_rules,
                        compute=_fill_compute, memo=False)(stub),
            instruction(api=api, op="dma_copy", writes=("dst",), rules=_hbm_rules,
                        compute=_fill_compute, memo=False)(stub))


_FILL = {api: _fill_instructions(api) for api in ("nl.full", "nl.zeros", "nl.ones", "nl.full_like",
                                                  "nl.zeros_like", "nl.ones_like")}


def _full(api, shape, fill_value, dtype, buffer, name) -> NkiTensor:
    split = _block_split(shape, buffer)
    if split is not None:
        return _block_tensor(api, split, dtype, buffer, name, fill=fill_value)
    t = access.allocate(shape, dtype, buffer, name, op=api, fill=False)
    on_chip, hbm = _FILL[api]
    (on_chip if t.on_chip else hbm)(t, fill_value)
    return t


def full(shape, fill_value, dtype, buffer=sbuf, name: str = "", **kw) -> NkiTensor:
    """A tensor filled with ``fill_value`` (rounded once into ``dtype``): one fill instruction
    (see the module docstring). Raises: ShapeError, DtypeError, CapacityError, TypeError."""
    if kw:
        unknown_keyword("nl.full", full, kw)
    return _full("nl.full", shape, fill_value, dtype, buffer, name)


def zeros(shape, dtype, buffer=sbuf, name: str = "", **kw) -> NkiTensor:
    """A tensor of zeros (one fill instruction, as ``full``)."""
    if kw:
        unknown_keyword("nl.zeros", zeros, kw)
    return _full("nl.zeros", shape, 0, dtype, buffer, name)


def zeros_folded(shape, dtype, buffer, name: str = "") -> NkiTensor | None:
    """Beta 1's ``t = nl.zeros(..., buffer=nl.psum)`` whose first use is ``t += <matmul>``: the
    tile ``zeros`` makes (same allocation and checks), its elements set to +0.0 with no
    instruction; its fill is owed (``fold_zeros`` takes it into the first matmul, ``owe_zeros``
    issues it). None (the caller uses ``zeros``) unless it is one plain fp32 PSUM tile."""
    if np.dtype(dtype) != np.float32 or _block_split(shape, buffer) is not None:
        return None
    t = access.allocate(shape, dtype, buffer, name, op="nl.zeros", fill=False)
    if type(t) is not NkiTensor or t.storage is not t.alloc.storage:
        return None
    access.write(t, np.zeros(t.shape, np.float32))
    _owed(state.core("nl.zeros"))[t.alloc] = (t.shape, t.strides)   # (no reference to the tile)
    return t


def _owed(core):
    table = core.extras.get("beta1_owed_zeros")
    if table is None:
        table = core.extras["beta1_owed_zeros"] = weakref.WeakKeyDictionary()
    return table


def fold_zeros(dst: NkiTensor) -> bool:
    """True when ``dst`` (the PSUM destination of a ``+=`` matmul) covers a ``zeros_folded`` tile
    whose fill is still owed: the fill is dropped, the matmul overwrites. A view of such a tile
    that does not cover it issues the fill first (``owe_zeros``) and gives False."""
    core = state.maybe_core()
    table = None if core is None else core.extras.get("beta1_owed_zeros")
    if not table or dst.alloc not in table:
        return False
    if dst.storage is dst.alloc.storage and dst.covers_all():
        del table[dst.alloc]
        return True
    owe_zeros(dst)
    return False


def owe_zeros(t) -> None:
    """Issue the fill instruction ``nl.zeros`` owes ``t``'s tile (``zeros_folded``), if any."""
    core = state.maybe_core()
    table = None if core is None else core.extras.get("beta1_owed_zeros")
    if table and isinstance(t, NkiTensor) and t.alloc in table:
        shape, strides = table.pop(t.alloc)
        _FILL["nl.zeros"][0](NkiTensor(t.alloc, shape, strides, 0), 0)


def ones(shape, dtype, buffer=sbuf, name: str = "", **kw) -> NkiTensor:
    """A tensor of ones (one fill instruction, as ``full``)."""
    if kw:
        unknown_keyword("nl.ones", ones, kw)
    return _full("nl.ones", shape, 1, dtype, buffer, name)


def empty_like(x, dtype=None, buffer=None, name: str = "", **kw) -> NkiTensor:
    """An uninitialised tensor with ``x``'s shape; dtype and buffer default to ``x``'s."""
    if kw:
        unknown_keyword("nl.empty_like", empty_like, kw)
    return ndarray(x.shape, dtype or x.dtype, buffer or x.buffer, name)


def zeros_like(x, dtype=None, buffer=None, name: str = "", **kw) -> NkiTensor:
    """Zeros with ``x``'s shape; dtype and buffer default to ``x``'s."""
    if kw:
        unknown_keyword("nl.zeros_like", zeros_like, kw)
    return _full("nl.zeros_like", x.shape, 0, dtype or x.dtype, buffer or x.buffer, name)


def ones_like(x, dtype=None, buffer=None, name: str = "", **kw) -> NkiTensor:
    """Ones with ``x``'s shape; dtype and buffer default to ``x``'s."""
    if kw:
        unknown_keyword("nl.ones_like", ones_like, kw)
    return _full("nl.ones_like", x.shape, 1, dtype or x.dtype, buffer or x.buffer, name)


def full_like(x, fill_value, dtype=None, buffer=None, name: str = "", **kw) -> NkiTensor:
    """``fill_value`` with ``x``'s shape; dtype and buffer default to ``x``'s."""
    if kw:
        unknown_keyword("nl.full_like", full_like, kw)
    return _full("nl.full_like", x.shape, fill_value, dtype or x.dtype, buffer or x.buffer, name)


def shared_constant(constant, dtype=None, **kw) -> NkiTensor:
    """A ``shared_hbm`` tensor holding a NumPy array (or the ``.npy`` file at a path).

    Issues no instruction: "The constant is embedded in the compiled binary and loaded to HBM at
    model load time". ``dtype`` (0.2.0 and the current docs; default: the array's) converts the
    values once. Raises: DtypeError (not an NKI dtype), TypeError (unknown keyword).
    """
    if kw:
        unknown_keyword("nl.shared_constant", shared_constant, kw)
    arr = np.load(constant) if isinstance(constant, str) else np.asarray(constant)
    dt = _dt.as_dtype(dtype or arr.dtype)
    if dt is None:
        raise DtypeError("nl.shared_constant", f"dtype {dtype or arr.dtype} is not an NKI dtype")
    t = access.allocate(arr.shape or (1,), dt, shared_hbm, "shared_constant", op="nl.shared_constant",
                        fill=False)
    access.write(t, arr.astype(np.float32) if arr.dtype.kind == "f" and dt != arr.dtype else arr)
    return t


def _identity_compute(ins, dst, n):
    access.write(dst, np.eye(n, dtype=np.float32))


def _identity_rules(ins, dst, n):
    return _HBM


@instruction(api="nl.shared_identity_matrix", op="dma_copy", writes=("dst",), rules=_identity_rules,
             compute=_identity_compute, memo=False)
def _identity(dst, n):
    """dst = the n x n identity, rounded once into dst.dtype (the instruction
    nl.shared_identity_matrix issues: a DMA of the binary's shared constant)."""


def shared_identity_matrix(n, dtype=_dt.uint8, dst=None, **kw) -> NkiTensor:
    """An ``n`` x ``n`` identity. Decision: returned in SBUF, as real kernels use it (the moving
    operand of TensorE transposes), though the docs also liken it to shared_constant (HBM); it
    is one dma_copy from that constant into the tile (or into ``dst`` when given).
    Raises: ShapeError (n > pmax), DtypeError, TypeError (unknown keyword).
    """
    if kw:
        unknown_keyword("nl.shared_identity_matrix", shared_identity_matrix, kw)
    n = int(n)
    tgt = state.core("nl.shared_identity_matrix").target
    if n > tgt.pmax:
        raise ShapeError("nl.shared_identity_matrix", f"n {n} exceeds the partition limit {tgt.pmax} on "
                                                      f"{tgt.name}")
    t = dst if dst is not None else access.allocate((n, n), dtype, sbuf, "identity",
                                                   op="nl.shared_identity_matrix", fill=False)
    _identity(t, n)
    return t


__all__ = ["ndarray", "full", "zeros", "ones", "empty_like", "zeros_like", "ones_like", "full_like",
           "shared_constant", "shared_identity_matrix"]
