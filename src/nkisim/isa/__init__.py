"""``nki.isa``: one module per op family; every op runs resolve -> check -> fp32 compute -> round
once -> write -> trace. Never imports torch."""
from .activation import *  # noqa: F401,F403
from .copy import *  # noqa: F401,F403
from .dma import *  # noqa: F401,F403
from .elementwise import *  # noqa: F401,F403
from .enums import *  # noqa: F401,F403
from .gather import *  # noqa: F401,F403
from .matmul import *  # noqa: F401,F403
from .multicore import *  # noqa: F401,F403
from .mx import *  # noqa: F401,F403
from .random import *  # noqa: F401,F403
from .reduce import *  # noqa: F401,F403
from .scan import *  # noqa: F401,F403
from .search import *  # noqa: F401,F403
from .select import *  # noqa: F401,F403
from .stats import *  # noqa: F401,F403
from .transpose import *  # noqa: F401,F403
from .version import *  # noqa: F401,F403
from .registers import *  # noqa: F401,F403
from .unsupported import *  # noqa: F401,F403
from ..errors import NkiError as NkiValidationError  # noqa: F401
import sys as _sys

_FAMILIES = ("activation", "copy", "dma", "elementwise", "enums", "gather", "matmul", "multicore", "mx",
             "random", "reduce", "scan", "search", "select", "stats", "transpose", "version", "registers",
             "unsupported")
__all__ = sorted({n for f in _FAMILIES for n in _sys.modules[f"{__name__}.{f}"].__all__}
                 | {"NkiValidationError"})


def _instruction(fn):
    """The public face of one nisa op: with findings="all", a broken rule is recorded and the
    instruction skipped (its dst untouched) instead of stopping the kernel."""
    def op(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except _NkiError as exc:
            core = _state.current.get()
            if core is None or not core.launch.record(exc):
                raise
            return NkiInstruction(f"nisa.{fn.__name__}", kwargs.get("name"))
    _functools.update_wrapper(op, fn)
    return op


import functools as _functools  # noqa: E402
import types as _types  # noqa: E402

from .. import state as _state  # noqa: E402
from ..errors import NkiError as _NkiError  # noqa: E402

for _name in __all__:
    _obj = globals()[_name]
    if isinstance(_obj, _types.FunctionType) and _name not in ("as_enum",) and not hasattr(_obj, "spec"):
        globals()[_name] = _instruction(_obj)
del _name, _obj
