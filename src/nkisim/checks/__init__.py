"""Hardware rules: shared checks (rules), capacity, races and uninitialised reads. No torch.

Importing this package registers the race watcher and the uninitialised-read check and mark with
``memory.hooks`` (memory reaches them only through the hooks, never by importing checks).
"""
from ..memory import hooks as _hooks
from . import races as _races, uninit as _uninit

_hooks.register(watch_access=_races.watch_access, check_read=_uninit.check_read,
                mark_written=_uninit.mark_written)
