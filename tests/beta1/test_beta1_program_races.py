"""Races between the SPMD programs of one Beta-1 launch (``detect_races``; see the Decision in
``checks.races.ProgramRaces``): two programs writing the same HBM elements with different values,
nothing reading them in between, raise RaceError; disjoint tiles, equal values, read-modify-writes
and runs without race detection do not."""
import re

import numpy as np
import pytest

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
from nkisim.errors import RaceError


@pytest.fixture
def races(monkeypatch):
    monkeypatch.setenv("NKISIM_DETECT_RACES", "1")


@nki.jit(mode="simulation")
def whole_output(a):
    out = nl.ndarray((4, 8), dtype=a.dtype, buffer=nl.shared_hbm)
    i = nl.program_id(0)
    nl.store(out, nl.load(a[i * 4:(i + 1) * 4, :]))       # every program writes all of out
    return out


@nki.jit(mode="simulation")
def own_tiles(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    i, j = nl.program_id(0), nl.program_id(1)
    t = nl.load(a[i * 4:(i + 1) * 4, j * 4:(j + 1) * 4])
    nl.store(out[i * 4:(i + 1) * 4, j * 4:(j + 1) * 4], nl.multiply(t, 2.0))
    return out


def test_programs_overwriting_each_others_output_race(races):
    a = np.arange(64, dtype=np.float32).reshape(8, 8)
    with pytest.raises(RaceError) as info:
        nki.simulate_kernel(whole_output[2], a)
    assert re.fullmatch(r"nisa\.dma_copy: dst writes 32 element\(s\) of shared_hbm tensor \(4, 8\) float32 in "
                        r"SPMD program 1 that program 0 wrote \(test_beta1_program_races\.py:\d+\) with "
                        r"different values, and nothing read them since: the programs of a launch run in "
                        r"parallel, in no order, so which value survives is undefined; give each program "
                        r"its own elements \(test_beta1_program_races\.py:\d+\)", str(info.value))


def test_without_race_detection_the_last_program_wins(monkeypatch):
    monkeypatch.delenv("NKISIM_DETECT_RACES", raising=False)
    a = np.arange(64, dtype=np.float32).reshape(8, 8)
    np.testing.assert_array_equal(nki.simulate_kernel(whole_output[2], a), a[4:])


def test_each_program_its_own_tile_is_no_race_in_a_2d_grid(races):
    a = np.arange(64, dtype=np.float32).reshape(8, 8)
    np.testing.assert_array_equal(nki.simulate_kernel(own_tiles[2, 2], a), a * 2)


def test_2d_grid_names_programs_by_grid_index(races):
    @nki.jit(mode="simulation")
    def k(a):
        out = nl.ndarray((4, 4), dtype=a.dtype, buffer=nl.shared_hbm)
        i, j = nl.program_id(0), nl.program_id(1)
        nl.store(out, nl.load(a[i * 4:(i + 1) * 4, j * 4:(j + 1) * 4]))
        return out
    a = np.arange(64, dtype=np.float32).reshape(8, 8)
    with pytest.raises(RaceError, match=r"in SPMD program \(0, 1\) that program \(0, 0\) wrote"):
        nki.simulate_kernel(k[2, 2], a)


def test_equal_values_are_no_race(races):
    @nki.jit(mode="simulation")
    def k(a):
        out = nl.ndarray((4, 8), dtype=a.dtype, buffer=nl.shared_hbm)
        nl.store(out, nl.load(a[0:4, :]))                   # every program the same values
        return out
    a = np.arange(64, dtype=np.float32).reshape(8, 8)
    a[0, 0] = np.nan
    got = nki.simulate_kernel(k[3], a)
    np.testing.assert_array_equal(got, a[:4])


def test_read_modify_writes_of_every_program_add_up(races):
    @nki.jit(mode="simulation")
    def k(table, idx, vals):
        i = nl.program_id(0)
        it = nl.load(idx)
        nl.atomic_rmw(table[it, nl.arange(4)[None, :]], value=nl.load(vals[i]), op=np.add)
    table = np.zeros((5, 4), np.float32)
    idx = np.array([[1], [3]], np.int32)
    vals = np.arange(24, dtype=np.float32).reshape(3, 2, 4)
    nki.simulate_kernel(k[3], table, idx, vals)
    want = np.zeros((5, 4), np.float32)
    want[[1, 3]] = vals.sum(axis=0)
    np.testing.assert_array_equal(table, want)


def test_a_failed_race_check_leaves_the_callers_arrays(races):
    @nki.jit(mode="simulation")
    def k(a, out):
        i = nl.program_id(0)
        nl.store(out, nl.load(a[i * 4:(i + 1) * 4, :]))
    a = np.arange(64, dtype=np.float32).reshape(8, 8)
    out = np.full((4, 8), -1.0, np.float32)
    with pytest.raises(RaceError):
        nki.simulate_kernel(k[2], a, out)
    np.testing.assert_array_equal(out, -1.0)
