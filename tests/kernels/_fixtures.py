"""Fixtures shared by the kernel-library tests: a clean environment and route counters per test,
and the two routes (`sim`: simulator on; `cpu`: PyTorch fallbacks)."""
import pytest

from nkisim.torch import reset_route_stats

_ENV = ("VLLM_NEURON_CPU_MODE", "NKI_SIMULATOR", "NKI_PRECISE_FP", "VLLM_NEURON_DISABLE_NKI_KERNELS",
        "NEURON_PLATFORM_TARGET_OVERRIDE", "NKI_NC_VERSION")


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    for name in _ENV:
        monkeypatch.delenv(name, raising=False)
    reset_route_stats()


@pytest.fixture
def sim(monkeypatch):
    monkeypatch.setenv("VLLM_NEURON_CPU_MODE", "1")
    monkeypatch.setenv("NKI_SIMULATOR", "1")


@pytest.fixture
def cpu(monkeypatch):
    monkeypatch.setenv("VLLM_NEURON_CPU_MODE", "1")
    monkeypatch.setenv("NKI_SIMULATOR", "0")
