"""``nkisim run`` / ``nkisim profile``: every option and the script are checked before the script
starts (usage and one ``nkisim <command>: error: ...`` line, exit 2, argparse's convention); a rule
that is always fatal says so under ``--findings warn``."""
import json
import os
import subprocess
import sys
import textwrap

import pytest

from nkisim import cli
from nkisim.cli import main

# The script leaves a file behind when it runs at all: a usage error must stop it before it starts
SCRIPT = textwrap.dedent('''\
    import pathlib, sys
    pathlib.Path(sys.argv[1]).write_text("ran")
''')

OOB = textwrap.dedent('''\
    import numpy as np
    import nkisim.nki as nki
    import nkisim.nki.language as nl
    import nkisim.nki.isa as nisa

    @nki.jit
    def oob(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        t = nl.ndarray((128, 512), dtype=a.dtype, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=t, data1=t, data2=t[:, 0:256], op=nl.add)
        nisa.dma_copy(dst=t, src=a[0:128, 0:600])
        nisa.dma_copy(dst=out, src=t)
        return out

    print("returned", oob(np.ones((128, 512), np.float32)).shape)
''')


@pytest.fixture
def script(tmp_path):
    path = tmp_path / "marks.py"
    path.write_text(SCRIPT)
    return path


def _usage_error(capsys, argv) -> str:
    """Run ``nkisim *argv``; expect exit 2 with argparse's usage and one error line; return it."""
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[0].startswith(f"usage: nkisim {argv[0]} ")
    assert "Traceback" not in "\n".join(err)
    return err[-1]


@pytest.mark.parametrize("command", ["run", "profile"])
def test_a_bad_target_is_refused_before_the_script_runs(command, script, tmp_path, capsys):
    marker = tmp_path / "ran.txt"
    line = _usage_error(capsys, [command, "--target", "trn9", str(script), str(marker)])
    assert line == (f"nkisim {command}: error: argument --target: unknown target 'trn9'; expected one of "
                    f"gen2, gen3, gen4, inf2, trn1, trn2, trn3")
    assert not marker.exists()


def test_a_bad_findings_mode_is_refused(script, tmp_path, capsys):
    line = _usage_error(capsys, ["run", "--findings", "some", str(script), str(tmp_path / "ran.txt")])
    assert line == "nkisim run: error: argument --findings: invalid choice: 'some' (choose from 'first', 'warn', 'all')"


@pytest.mark.parametrize("var, value, message", [
    ("NKISIM_FINDINGS", "bogus", "NKISIM_FINDINGS: expected first, all or warn, got 'bogus'"),
    ("NEURON_PLATFORM_TARGET_OVERRIDE", "trn9", "NEURON_PLATFORM_TARGET_OVERRIDE: unknown target 'trn9'; "
                                                "expected one of gen2, gen3, gen4, inf2, trn1, trn2, trn3"),
    ("NKISIM_STRICT_UNINIT", "maybe", "NKISIM_STRICT_UNINIT: expected 1/0, true/false, yes/no or on/off (any case), "
                                      "got 'maybe'"),
])
def test_a_bad_setting_in_the_environment_is_refused_up_front(var, value, message, script, tmp_path, capsys,
                                                                monkeypatch):
    monkeypatch.setenv(var, value)
    marker = tmp_path / "ran.txt"
    assert _usage_error(capsys, ["run", str(script), str(marker)]) == f"nkisim run: error: {message}"
    assert _usage_error(capsys, ["profile", str(script), str(marker)]) == f"nkisim profile: error: {message}"
    assert not marker.exists()


