"""Progress bars: drawn on a terminal only; silent (no output at all) anywhere else."""
import io

import numpy as np
import pytest

from nkisim import progress
from nkisim.cli import count_launches
import nkisim.nki as nki
import nkisim.nki.language as nl


class _Tty(io.StringIO):
    def isatty(self):
        return True


@nki.jit
def _copy(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    nl.store(out, nl.load(a))
    return out


def test_silent_when_not_a_terminal(capsys):
    with progress.bar(3, desc="work") as b:
        b.update()
    with progress.activity("long", delay=0) as b:
        b.set_description("phase 2")
    assert not progress.enabled()
    assert capsys.readouterr() == ("", "")


def test_drawn_on_a_terminal_and_counts_launches(monkeypatch):
    pytest.importorskip("tqdm")
    err = _Tty()
    monkeypatch.setattr("sys.stderr", err)
    monkeypatch.setattr("sys.stdout", _Tty())
    assert progress.enabled()
    with progress.bar(None, desc="launches", unit=" launches") as b, count_launches(b):
        for _ in range(3):
            nki.simulate(_copy)(np.ones((4, 4), np.float32))
        assert b.n == 3
    assert "launches" in err.getvalue()
    monkeypatch.setattr("sys.stdout", io.StringIO())         # output piped: no bar
    assert not progress.enabled()


def test_no_launch_hook_when_silent():
    from nkisim.runtime import launch
    with progress.bar(None) as b, count_launches(b):
        assert launch.LAUNCH_HOOK.get() is None
