"""Transitional: names a read or write made by an op not yet run by ``isa.dispatch``.

Inside a dispatched instruction ``memory.hooks.accessor`` names op and operand from ``core.ins``
and never comes here. An op that still runs outside the dispatcher has no ``core.ins``; for it,
and only when an error is being raised, this guesses from the call stack: the outermost nkisim
API frame (``nisa.<fn>``/``nl.<fn>``) and the local name the view has there. Registered as
``memory.hooks.unnamed`` by ``checks/__init__``. Delete this module (and its registration) once
every op is an ``@instruction`` or ``api_function``: the tests of uninitialised reads, races and
read-only arguments then name any op still outside the dispatcher. Imports nothing from nkisim.
"""
from __future__ import annotations

import os
import sys

_PKG = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_PREFIX = {"isa": "nisa", "language": "nl"}


def guess(t=None, kind: str = "r") -> tuple[str, str] | None:
    """(``nisa.<op>``/``nl.<fn>``, operand name) of the outermost nkisim API frame on the stack,
    None when there is none. When the same view is several operands, a read names an input and a
    write names a ``dst``."""
    frame = sys._getframe(1)
    found = None
    while frame is not None:
        path = os.path.abspath(frame.f_code.co_filename)
        if not path.startswith(_PKG):
            break
        parts = os.path.relpath(path, _PKG).split(os.sep)
        part = parts[0]
        if part in _PREFIX and parts[-1] != "__init__.py":
            found = (frame, _PREFIX[part])
        frame = frame.f_back
    if found is None:
        return None
    frame, prefix = found
    names = []
    if t is not None:
        for name, value in frame.f_locals.items():
            if value is t or getattr(value, "alloc", None) is getattr(t, "alloc", 0) \
                    and getattr(value, "offset", None) == t.offset and value.shape == t.shape:
                names.append(name)
    outs = [n for n in names if n.startswith("dst")]
    ins = [n for n in names if not n.startswith("dst")]
    pick = (outs or ins) if kind == "w" else (ins or outs)
    return f"{prefix}.{frame.f_code.co_name}", pick[0] if pick else "operand"


__all__ = ["guess"]
