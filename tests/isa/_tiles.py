"""Tile helpers shared by the ISA tests: put a NumPy array on chip (SBUF, or PSUM via SBUF)."""
import nkisim.nki.isa as nisa
import nkisim.nki.language as nl


def sb(x, dtype=None):
    """``x`` (an HBM tensor) copied into a new SBUF tile (optionally of another dtype)."""
    t = nl.ndarray(x.shape, dtype=dtype or x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    return t


def ps(x):
    """``x`` copied into a new PSUM tile (through SBUF)."""
    t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.psum)
    nisa.tensor_copy(dst=t, src=sb(x))
    return t


def load(x, buffer=nl.sbuf):
    """``x`` in a new tile in ``buffer`` (SBUF, or PSUM through SBUF)."""
    return ps(x) if buffer is nl.psum else sb(x)