def test_an_option_overrides_a_bad_environment_value(script, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("NKISIM_FINDINGS", "bogus")
    marker = tmp_path / "ran.txt"
    assert main(["run", "--findings", "warn", str(script), str(marker)]) == 0
    assert marker.read_text() == "ran"


@pytest.mark.parametrize("command", ["run", "profile"])
def test_a_missing_script_or_a_directory_is_one_line_and_exit_2(command, tmp_path, capsys):
    missing = tmp_path / "nothere.py"
    assert _usage_error(capsys, [command, str(missing)]) == \
        f"nkisim {command}: error: script '{missing}': no such file"
    assert _usage_error(capsys, [command, str(tmp_path)]) == \
        f"nkisim {command}: error: script '{tmp_path}' is a directory, not a Python script"


def test_an_unreadable_script_is_one_line_and_exit_2(script, capsys, monkeypatch):
    def refuse(path, *args, **kwargs):
        raise PermissionError(13, "Permission denied", str(path))
    monkeypatch.setattr(cli, "open", refuse, raising=False)     # as root, chmod 000 is still readable
    assert _usage_error(capsys, ["run", str(script)]) == \
        f"nkisim run: error: script '{script}' cannot be read: Permission denied"


def test_the_runner_itself_refuses_a_missing_script(tmp_path, capsys):
    """``run_script`` / ``profile_script`` called from Python: exit status 2 and the one line."""
    missing = str(tmp_path / "nothere.py")
    assert cli.run_script(missing) == 2
    assert capsys.readouterr().err == f"nkisim run: error: script '{missing}': no such file\n"
    assert cli.profile_script(missing, trace_dir=str(tmp_path)) == 2
    assert capsys.readouterr().err == f"nkisim profile: error: script '{missing}': no such file\n"


def test_bad_output_paths_are_refused_up_front(script, tmp_path, capsys):
    marker = tmp_path / "ran.txt"
    assert _usage_error(capsys, ["run", "--json", str(tmp_path), str(script), str(marker)]) == \
        f"nkisim run: error: --json '{tmp_path}' is a directory; give a file name"
    nowhere = tmp_path / "no" / "f.json"
    assert _usage_error(capsys, ["run", "--json", str(nowhere), str(script), str(marker)]) == \
        f"nkisim run: error: --json '{nowhere}': directory '{nowhere.parent}' does not exist"
    under_a_file = script / "x.json"                              # its "directory" is a file
    assert _usage_error(capsys, ["run", "--json", str(under_a_file), str(script), str(marker)]) == \
        f"nkisim run: error: --json '{under_a_file}': '{script}' is a file, not a directory"
    deeper = script / "sub" / "x.json"
    assert _usage_error(capsys, ["run", "--json", str(deeper), str(script), str(marker)]) == \
        f"nkisim run: error: --json '{deeper}': '{script}' is a file, not a directory"
    blocked = script / "traces"                                   # under a file
    assert _usage_error(capsys, ["profile", "--trace-dir", str(blocked), str(script), str(marker)]) == \
        f"nkisim profile: error: --trace-dir '{blocked}': '{script}' is a file, not a directory"
    assert not marker.exists()


def test_python_dash_m_missing_script_has_no_traceback(tmp_path):
    env = dict(os.environ)
    src = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src")
    env["PYTHONPATH"] = src + os.pathsep + env.get("PYTHONPATH", "")
    missing = tmp_path / "nothere.py"
    got = subprocess.run([sys.executable, "-m", "nkisim", "run", str(missing)], capture_output=True, text=True,
                         env=env, timeout=120)
    assert got.returncode == 2 and got.stdout == ""
    assert got.stderr.splitlines()[-1] == f"nkisim run: error: script '{missing}': no such file"
    assert "Traceback" not in got.stderr


# ---- --findings warn and a rule that is always fatal ------------------------------------------

def test_warn_says_plainly_that_an_out_of_bounds_slice_is_always_fatal(tmp_path, capsys):
    path = tmp_path / "oob.py"
    path.write_text(OOB)
    out = tmp_path / "f.json"
    assert main(["run", "--findings", "warn", "--json", str(out), str(path)]) == 1
    err = capsys.readouterr().err.splitlines()
    assert err[0] == "nkisim: 2 finding(s) in kernel oob; the kernel stopped at the BoundsError, which is always fatal"
    assert err[-1] == ("nkisim run: BoundsError: tensor indexing: slice 0:600 on dim 1 of tensor 'argument 0' "
                       "(128, 512) is outside 0:512; always fatal, even with findings=\"warn\": an access "
                       "outside a tensor, or a view that does not fit it, has no elements to go on with, so "
                       "the kernel stopped here (oob.py:11)")
    doc = json.loads(out.read_text())
    assert [(f["rule"], f["line"], f["fatal"]) for f in doc["findings"]] == [
        ("ShapeError", 10, False), ("BoundsError", 11, True)]
    jsonschema = pytest.importorskip("jsonschema")
    from nkisim import findings
    jsonschema.validate(doc, findings.schema())


def test_help_says_which_rules_are_always_fatal(capsys):
    with pytest.raises(SystemExit):
        main(["run", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert ("a rule broken outside any instruction (indexing a tensor, allocating one, a loop over its limit, "
            "the launch) is always fatal, in every mode") in text


def test_demo_refuses_an_unknown_example_before_running_any(capsys):
    from nkisim import examples
    line = _usage_error(capsys, ["demo", "--small", "--only", "tensor_add,nope"])
    assert line.startswith("nkisim demo: error: --only: unknown example(s) nope; expected some of tensor_add, ")
    assert all(n in line for n in examples.NAMES)


@pytest.mark.parametrize("command", ["run", "profile"])
def test_no_script_names_only_the_script_as_required(command, capsys):
    """The script's own arguments are optional: only ``script`` is reported missing."""
    assert _usage_error(capsys, [command]) == \
        f"nkisim {command}: error: the following arguments are required: script"


@pytest.mark.parametrize("argv", [["run", "--bogus"], ["profile", "--bogus"], ["demo", "--bogus"],
                                  ["ops", "--bogus"]])
def test_an_unknown_option_is_reported_with_the_subcommand_usage(argv, script, tmp_path, capsys):
    marker = tmp_path / "ran.txt"
    tail = [str(script), str(marker)] if argv[0] in ("run", "profile") else []
    assert _usage_error(capsys, argv + tail) == f"nkisim {argv[0]}: error: unrecognized arguments: --bogus"
    assert not marker.exists()


def test_options_after_the_script_still_go_to_the_script(script, tmp_path, capsys):
    marker = tmp_path / "ran.txt"
    assert main(["run", str(script), str(marker), "--bogus"]) == 0
    assert marker.read_text() == "ran"
