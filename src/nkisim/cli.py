"""The ``nkisim`` command: ``nkisim demo`` runs every example kernel and prints a table;
``nkisim ops`` lists every ``nki.isa`` instruction and whether nkisim simulates it."""
from __future__ import annotations

import argparse
import sys


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="nkisim", description="CPU simulator for NKI kernels")
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="run the example kernels on realistic sizes and check them")
    demo.add_argument("--small", action="store_true", help="small shapes (seconds, for smoke tests)")
    demo.add_argument("--only", default=None, help="comma-separated example names")
    ops = sub.add_parser("ops", help="list the nki.isa instructions: family, operands, simulated or not")
    ops.add_argument("--stubs", action="store_true", help="only the instructions nkisim does not simulate")
    args = parser.parse_args(argv)
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


if __name__ == "__main__":
    sys.exit(main())
