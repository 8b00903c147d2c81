"""The ``nki.language.dtypes`` face (also aliased ``nki.dtype`` by nki-library's harness): every NKI
dtype that ``nki.language`` exports, nothing else."""
import numpy as _np

import nkisim.language as _nl

__all__ = sorted(n for n in _nl.__all__ if isinstance(getattr(_nl, n), _np.dtype))
globals().update({n: getattr(_nl, n) for n in __all__})
