"""``nkisim.simulate`` / ``nki.simulate`` of a Beta-1 (``neuronxcc.nki.jit``) kernel runs it as
its own launch does: every program of its grid, Beta-1 semantics (a ``psum += <matmul>`` onto a
bias keeps the bias), ``nki.simulate``'s options over the jit's ``platform_target``. Before, the
kernel's function ran as one Beta-2 program: program 0's rows only. References: NumPy."""
import numpy as np
import pytest

import neuronxcc.nki as nki1
import neuronxcc.nki.isa as nisa1
import neuronxcc.nki.language as nl1
import nkisim
from nkisim import nki
from nkisim.errors import FindingsError


@nki1.jit
def rows(a):
    """Program i copies row i of ``a`` (2 x 4) into the output, plus i."""
    out = nl1.ndarray((2, 4), dtype=nl1.float32, buffer=nl1.shared_hbm)
    i = nl1.program_id(0)
    t = nl1.load(a[i:i + 1, :])
    nl1.store(out[i:i + 1, :], value=nl1.add(t, i))
    return out


A = np.arange(8, dtype=np.float32).reshape(2, 4)
WANT = A + np.array([[0], [1]], np.float32)


@pytest.mark.parametrize("launch", [
    lambda: nkisim.simulate(rows[2]),
    lambda: nki.simulate(rows[2]),
    lambda: nki.simulate(rows)[2],
    lambda: nki.simulate(rows, target="trn2")[2],
])
def test_simulate_runs_every_program_of_a_beta1_grid(launch):
    np.testing.assert_array_equal(launch()(A), WANT)


def test_simulate_keeps_beta1_psum_sum_semantics():
    rng = np.random.default_rng(3)
    a = rng.integers(-3, 4, (32, 16)).astype(np.float32)
    b = rng.integers(-3, 4, (32, 24)).astype(np.float32)
    bias = rng.integers(-50, 50, (16, 24)).astype(np.float32)

    @nki1.jit
    def k(a, b, bias):
        out = nl1.ndarray((16, 24), dtype=nl1.float32, buffer=nl1.shared_hbm)
        ps = nl1.ndarray((16, 24), nl1.float32, buffer=nl1.psum)
        ps[...] = nl1.load(bias)
        ps += nisa1.nc_matmul(nl1.load(a), nl1.load(b))
        nl1.store(out, nl1.copy(ps))
        return out

    np.testing.assert_array_equal(nkisim.simulate(k)(a, b, bias), bias + a.T @ b)   # exact integers


def test_simulate_options_reach_a_beta1_launch():
    """``findings="all"`` collects the broken rule (a 256-partition tile) and raises one
    FindingsError holding it."""
    @nki1.jit(platform_target="trn3")
    def k(a):
        out = nl1.ndarray((256, 4), dtype=nl1.float32, buffer=nl1.shared_hbm)
        t = nl1.load(a)
        nl1.store(out, value=nl1.exp(t))
        return out

    x = np.zeros((256, 4), np.float32)
    sim = nki.simulate(k, findings="all")
    with pytest.raises(FindingsError):
        sim(x)
    assert sim.findings and "partition" in str(sim.findings[0])
