"""Memoised rule checks. An op's shape/dtype/buffer/engine rules read only its operands' static
signature (shapes, dtypes, buffers, options) and the target, so a hot op keys a dict on exactly
the values its checks read, runs the checks on the first call with a new key and skips them on
later calls with the same key (a failing call is never remembered). Imports nothing."""
from __future__ import annotations

LIMIT = 4096        # entries per op table; a full table starts over (kernels use a handful)


def remember(table: dict, key, value=True) -> None:
    """Record that ``key`` passed the checks (``value``: what the checks derived, if anything)."""
    if len(table) >= LIMIT:
        table.clear()
    table[key] = value


__all__ = ["remember", "LIMIT"]
