"""findings="all"/"warn": run to the end, skip each failing instruction, report every finding by
rule; "all" then raises one FindingsError holding them (the caller's arrays untouched), "warn"
returns normally."""
import numpy as np
import pytest

import nkisim.nki as nki
import nkisim.nki.isa as nisa
import nkisim.nki.language as nl
from nkisim.errors import CapacityError, FindingsError, MemorySpaceError, NkiError, ShapeError


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
    for b in big + big:                                             # both read, both live together
        nisa.tensor_copy(dst=b[:, 0:1], src=b[:, 0:1])
    nisa.dma_copy(dst=out, src=t)
    return out


def test_first_finding_stops_by_default():
    x = np.ones((4, 8), np.float32)
    with pytest.raises(MemorySpaceError):
        nki.simulate(three_faults)(x)


def test_warn_reports_findings_grouped_and_returns(capsys):
    x = np.ones((4, 8), np.float32)
    sim = nki.simulate(three_faults, findings="warn")
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


def test_all_reports_the_findings_then_raises_one_error_holding_them(capsys):
    x = np.ones((4, 8), np.float32)
    sim = nki.simulate(three_faults, findings="all")
    with pytest.raises(FindingsError) as err:
        sim(x)
    e = err.value
    assert isinstance(e, NkiError) and isinstance(e, RuntimeError)
    assert [type(f) for f in e.findings] == [MemorySpaceError, ShapeError, CapacityError]
    assert e.findings == sim.findings
    first = e.findings[0]
    assert str(e) == (f"kernel launch: kernel three_faults broke 3 rule(s) (1 MemorySpaceError, 1 ShapeError, "
                      f"1 CapacityError); the first: {first.op}: {first.what} ({first.where})")
    assert e.where == first.where and first.where.startswith("test_findings.py:")
    err_lines = capsys.readouterr().err.splitlines()   # printed before the error, as with "warn"
    assert err_lines[0] == "nkisim: 3 finding(s) in kernel three_faults"


def test_all_leaves_the_callers_arrays_untouched():
    def kernel(x):
        t = nl.load(x)
        nl.store(x, nl.multiply(t, 2.0))                 # a valid write to the caller's array
        nisa.tensor_tensor(dst=t, data1=t, data2=t[:, 0:4], op=nl.add)   # ShapeError, recorded
        return x
    x = np.arange(32, dtype=np.float32).reshape(4, 8)
    before = x.copy()
    with pytest.raises(FindingsError) as err:
        nki.simulate(kernel, findings="all")(x)
    assert [type(f) for f in err.value.findings] == [ShapeError]
    np.testing.assert_array_equal(x, before)
    nki.simulate(kernel, findings="warn")(x)             # warn: the kernel's writes land
    np.testing.assert_array_equal(x, before * 2)


def test_all_without_findings_returns_normally(capsys):
    x = np.ones((4, 8), np.float32)

    def kernel(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        nl.store(out, nl.load(x))
        return out
    sim = nki.simulate(kernel, findings="all")
    np.testing.assert_array_equal(sim(x), x)
    assert sim.findings == [] and capsys.readouterr().err == ""


def test_an_error_after_findings_joins_them():
    """A rule outside instructions (an allocation) raises even under "all": with earlier findings the
    one FindingsError holds them and that error last (chained as its cause)."""
    def kernel(x):
        t = nl.load(x)
        nisa.tensor_tensor(dst=t, data1=t, data2=t[:, 0:4], op=nl.add)   # recorded
        nl.ndarray((200, 8), dtype=nl.float32, buffer=nl.sbuf)            # raises: partition dim
        return x
    x = np.ones((4, 8), np.float32)
    with pytest.raises(FindingsError) as err:
        nki.simulate(kernel, findings="all")(x)
    assert [type(f) for f in err.value.findings] == [ShapeError, ShapeError]
    assert err.value.__cause__ is err.value.findings[-1]
    with pytest.raises(ShapeError, match="partition dim 200"):            # warn: that error itself
        nki.simulate(kernel, findings="warn")(x)


@pytest.mark.parametrize("value", ["all", "ALL ", "warn", "Warn", "first"])
def test_findings_environment_values(monkeypatch, value):
    from nkisim.config import Settings
    monkeypatch.setenv("NKISIM_FINDINGS", value)
    assert Settings.from_env().findings == value.strip().lower()


def test_findings_setting_is_validated():
    with pytest.raises(ValueError, match="Settings.findings must be 'first', 'all' or 'warn', got 'some'"):
        nki.simulate(three_faults, findings="some")(np.ones((4, 8), np.float32))


def test_repeated_identical_findings_print_once_with_their_count(capsys):
    def kernel(x):
        t = nl.load(x)
        for _ in range(3):
            nisa.tensor_tensor(dst=t, data1=t, data2=t[:, 0:4], op=nl.add)     # the same broken rule
        return x
    nki.simulate(kernel, findings="warn")(np.ones((128, 8), np.float32))
    err = capsys.readouterr().err
    assert "3 finding(s)" in err and "ShapeError (3):" in err
    assert err.count("data2 has 4 elements per partition") == 1 and "(x3)" in err


def test_zeros_errors_name_nl_zeros():
    def kernel(x):
        nl.zeros((128, 64.5), dtype=nl.float32, buffer=nl.sbuf)
        return x
    with pytest.raises(ShapeError, match=r"^nl\.zeros: "):
        nki.simulate(kernel)(np.ones((1, 1), np.float32))
