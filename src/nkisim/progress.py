"""Progress bars for long work (the demo's model modes, ``nkisim run`` / ``nkisim profile`` over
many launches, big profiled launches), drawn with tqdm on stderr only when stderr is a terminal:
anywhere else (tests, CI logs, pipes) they print nothing. Decision: tqdm (one small pure-Python
dependency); when it is not installed the bars are silent too.
"""
from __future__ import annotations

import os
import sys


def enabled(stream=None) -> bool:
    """True when progress may be drawn: ``stream`` (default stderr) and stdout are terminals and
    ``NKISIM_PROGRESS`` is not 0."""
    if os.environ.get("NKISIM_PROGRESS", "").strip() == "0":
        return False
    stream = stream if stream is not None else sys.stderr
    try:
        return bool(stream.isatty() and sys.stdout.isatty())
    except (AttributeError, ValueError):
        return False


class _Silent:
    """The bar used when progress is off: every call does nothing."""

    n = 0

    def update(self, n: int = 1) -> None:
        self.n += n

    def set_description(self, desc=None, refresh=True) -> None:
        pass

    def set_postfix_str(self, s="", refresh=True) -> None:
        pass

    def close(self) -> None:
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


def bar(total: int | None = None, desc: str = "", unit: str = "it"):
    """A progress bar (``with bar(total, desc) as b: ... b.update()``): tqdm on a terminal, else
    a silent stand-in. ``total=None`` counts without an end (e.g. kernel launches)."""
    if not enabled():
        return _Silent()
    try:
        from tqdm import tqdm
    except ImportError:
        return _Silent()
    return tqdm(total=total, desc=desc, unit=unit, leave=False, file=sys.stderr, dynamic_ncols=True)


__all__ = ["bar", "enabled"]
