"""The ``nki`` face: ``import nkisim.nki as nki`` (or plain ``import nki`` where no Neuron SDK is
installed) gives the NKI API backed by the simulator."""
from nkisim.errors import NkiError
from nkisim.runtime.kernel import Kernel, jit, simulate, simulate_kernel as _simulate_kernel
from nkisim.dtypes import float32 as _f32
import numpy as _np

from nkisim.runtime.ranks import per_rank, simulate_ranks

from . import collectives, compiler, isa, language, simulator, tensor, typing  # noqa: F401

dtype = _np.dtype


def cpu_simulate(kernel, **options):
    """nki-library harness spelling: ``nki.cpu_simulate(kernel)[lnc](**kwargs)``."""
    return simulate(kernel, **options)


def simulate_kernel(kernel, *args, **kwargs):
    """Beta 1 spelling: ``nki.simulate_kernel(kernel, *args, **kwargs)``."""
    return simulate(kernel)(*args, **kwargs)


def trace(func=None, **options):
    """Beta 1 sub-kernel decorator: the function runs as plain Python inside a kernel."""
    return func if func is not None else (lambda f: f)


baremetal = jit
# on CPU: one simulated run with the cost model (estimated device time; runtime.profiling)
from nkisim.runtime.profiling import benchmark, nki_profile as profile  # noqa: E402

__all__ = ["jit", "simulate", "simulate_kernel", "cpu_simulate", "Kernel", "tensor", "dtype", "trace",
           "baremetal", "benchmark", "profile", "language", "isa", "typing", "compiler", "simulator",
           "NkiError", "collectives", "per_rank", "simulate_ranks"]
