"""``nkisim profile SCRIPT.py [args]``, run in-process with the conftest's fake estimate."""
import json
import os
import sys
import textwrap

import pytest

from nkisim.cli import main

SCRIPT = textwrap.dedent('''
    import sys
    import numpy as np
    import nkisim.nki as nki
    import nkisim.nki.language as nl

    @nki.jit
    def double(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        x = nl.load(a)
        nl.store(out, x + x)
        return out

    a = np.ones((128, 64), dtype=np.float32)
    r = double(a)
    r = double(r)
    print("result", r[0, 0], "args", sys.argv[1:])
    if "--fail" in sys.argv:
        raise RuntimeError("script failed")
    if "--exit" in sys.argv:
        sys.exit(3)
''')


@pytest.fixture
def script(tmp_path):
    path = tmp_path / "myscript.py"
    path.write_text(SCRIPT)
    return path


def test_profiles_every_launch(fake_schedule, script, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("NKI_SIMULATOR", "0")            # the CLI turns the simulator on
    argv, path = sys.argv[:], sys.path[:]
    out_dir = tmp_path / "traces"
    assert main(["profile", "--trace-dir", str(out_dir), "--target", "trn2", str(script), "x", "--y"]) == 0
    out = capsys.readouterr().out
    assert "result 4.0 args ['x', '--y']" in out
    assert out.count("double: estimated 0.300 us on trn2 (LNC1), 3 instructions") == 2
    assert "small_dma" not in out and "256 B contiguous per partition" in out      # the warning text
    names = sorted(os.listdir(out_dir))
    assert names == ["myscript.1.double.json", "myscript.2.double.json"]
    doc = json.loads((out_dir / names[0]).read_text())
    assert sum(e["ph"] == "X" for e in doc["traceEvents"]) == 3
    assert "nkisim profile: 2 kernel launch(es) profiled" in out
    assert os.environ["NKI_SIMULATOR"] == "0" and sys.argv == argv and sys.path == path


def test_plot_and_default_trace_dir(fake_schedule, script, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["profile", "--plot", str(script)]) == 0
    with open(tmp_path / "myscript.1.double.png", "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"
    assert (tmp_path / "myscript.2.double.json").exists()


def test_script_errors_and_exit_status(fake_schedule, script, tmp_path, capsys):
    assert main(["profile", "--trace-dir", str(tmp_path), str(script), "--fail"]) == 1
    assert "RuntimeError: script failed" in capsys.readouterr().err
    assert main(["profile", "--trace-dir", str(tmp_path), str(script), "--exit"]) == 3


def test_no_hook_after_the_run(fake_schedule, script, tmp_path, capsys):
    from nkisim.runtime import launch
    before = launch.LAUNCH_HOOK.get()      # None, or the pytest plugin's timer (--nki-durations)
    main(["profile", "--trace-dir", str(tmp_path), str(script)])
    assert launch.LAUNCH_HOOK.get() is before
