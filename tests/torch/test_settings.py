"""Environment switches read at call time, can_run_kernel's rules, route counters."""
import pytest

torch = pytest.importorskip("torch")

from nkisim.config import Settings  # noqa: E402
from nkisim.errors import SimulatorOffError  # noqa: E402
from nkisim.torch import (TorchSettings, can_run_kernel, dispatch, reset_route_stats,  # noqa: E402
                          route_stats, wrap_nki)
from nki_torch_kernels import clean_env, scale_inplace  # noqa: E402,F401

KEY = "nki_torch_kernels.scale_inplace"


def test_defaults_when_nothing_is_set():
    s = Settings.from_env()
    assert (s.cpu_mode, s.simulator, s.precise_fp, s.disable_kernels, s.target) == (False, False, True, False,
                                                                                   "trn3")
    assert TorchSettings is Settings                # one settings table for the core and torch


@pytest.mark.parametrize("value, on", [("1", True), ("0", False), (" 1", True), ("1 ", True), (" 0 ", False),
                                       ("", False), ("  ", False)])
def test_nki_simulator_is_1_or_0_with_whitespace_stripped(monkeypatch, value, on):
    monkeypatch.setenv("NKI_SIMULATOR", value)
    assert Settings.from_env().simulator is on


@pytest.mark.parametrize("value", ["true", "yes", "on", "2", "1.0"])
def test_nki_simulator_values_vllm_neuron_would_read_as_off_are_rejected(monkeypatch, value):
    monkeypatch.setenv("NKI_SIMULATOR", value)
    with pytest.raises(ValueError, match=rf"^NKI_SIMULATOR: expected 1 or 0, got '{value}'$"):
        Settings.from_env()
    with pytest.raises(ValueError, match=r"^NKI_SIMULATOR: "):
        can_run_kernel("cpu")                       # the gate reads the same parse


def test_settings_read_at_call_time(monkeypatch):
    monkeypatch.setenv("VLLM_NEURON_CPU_MODE", "1")
    monkeypatch.setenv("NKI_PRECISE_FP", "0")
    monkeypatch.setenv("VLLM_NEURON_DISABLE_NKI_KERNELS", "1")
    monkeypatch.setenv("NEURON_PLATFORM_TARGET_OVERRIDE", "gen3")
    s = Settings.from_env()
    assert (s.cpu_mode, s.simulator, s.precise_fp, s.disable_kernels, s.target) == (True, False, False, True,
                                                                                   "trn2")


def test_the_torch_layer_and_the_core_agree_on_the_three_old_disagreements(monkeypatch):
    # NKI_NC_VERSION names the target when NEURON_PLATFORM_TARGET_OVERRIDE is unset (both layers)
    monkeypatch.setenv("NKI_NC_VERSION", "gen3")
    assert Settings.from_env().target == "trn2"
    monkeypatch.setenv("VLLM_NEURON_CPU_MODE", "1")
    monkeypatch.setenv("NKI_SIMULATOR", " 1")       # stripped: on, for the gate and the jit call
    assert can_run_kernel("cpu") is True
    monkeypatch.setenv("NKI_PRECISE_FP", "maybe")   # no longer read as 1 by the torch layer
    with pytest.raises(ValueError, match=r"^NKI_PRECISE_FP: expected 1/0, true/false, yes/no or on/off \(any case\), got 'maybe'$"):
        can_run_kernel("cpu")


def test_cpu_mode_must_be_an_integer(monkeypatch):
    monkeypatch.setenv("VLLM_NEURON_CPU_MODE", "on")
    with pytest.raises(ValueError, match=r"^VLLM_NEURON_CPU_MODE: expected an integer \(nonzero is on\), got 'on'$"):
        Settings.from_env()


@pytest.mark.parametrize("value, on", [("0", False), ("1", True), ("2", True), (" 1 ", True), ("-1", True)])
def test_vllm_switches_read_as_vllm_neuron_does(monkeypatch, value, on):
    monkeypatch.setenv("VLLM_NEURON_DISABLE_NKI_KERNELS", value)
    assert Settings.from_env().disable_kernels is on


@pytest.mark.parametrize("env, device, want", [
    ({}, "cpu", False),                                             # rule 3: host CPU
    ({}, "", False),                                                # Decision: "" is the host
    ({}, "neuron", True),
    ({}, "neuron:1", True),
    ({"VLLM_NEURON_DISABLE_NKI_KERNELS": "1"}, "neuron", False),    # rule 1 wins
    ({"VLLM_NEURON_CPU_MODE": "1"}, "cpu", False),                  # rule 2: simulator off
    ({"VLLM_NEURON_CPU_MODE": "1", "NKI_SIMULATOR": "1"}, "cpu", True),
    ({"VLLM_NEURON_CPU_MODE": "1", "NKI_SIMULATOR": "1"}, "neuron", True),   # device ignored
    ({"VLLM_NEURON_CPU_MODE": "1", "NKI_SIMULATOR": "1", "VLLM_NEURON_DISABLE_NKI_KERNELS": "1"},
     "cpu", False),
    ({"VLLM_NEURON_CPU_MODE": "1", "NKI_SIMULATOR": "1", "NEURON_PLATFORM_TARGET_OVERRIDE": "trn1"},
     "cpu", False),                                                 # NeuronCore v2: no NKI kernels
    ({"VLLM_NEURON_CPU_MODE": "0", "NKI_SIMULATOR": "1"}, "cpu", False),
])
def test_can_run_kernel_rules(monkeypatch, env, device, want):
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    assert can_run_kernel(device) is want
    if device == "cpu":
        assert can_run_kernel(torch.device("cpu")) is want
        assert can_run_kernel(torch.zeros(1)) is want


