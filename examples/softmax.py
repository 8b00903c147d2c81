"""Row softmax: ``out = exp(x - max(x)) / sum(exp(x - max(x)))`` along each row, float32.

Runs the example on seeded inputs and checks it against its NumPy reference (one table row).
The kernel and its reference live in src/nkisim/examples/softmax.py (module nkisim.examples.softmax).

Usage: python examples/softmax.py [--small]
"""
import sys

from nkisim import demo

if __name__ == "__main__":
    sys.exit(demo.run(small="--small" in sys.argv[1:], only=["softmax"]))
