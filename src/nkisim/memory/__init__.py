"""Memory: buffers, NkiTensor views, allocation and the read/write path. Never imports torch."""
from .access import allocate, assign, read_f32, read_raw, to_numpy, wrap_array, write
from .buffers import MemoryRegion, hbm, private_hbm, psum, sbuf, shared_hbm
from .tensor import Allocation, NkiTensor

__all__ = ["allocate", "assign", "read_f32", "read_raw", "to_numpy", "wrap_array", "write",
           "MemoryRegion", "hbm", "private_hbm", "psum", "sbuf", "shared_hbm", "Allocation", "NkiTensor"]
