"""Dynamic loops that never end raise LoopLimitError (naming the loop's line and the count) past
``max_loop_iterations``; a VirtualRegister's truth and comparisons are computed from its current
value, never a silent constant.

Documented behaviour compared (aws-neuron-sdk nki/api/nki/language/__init__.py: while_loop
"Loops while the condition register is nonzero, checking the condition before each iteration";
dynamic_range "step ... must be a compile-time positive integer (not VirtualRegister)";
nki/api/nki/isa/__init__.py VirtualRegister: registers in ``while reg:`` / dynamic_range)."""
import sys

import numpy as np
import pytest

import nkisim.nki as nki
import nkisim.nki.isa as nisa
import nkisim.nki.language as nl
from nkisim.config import KNOBS, Settings
from nkisim.errors import ArgumentError, DtypeError, LoopLimitError

F32 = np.float32


def _line():
    """The caller's next line."""
    return sys._getframe(1).f_lineno + 1


def _run(kernel, *args, **options):
    return nki.simulate(kernel, **options)(*args)


def _x():
    return np.zeros((1, 1), F32)


def test_the_cap_is_a_setting_with_a_generous_default():
    knob = next(k for k in KNOBS if k.field == "max_loop_iterations")
    assert knob.default == 1_000_000 and knob.env == ("NKISIM_MAX_LOOP_ITERATIONS",)
    assert Settings.from_env({"NKISIM_MAX_LOOP_ITERATIONS": " 25 "}).max_loop_iterations == 25
    for bad in ("0", "-3", "many"):
        with pytest.raises(ValueError, match="NKISIM_MAX_LOOP_ITERATIONS: expected a positive integer"):
            Settings.from_env({"NKISIM_MAX_LOOP_ITERATIONS": bad})
    with pytest.raises(ValueError, match="max_loop_iterations must be a positive integer"):
        Settings(max_loop_iterations=0)


def test_bare_while_on_a_register_that_never_clears():
    lines = []

    def kernel(x):
        r = nisa.register_alloc(1)
        lines.append(_line())
        while r:
            nisa.register_move(r, 1)
        return x
    with pytest.raises(LoopLimitError) as info:
        _run(kernel, _x(), max_loop_iterations=50)
    assert str(info.value) == (
        "while: the loop's register condition still holds after 50 iterations (max_loop_iterations 50, "
        f"NKISIM_MAX_LOOP_ITERATIONS); does it ever clear? (test_dynamic_loops.py:{lines[0]})")


@pytest.mark.parametrize("form", ["ne", "gt", "reflected", "not_eq"])
def test_while_on_a_register_comparison_that_never_clears(form, monkeypatch):
    monkeypatch.setenv("NKISIM_MAX_LOOP_ITERATIONS", "40")
    lines = []

    def kernel(x):
        r = nisa.register_alloc(7)
        lines.append(_line())
        if form == "ne":
            while r != 0:
                nisa.register_move(r, 7)
        elif form == "gt":
            while r > 3:
                nisa.register_move(r, 7)
        elif form == "reflected":
            while 0 < r:
                nisa.register_move(r, 7)
        else:
            while not r == 0:
                nisa.register_move(r, 7)
        return x
    with pytest.raises(LoopLimitError, match=r"^while: the loop's register condition still holds after 40 "
                                             r"iterations .*\(test_dynamic_loops\.py:(\d+)\)"):
        _run(kernel, _x())


def test_a_register_while_loop_that_ends_runs_every_iteration():
    """Under the cap the loop runs exactly as Python's while: n iterations (cap = n passes)."""
    def kernel(x, n_hbm):
        r = nisa.register_alloc()
        nisa.register_load(r, n_hbm)
        count = [0, 0]
        while r:
            count[0] += 1
            nisa.register_move(r, int(r) - 1)
        nisa.register_load(r, n_hbm)
        while r > 0:
            count[1] += 1
            nisa.register_move(r, int(r) - 1)
        out = nl.ndarray((1, 2), dtype=nl.int32, buffer=nl.shared_hbm)
        t = nl.ndarray((1, 2), dtype=nl.int32, buffer=nl.sbuf)
        nisa.memset(dst=t[:, 0:1], value=count[0])
        nisa.memset(dst=t[:, 1:2], value=count[1])
        nisa.dma_copy(dst=out, src=t)
        return out
    got = _run(kernel, _x(), np.array([[30]], np.int32), max_loop_iterations=30)
    assert got.tolist() == [[30, 30]]
    # repeated loops in one kernel each count from the start
    def twice(x):
        r = nisa.register_alloc()
        for _ in range(3):
            nisa.register_move(r, 20)
            while r:
                nisa.register_move(r, int(r) - 1)
        return x
    _run(twice, _x(), max_loop_iterations=20)


