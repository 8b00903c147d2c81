"""Which public op and operand a read or write belongs to, found from the call stack (only when an
error is being raised, so it costs nothing on the normal path)."""
from __future__ import annotations

import os
import sys

_PKG = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_PREFIX = {"isa": "nisa", "language": "nl"}


def current_op(tensor=None, depth: int = 2, kind: str = "r") -> tuple[str, str]:
    """(``nisa.<op>``, operand name) of the outermost nkisim API frame on the stack. When the same
    tensor is passed as several operands, a read names an input and a write names ``dst``.
    Inside an instruction run by ``isa.dispatch`` the running instruction names both."""
    from .. import state
    core = state.current.get()
    ins = core.ins if core is not None else None
    if ins is not None:
        return ins.op, ins.role_of(tensor, kind) if tensor is not None else "operand"
    frame = sys._getframe(depth)
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
        return "nki", "operand"
    frame, prefix = found
    names = []
    if tensor is not None:
        for name, value in frame.f_locals.items():
            if value is tensor or getattr(value, "alloc", None) is getattr(tensor, "alloc", 0) \
                    and getattr(value, "offset", None) == tensor.offset and value.shape == tensor.shape:
                names.append(name)
    outs = [n for n in names if n.startswith("dst")]
    ins = [n for n in names if not n.startswith("dst")]
    pick = (outs or ins) if kind == "w" else (ins or outs)
    return f"{prefix}.{frame.f_code.co_name}", pick[0] if pick else "operand"


__all__ = ["current_op"]
