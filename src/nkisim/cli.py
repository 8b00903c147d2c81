"""The ``nkisim`` command: ``nkisim run SCRIPT.py [args]`` runs a script with the simulator on
(``--target``, ``--strict``, ``--races``, ``--findings``, ``--json FILE``); ``nkisim demo`` runs
every example kernel and prints a table; ``nkisim ops`` lists every documented ``nki.isa`` and
``nki.language`` name with its status and generations (``--stubs``, ``--markdown``);
``nkisim profile SCRIPT.py [args]`` runs a script with the simulator on and profiles every kernel
launch it makes (estimated device time: summary printed, Perfetto traces written);
``nkisim --version``. ``python -m nkisim`` is the same command.
"""
from __future__ import annotations

import argparse
import contextlib
import os
import sys

FINDINGS_MODES = ("first", "warn", "all")
FATAL_NOTE = ("a rule broken outside any instruction (indexing a tensor, allocating one, a loop over "
              "its limit, the launch) is always fatal, in every mode")


def version() -> str:
    """The installed nkisim's version (package metadata; "unknown" when it is not installed)."""
    from importlib import metadata
    try:
        return metadata.version("nkisim")
    except metadata.PackageNotFoundError:
        return "unknown"


def _target_arg(value: str) -> str:
    """``--target``: a target name or alias, checked when the command line is read."""
    from .config import normalize_target
    try:
        return normalize_target(value, "--target")
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e).removeprefix("--target: ")) from None


class _Command(argparse.ArgumentParser):
    """A subcommand's parser: an option it does not know is reported with its own usage
    (``nkisim run: error: unrecognized arguments: --bogus``, exit 2), not the top-level one's."""

    def parse_known_args(self, args=None, namespace=None):
        namespace, extras = super().parse_known_args(args, namespace)
        if extras:
            self.error(f"unrecognized arguments: {' '.join(extras)}")
        return namespace, extras


