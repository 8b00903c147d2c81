"""The ``nki.simulator`` face: ``simulate_kernel(func, args, kwargs, lnc)`` as vLLM-on-Neuron calls it."""
from nkisim.runtime.kernel import simulate, simulate_kernel

__all__ = ["simulate_kernel", "simulate"]
