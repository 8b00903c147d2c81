"""The ``nki.isa.constants`` face: the ISA enums."""
from nkisim.isa.enums import (dge_mode, dma_engine, engine, matmul_perf_mode, nc_version, oob_mode,
                              reduce_cmd)

__all__ = ["dge_mode", "dma_engine", "engine", "matmul_perf_mode", "nc_version", "oob_mode", "reduce_cmd"]