def _script_arguments(p: argparse.ArgumentParser) -> None:
    """``script`` and the optional ``script_args`` after it (everything that follows the script
    goes to it). Decision: ``script_args`` is marked not required, so a missing script is reported
    as "the following arguments are required: script" only (argparse counts REMAINDER in)."""
    p.add_argument("script", help="the Python script to run")
    p.add_argument("script_args", nargs=argparse.REMAINDER,
                   help="arguments passed to the script").required = False


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="nkisim", description="CPU simulator for NKI kernels")
    parser.add_argument("--version", action="version", version=f"nkisim {version()}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Command)
    run = sub.add_parser("run", help="run a Python script with the simulator on (NKI_SIMULATOR=1)")
    run.add_argument("--target", default=None, type=_target_arg,
                     help="trn1 | trn2 | trn3 (default: the environment's)")
    run.add_argument("--strict", action="store_true",
                     help="strict uninitialised reads: reading never-written elements raises")
    run.add_argument("--races", action="store_true",
                     help="race detection, affine_range iterations in a shuffled order")
    run.add_argument("--findings", choices=FINDINGS_MODES, default=None,
                     help="first: stop at the first broken rule; warn: report every one and go on "
                          "past it (the failing instruction is skipped); all: the same, then raise; "
                          + FATAL_NOTE + " (default: the environment's)")
    run.add_argument("--json", default=None, metavar="FILE",
                     help="write the findings as JSON (schema: nkisim/schemas/findings.schema.json)")
    _script_arguments(run)
    demo = sub.add_parser("demo", help="run the example kernels on realistic sizes and check them")
    demo.add_argument("--small", action="store_true", help="small shapes (seconds, for smoke tests)")
    demo.add_argument("--only", default=None, help="comma-separated example names")
    ops = sub.add_parser("ops", help="list the documented nki.isa and nki.language names: status, generations")
    ops.add_argument("--stubs", action="store_true", help="only the names nkisim does not fully simulate")
    ops.add_argument("--markdown", action="store_true", help="print the table as Markdown (the README's)")
    prof = sub.add_parser("profile", help="run a Python script with the simulator on; profile every kernel launch")
    prof.add_argument("--trace-dir", default=None,
                      help="where the traces go (default: the current directory)")
    prof.add_argument("--target", default=None, type=_target_arg,
                      help="trn1 | trn2 | trn3 (default: the environment's)")
    prof.add_argument("--plot", action="store_true", help="also draw each launch's timeline as a PNG")
    _script_arguments(prof)
    parser.commands = {"run": run, "demo": demo, "ops": ops, "profile": prof}
    return parser


def check_script(script: str) -> str | None:
    """Why ``script`` cannot be run (a one-line reason), or None: it must be a readable file.
    Decision: a directory is refused even with a ``__main__.py`` (``nkisim run`` runs a script)."""
    if not os.path.exists(script):
        return f"script {script!r}: no such file"
    if os.path.isdir(script):
        return f"script {script!r} is a directory, not a Python script"
    try:
        with open(script, "rb"):
            pass
    except OSError as e:
        return f"script {script!r} cannot be read: {e.strerror or e}"
    return None


def _nearest_existing(path: str) -> str:
    """``path`` made absolute, or its nearest ancestor that exists."""
    probe = os.path.abspath(path)
    while not os.path.exists(probe):
        probe = os.path.dirname(probe)
    return probe


def _check_output_file(path: str, what: str) -> str | None:
    """Why ``path`` cannot be written as a file (it is a directory, a file stands where one of its
    directories should be, or its directory is missing or not writable)."""
    if os.path.isdir(path):
        return f"{what} {path!r} is a directory; give a file name"
    parent = os.path.dirname(os.path.abspath(path))
    probe = _nearest_existing(parent)
    if not os.path.isdir(probe):
        return f"{what} {path!r}: {probe!r} is a file, not a directory"
    if probe != parent:
        return f"{what} {path!r}: directory {parent!r} does not exist"
    if not os.access(parent, os.W_OK):
        return f"{what} {path!r}: directory {parent!r} is not writable"
    return None


def _check_dir(path: str, what: str) -> str | None:
    """Why ``path`` cannot be the directory outputs go to (it is a file, or a file is in its way)."""
    probe = _nearest_existing(path)
    if not os.path.isdir(probe):
        return f"{what} {path!r}: {probe!r} is a file, not a directory"
    if not os.access(probe, os.W_OK):
        return f"{what} {path!r}: {probe!r} is not writable"
    return None


def _usage_error(args) -> str | None:
    """The first bad option or argument of ``nkisim run`` / ``nkisim profile``, checked before the
    script runs (so a typo costs nothing), as one line; None when all hold. Checked: the script;
    ``--json FILE``; ``--trace-dir``; and the settings the run would launch kernels with (the
    options over the environment's variables, e.g. a bad ``NKISIM_FINDINGS`` or
    ``NEURON_PLATFORM_TARGET_OVERRIDE`` in the environment), by ``config.Settings.from_env``."""
    from .config import Settings
    problem = check_script(args.script)
    if problem is None and getattr(args, "json", None):
        problem = _check_output_file(args.json, "--json")
    if problem is None and getattr(args, "trace_dir", None):
        problem = _check_dir(args.trace_dir, "--trace-dir")
    if problem is None:
        env = _settings_env(args.target, getattr(args, "strict", False), getattr(args, "races", False),
                            getattr(args, "findings", None))
        try:
            Settings.from_env({**os.environ, **env})
        except ValueError as e:
            problem = str(e)
    return problem


def main(argv=None) -> int:
    """The ``nkisim`` command. Decision: every option and argument of ``run`` / ``profile`` is
    checked before the script starts; a bad one prints the command's usage and one line
    ``nkisim <command>: error: <why>`` to stderr and exits 2 (argparse's convention, also for the
    options argparse checks itself: ``--target``, ``--findings``)."""
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command in ("run", "profile"):
        problem = _usage_error(args)
        if problem is not None:
            parser.commands[args.command].error(problem)      # exits 2
    if args.command == "demo" and args.only:
        from .demo import MODEL
        from .examples import NAMES
        unknown = [n for n in args.only.split(",") if n not in NAMES + (MODEL,)]
        if unknown:
            parser.commands["demo"].error(f"--only: unknown example(s) {', '.join(unknown)}; expected some of "
                                          f"{', '.join(NAMES + (MODEL,))}")
    if args.command == "run":
        return run_script(args.script, args.script_args, target=args.target, strict=args.strict,
                          races=args.races, findings=args.findings, json_path=args.json)
    if args.command == "profile":
        return profile_script(args.script, args.script_args, trace_dir=args.trace_dir, target=args.target,
                              plot=args.plot)
    if args.command == "ops":
        from . import ops_table as _ops
        rows = _ops.rows(stubs_only=args.stubs)
        print(_ops.markdown(rows) if args.markdown else _ops.text(rows))
        return 0
    if args.command == "demo":
        from .demo import run
        return run(small=args.small, only=args.only.split(",") if args.only else None)
    return 2


def ops_table(stubs_only: bool = False) -> list:
    """The rows of ``nkisim ops`` (``nkisim.ops_table.rows``)."""
    from . import ops_table as _ops
    return _ops.rows(stubs_only=stubs_only)


@contextlib.contextmanager
def count_launches(b, on_launch=None):
    """Inside the block, every kernel launch (``runtime.launch.LAUNCH_HOOK``; not multi-rank
    launches, not profiled ones) ticks bar ``b`` and calls ``on_launch(go)`` if given, which must
    return ``go()`` (the launch). Nothing is hooked when ``b`` is silent and ``on_launch`` is
    None. Decision: here (the command-line layer), not in ``progress``, which every layer may
    import."""
    from . import progress
    from .runtime import launch as _launch
    if isinstance(b, progress._Silent) and on_launch is None:
        yield
        return

    def hook(func, go, target, lnc):
        b.update()
        return on_launch(go) if on_launch is not None else go()

    token = _launch.LAUNCH_HOOK.set(hook)
    try:
        yield
    finally:
        _launch.LAUNCH_HOOK.reset(token)


def _exit_status(exc: SystemExit) -> int:
    code = exc.code
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)         # sys.exit("message"): Python prints it and exits 1
    return 1


