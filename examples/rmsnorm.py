"""RMSNorm: ``out = x / sqrt(mean(x**2, axis=1) + eps) * gamma``, bf16 in and out, fp32 math.

Runs the example on seeded inputs and checks it against its NumPy reference (one table row).
The kernel and its reference live in src/nkisim/examples/rmsnorm.py (module nkisim.examples.rmsnorm).

Usage: python examples/rmsnorm.py [--small]
"""
import sys

from nkisim import demo

if __name__ == "__main__":
    sys.exit(demo.run(small="--small" in sys.argv[1:], only=["rmsnorm"]))
