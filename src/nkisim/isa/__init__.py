"""``nki.isa``: one module per op family; every op runs resolve -> check -> fp32 compute -> round
once -> write -> trace. Never imports torch."""
from .activation import *  # noqa: F401,F403
from .copy import *  # noqa: F401,F403
from .dma import *  # noqa: F401,F403
from .elementwise import *  # noqa: F401,F403
from .enums import *  # noqa: F401,F403
from .matmul import *  # noqa: F401,F403
from .multicore import *  # noqa: F401,F403
from .reduce import *  # noqa: F401,F403
from .scan import *  # noqa: F401,F403
from .search import *  # noqa: F401,F403
from .select import *  # noqa: F401,F403
from .stats import *  # noqa: F401,F403
from .transpose import *  # noqa: F401,F403
from .version import *  # noqa: F401,F403
from ..errors import NkiError as NkiValidationError  # noqa: F401
import sys as _sys

_FAMILIES = ("activation", "copy", "dma", "elementwise", "enums", "matmul", "multicore", "reduce", "scan",
             "search", "select", "stats", "transpose", "version")
__all__ = sorted({n for f in _FAMILIES for n in _sys.modules[f"{__name__}.{f}"].__all__}
                 | {"NkiValidationError"})