def _execute(script: str, script_args, env: dict, hooks, prog: str) -> tuple[int, BaseException | None]:
    """The one script runner of ``nkisim run`` and ``nkisim profile``: run ``script`` as
    ``__main__`` (``sys.argv`` = ``[script, *script_args]``, its directory first on ``sys.path``)
    with ``env`` set in ``os.environ``, inside the context manager ``hooks``. Returns (exit status,
    the NkiError that ended the script or None). Exit status: the script's (``sys.exit``), 0 when
    it ends normally, 1 when it raised: a kernel error (an NkiError) prints one clear line
    ``<prog>: <ErrorClass>: <message>`` (no internal traceback), anything else its traceback;
    130 after Ctrl-C; 2, before anything runs, when ``script`` is no readable file or ``env`` over
    the environment is no valid setting (one line ``<prog>: error: <why>``; ``main`` checks the
    same first, with the usage). The environment, ``sys.argv`` and ``sys.path`` are restored
    afterwards."""
    import runpy
    import traceback

    from .config import Settings
    from .errors import NkiError

    problem = check_script(script)
    if problem is None:
        try:
            Settings.from_env({**os.environ, **env})
        except ValueError as e:
            problem = str(e)
    if problem is not None:
        print(f"{prog}: error: {problem}", file=sys.stderr)
        return 2, None

    saved_env = {k: os.environ.get(k) for k in env}
    saved_argv, saved_path = sys.argv[:], sys.path[:]
    status, error = 0, None
    os.environ.update(env)
    sys.argv = [script, *script_args]
    sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
    try:
        with hooks:
            runpy.run_path(script, run_name="__main__")
    except SystemExit as exc:
        status = _exit_status(exc)
    except NkiError as exc:
        error, status = exc, 1
        print(f"{prog}: {type(exc).__name__}: {exc}", file=sys.stderr)
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        status = 130
    except Exception:
        traceback.print_exc()
        status = 1
    finally:
        sys.stdout.flush()
        sys.argv[:], sys.path[:] = saved_argv, saved_path
        for k, v in saved_env.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    return status, error


def _settings_env(target=None, strict: bool = False, races: bool = False, findings=None) -> dict:
    """The environment ``nkisim run``'s options stand for (config's variables; an option not given
    leaves the environment's value)."""
    env = {"NKI_SIMULATOR": "1"}
    if target:
        env["NEURON_PLATFORM_TARGET_OVERRIDE"] = target
    if strict:
        env["NKISIM_STRICT_UNINIT"] = "1"
    if races:
        env["NKISIM_DETECT_RACES"] = env["NKISIM_SHUFFLE"] = "1"
    if findings:
        if findings not in FINDINGS_MODES:
            raise ValueError(f"findings must be one of {', '.join(FINDINGS_MODES)}, got {findings!r}")
        env["NKISIM_FINDINGS"] = findings
    return env


