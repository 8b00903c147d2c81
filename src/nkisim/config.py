"""Settings: every behaviour knob, one frozen instance per kernel call, read from the environment
only by ``Settings.from_env()`` when a kernel is called (never at import or decoration)."""
from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from typing import Literal

_TARGET_ALIASES = {
    "trn1": "trn1", "inf2": "trn1", "gen2": "trn1",
    "trn2": "trn2", "gen3": "trn2",
    "trn3": "trn3", "gen4": "trn3",
}


def normalize_target(name: str) -> str:
    """Map ``trn1|inf2|gen2``, ``trn2|gen3``, ``trn3|gen4`` (any case) to trn1/trn2/trn3.

    Raises ValueError naming the accepted values.
    """
    key = str(name).strip().lower()
    if key not in _TARGET_ALIASES:
        raise ValueError(
            f"NEURON_PLATFORM_TARGET_OVERRIDE: unknown target {name!r}; "
            f"expected one of {', '.join(sorted(_TARGET_ALIASES))}")
    return _TARGET_ALIASES[key]


def _flag(value: str | None, default: bool, name: str = "setting") -> bool:
    if value is None or value.strip() == "":
        return default
    v = value.strip().lower()
    if v in ("1", "true", "yes", "on"):
        return True
    if v in ("0", "false", "no", "off"):
        return False
    raise ValueError(f"{name}: expected 1/0 (or true/false), got {value!r}")


@dataclass(frozen=True, kw_only=True)
class Settings:
    """Every behaviour knob; one instance per kernel call.

    Defaults are given beside each field with the environment variable that sets it.
    """
    target: Literal["trn1", "trn2", "trn3"] = "trn3"   # NEURON_PLATFORM_TARGET_OVERRIDE
    precise_fp: bool = True                            # NKI_PRECISE_FP: ml_dtypes storage (0: fp32)
    simulator: bool = False                            # NKI_SIMULATOR == "1": plain jit calls simulate
    uninitialized_reads: Literal["sentinel", "raise"] = "sentinel"   # NKISIM_STRICT_UNINIT=1: raise
    detect_races: bool = False                         # NKISIM_DETECT_RACES=1
    iteration_order: Literal["program", "shuffled"] = "program"      # NKISIM_SHUFFLE=1
    seed: int = 0                                      # NKISIM_SEED
    findings: Literal["first", "all"] = "first"        # NKISIM_FINDINGS: stop at the first broken
    #   rule, or run to the end (skipping each failing instruction) and report every finding
    barrier_timeout_s: float = 30.0                    # longest wait at an LNC2 sync point
    fast_paths: bool = True                            # NKISIM_FAST_PATHS=0: no rule memo, deferred
    #   copies/fills, storage pool, out= writes or GC pause (results are bit-identical either way)

    def __post_init__(self):
        object.__setattr__(self, "target", normalize_target(self.target))
        if self.uninitialized_reads not in ("sentinel", "raise"):
            raise ValueError(f"Settings.uninitialized_reads must be 'sentinel' or 'raise', "
                             f"got {self.uninitialized_reads!r}")
        if self.iteration_order not in ("program", "shuffled"):
            raise ValueError(f"Settings.iteration_order must be 'program' or 'shuffled', "
                             f"got {self.iteration_order!r}")
        if self.findings not in ("first", "all"):
            raise ValueError(f"Settings.findings must be 'first' or 'all', got {self.findings!r}")
        if self.seed < 0:
            raise ValueError(f"Settings.seed must be >= 0, got {self.seed}")
        if self.barrier_timeout_s <= 0:
            raise ValueError(f"Settings.barrier_timeout_s must be > 0, got {self.barrier_timeout_s}")

    @classmethod
    def from_env(cls, env=None, **overrides) -> "Settings":
        """Build settings from ``env`` (default ``os.environ``), then apply keyword overrides."""
        env = os.environ if env is None else env
        kw = dict(
            target=env.get("NEURON_PLATFORM_TARGET_OVERRIDE") or env.get("NKI_NC_VERSION") or "trn3",
            precise_fp=_flag(env.get("NKI_PRECISE_FP"), True, "NKI_PRECISE_FP"),
            simulator=env.get("NKI_SIMULATOR", "").strip() == "1",
            uninitialized_reads="raise" if _flag(env.get("NKISIM_STRICT_UNINIT"), False, "NKISIM_STRICT_UNINIT")
            else "sentinel",
            detect_races=_flag(env.get("NKISIM_DETECT_RACES"), False, "NKISIM_DETECT_RACES"),
            iteration_order="shuffled" if _flag(env.get("NKISIM_SHUFFLE"), False, "NKISIM_SHUFFLE") else "program",
            seed=int(env.get("NKISIM_SEED", "0") or 0),
            findings=(env.get("NKISIM_FINDINGS") or "first").strip().lower(),
            fast_paths=_flag(env.get("NKISIM_FAST_PATHS"), True, "NKISIM_FAST_PATHS"),
        )
        kw.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**kw)

    def replace(self, **changes) -> "Settings":
        return dataclasses.replace(self, **changes)


__all__ = ["Settings", "normalize_target"]
