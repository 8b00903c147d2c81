"""``can_run_kernel``: whether an op takes its NKI kernel or its torch fallback, read at call time.

The switches (VLLM_NEURON_CPU_MODE, VLLM_NEURON_DISABLE_NKI_KERNELS, NKI_SIMULATOR,
NEURON_PLATFORM_TARGET_OVERRIDE, ...) are rows of the one settings table, ``config.Settings``:
the torch layer and the simulator read the environment through the same parser.
Imports nkisim.config and nkisim.arch only (no torch at import; tensors are inspected by duck type).
"""
from __future__ import annotations

from .. import arch
from ..config import Settings

TorchSettings = Settings    # the torch layer's name for the one settings table (kept for callers)


def _device_type(tensor_or_device) -> str:
    dev = getattr(tensor_or_device, "device", tensor_or_device)
    return str(getattr(dev, "type", dev) or "").split(":")[0]


def can_run_kernel(tensor_or_device="", kernel=None) -> bool:
    """Whether an op should take its NKI kernel (True) or its torch fallback (False), now.

    Rules, in order (vllm-neuron's, plus the simulator's limits):
    1. VLLM_NEURON_DISABLE_NKI_KERNELS true -> False.
    2. VLLM_NEURON_CPU_MODE true -> NKI_SIMULATOR == "1" (the device is ignored), and then False
       for a target the simulator cannot run: trn1 (Decision: NeuronCore v2 runs no NKI Beta 2
       kernel, aws-neuron-sdk#1322), or a ``kernel`` (jitted kernel or NKIHOPCaller) that carries
       a ``simulator_unsupported`` reason (e.g. it needs collectives) or whose LNC exceeds the
       target's.
    3. Otherwise True only for a tensor/device on a Neuron device. Decision: "" (no device given)
       counts as the host CPU, so it is False here (vllm-neuron answered True).
    Raises ValueError for a switch set to a value the settings table does not accept (Decision:
    the simulator would refuse the same environment; e.g. NEURON_PLATFORM_TARGET_OVERRIDE=trn9,
    NKI_SIMULATOR=true), naming the variable and the accepted values.
    """
    s = Settings.from_env()
    if s.disable_kernels:
        return False
    if s.cpu_mode:
        if not s.simulator or s.target == "trn1":
            return False
        if getattr(kernel, "simulator_unsupported", None):
            return False
        lnc = getattr(kernel, "lnc", 1) or 1
        return lnc <= arch.get(s.target).lnc_max
    return _device_type(tensor_or_device) not in ("", "cpu", "meta")


__all__ = ["TorchSettings", "can_run_kernel"]
