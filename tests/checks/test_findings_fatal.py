"""What findings="warn" (and "all") can go on past, rule kind by rule kind (the Decision in
``runtime.launch.run``): a rule broken inside an instruction is skipped and the kernel goes on; a
rule broken outside any instruction (indexing, allocation, a dynamic loop, the launch) is always
fatal, and its message says so plainly."""
import numpy as np
import pytest

import nkisim.nki as nki
import nkisim.nki.isa as nisa
import nkisim.nki.language as nl
from nkisim.errors import (ArgumentError, BoundsError, CapacityError, DeadlockError, DtypeError, EngineError,
                           FindingsError, KernelArgumentError, LoopLimitError, MemorySpaceError, RaceError,
                           ShapeError, UninitializedReadError, UnsupportedError)

X = np.arange(32, dtype=np.float32).reshape(4, 8)


# ---- inside an instruction: skipped, the kernel goes on ---------------------------------------

def _dtype(x, t):
    nisa.tensor_tensor(dst=t, data1=t, data2=t, op=nl.bitwise_and)        # float operands


def _shape(x, t):
    nisa.tensor_tensor(dst=t, data1=t, data2=t[:, 0:4], op=nl.add)


def _memory_space(x, t):
    nisa.tensor_tensor(dst=t, data1=x, data2=t, op=nl.add)                # HBM operand


