"""2-D transpose: ``out = x.T`` for a float32 matrix of any shape.

Runs the example on seeded inputs and checks it against its NumPy reference (one table row).
The kernel and its reference live in src/nkisim/examples/transpose.py (module nkisim.examples.transpose).

Usage: python examples/transpose.py [--small]
"""
import sys

from nkisim import demo

if __name__ == "__main__":
    sys.exit(demo.run(small="--small" in sys.argv[1:], only=["transpose"]))