def test_if_on_a_register_inside_a_long_loop_is_not_a_loop():
    def kernel(x):
        r = nisa.register_alloc(1)
        hits = 0
        for _ in range(100):
            if r:
                hits += 1
            if r == 1:
                hits += 1
        assert hits == 200
        return x
    _run(kernel, _x(), max_loop_iterations=5)


def test_while_loop_whose_condition_never_clears():
    lines = []

    def kernel(x):
        r = nisa.register_alloc(1)
        lines.append(_line())
        nl.while_loop(r, lambda v: v)
        return x
    with pytest.raises(LoopLimitError) as info:
        _run(kernel, _x(), max_loop_iterations=64)
    assert str(info.value) == (
        "nl.while_loop: the condition register is still nonzero after 64 iterations (max_loop_iterations, "
        f"NKISIM_MAX_LOOP_ITERATIONS); does it ever clear? (test_dynamic_loops.py:{lines[0]})")


def test_while_loop_tests_before_each_iteration_and_runs_up_to_the_cap():
    calls = []

    def kernel(x):
        zero = nisa.register_alloc(0)
        nl.while_loop(zero, lambda v: calls.append("never") or v)
        r = nisa.register_alloc(10)

        def body(v):
            calls.append(int(v))
            nisa.register_move(v, int(v) - 1)
            return v
        nl.while_loop(r, body)
        return x
    _run(kernel, _x(), max_loop_iterations=10)
    assert calls == list(range(10, 0, -1))


@pytest.mark.parametrize("api", ["dynamic_range", "fori_loop"])
def test_dynamic_range_over_the_cap(api):
    lines = []

    def kernel(x, n_hbm):
        r = nisa.register_alloc()
        nisa.register_load(r, n_hbm)
        lines.append(_line())
        if api == "dynamic_range":
            for _ in nl.dynamic_range(r):
                pass
        else:
            nl.fori_loop(0, r, lambda i: None)
        return x
    with pytest.raises(LoopLimitError, match=rf"^nl\.{api}: the loop would run 2147483647 iterations, more than "
                                             r"1000000 \(max_loop_iterations, NKISIM_MAX_LOOP_ITERATIONS\) "
                                             r"\(test_dynamic_loops\.py:(\d+)\)") as info:
        _run(kernel, _x(), np.array([[2**31 - 1]], np.int32))
    assert info.match(rf"test_dynamic_loops\.py:({lines[0] + 1}|{lines[0] + 4})\)")
    # at the cap it runs
    seen = []

    def at_cap(x):
        for i in nl.dynamic_range(2, 14, 3):
            seen.append(int(i))
        nl.fori_loop(0, 4, lambda i: seen.append(int(i)))
        return x
    _run(at_cap, _x(), max_loop_iterations=4)
    assert seen == [2, 5, 8, 11, 0, 1, 2, 3]


@pytest.mark.parametrize("step", [0, -1, "reg", 1.5])
def test_dynamic_range_step_must_be_a_positive_integer(step):
    def kernel(x):
        s = nisa.register_alloc(2) if step == "reg" else step
        for _ in nl.dynamic_range(0, 4, s):
            pass
        return x
    with pytest.raises(ArgumentError, match=r"^nl\.dynamic_range: step must be a compile-time positive integer"):
        _run(kernel, _x())


# ---- register truth and comparisons: from the current value ------------------------------------

def test_register_comparisons_follow_the_current_value():
    got = {}

    def kernel(x):
        r = nisa.register_alloc(0)
        other = nisa.register_alloc(5)
        for v in (-2, 0, 3, 5):
            nisa.register_move(r, v)
            got[v] = (bool(r), r == 0, r != 0, r < 3, r <= 3, r > 3, r >= 3, 3 == r, 3 > r,
                      r == other, r < other, r == 3.0, bool(not r))
            if r == 0:
                got[v] += ("if-zero",)
            if r:
                got[v] += ("if-true",)
        return x
    _run(kernel, _x())
    for v in (-2, 0, 3, 5):
        want = (v != 0, v == 0, v != 0, v < 3, v <= 3, v > 3, v >= 3, 3 == v, 3 > v, v == 5, v < 5,
                v == 3.0, not v) + (("if-zero",) if v == 0 else ()) + (("if-true",) if v else ())
        assert got[v] == want, v


@pytest.mark.parametrize("other", ["0", None, [0], True])
def test_register_compared_with_a_non_number_raises(other):
    def kernel(x):
        r = nisa.register_alloc(0)
        return r == other
    with pytest.raises(DtypeError, match=r"^nisa\.VirtualRegister: cannot compare a register with "):
        _run(kernel, _x())
