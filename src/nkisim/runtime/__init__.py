"""Runtime: jit/Kernel, launches (grid, LNC cores), program ids, loops, simulate(). No torch."""
from .kernel import Kernel, jit, num_programs, program_id, program_ndim, simulate, simulate_kernel
from .launch import run
from .loops import affine_range, range, sequential_range, static_range

__all__ = ["Kernel", "jit", "simulate", "simulate_kernel", "program_id", "num_programs", "program_ndim",
           "run", "affine_range", "sequential_range", "static_range", "range"]
