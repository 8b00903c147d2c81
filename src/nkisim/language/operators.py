"""NkiTensor's Python operators (``a + b``, ``a < 2``, ``-a``, ``a += b``, ...) are the nl tile
functions (``tile.operator``, ``tile.inplace``): this module registers them with
``memory.hooks`` when ``nkisim.language`` is imported, so memory never imports the language
layer. Imports memory.hooks and language.tile.
"""
from __future__ import annotations

from ..memory import hooks as _hooks
from . import tile as _tile

_hooks.register(operator=_tile.operator, inplace=_tile.inplace)

__all__: list = []
