"""The Beta-1 ``nki.compiler`` face (``import neuronxcc.nki.compiler as ncc``): allocation and
compilation hints. ``ncc.sbuf.mod_alloc(...)`` / ``.alloc(...)`` / ``.auto_alloc()`` stand for the
SBUF buffer and ``ncc.psum.*`` for PSUM (Decision: every allocation keeps its own storage, as in
``nl.ndarray(address=...)``; placement is not simulated); the decorators are no-ops."""
import types as _types

from nkisim.language.misc import no_reorder  # noqa: F401
from nkisim.memory.buffers import psum as _psum, sbuf as _sbuf
from nkisim.nki.compiler import (enable_stack_allocator, force_auto_alloc, kernel_builder,  # noqa: F401
                                 skip_middle_end_transformations)


def _space(buffer):
    def alloc(*args, **kwargs):
        return buffer
    return _types.SimpleNamespace(alloc=alloc, mod_alloc=alloc, auto_alloc=alloc)


sbuf, psum = _space(_sbuf), _space(_psum)


def multi_buffer(factor=2):
    """A hint; no effect in simulation."""
    return None


def allocation_scope():
    """A hint; no effect in simulation."""
    return no_reorder()


__all__ = ["enable_stack_allocator", "force_auto_alloc", "skip_middle_end_transformations", "sbuf", "psum",
           "kernel_builder", "multi_buffer", "allocation_scope", "no_reorder"]
