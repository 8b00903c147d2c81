"""findings="all": run to the end, skip each failing instruction, report every finding by rule."""
import numpy as np
import pytest

import nkisim.nki as nki
import nkisim.nki.isa as nisa
import nkisim.nki.language as nl
from nkisim.errors import CapacityError, MemorySpaceError, ShapeError


def three_faults(x):
    out = nl.ndarray((4, 8), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.ndarray((4, 8), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    ps = nl.ndarray((4, 8), dtype=nl.float32, buffer=nl.psum)
    nisa.dma_copy(dst=out, src=ps)                                  # PSUM source: MemorySpaceError
    nisa.tensor_tensor(dst=t, data1=t, data2=t[:, 0:4], op=nl.add)  # free size mismatch: ShapeError
    big = [nl.ndarray((128, 60000), dtype=nl.float32, buffer=nl.sbuf) for _ in range(2)]  # CapacityError
    for b in big:
        nisa.memset(dst=b[:, 0:1], value=0.0)
    nisa.dma_copy(dst=out, src=t)
    return out


def test_first_finding_stops_by_default():
    x = np.ones((4, 8), np.float32)
    with pytest.raises(MemorySpaceError):
        nki.simulate(three_faults)(x)


def test_all_findings_are_reported_grouped(capsys):
    x = np.ones((4, 8), np.float32)
    sim = nki.simulate(three_faults, findings="all")
    out = sim(x)
    np.testing.assert_array_equal(out, x)            # valid instructions still ran
    kinds = [type(e) for e in sim.findings]
    assert kinds == [MemorySpaceError, ShapeError, CapacityError]
    err = capsys.readouterr().err.splitlines()
    assert err[0] == "nkisim: 3 finding(s) in kernel three_faults"
    assert err[1] == "  MemorySpaceError (1):"
    assert err[2].startswith("    nisa.dma_copy: src is in psum") and "test_findings.py:" in err[2]
    assert err[3] == "  ShapeError (1):"
    assert err[5] == "  CapacityError (1):"


def test_findings_setting_is_validated():
    with pytest.raises(ValueError, match="Settings.findings must be 'first' or 'all', got 'some'"):
        nki.simulate(three_faults, findings="some")(np.ones((4, 8), np.float32))
