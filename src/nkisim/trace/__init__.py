"""Instruction events. ``emit`` returns after one test when nobody listens (the default)."""
from __future__ import annotations

listeners: list = []


def emit(instruction: str, **info) -> None:
    """Send one instruction event ``(instruction, info)`` to every listener."""
    if not listeners:
        return
    for fn in listeners:
        fn(instruction, info)


__all__ = ["emit", "listeners"]
