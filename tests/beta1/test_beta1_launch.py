"""Beta-1 launches: ``nki.jit`` modes, SPMD grids of any rank with program ids, ``nl.nc`` /
``nl.spmd_dim`` core mapping, ``simulate_kernel`` with outputs passed as arguments, shared_hbm
outputs across programs, typing annotations, benchmark, nested grids."""
import numpy as np
import pytest

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import neuronxcc.nki.typing as nt
import nkisim
from nkisim.errors import ArgumentError, ShapeError, UnsupportedError
from nkisim.runtime.beta1 import Grid, parse_grid


def _ids_kernel(out):
    """Each program stores (its ids..., ndim, num_programs) into its row of ``out``."""
    flat = 0
    for ax in range(nl.program_ndim()):
        flat = flat * nl.num_programs(ax) + nl.program_id(ax)
    row = nl.zeros((1, 5), dtype=nl.int32)
    for ax in range(nl.program_ndim()):
        row[0:1, ax:ax + 1] = nl.full((1, 1), nl.program_id(ax), dtype=nl.int32)
    row[0:1, 3:4] = nl.full((1, 1), nl.program_ndim(), dtype=nl.int32)
    row[0:1, 4:5] = nl.full((1, 1), nl.num_programs(), dtype=nl.int32)
    nl.store(out[flat:flat + 1, :], row)


ids_kernel = nki.jit(_ids_kernel, mode="simulation")


@pytest.mark.parametrize("grid", [(3,), (2, 3), (2, 2, 2)])
def test_grid_of_any_rank_gives_each_program_its_ids(grid):
    n = int(np.prod(grid))
    out = np.zeros((n, 5), np.int32)
    nki.simulate_kernel(ids_kernel[grid], out)          # an output passed as an argument: written in place
    want = np.zeros((n, 5), np.int32)
    for flat, ix in enumerate(np.ndindex(*grid)):
        want[flat, :len(ix)] = ix
        want[flat, 3], want[flat, 4] = len(grid), n
    np.testing.assert_array_equal(out, want)


def test_no_grid_is_one_program_of_rank_0():
    out = np.zeros((1, 5), np.int32)
    ids_kernel(out)
    np.testing.assert_array_equal(out, [[0, 0, 0, 0, 1]])


@pytest.mark.parametrize("spec, cores", [
    ((nl.nc(2), 2), [0, 0, 1, 1]),                      # the nl.nc docs: NC0 runs kernel[0, *]
    ((nl.spmd_dim(nl.nc(2), 2), 2), [0] * 4 + [1] * 4),  # spmd_dim docs, example 2
    ((nl.nc(2) * 2, 2), [0] * 4 + [1] * 4),
    ((nl.spmd_dim(2, nl.nc(2)), 2), [0, 0, 1, 1, 0, 0, 1, 1]),   # example 3
    ((2 * nl.nc(2), 2), [0, 0, 1, 1, 0, 0, 1, 1]),
    ((4, 2), [0] * 8),
])
def test_programs_map_onto_cores_as_documented(spec, cores):
    g = Grid(parse_grid(spec))
    assert [g.core_of(ix) for ix in np.ndindex(*g.dims)] == cores
    assert g.cores == max(cores) + 1


def test_nc2_launch_runs_every_program_on_its_core():
    src = np.arange(8, dtype=np.float32).reshape(4, 2, 1, 1)

    @nki.jit(mode="simulation", platform_target="trn2")
    def copy(a):
        b = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)     # one tensor for all programs
        i, j = nl.program_id(0), nl.program_id(1)
        nl.store(b[i, j], nl.load(a[i, j]))
        return b

    with nkisim.trace.record() as events:
        got = copy[nl.spmd_dim(2, nl.nc(2)), 2](src)
    np.testing.assert_array_equal(got, src)
    stores = [e.core for e in events if e.api == "nl.store"]
    assert stores == [0, 0, 0, 0, 1, 1, 1, 1] or sorted(stores) == [0, 0, 0, 0, 1, 1, 1, 1]
    assert len(stores) == 8