def _bounds(x, t):
    rows = nl.ndarray((4, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.memset(dst=rows, value=7)                                         # row 7 of a 4-row tensor
    nisa.dma_copy(dst=t, src=x.ap([[8, 4], [1, 8]], vector_offset=rows, indirect_dim=0))


def _argument(x, t):
    nisa.tensor_scalar(dst=t, data=t, op0=42, operand0=1.0)               # no operator


def _engine(x, t):
    nisa.tensor_copy(dst=t, src=t, engine=nisa.engine.tensor)


def _unsupported(x, t):
    nisa.exponential(dst=t, src=t)                                         # trn3 or newer


def _uninitialised(x, t):
    never = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.tensor_copy(dst=t, src=never)


def _race(x, t):
    h = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    for _ in nl.affine_range(2):
        nisa.dma_copy(dst=h, src=t)                                        # each iteration overwrites


def _capacity(x, t):
    big = [nl.ndarray((128, 60000), dtype=nl.float32, buffer=nl.sbuf) for _ in range(2)]
    for b in big:
        nisa.memset(dst=b[:, 0:1], value=0.0)
    for b in big + big:                                                    # both live together
        nisa.tensor_copy(dst=b[:, 0:1], src=b[:, 0:1])


CONTINUABLE = [
    (ShapeError, _shape, {}), (DtypeError, _dtype, {}), (MemorySpaceError, _memory_space, {}),
    (BoundsError, _bounds, {}), (ArgumentError, _argument, {}), (EngineError, _engine, {"target": "trn2"}),
    (UnsupportedError, _unsupported, {"target": "trn2"}),
    (UninitializedReadError, _uninitialised, {"uninitialized_reads": "raise"}),
    (RaceError, _race, {"detect_races": True}), (CapacityError, _capacity, {}),
]


def _around(broken):
    """Load x, break one rule, then double and store: what the valid instructions compute is 2x
    (the broken instruction is skipped, so its destination keeps x)."""
    def kernel(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x)
        broken(x, t)
        nisa.tensor_scalar(dst=t, data=t, op0=nl.multiply, operand0=2.0)
        nisa.dma_copy(dst=out, src=t)
        return out
    return kernel


@pytest.mark.parametrize("cls, broken, options", CONTINUABLE, ids=[c[0].__name__ for c in CONTINUABLE])
def test_a_rule_broken_inside_an_instruction_is_skipped_under_warn(cls, broken, options, capsys):
    kernel = _around(broken)
    with pytest.raises(cls):                                   # the rule is real: "first" stops
        nki.simulate(kernel, **options)(X.copy())
    sim = nki.simulate(kernel, findings="warn", **options)
    np.testing.assert_array_equal(sim(X.copy()), X * 2)
    assert [type(e) for e in sim.findings] == [cls]
    assert not getattr(sim.findings[0], "fatal", False)
    assert "always fatal" not in str(sim.findings[0])
    err = capsys.readouterr().err
    assert f"  {cls.__name__} (1):" in err and "always fatal" not in err


def test_a_deadlock_at_a_sync_instruction_is_skipped_under_warn():
    def kernel(x):
        if nl.program_id(0) == 0:
            nisa.core_barrier(x, (0, 1))                       # core 1 never comes
        return x
    sim = nki.simulate(kernel, findings="warn")[2]
    np.testing.assert_array_equal(sim(X.copy()), X)
    assert [type(e) for e in sim.findings] == [DeadlockError]


# ---- outside any instruction: always fatal ----------------------------------------------------

def _slice(x):
    return x[0:4, 0:20]


def _index(x):
    return x[9]


def _reshape(x):
    return x.reshape((5, 7))


def _allocate_shape(x):
    return nl.ndarray((200, 8), dtype=nl.float32, buffer=nl.sbuf)


def _allocate_dtype(x):
    return nl.ndarray((4, 8), dtype=np.complex64, buffer=nl.sbuf)


def _loop(x):
    r = nisa.register_alloc(1)
    while r:
        nisa.register_move(r, 1)


WHY_VIEW = "an access outside a tensor, or a view that does not fit it, has no elements to go on with"
WHY_ALLOC = "no tensor was allocated to go on with"
FATAL = [
    (BoundsError, _slice, WHY_VIEW), (BoundsError, _index, WHY_VIEW), (ShapeError, _reshape, WHY_VIEW),
    (ShapeError, _allocate_shape, WHY_ALLOC), (DtypeError, _allocate_dtype, WHY_ALLOC),
    (LoopLimitError, _loop, "the loop would never end"),
]


def _fatal_after_a_finding(fatal):
    """Write the caller's x, break a skippable rule, then break ``fatal``'s."""
    def kernel(x):
        t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
        nisa.memset(dst=t, value=0.0)
        nisa.dma_copy(dst=x, src=t)                                        # lands only on success
        nisa.tensor_tensor(dst=t, data1=t, data2=t[:, 0:4], op=nl.add)    # ShapeError, skipped
        fatal(x)
        return x
    return kernel


@pytest.mark.parametrize("mode", ["warn", "all"])
@pytest.mark.parametrize("cls, fatal, why", FATAL, ids=[f[1].__name__.strip("_") for f in FATAL])
def test_a_rule_broken_outside_instructions_is_always_fatal(cls, fatal, why, mode, capsys):
    def alone(x):
        fatal(x)
        return x
    with pytest.raises(cls) as plain:                                   # "first": the message as ever
        nki.simulate(alone, max_loop_iterations=20)(np.zeros((4, 8), np.float32))
    assert "always fatal" not in str(plain.value)
    assert not getattr(plain.value, "fatal", False)
    capsys.readouterr()

    kernel = _fatal_after_a_finding(fatal)
    x = X.copy()
    expect = FindingsError if mode == "all" else cls
    with pytest.raises(expect) as info:
        nki.simulate(kernel, findings=mode, max_loop_iterations=20)(x)
    np.testing.assert_array_equal(x, X)                                 # the caller's array untouched
    err = info.value.findings[-1] if mode == "all" else info.value
    assert type(err) is cls and err.fatal is True
    assert f'; always fatal, even with findings="{mode}": {why}, so the kernel stopped here (' in str(err)
    assert str(err) == f"{err.op}: {err.what} ({err.where})" and err.where.startswith("test_findings_fatal.py:")
    if mode == "all":
        assert [type(e) for e in info.value.findings] == [ShapeError, cls]
        assert f"the kernel stopped at the last, an always-fatal {cls.__name__} ({err.where})" in str(info.value)
    head = capsys.readouterr().err.splitlines()[0]
    assert head == (f"nkisim: 2 finding(s) in kernel kernel; the kernel stopped at the {cls.__name__}, "
                    f"which is always fatal")


def test_a_fatal_rule_alone_under_warn_says_so_too(capsys):
    def kernel(x):
        return x[0:4, 0:20]
    with pytest.raises(BoundsError) as info:
        nki.simulate(kernel, findings="warn")(X.copy())
    assert str(info.value).startswith("tensor indexing: slice 0:20 on dim 1 of tensor 'argument 0' (4, 8) is "
                                      "outside 0:8; always fatal, even with findings=\"warn\": ")
    assert capsys.readouterr().err == ""                       # no finding was recorded before it


def test_launch_rules_are_always_fatal():
    def result_on_chip(x):
        return nl.ndarray((4, 8), dtype=nl.float32, buffer=nl.sbuf)
    with pytest.raises(MemorySpaceError, match="always fatal, even with findings=\"warn\": the launch itself "
                                               r"\(its grid, arguments or results\) is invalid"):
        nki.simulate(result_on_chip, findings="warn")(X.copy())
    with pytest.raises(KernelArgumentError, match="always fatal, even with findings=\"warn\""):
        nki.simulate(lambda x: x, findings="warn")([1.0, 2.0])
    with pytest.raises(UnsupportedError, match=r"LNC2 needs .* trn1 has 1; always fatal, even with "
                                               r"findings=\"all\": the launch itself"):
        nki.simulate(lambda x: x, findings="all", target="trn1")[2](X.copy())


def test_a_python_error_after_a_skipped_instruction_is_named_in_the_report(capsys):
    def kernel(x):
        t = nl.load(x)                      # 200 partitions: ShapeError, no placeholder tile fits
        return t.shape                      # None.shape
    with pytest.raises(AttributeError):
        nki.simulate(kernel, findings="warn")(np.ones((200, 8), np.float32))
    head = capsys.readouterr().err.splitlines()[0]
    assert head == ("nkisim: 1 finding(s) in kernel kernel; then the kernel raised AttributeError (the result "
                    "of a skipped call is a placeholder tile, or None)")


def test_a_fatal_error_pickles_with_its_mark():
    import pickle
    with pytest.raises(BoundsError) as info:
        nki.simulate(lambda x: x[9], findings="warn")(X.copy())
    back = pickle.loads(pickle.dumps(info.value))
    assert type(back) is BoundsError and back.fatal is True and str(back) == str(info.value)
    assert BoundsError("op", "what", "f.py:1").fatal is False