def run_script(script: str, script_args=(), *, target=None, strict: bool = False, races: bool = False,
               findings=None, json_path=None) -> int:
    """``nkisim run SCRIPT.py [args]``: run ``script`` as ``__main__`` with ``NKI_SIMULATOR=1``,
    ``target`` (NEURON_PLATFORM_TARGET_OVERRIDE), ``strict`` (NKISIM_STRICT_UNINIT=1), ``races``
    (NKISIM_DETECT_RACES=1 and NKISIM_SHUFFLE=1) and ``findings`` (NKISIM_FINDINGS) set. Every
    kernel launch is counted (a progress counter on a terminal); with ``json_path`` the findings
    are written there as JSON (``nkisim.findings.document``, one record per finding: every finding
    of a "warn"/"all" launch, and each NkiError a launch raised, whether or not the script caught
    it). Returns the script's exit status (1 after a kernel error, printed as one line).
    Decision: the findings of launches the script makes through ``nki.simulate(..., findings=...)``
    are recorded too (they are findings of the run)."""
    from . import findings as _findings, progress
    from .errors import NkiError
    from .runtime import launch as _launch

    env = _settings_env(target, strict, races, findings)
    sink: list = []
    raised: list = []
    counter = {"launches": 0}

    def on_launch(go):
        counter["launches"] += 1
        try:
            return go()
        except NkiError as exc:
            raised.append(exc)
            raise

    @contextlib.contextmanager
    def hooks():
        with progress.bar(None, desc="nkisim run: kernel launches", unit=" launches") as bar, \
                count_launches(bar, on_launch):
            token = _launch.FINDINGS_SINK.set(sink)
            try:
                yield
            finally:
                _launch.FINDINGS_SINK.reset(token)

    status, error = _execute(script, script_args, env, hooks(), "nkisim run")
    if json_path:
        errors = sink + raised + ([error] if error is not None else [])
        settings = {"target": target, "strict": strict, "races": races, "findings": findings}
        _findings.write(json_path, _findings.document(script, status, counter["launches"], errors, settings))
    return status


def _trace_name(script: str, n: int, kernel: str) -> str:
    stem = os.path.splitext(os.path.basename(script))[0]
    return f"{stem}.{n}.{kernel}.json"


def profile_script(script: str, script_args=(), *, trace_dir=None, target=None, plot: bool = False) -> int:
    """``nkisim profile SCRIPT.py [args]``: run ``script`` as ``nkisim run`` does (the same runner,
    ``_execute``) with ``NKI_SIMULATOR=1`` (and ``NEURON_PLATFORM_TARGET_OVERRIDE=target`` if
    given); each kernel launch it makes is profiled (``runtime.profiling.session``): its summary is
    printed and its Chrome-trace JSON written to ``trace_dir/<script stem>.<n>.<kernel>.json``
    (n = 1, 2, ... in launch order; with ``plot`` a PNG beside it). Decision: ``trace_dir``
    defaults to the current directory (the script's may not be writable). Returns the script's exit
    status (1 if it raised). The environment, ``sys.argv`` and ``sys.path`` are restored afterwards."""
    from . import progress
    from .runtime.profiling import session

    trace_dir = trace_dir or os.getcwd()
    written: list = []

    @contextlib.contextmanager
    def hooks():
        with progress.bar(None, desc="nkisim profile: launches profiled", unit=" launches") as bar:
            def on_profile(prof):
                n = len(written) + 1
                path = prof.save_trace(os.path.join(trace_dir, _trace_name(script, n, prof.kernel)))
                written.append(path)
                bar.update()
                print(f"== nkisim profile: launch {n}")
                print(prof.summary())
                print(f"trace: {path}")
                if plot:
                    print(f"plot: {prof.plot(path[:-5] + '.png')}")
                sys.stdout.flush()

            with session(on_profile):
                yield

    env = {"NKI_SIMULATOR": "1", **({"NEURON_PLATFORM_TARGET_OVERRIDE": target} if target else {})}
    status, _ = _execute(script, script_args, env, hooks(), "nkisim profile")
    print(f"nkisim profile: {len(written)} kernel launch(es) profiled; traces in {trace_dir}")
    return status


if __name__ == "__main__":
    sys.exit(main())
