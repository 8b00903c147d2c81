"""``nl.tile_size``: tile limits of the target being simulated (read from ``arch`` at access time).

Source: aws-neuron-sdk nki/api/nki.language.tile_size.rst.
"""
from __future__ import annotations

from .. import arch, state
from ..config import Settings


def _target():
    c = state.maybe_core()
    return c.target if c is not None else arch.get(Settings.from_env().target)


class _TileSize:
    """Attributes: pmax, psum_fmax, psum_bank_fmax, psum_bank_fmax_bytes, psum_num_banks,
    gemm_stationary_fmax, gemm_moving_fmax, bn_stats_fmax, psum_min_align, sbuf_min_align,
    total_available_sbuf_size / sbuf_fmax_bytes (usable SBUF bytes per partition), sbuf_fmax
    (in fp32 elements), sbuf_size_bytes."""

    pmax = property(lambda self: _target().pmax)
    psum_fmax = property(lambda self: _target().psum_bank_fmax)
    psum_bank_fmax = property(lambda self: _target().psum_bank_fmax)
    psum_bank_fmax_bytes = property(lambda self: _target().psum_bank_bytes)
    psum_num_banks = property(lambda self: _target().psum_num_banks)
    gemm_stationary_fmax = property(lambda self: _target().gemm_stationary_fmax)
    gemm_moving_fmax = property(lambda self: _target().gemm_moving_fmax)
    bn_stats_fmax = property(lambda self: _target().bn_stats_fmax)
    psum_min_align = 4
    sbuf_min_align = 1
    total_available_sbuf_size = property(lambda self: _target().sbuf_usable_bytes)
    sbuf_fmax_bytes = property(lambda self: _target().sbuf_usable_bytes)
    sbuf_fmax = property(lambda self: _target().sbuf_usable_bytes // 4)
    sbuf_size_bytes = property(lambda self: _target().sbuf_size_bytes)

    def __repr__(self):
        return f"nl.tile_size(target={_target().name})"


tile_size = _TileSize()
__all__ = ["tile_size"]
