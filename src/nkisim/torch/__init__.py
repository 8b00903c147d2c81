"""PyTorch integration (optional extra): zero-copy conversion, ``wrap_nki``/``NKIHOPCaller``, the
``nki_kernel_wrapper`` HOP, ``simulate_nki_kernel``, ``can_run_kernel`` and route counters.

The simulator core never imports this package; ``runtime.launch`` reaches ``convert`` by name.
"""
from .convert import from_numpy, to_numpy
from .hop import nki_kernel_wrapper, nki_kernel_wrapper_functional
from .registry import kernel_side_table
from .routes import dispatch, reset_route_stats, route_stats
from .settings import TorchSettings, can_run_kernel
from .simulate import simulate_nki_kernel
from .wrap import NKIHOPCaller, wrap_nki

__all__ = ["to_numpy", "from_numpy", "wrap_nki", "NKIHOPCaller", "nki_kernel_wrapper",
           "nki_kernel_wrapper_functional", "simulate_nki_kernel", "can_run_kernel", "TorchSettings",
           "route_stats", "reset_route_stats", "dispatch", "kernel_side_table"]
