"""Progress bars for long work (the demo's model modes, ``nkisim run`` / ``nkisim profile`` over
many launches, big profiled launches), drawn with tqdm on stderr only when stderr is a terminal:
anywhere else (tests, CI logs, pipes) they print nothing. Decision: tqdm (one small pure-Python
dependency); when it is not installed the bars are silent too. Imports nothing from nkisim, so
any layer may use it; nothing here runs per instruction.
"""
from __future__ import annotations

import contextlib
import sys
import threading


def enabled(stream=None) -> bool:
    """True when progress may be drawn: ``stream`` (default stderr) and stdout are terminals."""
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


def bar(total: int | None = None, desc: str = "", unit: str = "it", delay: float = 0.0, **kwargs):
    """A progress bar (``with bar(total, desc) as b: ... b.update()``): tqdm on a terminal, else
    a silent stand-in. ``total=None`` counts without an end (e.g. kernel launches); ``delay``:
    seconds before it first shows (short work shows nothing)."""
    if not enabled():
        return _Silent()
    try:
        from tqdm import tqdm
    except ImportError:
        return _Silent()
    return tqdm(total=total, desc=desc, unit=unit, leave=False, file=sys.stderr, dynamic_ncols=True,
                delay=delay, **kwargs)


def echo(b, text: str, file=None) -> None:
    """Print ``text`` (a line) to ``file`` (default stdout) while bar ``b`` may be drawn: above
    the bar (tqdm.write) on a terminal, a plain flushed print otherwise."""
    if isinstance(b, _Silent):
        print(text, file=file, flush=True)
    else:
        b.write(text, file=file if file is not None else sys.stdout)


@contextlib.contextmanager
def activity(desc: str, delay: float = 1.0, every: float = 0.5):
    """``with activity("nkisim.profile: simulating k") as b:`` a line with the elapsed time, kept
    fresh by a daemon thread every ``every`` seconds while the block runs (``b.set_description``
    names the current phase); shown only on a terminal and only after ``delay`` seconds. Used
    around one long launch, whose instructions are not counted (that would cost every
    instruction a call)."""
    b = bar(None, desc=desc, delay=delay, bar_format="{desc} {elapsed}")
    if isinstance(b, _Silent):
        yield b
        return
    stop = threading.Event()

    def refresh():
        if stop.wait(delay):
            return
        while True:
            b.refresh()
            b.last_print_t = b._time()      # drawn: tqdm's close then clears the line
            if stop.wait(every):
                return

    t = threading.Thread(target=refresh, name="nkisim-progress", daemon=True)
    t.start()
    try:
        yield b
    finally:
        stop.set()
        t.join()
        b.close()


__all__ = ["bar", "activity", "echo", "enabled"]
