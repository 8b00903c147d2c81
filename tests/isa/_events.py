"""Event helpers shared by the ISA tests: run a kernel inside ``trace.record()`` with the fast
paths on or off, compare operands, find the line of a ``# ev:<tag>`` marker in a test file."""
import os

from nkisim import trace
from conftest import simulate


def record(kernel, *args, fast=True, **kwargs):
    """(result, events) of one simulated run; ``fast=False`` runs it with NKISIM_FAST_PATHS=0."""
    old = os.environ.get("NKISIM_FAST_PATHS")
    os.environ["NKISIM_FAST_PATHS"] = "1" if fast else "0"
    try:
        with trace.record() as events:
            out = simulate(kernel, *args, **kwargs)
    finally:
        if old is None:
            del os.environ["NKISIM_FAST_PATHS"]
        else:
            os.environ["NKISIM_FAST_PATHS"] = old
    return out, events


def roles(ops):
    """(role, buffer, shape, dtype, nbytes) of each operand."""
    return [(o.role, o.buffer, o.shape, o.dtype, o.nbytes) for o in ops]


def line(module_file: str, tag: str) -> str:
    """``<file>:N`` of the line of ``module_file`` ending in ``# ev:<tag>``."""
    name = os.path.basename(module_file)
    with open(module_file) as f:
        for i, text in enumerate(f, 1):
            if text.rstrip().endswith(f"# ev:{tag}"):
                return f"{name}:{i}"
    raise AssertionError(tag)


__all__ = ["record", "roles", "line"]
