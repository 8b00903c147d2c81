"""The ``nkisim`` command: ``nkisim demo`` runs every example kernel and prints a table."""
from __future__ import annotations

import argparse
import sys


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="nkisim", description="CPU simulator for NKI kernels")
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="run the example kernels on realistic sizes and check them")
    demo.add_argument("--small", action="store_true", help="small shapes (seconds, for smoke tests)")
    demo.add_argument("--only", default=None, help="comma-separated example names")
    args = parser.parse_args(argv)
    if args.command == "demo":
        from .demo import run
        return run(small=args.small, only=args.only.split(",") if args.only else None)
    return 2


if __name__ == "__main__":
    sys.exit(main())
