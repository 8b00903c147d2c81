"""What memory calls without importing the layers above it, and who runs an access.

A registry filled at import: ``checks`` registers the race watcher and the uninitialised-read
check and mark (``checks/__init__``), ``language`` registers NkiTensor's Python operators
(``language/operators.py``). ``accessor`` names the instruction and operand of a read or write
for an error, from the running instruction the dispatcher keeps in ``core.ins``.
Imports state only (never checks, language, isa, runtime or torch).
"""
from __future__ import annotations

from .. import state


def _missing(layer: str):
    def hook(*args, **kwargs):
        raise RuntimeError(f"nkisim.{layer} is not imported, so this memory hook is unset "
                           f"(import nkisim.nki, or nkisim.{layer}, before running a kernel)")
    return hook


def _not_implemented(*args, **kwargs):
    return NotImplemented


# ---- the hooks (module attributes, read at every call; set only by ``register``) -------------

watch_access = _missing("checks")    # (view, kind "r"/"w", accumulation) -> None: race detection
check_read = _missing("checks")      # (view) -> None: raise on never-written elements (strict mode)
mark_written = _missing("checks")    # (view) -> None: mark the view's elements written (strict mode)
operator = _not_implemented          # (name, *operands): ``a + b``, ``-a``, ``a == b`` on NkiTensor
inplace = _not_implemented           # (name, x, y): ``x += y`` and the other in-place operators
tensor_method = _missing("language")  # (name, t, *args): Beta-1 tensor methods (astype, broadcast_to)

_NAMES = ("watch_access", "check_read", "mark_written", "operator", "inplace", "tensor_method")


def register(**hooks) -> None:
    """Set hooks by name (at import of the layer that provides them); unknown names raise."""
    for name, fn in hooks.items():
        if name not in _NAMES:
            raise TypeError(f"memory.hooks: unknown hook {name!r}; expected one of {list(_NAMES)}")
        globals()[name] = fn


def accessor(t=None, kind: str = "r") -> tuple[str, str]:
    """``(op, operand)`` an error of a read (``kind="r"``) or write (``"w"``) of view ``t`` names:
    the running instruction and the parameter ``t`` was passed as (``core.ins.op``,
    ``core.ins.role_of``; a write names a written role first). Outside any instruction (a
    host-side access such as ``tensor.np()`` or a kernel's return): the running nl function
    (``core.api``) or "nki", and "operand". Called only when an error is being raised."""
    core = state.current.get()
    ins = core.ins if core is not None else None
    if ins is not None:
        return ins.op, ins.role_of(t, kind) if t is not None else "operand"
    api = core.api if core is not None else None
    return (api or "nki"), "operand"


__all__ = ["register", "accessor", "watch_access", "check_read", "mark_written", "operator",
           "inplace", "tensor_method"]
