"""greedy_sample: kernel vs fallback vs NumPy argmax (ties -> lowest index); routes; gate."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

torch = pytest.importorskip("torch")

from nkisim.kernels import greedy_sample  # noqa: E402
from nkisim.kernels.sampling import (CHUNK, greedy_sample_fallback, greedy_sample_kernel,  # noqa: E402
                                     kernel_fits)
from nkisim.torch import reset_route_stats, route_stats, simulate_nki_kernel  # noqa: E402
from _fixtures import clean_env, cpu, sim  # noqa: E402,F401

NAME = "nkisim.kernels.sampling.greedy_sample_kernel"


def logits(B, V, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(B, V, generator=g) * 3).to(dtype)


def run_kernel(x, lnc=1):
    return simulate_nki_kernel(greedy_sample_kernel, lnc, dict(logits=x))


def numpy_argmax(x):
    return torch.from_numpy(np.argmax(x.float().numpy(), axis=1))     # first occurrence wins


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("B, V", [(1, 1), (2, 3), (7, 1000), (130, 40), (3, 20000), (2, 32000)])
@pytest.mark.parametrize("lnc", [1, 2])
def test_kernel_matches_fallback_exactly(B, V, dtype, lnc):
    x = logits(B, V, dtype)
    got = run_kernel(x, lnc)
    assert got.dtype == torch.int32 and got.shape == (B,)
    assert torch.equal(got.long(), greedy_sample_fallback(x))


@pytest.mark.parametrize("target", ["trn2", "trn3"])
def test_kernel_runs_on_each_target(monkeypatch, target):
    monkeypatch.setenv("NEURON_PLATFORM_TARGET_OVERRIDE", target)
    x = logits(5, 1000, torch.bfloat16)
    assert torch.equal(run_kernel(x, 2).long(), greedy_sample_fallback(x))


def test_ties_go_to_the_lowest_index_across_and_within_chunks():
    V = 3 * CHUNK                                  # three chunks
    x = torch.zeros(4, V)
    x[0, [5, CHUNK + 7, 2 * CHUNK + 1]] = 9.0      # the same max in every chunk -> 5
    x[1, [CHUNK + 7, CHUNK + 9, 2 * CHUNK]] = 9.0  # first chunk below the max -> CHUNK + 7
    x[2, [V - 1]] = 9.0                            # the very last element
    x[3] = -float("inf")                           # all equal: index 0
    got = run_kernel(x)
    assert got.tolist() == [5, CHUNK + 7, V - 1, 0]
    assert torch.equal(got.long(), greedy_sample_fallback(x))


@settings(max_examples=20, deadline=None)
@given(rows=st.lists(st.lists(st.integers(-3, 3), min_size=9, max_size=9), min_size=1, max_size=5))
def test_ties_property_small_integer_logits(rows):
    """Logits drawn from 7 values: ties everywhere; the kernel picks NumPy's first maximum."""
    x = torch.tensor(rows, dtype=torch.float32)
    assert torch.equal(run_kernel(x).long(), numpy_argmax(x))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_fallback_matches_numpy_argmax(dtype):
    x = logits(7, 1000, dtype)
    x[:, 10] = x[:, 500] = 100.0                   # a tie: lowest index
    assert torch.equal(greedy_sample_fallback(x), numpy_argmax(x))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_op_takes_kernel_in_simulator(sim, dtype):
    x = logits(7, 1000, dtype)
    got = greedy_sample(x)
    assert got.dtype == torch.int64
    assert route_stats()[NAME] == {"kernel": 1, "fallback": 0}
    assert torch.equal(got, greedy_sample_fallback(x))


def test_op_takes_fallback_in_cpu_mode(cpu):
    x = logits(7, 1000, torch.bfloat16)
    got = greedy_sample(x)
    assert route_stats()[NAME] == {"kernel": 0, "fallback": 1}
    assert got.dtype == torch.int64 and torch.equal(got, greedy_sample_fallback(x))


@pytest.mark.parametrize("x", [
    torch.zeros(2, 8, dtype=torch.float16),        # dtype
    torch.zeros(2, 0),                             # empty vocabulary (argmax raises either way)
])
def test_gate_refuses_to_fallback(sim, x):
    try:
        want = greedy_sample_fallback(x)
    except (IndexError, RuntimeError):
        with pytest.raises((IndexError, RuntimeError)):
            greedy_sample(x)
    else:
        assert torch.equal(greedy_sample(x), want)
    assert route_stats()[NAME] == {"kernel": 0, "fallback": 1}


def test_gate_limits():
    assert kernel_fits(torch.zeros(1, 1)) and kernel_fits(torch.zeros(3, 32000, dtype=torch.bfloat16))
    assert not kernel_fits(torch.zeros(0, 8)) and not kernel_fits(torch.zeros(2, 8, dtype=torch.int32))


@pytest.mark.parametrize("route_env", ["sim", "cpu"])
@pytest.mark.parametrize("shape", [(50,), (2, 3, 8)])
def test_not_2d_logits_raise_on_both_routes(request, route_env, shape):
    """Docs: [B, V] -> [B]; a 1-D (or 3-D) tensor is refused before routing, not argmaxed."""
    request.getfixturevalue(route_env)
    with pytest.raises(ValueError, match=r"^greedy_sample: logits must be \[B, V\], got shape "
                                         + r"\[" + r", ".join(map(str, shape)) + r"\]$"):
        greedy_sample(torch.zeros(shape))
    assert route_stats() == {}
