"""``wrap_nki(kernel) -> NKIHOPCaller``: call an NKI kernel from PyTorch through nki_kernel_wrapper.

The caller is plain Python that Dynamo inlines; the kernel is registered once (its string key is a
graph constant). Imports torch and the torch layer; never isa or checks.
"""
from __future__ import annotations

from typing import Callable

import torch

from .hop import nki_kernel_wrapper
from .registry import kernel_side_table


@torch._dynamo.assume_constant_result
def _register(kernel, output_spec, mutates_args) -> str:
    return kernel_side_table.add_kernel(kernel, output_spec, mutates_args)


def _as_grid(grid) -> tuple:
    grid = tuple(grid) if isinstance(grid, (tuple, list)) else (grid,)
    try:
        grid = tuple(int(getattr(g, "value", g)) for g in grid)
    except (TypeError, ValueError):
        raise TypeError(f"wrap_nki: launch grid must be integers, got {list(grid)!r}") from None
    if len(grid) != 1 or grid[0] not in (1, 2):
        raise ValueError(f"wrap_nki: launch grid {list(grid)} is not supported; the grid is the LNC "
                         f"degree: use [1] or [2]")
    return grid


class NKIHOPCaller:
    """``caller(*args, **kwargs)`` runs the kernel through nki_kernel_wrapper; ``caller[2]`` is LNC2.

    Arguments are bound like a Python call: positional then keyword, ordered by the kernel's
    signature, defaults filled; a missing required argument is a TypeError (never None).
    """

    def __init__(self, kernel_key: str, arg_names: tuple, defaults: dict, grid: tuple = (),
                 kernel_lnc: int | None = None, name: str = "kernel"):
        self.kernel_key = kernel_key
        self.arg_names = tuple(arg_names)
        self.defaults = dict(defaults)
        self.grid = tuple(grid)
        self.kernel_lnc = kernel_lnc
        self.__name__ = name

    @property
    def kernel_name(self) -> str:
        return self.kernel_key.split("#")[0]

    @property
    def lnc(self) -> int:
        return self.grid[0] if self.grid else (self.kernel_lnc or 1)

    def __getitem__(self, grid) -> "NKIHOPCaller":
        grid = _as_grid(grid)
        if self.kernel_lnc is not None and grid[0] != self.kernel_lnc:
            raise ValueError(f"wrap_nki: {self.__name__} was jitted as kernel[{self.kernel_lnc}] but "
                             f"called with grid [{grid[0]}]; the two LNC degrees must agree")
        return NKIHOPCaller(self.kernel_key, self.arg_names, self.defaults, grid, self.kernel_lnc,
                            self.__name__)

    def bind(self, args: tuple, kwargs: dict) -> tuple:
        """Argument values in signature order, defaults filled."""
        name = self.__name__
        if len(args) > len(self.arg_names):
            raise TypeError(f"{name}() takes {len(self.arg_names)} arguments but {len(args)} were given")
        values = dict(zip(self.arg_names, args))
        for k, v in kwargs.items():
            if k not in self.arg_names:
                raise TypeError(f"{name}() got an unexpected keyword argument {k!r}")
            if k in values:
                raise TypeError(f"{name}() got multiple values for argument {k!r}")
            values[k] = v
        out = []
        for n in self.arg_names:
            if n in values:
                out.append(values[n])
            elif n in self.defaults:
                out.append(self.defaults[n])
            else:
                raise TypeError(f"{name}() missing required argument {n!r}")
        return tuple(out)

    def __call__(self, *args, **kwargs):
        return nki_kernel_wrapper(kernel_idx=self.kernel_key, grid=(self.lnc,), backend_config="",
                                  operand_output_aliases={}, args=self.bind(args, kwargs),
                                  arg_names=self.arg_names, constant_args_key="")

    def __repr__(self):
        return f"<NKIHOPCaller {self.kernel_key} grid={list(self.grid)}>"


def wrap_nki(kernel: Callable, *, output_spec: Callable | None = None,
             mutates_args=()) -> NKIHOPCaller:
    """Wrap a jitted kernel (``nki.jit``, optionally ``kernel[2]``) or a plain kernel function.

    ``output_spec(**args)`` declares the outputs for Fake/Meta without running the kernel (see
    registry.KernelEntry); ``mutates_args`` names inputs written but not returned. Both may also be
    attributes of the kernel object. Without ``output_spec``, tracing runs the kernel once per
    argument signature on ones to learn output shapes and written inputs (cached).
    LNC: ``kernel[2]`` and ``wrap_nki(kernel)[2]`` both give LNC2; conflicting degrees raise.
    Decision: HOP fields follow vllm-neuron's seven, but ``kernel_idx`` holds the registry's stable
    string key and ``constant_args_key`` is "" while constants ride inline in ``args``.
    Decision: a kernel returning a list gives a tuple in every mode (eager, Fake, compiled), like a
    torch op; returning anything but None, a tensor or tensors is a TypeError in every mode
    (registry.check_result). A tensor argument that requires grad (grad mode on) is a ValueError
    in every mode; tensors on meta mixed with real ones are a RuntimeError, as in torch.
    """
    programs = getattr(kernel, "programs_per_core", 1)      # a Beta-1 (neuronxcc.nki) SPMD grid
    if programs != 1:
        raise ValueError(f"wrap_nki: {kernel!r} has an SPMD grid {list(kernel.specs)} of {programs} programs "
                         f"per core; the torch layer launches one program per core (wrap the kernel "
                         f"without a grid, or with nl.nc(2) alone)")
    key = _register(kernel, output_spec, tuple(mutates_args))
    entry = kernel_side_table.get_kernel(key)
    grid = getattr(kernel, "grid", None) or ()
    name = getattr(entry.func, "__name__", "kernel")
    return NKIHOPCaller(key, entry.arg_names, entry.defaults, (), int(grid[0]) if grid else None, name)


__all__ = ["wrap_nki", "NKIHOPCaller"]