def test_nc2_needs_a_two_core_target():
    with pytest.raises(UnsupportedError, match=r"LNC2 needs a target with 2 cores per logical core; trn1 has 1"):
        nki.jit(_ids_kernel, mode="simulation", platform_target="trn1")[nl.nc(2)](np.zeros((2, 5), np.int32))


def test_simulation_mode_ignores_nki_simulator(monkeypatch):
    monkeypatch.setenv("NKI_SIMULATOR", "0")
    out = np.zeros((2, 5), np.int32)
    ids_kernel[2](out)
    assert out[1, 0] == 1


def test_bad_mode_and_bad_grid():
    with pytest.raises(ArgumentError, match=r"mode 'gpu' is not one of"):
        nki.jit(_ids_kernel, mode="gpu")
    with pytest.raises(TypeError, match=r"each dimension must be an integer >= 1"):
        ids_kernel[0]
    with pytest.raises(UnsupportedError, match=r"more than one nl\.nc"):
        ids_kernel[nl.nc(2), nl.nc(2)]


def test_program_id_axis_out_of_range():
    @nki.jit(mode="simulation")
    def k():
        nl.program_id(2)

    with pytest.raises(ArgumentError, match=r"^nl\.program_id: axis 2 out of range for a 2-d launch grid"):
        k[2, 2]()


def test_returned_on_chip_tile_comes_back_as_values():
    x = np.arange(8, dtype=np.float32).reshape(2, 4)

    @nki.jit(mode="simulation")
    def k(x):
        return nl.exp(nl.load(x))

    np.testing.assert_allclose(nki.simulate_kernel(k, x), np.exp(x), rtol=1e-6)


def test_annotated_shapes_are_checked():
    @nki.jit(mode="simulation")
    def k(a: nt.tensor[4, 8], b: nt.mutable_tensor):
        nl.store(b, nl.load(a))

    a, b = np.ones((4, 8), np.float32), np.zeros((4, 8), np.float32)
    k(a, b)
    np.testing.assert_array_equal(b, a)
    with pytest.raises(ShapeError, match=r"argument 'a' has shape \[4, 9\], its annotation nt\.tensor\[4, 8\] "
                                         r"expects \[4, 8\]"):
        k(np.ones((4, 9), np.float32), b)


def test_nested_grid_launch_is_unsupported():
    inner = nki.jit(_ids_kernel, mode="simulation")

    @nki.jit(mode="simulation")
    def outer(out):
        inner[2](out)

    with pytest.raises(UnsupportedError, match="err_nested_kernel_with_spmd_grid"):
        outer(np.zeros((2, 5), np.int32))


def test_sub_kernel_call_runs_inline():
    inner = nki.jit(_ids_kernel, mode="simulation")

    @nki.jit(mode="simulation")
    def outer(out):
        inner(out)

    out = np.zeros((2, 5), np.int32)
    outer[2](out)
    np.testing.assert_array_equal(out[:, 0], [0, 1])


def test_benchmark_sets_the_latency_estimate(capsys):
    x = np.ones((128, 512), np.float32)

    @nki.benchmark(warmup=1, iters=2)
    def k(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        nl.store(out, nl.add(nl.load(x), 1.0))
        return out

    np.testing.assert_array_equal(k(x), x + 1)
    us = k.benchmark_result.nc_latency.get_latency_percentile(50)
    assert us > 0 and us == k.benchmark_result.nc_latency.get_latency_percentile(99)
    assert "nki.benchmark k: estimated" in capsys.readouterr().out


def test_baremetal_and_trace_decorators():
    @nki.trace
    def double(t):
        return nl.multiply(t, 2.0)

    @nki.baremetal(save_neff_name="file.neff")
    def k(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        nl.store(out, double(nl.load(x)))
        return out

    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_array_equal(k(x), 2 * x)


def test_kernel_sign_lists_parameters():
    assert list(ids_kernel.sign.parameters) == ["out"]
