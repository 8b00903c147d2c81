"""Causal single-head attention: ``out = softmax(q @ k.T / sqrt(d) + causal_mask) @ v``, float32.

Runs the example on seeded inputs and checks it against its NumPy reference (one table row).
The kernel and its reference live in src/nkisim/examples/attention.py (module nkisim.examples.attention).

Usage: python examples/attention.py [--small]
"""
import sys

from nkisim import demo

if __name__ == "__main__":
    sys.exit(demo.run(small="--small" in sys.argv[1:], only=["attention"]))
