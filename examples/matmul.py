"""Tiled matrix multiplication: ``out = lhsT.T @ rhs`` with bf16 inputs and an fp32 result.

Runs the example on seeded inputs and checks it against its NumPy reference (one table row).
The kernel and its reference live in src/nkisim/examples/matmul.py (module nkisim.examples.matmul).

Usage: python examples/matmul.py [--small]
"""
import sys

from nkisim import demo

if __name__ == "__main__":
    sys.exit(demo.run(small="--small" in sys.argv[1:], only=["matmul"]))