def test_can_run_kernel_rejects_a_target_nkisim_lacks(monkeypatch):
    monkeypatch.setenv("VLLM_NEURON_CPU_MODE", "1")
    monkeypatch.setenv("NKI_SIMULATOR", "1")
    monkeypatch.setenv("NEURON_PLATFORM_TARGET_OVERRIDE", "trn9")
    with pytest.raises(ValueError, match=r"^NEURON_PLATFORM_TARGET_OVERRIDE: unknown target 'trn9'; expected "
                                         r"one of gen2, gen3, gen4, inf2, trn1, trn2, trn3$"):
        can_run_kernel("cpu")


def test_can_run_kernel_says_no_for_a_kernel_the_simulator_cannot_run(monkeypatch):
    monkeypatch.setenv("VLLM_NEURON_CPU_MODE", "1")
    monkeypatch.setenv("NKI_SIMULATOR", "1")
    w = wrap_nki(scale_inplace)
    assert can_run_kernel("cpu", w[2]) is True

    def needs_collectives(x):
        return x
    needs_collectives.simulator_unsupported = "uses nki.collectives, which nkisim does not simulate"
    assert can_run_kernel("cpu", needs_collectives) is False


def test_cpu_mode_without_simulator_direct_call_raises_and_gate_says_no(monkeypatch):
    monkeypatch.setenv("VLLM_NEURON_CPU_MODE", "1")
    w = wrap_nki(scale_inplace)
    x = torch.ones(2, 2)
    assert can_run_kernel(x, w) is False
    with pytest.raises(SimulatorOffError, match=r"^nki_kernel_wrapper: kernel nki_torch_kernels\.scale_inplace "
                                                r"was dispatched to CPU but the NKI simulator is off; set "
                                                r"NKI_SIMULATOR=1 .*can_run_kernel\(\) is False\)$"):
        w(x)
    assert torch.equal(x, torch.ones(2, 2))
    assert route_stats() == {}


def test_route_counters_follow_the_simulator_switch(monkeypatch):
    monkeypatch.setenv("VLLM_NEURON_CPU_MODE", "1")
    op = dispatch(wrap_nki(scale_inplace), lambda x, factor=2.0: x.mul_(factor))
    x = torch.ones(2, 2)
    op(x, 3.0)                                            # simulator off: fallback
    assert route_stats() == {KEY: {"kernel": 0, "fallback": 1}}
    monkeypatch.setenv("NKI_SIMULATOR", "1")              # read at call time
    assert can_run_kernel(x) is True
    op(x, 3.0)
    op(x, 3.0)
    assert route_stats() == {KEY: {"kernel": 2, "fallback": 1}}
    assert torch.equal(x, torch.full((2, 2), 27.0))
    reset_route_stats()
    assert route_stats() == {}


def test_route_counters_count_every_simulator_entry_point_on_torch_tensors(monkeypatch):
    import numpy as np
    import nkisim.nki as nki
    from nkisim.errors import ShapeError
    from nkisim.torch import simulate_nki_kernel
    from nki_torch_kernels import too_many_partitions
    monkeypatch.setenv("NKI_SIMULATOR", "1")
    x = torch.ones(2, 2)
    nki.simulate(scale_inplace)(x)
    scale_inplace(x)                                            # jitted call, NKI_SIMULATOR=1
    nki.simulator.simulate_kernel(scale_inplace, (), {"x": x})
    simulate_nki_kernel(scale_inplace, 1, {"x": x})
    wrap_nki(scale_inplace)(x)
    assert route_stats() == {KEY: {"kernel": 5, "fallback": 0}}
    nki.simulate(scale_inplace)(np.ones((2, 2), np.float32))    # NumPy only: not counted
    with pytest.raises(ShapeError):
        nki.simulate(too_many_partitions)(x)                    # a failed run: not counted
    assert route_stats() == {KEY: {"kernel": 5, "fallback": 0}}


def test_route_counters_skip_shape_only_runs_under_compile(monkeypatch):
    from nki_torch_kernels import copy
    monkeypatch.setenv("NKI_SIMULATOR", "1")
    W = wrap_nki(copy)
    torch._dynamo.reset()
    f = torch.compile(lambda a: W(a) + 1, backend="aot_eager", fullgraph=True)
    f(torch.ones(2, 2))
    f(torch.ones(2, 2))
    assert route_stats() == {"nki_torch_kernels.copy": {"kernel": 2, "fallback": 0}}
