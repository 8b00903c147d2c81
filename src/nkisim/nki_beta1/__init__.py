"""The Beta-1 ``nki`` face: ``import neuronxcc.nki as nki`` / ``from neuronxcc import nki`` (served
by ``compat.finder`` only where no Neuron SDK is installed). Beta-1 kernels run unmodified on the
Beta-2 instruction pipeline (``runtime.beta1``, ``language.beta1``, ``language.beta1_isa``)."""
from nkisim.errors import NkiError
from nkisim.memory.tensor import NkiTensor as tensor
from nkisim.runtime.beta1 import (Beta1Kernel, baremetal, benchmark, jit, profile, simulate_kernel,  # noqa: F401
                                  trace)

from . import compiler, isa, language, typing  # noqa: F401

_MISSING = {
    "FrameworkKernel": "the torch layer: nkisim.torch.wrap_nki(kernel)",
    "simulate": "nki.simulate_kernel(kernel, *args) (Beta 1) or Beta 2's nki.simulate(kernel)(*args)",
}


def __getattr__(name):
    if name in _MISSING:
        from nkisim.errors import UnsupportedError
        raise UnsupportedError(f"nki.{name}", f"is not part of nkisim's Beta 1 face; use {_MISSING[name]}",
                               where="?")
    raise AttributeError(f"module 'neuronxcc.nki' has no attribute {name!r}")


__all__ = ["jit", "baremetal", "benchmark", "profile", "simulate_kernel", "trace", "tensor", "language", "isa",
           "typing", "compiler", "NkiError", "Beta1Kernel"]
