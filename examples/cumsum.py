"""Cumulative sum along each row: ``out[r, j] = sum(x[r, :j + 1])``, float32.

Runs the example on seeded inputs and checks it against its NumPy reference (one table row).
The kernel and its reference live in src/nkisim/examples/cumsum.py (module nkisim.examples.cumsum).

Usage: python examples/cumsum.py [--small]
"""
import sys

from nkisim import demo

if __name__ == "__main__":
    sys.exit(demo.run(small="--small" in sys.argv[1:], only=["cumsum"]))
