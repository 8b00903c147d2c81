"""``get_nc_version``: the NeuronCore generation of the target being simulated."""
from __future__ import annotations

from .. import state
from .enums import nc_version


def get_nc_version() -> nc_version:
    """nc_version.gen2 (trn1), gen3 (trn2) or gen4 (trn3); an IntEnum, so ``>= 3`` works.

    Outside a kernel it reports the target chosen by NEURON_PLATFORM_TARGET_OVERRIDE.
    """
    c = state.maybe_core()
    if c is None:
        from .. import arch
        from ..config import Settings
        return nc_version(arch.get(Settings.from_env().target).nc_version)
    return nc_version(c.target.nc_version)


def get_nc_sub_version() -> int:
    return 0


__all__ = ["get_nc_version", "get_nc_sub_version"]
