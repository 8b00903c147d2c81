"""Partition <-> free transpose on the Tensor or Vector engine: ``nc_transpose``.

Source: aws-neuron-sdk nki/api/nki/isa/__init__.py (nc_transpose, nc_matmul transpose mode).
Imports memory, checks, dispatch.
"""
from __future__ import annotations

import numpy as np

from .. import dtypes as _dt
from ..checks import rules
from ..errors import DtypeError, ShapeError
from ..memory.access import read_f32, read_raw, write
from ..memory.buffers import psum, sbuf
from .dispatch import Passed, instruction
from .enums import as_enum, engine as _engine

_TENSOR_BUFFERS = ((sbuf, "data"), (psum, "dst"))
_ENGINES = (_engine.tensor, _engine.vector, _engine.unknown)


def _nt_rules(ins, dst, data, engine, name):
    """nc_transpose's rules (see its docstring): the engine that runs it."""
    op, t = ins.op, ins.target
    rules.tensor(op, "dst", dst)
    rules.tensor(op, "data", data)
    eng = as_enum(_engine, engine, op)
    rules.engine_in(op, eng, _ENGINES, t)
    rules.on_chip(op, "data", data)
    rules.on_chip(op, "dst", dst)
    if eng is _engine.unknown:
        eng = _engine.tensor if data.buffer is sbuf and dst.buffer is psum else _engine.vector
    p, f = data.shape[0], data.free_size
    rules.partitions(op, "data", data, t)
    rules.partitions(op, "dst", dst, t)
    if eng is _engine.tensor:
        rules.sbuf_only(op, "data", data)
        rules.psum_only(op, "dst", dst)
        rules.at_most(op, "data free size", f, t.gemm_stationary_fmax, t, note="(tensor engine transpose)")
    else:
        lim = t.vector_transpose_max
        rules.at_most(op, "data partition dim", p, lim, t, note="(vector engine transpose)")
        rules.at_most(op, "data free size", f, lim, t, note="(vector engine transpose)")
    if dst.shape[0] != f or dst.free_size != p:
        raise ShapeError(op, f"dst shape {dst.shape} must have {f} partitions (data elements per "
                             f"partition) and {p} elements per partition (data partitions)")
    if dst.dtype != data.dtype:
        raise DtypeError(op, f"dst dtype {_dt.name(dst.dtype)} must equal data dtype {_dt.name(data.dtype)}")
    return Passed(eng)


def _nt_compute(ins, dst, data, engine, name):
    p, f = data.shape[0], data.free_size
    if ins.engine is _engine.tensor:
        if ins.target.nc_version < 3:
            values = _identity_matmul(read_f32(data).reshape(p, f))
        else:
            values = read_raw(data).reshape(p, f).T
        write(dst, values, matmul=True)
    else:
        write(dst, read_raw(data).reshape(p, f).T)


@instruction(reads=("data",), writes=("dst",), rules=_nt_rules, compute=_nt_compute)
def nc_transpose(dst, data, engine=_engine.unknown, name=None):
    """dst[f, p] = data[p, f], the free dims of ``data`` flattened into f.

    Shapes: data (P, F...), dst with F partitions and P elements per partition.
    TensorE: P <= pmax and F <= gemm_stationary_fmax (128 x 128), data in SBUF, dst in PSUM
    (counts as a matmul write, like nc_matmul(is_transpose=True)). VectorE: P, F <=
    vector_transpose_max (32 x 32), SBUF or PSUM on either side.
    ``engine=unknown``: TensorE when data is in SBUF and dst in PSUM (the only layout it can do),
    otherwise VectorE (Decision: the docs only say "selected from the input shape").
    Dtypes: dst.dtype == data.dtype; the copy is bit-exact (NaN/Inf kept), except TensorE on trn1,
    which is not bit-accurate for NaN/Inf (docs). Decision: trn1 TensorE computes the fp32 matmul
    with an identity, each sum starting from +0: -0.0 becomes +0.0; a NaN in data column f makes
    dst row f all NaN; an Inf at data[k, f] makes dst row f NaN except dst[f, k] (Inf * 0 = NaN).
    Engine: tensor, vector or unknown ("nki.isa.engine.tensor or nki.isa.engine.vector"); others
    raise EngineError; the event names the engine that ran it (unknown resolved as above). Size
    errors name ``data`` and the engine whose limit applies.
    Raises: ShapeError, DtypeError, MemorySpaceError, EngineError.
    Source: aws-neuron-sdk nki/api/nki/isa/__init__.py (nc_transpose).
    """


def _identity_matmul(x: np.ndarray) -> np.ndarray:
    """(x.T @ I) in fp32 with +0-started sums, in closed form: out[m, n] = +0 + x[n, m], NaN when
    another element of column m is non-finite (its product with 0 is NaN) or column m holds a NaN."""
    inf = np.isinf(x)
    poisoned = np.isnan(x).any(axis=0)[:, None] | ((inf.sum(axis=0)[:, None] - inf.T) > 0)
    return np.where(poisoned, np.float32(np.nan), x.T + np.float32(0))


__all__ = ["nc_transpose"]
