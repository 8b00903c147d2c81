"""Tile-level ``nl`` functions that allocate and return new tiles (nl.load, nl.add, nl.matmul, ...).

(being written) ``call(name, ...)`` dispatches an operator token's tile function.
"""
from __future__ import annotations

from ..errors import UnsupportedError


def call(name, *args, **kwargs):
    fn = globals().get(f"tile_{name}") or _FUNCS.get(name)
    if fn is None:
        raise UnsupportedError(f"nl.{name}", "this tile-level function is not implemented yet")
    return fn(*args, **kwargs)


_FUNCS: dict = {}
__all__: list = []
