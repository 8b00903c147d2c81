"""The Beta-1 ``nki.isa.constants`` face: the Beta-1 enums."""
from nkisim.language.beta1_isa import dge_mode, dma_engine, engine, nc_version, oob_mode, reduce_cmd

__all__ = ["dge_mode", "dma_engine", "engine", "nc_version", "oob_mode", "reduce_cmd"]
