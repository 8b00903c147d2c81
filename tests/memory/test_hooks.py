"""memory.hooks: errors of reads and writes name the running instruction and operand from the
dispatcher (``core.ins``), never from the call stack; checks and language register their hooks."""
import numpy as np
import pytest

import nkisim.nki as nki
import nkisim.nki.language as nl
from nkisim import state
from nkisim.errors import MemorySpaceError, RaceError, UninitializedReadError
from nkisim.isa.dispatch import SPECS, Passed, instruction
from nkisim.isa.enums import engine
from nkisim.memory import access, hooks


def _copy_rules(ins, dst, src, name):
    return Passed(engine.vector)


def _copy_compute(ins, dst, src, name):
    access.write(dst, access.read_raw(src))


@instruction(reads=("src",), writes=("dst",), rules=_copy_rules, compute=_copy_compute,
             op="hooks_test_copy", api="nisa.hooks_test_copy")
def hooks_test_copy(dst, src, name=None):
    """dst = src: a test instruction (no rules), run by the dispatcher."""


SPECS.pop(hooks_test_copy.spec.api)     # not a public op: keep it out of the op registry


def test_uninitialised_read_names_the_instruction_and_the_read_role():
    def kernel(x):
        t = nl.ndarray((4, 8), dtype=nl.float32, buffer=nl.sbuf, name="t")
        hooks_test_copy(dst=t, src=t)           # one view, two roles: a read names the input
        return x
    with pytest.raises(UninitializedReadError,
                       match=r"^nisa\.hooks_test_copy: src reads 32 never-written element\(s\) of sbuf "
                             r"tensor 't' \(4, 8\) float32, first at view index \(0, 0\) \(allocated at "
                             r"test_hooks\.py:\d+\) \(test_hooks\.py:\d+\)$"):
        nki.simulate(kernel, uninitialized_reads="raise")(np.zeros((1, 1), np.float32))


def test_race_names_the_instruction_and_the_written_role():
    def kernel(x):
        acc = nl.ndarray((2, 4), dtype=nl.float32, buffer=nl.shared_hbm, name="acc")
        for i in nl.affine_range(2):
            hooks_test_copy(dst=acc, src=x[i])
        return x
    with pytest.raises(RaceError,
                       match=r"^nisa\.hooks_test_copy: dst writes 8 element\(s\) of shared_hbm tensor 'acc' "
                             r"\(2, 4\) float32 in affine_range iteration 1 that iteration 0 wrote "
                             r"\(test_hooks\.py:\d+\) and nothing read since"):
        nki.simulate(kernel, detect_races=True)(np.ones((2, 2, 4), np.float32))


def test_read_only_caller_array_names_the_instruction_and_the_written_role():
    x = np.zeros((2, 4), np.float32)
    x.flags.writeable = False

    def kernel(x):
        t = nl.ndarray((2, 4), dtype=nl.float32, buffer=nl.sbuf)
        hooks_test_copy(dst=t, src=x)
        hooks_test_copy(dst=x, src=t)
    with pytest.raises(MemorySpaceError,
                       match=r"^nisa\.hooks_test_copy: dst is argument 0, a read-only array of the caller; "
                             r"the kernel cannot write it \(pass a writeable array\) \(test_hooks\.py:\d+\)$"):
        nki.simulate(kernel)(x)


def test_outside_any_instruction_the_nl_function_or_nki_is_named():
    seen = []

    def kernel(x):
        seen.append(hooks.accessor(x, "r"))
        core = state.current.get()
        core.api = "nl.load"
        try:
            seen.append(hooks.accessor(x, "w"))
        finally:
            core.api = None
        return x
    nki.simulate(kernel)(np.zeros((1, 1), np.float32))
    assert seen == [("nki", "operand"), ("nl.load", "operand")]


def test_checks_and_language_registered_their_hooks():
    from nkisim.checks import races, uninit
    from nkisim.language import operators
    assert hooks.watch_access is races.watch_access
    assert (hooks.check_read, hooks.mark_written) == (uninit.check_read, uninit.mark_written)
    # language.operators: Beta 2's tile.operator / tile.inplace, or Beta 1's inside a Beta-1 program
    assert (hooks.operator, hooks.inplace, hooks.tensor_method) == (
        operators._operator, operators._inplace, operators._tensor_method)


def test_an_unknown_hook_name_is_refused():
    with pytest.raises(TypeError, match=r"^memory\.hooks: unknown hook 'check_reads'; expected one of "):
        hooks.register(check_reads=print)
