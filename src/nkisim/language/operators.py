"""NkiTensor's Python operators (``a + b``, ``a < 2``, ``-a``, ``a += b``, ...) are the nl tile
functions (``tile.operator``, ``tile.inplace``): this module registers them with
``memory.hooks`` when ``nkisim.language`` is imported, so memory never imports the language
layer. Imports memory.hooks, language.tile and language.assign_target (and language.beta1 when
a Beta-1 tensor method is called).
"""
from __future__ import annotations

import numpy as _np

from .. import state as _state
from ..memory import hooks as _hooks
from . import assign_target as _targets, tile as _tile
from .assign_target import same_view as _same_view


def _operator(name, *operands):
    """``a + b`` etc.: inside a Beta-1 SPMD program (``runtime.beta1``), the Beta-1 tile function
    (partition broadcasting, tiles of different rank aligned on the partition dim); else Beta 2's."""
    core = _state.current.get()
    if core is not None and core.extras.get("beta1_program") is not None:
        from . import beta1
        if all(_tile._is_tile(v) or isinstance(v, (bool, int, float, _np.number, _np.bool_)) for v in operands):
            return beta1.TOKENS[name](*operands)
    return _tile.operator(name, *operands)


def _inplace(name, x, y):
    """``x += y`` etc.: in a Beta-1 SPMD program ``beta1.inplace`` (PSUM accumulation groups)."""
    if type(y) is _targets.Summed:     # ``t += <Beta-1 matmul>`` already accumulated into t
        if name != "add" or not _same_view(x, y.view):
            raise RuntimeError(f"nkisim internal error: an accumulated Beta-1 result met {name} of another tile")
        return x
    core = _state.current.get()
    if core is not None and core.extras.get("beta1_program") is not None:
        from . import beta1
        return beta1.inplace(name, x, y)
    return _tile.inplace(name, x, y)


def _tensor_method(name, t, *args):
    from . import beta1
    return beta1.tensor_method(name, t, *args)


_hooks.register(operator=_operator, inplace=_inplace, tensor_method=_tensor_method)

__all__: list = []
