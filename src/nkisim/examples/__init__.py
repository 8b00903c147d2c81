"""Example NKI kernels in the public tutorial style, each with a NumPy reference.

One module per example. Each module holds:

* ``KERNEL``: the ``@nki.jit`` kernel (written with ``import nki`` / ``nki.language as nl`` /
  ``nki.isa as nisa``, exactly as for the Neuron compiler);
* ``reference(*inputs)``: the same result in NumPy, float32 math, independent of nkisim;
* ``make_inputs(rng, small=False)``: a tuple of seeded input arrays, realistic sizes by default,
  small ones (for tests) with ``small=True``;
* ``RTOL``, ``ATOL``: the tolerance, with a one-line justification beside it.

``nkisim demo`` (``nkisim.demo``) runs them all; ``examples/<name>.py`` at the repository root runs
one. This package is the top layer: it imports the ``nki`` faces, never the other way round.
"""
from __future__ import annotations

import importlib
from types import ModuleType

# Demo order: simplest first.
NAMES = ("tensor_add", "matmul", "transpose", "rmsnorm", "layernorm", "softmax", "cumsum",
         "attention")


def load(name: str) -> ModuleType:
    """The example module ``name`` (one of ``NAMES``); ValueError for an unknown name."""
    if name not in NAMES:
        raise ValueError(f"unknown example {name!r}; expected one of {', '.join(NAMES)}")
    return importlib.import_module(f"{__name__}.{name}")


__all__ = ["NAMES", "load"]
