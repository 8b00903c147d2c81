"""nkisim: a CPU simulator for NKI kernels. ``import nkisim.nki as nki`` always reaches it;
``import nki`` does too where no Neuron SDK is installed.

This module stays import-light (it is imported at interpreter start-up by the ``nki`` face finder),
so everything heavier loads on first attribute access.

PYTEST_DONT_REWRITE: pytest marks the packages of every pytest11 plugin's distribution for assertion
rewriting, and this one is already imported when it does (by the face finder), which it would warn
about in every session of the environment (nkisim.pytest_plugin).
"""
__version__ = "0.1.0"

_LAZY = {"simulate": "nkisim.runtime", "jit": "nkisim.runtime", "simulate_kernel": "nkisim.runtime",
         "simulate_ranks": "nkisim.runtime.ranks", "per_rank": "nkisim.runtime.ranks",
         "Settings": "nkisim.config", "errors": "nkisim.errors", "profile": "nkisim.runtime.profiling",
         "Profile": "nkisim.trace.profile"}


def __getattr__(name):
    if name in _LAZY:
        import importlib
        mod = importlib.import_module(_LAZY[name])
        return mod if name == "errors" else getattr(mod, name)
    raise AttributeError(f"module 'nkisim' has no attribute {name!r}")


__all__ = ["simulate", "jit", "simulate_kernel", "simulate_ranks", "per_rank", "Settings", "profile", "Profile",
           "__version__"]
