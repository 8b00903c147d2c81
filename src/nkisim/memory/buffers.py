"""Memory regions (buffers) of a NeuronCore: SBUF, PSUM, private and shared HBM.

Source: aws-neuron-sdk nki/api/nki/language/__init__.py (MemoryRegion, sbuf, psum, hbm,
private_hbm, shared_hbm). Imports nothing from nkisim.
"""
from __future__ import annotations

import enum


class MemoryRegion(str, enum.Enum):
    """Where a tensor lives. ``hbm`` is an alias of ``private_hbm``."""
    sbuf = "sbuf"
    psum = "psum"
    private_hbm = "private_hbm"
    shared_hbm = "shared_hbm"

    def __str__(self) -> str:
        return self.value

    __repr__ = __str__

    def view(self, dtype, shape=None, name: str = "", size=None):
        """``sbuf.view(dtype=..., shape=...)``: a new uninitialised tensor in this buffer (the
        official quick start's spelling of ``nl.ndarray(shape, dtype, buffer=...)``)."""
        from .access import allocate
        return allocate(shape if shape is not None else size, dtype, self, name, op=f"{self.value}.view")


sbuf = MemoryRegion.sbuf
psum = MemoryRegion.psum
private_hbm = MemoryRegion.private_hbm
shared_hbm = MemoryRegion.shared_hbm
hbm = private_hbm
HBM = frozenset((private_hbm, shared_hbm))
ON_CHIP = frozenset((sbuf, psum))


def as_buffer(buffer) -> MemoryRegion:
    """Accept a MemoryRegion (or its name, which NKI 0.3+ rejects but older kernels pass)."""
    if isinstance(buffer, MemoryRegion):
        return buffer
    if isinstance(buffer, str):
        key = "private_hbm" if buffer == "hbm" else buffer
        try:
            return MemoryRegion(key)
        except ValueError:
            pass
    raise ValueError(f"unknown buffer {buffer!r}; expected nl.sbuf, nl.psum, nl.hbm, "
                     f"nl.private_hbm or nl.shared_hbm")


def is_hbm(buffer) -> bool:
    return as_buffer(buffer) in HBM


def is_on_chip(buffer) -> bool:
    return as_buffer(buffer) in ON_CHIP


def is_psum(buffer) -> bool:
    return as_buffer(buffer) is psum


def is_sbuf(buffer) -> bool:
    return as_buffer(buffer) is sbuf


__all__ = ["MemoryRegion", "sbuf", "psum", "hbm", "private_hbm", "shared_hbm", "as_buffer",
           "is_hbm", "is_on_chip", "is_psum", "is_sbuf", "HBM", "ON_CHIP"]
