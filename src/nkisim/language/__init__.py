"""``nki.language`` (nl): dtypes, buffers, creation, loops, program ids, op tokens, tile functions.

Never imports torch.
"""
from .. import dtypes as _d
from ..memory.buffers import (MemoryRegion, hbm, is_hbm, is_on_chip, is_psum, is_sbuf, private_hbm,
                              psum, sbuf, shared_hbm)
from ..memory.tensor import NkiTensor
from ..runtime.kernel import num_programs, program_id, program_ndim
from ..runtime.loops import (affine_range, dynamic_range, fori_loop, range, sequential_range,  # noqa: A004
                             static_range, while_loop)
from .creation import *  # noqa: F401,F403
from .misc import *  # noqa: F401,F403
from .ops import *  # noqa: F401,F403
from .tile import *  # noqa: F401,F403
from .tile_size import tile_size
from . import creation as _creation, misc as _misc, ops as _ops, tile as _tile
from . import operators as _operators  # noqa: F401  (registers NkiTensor's operators)

float32, float16, bfloat16, tfloat32 = _d.float32, _d.float16, _d.bfloat16, _d.tfloat32
float8_e4m3, float8_e4m3fn, float8_e5m2 = _d.float8_e4m3, _d.float8_e4m3fn, _d.float8_e5m2
float8_e8m0fnu = _d.float8_e8m0fnu
float8_e4m3fn_x4, float8_e5m2_x4, float4_e2m1fn_x4 = _d.float8_e4m3fn_x4, _d.float8_e5m2_x4, _d.float4_e2m1fn_x4
int8, int16, int32, uint8, uint16, uint32 = _d.int8, _d.int16, _d.int32, _d.uint8, _d.uint16, _d.uint32
bool_ = _d.bool_
globals()["bool"] = _d.bool_
tensor = NkiTensor

__all__ = sorted(set(_creation.__all__ + _misc.__all__ + _ops.__all__ + _tile.__all__) | {
    "MemoryRegion", "hbm", "is_hbm", "is_on_chip", "is_psum", "is_sbuf", "private_hbm", "psum", "sbuf",
    "shared_hbm", "NkiTensor", "tensor", "num_programs", "program_id", "program_ndim", "affine_range",
    "range", "sequential_range", "static_range", "dynamic_range", "fori_loop", "while_loop", "tile_size", "float32", "float16", "bfloat16",
    "tfloat32", "float8_e4m3", "float8_e4m3fn", "float8_e5m2", "float8_e8m0fnu", "float8_e4m3fn_x4", "float8_e5m2_x4",
    "float4_e2m1fn_x4", "int8", "int16", "int32", "uint8",
    "uint16", "uint32", "bool_", "bool"})
