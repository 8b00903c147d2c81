"""The Beta-1 ``nki.language`` face (``import neuronxcc.nki.language as nl``): dtypes, buffers,
loops and tile sizes shared with Beta 2; the Beta-1 functions from ``nkisim.language.beta1``."""
import nkisim.language as _b2
from nkisim.language import beta1 as _b1

_SHARED = ("float32", "float16", "bfloat16", "tfloat32", "float8_e4m3", "float8_e5m2", "int8", "int16", "int32",
           "uint8", "uint16", "uint32", "bool_", "bool", "hbm", "private_hbm", "shared_hbm", "sbuf", "psum",
           "tile_size")
globals().update({n: getattr(_b2, n) for n in _SHARED})
globals().update({n: getattr(_b1, n) for n in _b1.__all__})
__getattr__ = _b1.__getattr__
__all__ = sorted(set(_SHARED) | set(_b1.__all__))
