"""Tensor add: ``out = a + b`` for 2-D float32 tensors of any row count.

Runs the example on seeded inputs and checks it against its NumPy reference (one table row).
The kernel and its reference live in src/nkisim/examples/tensor_add.py (module nkisim.examples.tensor_add).

Usage: python examples/tensor_add.py [--small]
"""
import sys

from nkisim import demo

if __name__ == "__main__":
    sys.exit(demo.run(small="--small" in sys.argv[1:], only=["tensor_add"]))
