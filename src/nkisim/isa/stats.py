"""Statistics: ``bn_stats`` (per-partition count/mean/M2 of even and odd elements) and ``bn_aggr``
(combine (count, mean, M2) triples into mean and population variance), both on VectorE.

Source: aws-neuron-sdk nki/api/nki/isa/__init__.py (bn_stats, bn_aggr). Imports memory, checks,
dispatch (each op is an ``@instruction`` spec: static rules, compute).
"""
from __future__ import annotations

import numpy as np

from ..checks import rules
from ..errors import ShapeError
from ..memory.access import read_f32, write
from .dispatch import Passed, instruction
from .enums import engine as _engine
from .operands import pf

F32 = np.float32


def _tiles(opn, t, **tiles):
    """``rules.tiles``, and every operand has the first one's partition count."""
    rules.tiles(opn, t, **tiles)
    first = next(iter(tiles))
    for nm, x in tiles.items():
        if x.shape[0] != tiles[first].shape[0]:
            raise ShapeError(opn, f"{nm} partition dim {x.shape[0]} does not match {first} partition "
                                  f"dim {tiles[first].shape[0]}")


def _group(v):
    """(count, mean, variance * count) of each row of ``v`` in fp32; a row of 0 elements gives 0s."""
    n = v.shape[1]
    if n == 0:
        z = np.zeros(v.shape[0], F32)
        return z, z, z
    mean = np.add.reduce(v, axis=1, dtype=F32) / F32(n)
    d = v - mean[:, None]
    return np.full(v.shape[0], n, F32), mean, np.add.reduce(d * d, axis=1, dtype=F32)


def _bn_stats_rules(ins, dst, data, name):
    """bn_stats's rules (see its docstring)."""
    opn, t = ins.op, ins.target
    _tiles(opn, t, dst=dst, data=data)
    rules.at_most(opn, "data elements per partition", data.free_size, t.bn_stats_fmax, t)
    if dst.free_size != 6:
        raise ShapeError(opn, f"dst has {dst.free_size} elements per partition, must have 6")
    return Passed(_engine.vector)


def _bn_stats_compute(ins, dst, data, name):
    x = pf(read_f32(data))
    write(dst, np.stack(_group(x[:, 0::2]) + _group(x[:, 1::2]), axis=1))


@instruction(reads=("data",), writes=("dst",), rules=_bn_stats_rules, compute=_bn_stats_compute)
def bn_stats(dst, data, name=None):
    """dst[p] = [n_even, mean_even, var_even * n_even, n_odd, mean_odd, var_odd * n_odd].

    "even"/"odd" are the elements at even/odd positions of data[p]'s flattened free dims
    (Decision: position, not value; the docs say "the even elements"). Variances are population
    variances, so var * n is the sum of squared deviations (M2), computed in fp32 as two passes
    (mean, then squared deviations). Decision: a group with no elements (one-element rows have no
    odd element) gives count 0, mean 0, M2 0.
    Shapes: data (P, F...) with P <= pmax and at most ``bn_stats_fmax`` (512) elements per
    partition; dst (P, 6 elements). Dtypes: any; fp32 math, rounded once into dst.dtype.
    Buffers: SBUF or PSUM. Engine: Vector.
    Raises: ShapeError, MemorySpaceError.
    Source: aws-neuron-sdk nki/api/nki/isa/__init__.py (bn_stats).
    """


def _bn_aggr_rules(ins, dst, data, name):
    """bn_aggr's rules (see its docstring)."""
    opn, t = ins.op, ins.target
    _tiles(opn, t, dst=dst, data=data)
    if data.free_size % 3 or data.free_size == 0:
        raise ShapeError(opn, f"data has {data.free_size} elements per partition, must be a positive "
                              f"multiple of 3 (count, mean, variance*count)")
    if dst.free_size != 2:
        raise ShapeError(opn, f"dst has {dst.free_size} elements per partition, must have 2")
    return Passed(_engine.vector)


def _bn_aggr_compute(ins, dst, data, name):
    x = pf(read_f32(data)).reshape(data.shape[0], -1, 3)
    n, m, m2 = x[:, :, 0], x[:, :, 1], x[:, :, 2]
    total = np.add.reduce(n, axis=1, dtype=F32)
    safe = np.where(total == 0, F32(1), total)
    mean = np.add.reduce(n * m, axis=1, dtype=F32) / safe
    dev = m - mean[:, None]
    var = (np.add.reduce(m2, axis=1, dtype=F32) + np.add.reduce(n * dev * dev, axis=1, dtype=F32)) / safe
    empty = total == 0
    write(dst, np.stack((np.where(empty, F32(0), mean), np.where(empty, F32(0), var)), axis=1))


@instruction(reads=("data",), writes=("dst",), rules=_bn_aggr_rules, compute=_bn_aggr_compute)
def bn_aggr(dst, data, name=None):
    """dst[p] = [mean, var] of the k (count, mean, M2) triples in data[p] (population variance).

    N = sum n_i; mean = sum(n_i * mean_i) / N; var = (sum M2_i + sum n_i * (mean_i - mean)^2) / N,
    in fp32. Decision: a partition whose counts sum to 0 gives mean 0, var 0.
    Shapes: data (P, 3k elements), k >= 1, P <= pmax; dst (P, 2 elements). Dtypes: any; fp32 math,
    rounded once into dst.dtype. Buffers: SBUF or PSUM. Engine: Vector.
    Raises: ShapeError, MemorySpaceError.
    Source: aws-neuron-sdk nki/api/nki/isa/__init__.py (bn_aggr).
    """


__all__ = ["bn_stats", "bn_aggr"]
