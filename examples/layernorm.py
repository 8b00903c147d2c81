"""LayerNorm: ``out = (x - mean) / sqrt(var + eps) * gamma + beta`` over each row, float32.

Runs the example on seeded inputs and checks it against its NumPy reference (one table row).
The kernel and its reference live in src/nkisim/examples/layernorm.py (module nkisim.examples.layernorm).

Usage: python examples/layernorm.py [--small]
"""
import sys

from nkisim import demo

if __name__ == "__main__":
    sys.exit(demo.run(small="--small" in sys.argv[1:], only=["layernorm"]))
