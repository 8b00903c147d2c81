"""The Beta-1 ``nki.isa`` face (``import neuronxcc.nki.isa as nisa``): value-returning ops with
Beta-1 signatures and enums (``nkisim.language.beta1_isa``); ops Beta 1 never had (e.g.
``tensor_scalar_cumulative``) are the Beta-2 dst-first ones."""
import nkisim.isa as _b2
from nkisim.language import beta1_isa as _b1

from . import constants  # noqa: F401

_BETA2_ONLY = sorted(n for n in _b2.__all__ if n not in _b1.__all__ and not n[0].isupper()
                     and n not in ("as_enum", "matmul_perf_mode", "reduce_cmd"))
globals().update({n: getattr(_b2, n) for n in _BETA2_ONLY})
globals().update({n: getattr(_b1, n) for n in _b1.__all__})
NkiValidationError = _b2.NkiValidationError
__all__ = sorted(set(_BETA2_ONLY) | set(_b1.__all__) | {"NkiValidationError", "constants"})
