"""The ``nki.compiler`` face: allocation and compilation hints, accepted as no-ops."""
import types as _types


def _passthrough(func=None, *args, **kwargs):
    if callable(func):
        return func
    return lambda f: f


def _alloc(*args, **kwargs):
    """An allocation hint; nkisim allocates every tensor independently."""
    return None


enable_stack_allocator = force_auto_alloc = skip_middle_end_transformations = _passthrough
sbuf = _types.SimpleNamespace(alloc=_alloc, mod_alloc=_alloc, auto_alloc=_alloc)
psum = _types.SimpleNamespace(alloc=_alloc, mod_alloc=_alloc, auto_alloc=_alloc)
kernel_builder = _types.SimpleNamespace(compile_kernel=lambda *a, **k: None)
multi_buffer = allocation_scope = _alloc

__all__ = ["enable_stack_allocator", "force_auto_alloc", "skip_middle_end_transformations", "sbuf",
           "psum", "kernel_builder", "multi_buffer", "allocation_scope"]
