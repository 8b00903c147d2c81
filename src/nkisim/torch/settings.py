"""The vLLM-on-Neuron switches, read from the environment at call time, and ``can_run_kernel``.

Imports nkisim.config and nkisim.arch only (no torch at import; tensors are inspected by duck type).
"""
from __future__ import annotations

import os
from dataclasses import dataclass

from .. import arch
from ..config import normalize_target


def _int_flag(name: str, env) -> bool:
    """vllm-neuron's ``bool(int(value))``: unset or empty is False; a non-integer is an error."""
    value = env.get(name, "").strip()
    if not value:
        return False
    try:
        return bool(int(value))
    except ValueError:
        raise ValueError(f"{name} must be an integer (0 or 1), got {value!r}") from None


@dataclass(frozen=True, kw_only=True)
class TorchSettings:
    """The switches of the torch layer; one instance per call (``from_env``)."""
    cpu_mode: bool = False           # VLLM_NEURON_CPU_MODE (bool(int(v))): run the plugin on CPU
    simulator: bool = False          # NKI_SIMULATOR: only the literal "1" turns it on
    precise_fp: bool = True          # NKI_PRECISE_FP: defaults to 1 (ml_dtypes storage) when unset
    disable_kernels: bool = False    # VLLM_NEURON_DISABLE_NKI_KERNELS: every op takes its fallback
    target: str | None = "trn3"      # NEURON_PLATFORM_TARGET_OVERRIDE (None: a name nkisim lacks)

    @classmethod
    def from_env(cls, env=None) -> "TorchSettings":
        env = os.environ if env is None else env
        raw_target = env.get("NEURON_PLATFORM_TARGET_OVERRIDE", "").strip() or "trn3"
        try:
            target = normalize_target(raw_target)
        except ValueError:
            target = None
        precise = env.get("NKI_PRECISE_FP", "").strip()
        return cls(cpu_mode=_int_flag("VLLM_NEURON_CPU_MODE", env),
                   simulator=env.get("NKI_SIMULATOR") == "1",
                   precise_fp=True if not precise else precise.lower() not in ("0", "false", "off"),
                   disable_kernels=_int_flag("VLLM_NEURON_DISABLE_NKI_KERNELS", env),
                   target=target)


def _device_type(tensor_or_device) -> str:
    dev = getattr(tensor_or_device, "device", tensor_or_device)
    return str(getattr(dev, "type", dev) or "").split(":")[0]


def can_run_kernel(tensor_or_device="", kernel=None) -> bool:
    """Whether an op should take its NKI kernel (True) or its torch fallback (False), now.

    Rules, in order (vllm-neuron's, plus the simulator's limits):
    1. VLLM_NEURON_DISABLE_NKI_KERNELS true -> False.
    2. VLLM_NEURON_CPU_MODE true -> NKI_SIMULATOR == "1" (the device is ignored), and then False
       for a target the simulator cannot run: NEURON_PLATFORM_TARGET_OVERRIDE not a known name, or
       trn1 (Decision: NeuronCore v2 runs no NKI Beta 2 kernel, aws-neuron-sdk#1322), or a
       ``kernel`` (jitted kernel or NKIHOPCaller) that carries a ``simulator_unsupported`` reason
       (e.g. it needs collectives) or whose LNC exceeds the target's.
    3. Otherwise True only for a tensor/device on a Neuron device. Decision: "" (no device given)
       counts as the host CPU, so it is False here (vllm-neuron answered True).
    """
    s = TorchSettings.from_env()
    if s.disable_kernels:
        return False
    if s.cpu_mode:
        if not s.simulator or s.target is None or s.target == "trn1":
            return False
        if getattr(kernel, "simulator_unsupported", None):
            return False
        lnc = getattr(kernel, "lnc", 1) or 1
        return lnc <= arch.get(s.target).lnc_max
    return _device_type(tensor_or_device) not in ("", "cpu", "meta")


__all__ = ["TorchSettings", "can_run_kernel"]
