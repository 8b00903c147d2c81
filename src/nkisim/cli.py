"""The ``nkisim`` command: ``nkisim demo`` runs every example kernel and prints a table;
``nkisim ops`` lists every ``nki.isa`` instruction and whether nkisim simulates it;
``nkisim profile SCRIPT.py [args]`` runs a script with the simulator on and profiles every kernel
launch it makes (estimated device time: summary printed, Perfetto traces written)."""
from __future__ import annotations

import argparse
import os
import sys


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="nkisim", description="CPU simulator for NKI kernels")
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="run the example kernels on realistic sizes and check them")
    demo.add_argument("--small", action="store_true", help="small shapes (seconds, for smoke tests)")
    demo.add_argument("--only", default=None, help="comma-separated example names")
    ops = sub.add_parser("ops", help="list the nki.isa instructions: family, operands, simulated or not")
    ops.add_argument("--stubs", action="store_true", help="only the instructions nkisim does not simulate")
    prof = sub.add_parser("profile", help="run a Python script with the simulator on; profile every kernel launch")
    prof.add_argument("--trace-dir", default=None,
                      help="where the traces go (default: the current directory)")
    prof.add_argument("--target", default=None, help="trn1 | trn2 | trn3 (default: the environment's)")
    prof.add_argument("--plot", action="store_true", help="also draw each launch's timeline as a PNG")
    prof.add_argument("script", help="the Python script to run")
    prof.add_argument("script_args", nargs=argparse.REMAINDER, help="arguments passed to the script")
    args = parser.parse_args(argv)
    if args.command == "profile":
        return profile_script(args.script, args.script_args, trace_dir=args.trace_dir, target=args.target,
                              plot=args.plot)
    if args.command == "ops":
        rows = ops_table(stubs_only=args.stubs)
        widths = [max(len(r[i]) for r in rows) for i in range(4)] if rows else []
        for row in rows:
            print("  ".join([c.ljust(w) for c, w in zip(row, widths)] + [row[-1]]))
        return 0
    if args.command == "demo":
        from .demo import run
        return run(small=args.small, only=args.only.split(",") if args.only else None)
    return 2


def ops_table(stubs_only: bool = False) -> list[tuple[str, str, str, str, str]]:
    """Rows ``(api, family module, reads, writes, status)`` for every ``nki.isa`` instruction, by
    name; status is ``simulated``, or ``not simulated`` for the one op that raises UnsupportedError
    (``builtin_custom_op``: a custom GpSimd library cannot run on a CPU)."""
    import nkisim.isa as isa
    from nkisim.isa import dispatch

    rows = [] if stubs_only else [
        (api, spec.compute.__module__.rsplit(".", 1)[-1], ",".join(spec.reads) or "-",
         ",".join(spec.writes) or "-", "simulated") for api, spec in sorted(dispatch.SPECS.items())]
    if hasattr(isa, "builtin_custom_op"):    # no spec: custom GpSimd library code (Beta 1 page only)
        rows.append(("nisa.builtin_custom_op", "unsupported", "srcs", "dsts",
                     "not simulated (runs a custom GpSimd library; Beta 1 API only)"))
    return rows


def _trace_name(script: str, n: int, kernel: str) -> str:
    stem = os.path.splitext(os.path.basename(script))[0]
    return f"{stem}.{n}.{kernel}.json"


def profile_script(script: str, script_args=(), *, trace_dir=None, target=None, plot: bool = False) -> int:
    """``nkisim profile SCRIPT.py [args]``: run ``script`` as ``__main__`` (``sys.argv`` =
    ``[script, *args]``, its directory first on ``sys.path``) with ``NKI_SIMULATOR=1`` (and
    ``NEURON_PLATFORM_TARGET_OVERRIDE=target`` if given); each kernel launch it makes is profiled
    (``runtime.profiling.session``): its summary is printed and its Chrome-trace JSON written to
    ``trace_dir/<script stem>.<n>.<kernel>.json`` (n = 1, 2, ... in launch order; with ``plot`` a
    PNG beside it). Decision: ``trace_dir`` defaults to the current directory (the script's may
    not be writable). Returns the script's exit status (1 if it raised; the traceback is printed).
    The environment, ``sys.argv`` and ``sys.path`` are restored afterwards."""
    import runpy
    import traceback

    from .runtime.profiling import session

    trace_dir = trace_dir or os.getcwd()
    saved_env = {k: os.environ.get(k) for k in ("NKI_SIMULATOR", "NEURON_PLATFORM_TARGET_OVERRIDE")}
    saved_argv, saved_path = sys.argv[:], sys.path[:]
    written: list = []

    def on_profile(prof):
        n = len(written) + 1
        path = prof.save_trace(os.path.join(trace_dir, _trace_name(script, n, prof.kernel)))
        written.append(path)
        print(f"== nkisim profile: launch {n}")
        print(prof.summary())
        print(f"trace: {path}")
        if plot:
            print(f"plot: {prof.plot(path[:-5] + '.png')}")
        sys.stdout.flush()

    status = 0
    os.environ["NKI_SIMULATOR"] = "1"
    if target:
        os.environ["NEURON_PLATFORM_TARGET_OVERRIDE"] = target
    sys.argv = [script, *script_args]
    sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
    try:
        with session(on_profile):
            runpy.run_path(script, run_name="__main__")
    except SystemExit as exc:
        status = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except Exception:
        traceback.print_exc()
        status = 1
    finally:
        sys.argv[:], sys.path[:] = saved_argv, saved_path
        for k, v in saved_env.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    print(f"nkisim profile: {len(written)} kernel launch(es) profiled; traces in {trace_dir}")
    return status


if __name__ == "__main__":
    sys.exit(main())
