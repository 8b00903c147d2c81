"""Registers, dynamic loops, and documented-but-unsimulated ops."""
import inspect
import sys

import numpy as np
import pytest

import nkisim.trace
import nkisim.nki as nki
import nkisim.nki.isa as nisa
import nkisim.nki.language as nl
from nkisim.errors import MemorySpaceError, NkiError, UninitializedReadError, UnsupportedError
from nkisim.isa import unsupported as _unsupported


def test_register_load_store_and_dynamic_loops():
    def kernel(n_hbm, x):
        out = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.shared_hbm)
        r = nisa.register_alloc()
        nisa.register_load(r, n_hbm)                   # r = 5
        acc = nisa.register_alloc(0)
        for i in nl.dynamic_range(r):
            nisa.register_move(acc, int(acc) + int(i))   # 0+1+2+3+4
        total = [0]
        nl.fori_loop(0, 3, lambda i: total.__setitem__(0, total[0] + int(i)))
        left = nisa.register_alloc(3)
        while left:                                     # deprecated `while reg:` form
            nisa.register_move(left, int(left) - 1)
        ended = nl.while_loop(4, lambda v: v - 1)
        nisa.register_move(acc, int(acc) * 100 + total[0] * 10 + ended)
        nisa.register_store(out, acc)
        return out
    got = nki.simulate(kernel)(np.array([[5]], np.int32), np.zeros((1, 1), np.float32))
    assert got.tolist() == [[1030]]


def test_scalar_offset_from_a_register():
    def kernel(x):
        r = nisa.register_alloc(2)
        t = nl.ndarray((1, 4), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x.ap([[4, 1], [1, 4]], offset=0, scalar_offset=r, indirect_dim=0))
        out = nl.ndarray((1, 4), dtype=x.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=t)
        return out
    x = np.arange(16, dtype=np.float32).reshape(4, 4)
    np.testing.assert_array_equal(nki.simulate(kernel)(x), x[2:3])


def test_induction_register_is_read_only():
    def kernel(x):
        for i in nl.dynamic_range(2):
            nisa.register_move(i, 7)
    with pytest.raises(NkiError, match=r"^nisa\.register_move: dst is a loop induction register, which is "
                                       r"read-only \(test_registers\.py:\d+\)$"):
        nki.simulate(kernel)(np.zeros((1, 1), np.float32))


def test_builtin_custom_op_is_the_one_op_not_simulated():
    assert _unsupported.__all__ == ["builtin_custom_op"]

    def kernel(x):
        nisa.builtin_custom_op("f", "lib.so", 1, 1, [x], [x], alpha=2)
    with pytest.raises(UnsupportedError, match=r"^nisa\.builtin_custom_op: it runs a custom GpSimd library "
                                               r"\(device code\), which nkisim cannot run on a CPU "
                                               r"\(test_registers\.py:\d+\)$"):
        nki.simulate(kernel)(np.zeros((1, 1), np.float32))


def test_formerly_unsimulated_ops_have_their_documented_signatures():
    sig = {n: str(inspect.signature(getattr(nisa, n))).replace("<engine.", "").replace("<reduce_cmd.", "")
           for n in ("topk", "rng", "tensor_scalar_cumulative", "dma_compute")}
    assert sig["topk"] == "(val_dst, idx_dst, src, n, name=None)"
    assert sig["rng"].startswith("(dst, engine=vector")
    assert sig["tensor_scalar_cumulative"].startswith("(dst, src, op0, op1, imm0, imm1=None, reduce_cmd=")
    assert sig["dma_compute"].startswith("(dst, srcs, reduce_op, scales=None, unique_indices=True, oob_mode=")


def _next_line():
    """The line after the caller's: where the instruction under test is called."""
    return sys._getframe(1).f_lineno + 1


def test_unsimulated_op_misspelt_keyword_is_a_type_error():
    lines = []

    def kernel(x):
        lines.append(_next_line())
        nisa.topk(x, x, x, n=8, nme="top")
    with pytest.raises(TypeError) as info:
        nki.simulate(kernel)(np.zeros((1, 1), np.float32))
    assert str(info.value) == (f"nisa.topk() got an unexpected keyword argument 'nme'; did you mean 'name'? "
                               f"(test_registers.py:{lines[0]})")


def _operands(ops):
    return [(o.role, o.buffer, o.shape, o.dtype, o.nbytes) for o in ops]


def test_register_events_match_the_kernel_calls():
    lines = []

    def kernel(n_hbm):
        out = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.shared_hbm)
        n_sb = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
        nisa.dma_copy(dst=n_sb, src=n_hbm)
        lines.append(_next_line())
        r = nisa.register_alloc(5)
        lines.append(_next_line())
        nisa.register_load(r, n_sb)
        lines.append(_next_line())
        nisa.register_move(r, int(r) + 1)
        lines.append(_next_line())
        nisa.register_store(out, r)
        return out
    with nkisim.trace.record() as events:
        got = nki.simulate(kernel)(np.array([[41]], np.int32))
    assert got.tolist() == [[42]]
    ours = [e for e in events if e.op.startswith("register_")]
    assert [(e.op, e.api, e.engine, e.core, e.location) for e in ours] == [
        (op, api, "sync", 0, f"test_registers.py:{line}") for (op, api), line in zip(
            (("register_move", "nisa.register_alloc"), ("register_load", "nisa.register_load"),
             ("register_move", "nisa.register_move"), ("register_store", "nisa.register_store")), lines)]
    alloc, load, move, store = ours
    assert (alloc.reads, alloc.writes, alloc.options["src"]) == ((), (), 5)
    assert _operands(load.reads) == [("src", "sbuf", (1, 1), "int32", 4)] and load.writes == ()
    assert (move.reads, move.writes, move.options["src"]) == ((), (), 42)
    assert store.reads == () and _operands(store.writes) == [("dst", "shared_hbm", (1, 1), "int32", 4)]


def test_register_misspelt_keyword_is_a_type_error():
    lines = []

    def kernel(x):
        lines.append(_next_line())
        r = nisa.register_alloc(xx=3)
        nisa.register_move(r, 1)

    def kernel2(x):
        r = nisa.register_alloc(3)
        lines.append(_next_line())
        nisa.register_move(r, 1, nme="m")
    with pytest.raises(TypeError) as info:
        nki.simulate(kernel)(np.zeros((1, 1), np.float32))
    assert str(info.value) == (f"nisa.register_alloc() got an unexpected keyword argument 'xx'; did you "
                               f"mean 'x'? (test_registers.py:{lines[0]})")
    with pytest.raises(TypeError) as info:
        nki.simulate(kernel2)(np.zeros((1, 1), np.float32))
    assert str(info.value) == (f"nisa.register_move() got an unexpected keyword argument 'nme'; did you "
                               f"mean 'name'? (test_registers.py:{lines[1]})")


def test_register_errors_have_specific_classes():
    def unwritten(x):
        r = nisa.register_alloc()
        nisa.register_move(nisa.register_alloc(), r)
    with pytest.raises(UninitializedReadError, match=r"^nisa\.VirtualRegister: register read before it was "
                                                     r"written \(test_registers\.py:\d+\)$"):
        nki.simulate(unwritten)(np.zeros((1, 1), np.float32))

    def induction(x):
        for i in nl.dynamic_range(2):
            nisa.register_move(i, 7)
    with pytest.raises(MemorySpaceError):
        nki.simulate(induction)(np.zeros((1, 1), np.float32))
