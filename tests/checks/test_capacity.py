"""SBUF/PSUM capacity and the liveness lifetime model (memory/capacity.py)."""
import numpy as np
import pytest

import nkisim.nki as nki
import nkisim.nki.isa as nisa
import nkisim.nki.language as nl
from nkisim.errors import CapacityError, ShapeError

X = np.zeros((1, 1), np.float32)
USABLE_TRN2 = 212984      # tile_size.total_available_sbuf_size on trn2 (bytes per partition)


def run(kernel, target="trn2"):
    return nki.simulate(kernel, target=target)(X)


def use(*tiles):
    """Every tile written, then every tile written again: all of them live together (a tile is
    live from its first access to its last)."""
    for _ in range(2):
        for t in tiles:
            nisa.memset(dst=t[:, 0:1], value=0)


def test_sbuf_fills_exactly_then_overflows_trn2():
    def exact(x):
        big = nl.ndarray((128, USABLE_TRN2 // 4), dtype=nl.float32, buffer=nl.sbuf)
        small = nl.ndarray((128, 2), dtype=nl.uint8, buffer=nl.sbuf)
        use(big, small)
    with pytest.raises(CapacityError, match=r"^nl\.ndarray: sbuf allocation \(128, 2\) uint8 needs 128 partitions "
                                            r"x 2 bytes but 27261952 of 27261952 bytes of SBUF \(128 partitions "
                                            r"x 212984\) are live at that point on trn2, however placed; largest "
                                            r"live: \(128, 53246\) float32 \(test_capacity\.py:\d+\) 212984 B "
                                            r"\(test_capacity\.py:\d+\)$"):
        run(exact)

    def fits(x):
        big = nl.ndarray((128, USABLE_TRN2 // 4), dtype=nl.float32, buffer=nl.sbuf)
        use(big)                                      # last use: dead before the next allocation
        again = nl.ndarray((128, USABLE_TRN2 // 4), dtype=nl.float32, buffer=nl.sbuf)
        use(again)
    run(fits)


def test_error_points_at_the_allocation_line():
    def kernel(x):
        a = nl.ndarray((128, 40000), dtype=nl.float32, buffer=nl.sbuf)
        b = nl.ndarray((128, 40000), dtype=nl.float32, buffer=nl.sbuf, name="second")
        use(a, b)
    with pytest.raises(CapacityError) as info:
        run(kernel)
    line = kernel.__code__.co_firstlineno + 2
    assert info.value.where == f"test_capacity.py:{line}"
    assert "sbuf allocation 'second' (128, 40000) float32" in str(info.value)


def test_tiles_rebound_in_a_loop_count_once():
    def kernel(x):
        for i in nl.affine_range(8):
            t = nl.ndarray((128, 40000), dtype=nl.float32, buffer=nl.sbuf)   # 160000 B of 212984
            nisa.memset(dst=t, value=0.0)
        after = nl.ndarray((128, 40000), dtype=nl.float32, buffer=nl.sbuf)
        use(after)
    run(kernel)


def test_tiles_used_after_the_loop_stay_live():
    def kernel(x):
        keep = []
        for i in nl.affine_range(4):
            keep.append(nl.ndarray((128, 16384), dtype=nl.float32, buffer=nl.sbuf))   # 65536 B each
        use(*keep)
    with pytest.raises(CapacityError, match=r"needs 128 partitions x 65536 bytes but 25165824 of 27261952 "):
        run(kernel)


def test_sbuf_is_two_dimensional_tiles_of_fewer_partitions_sit_side_by_side():
    """Area bound: sum of partitions x bytes of the live tiles <= 128 x 212984 on trn2."""
    half = 150_000 // 4                                 # 150000 B per partition: one per partition row
    def two_halves(x):
        a = nl.ndarray((64, half), dtype=nl.float32, buffer=nl.sbuf)
        b = nl.ndarray((64, half), dtype=nl.float32, buffer=nl.sbuf)
        use(a, b)                                       # 2 x 64 x 150000 <= 128 x 212984
    run(two_halves)

    def three_halves(x):
        a = nl.ndarray((64, half), dtype=nl.float32, buffer=nl.sbuf)
        b = nl.ndarray((64, half), dtype=nl.float32, buffer=nl.sbuf)
        c = nl.ndarray((64, half), dtype=nl.float32, buffer=nl.sbuf, name="c")
        use(a, b, c)                                    # 3 x 64 x 150000 > 128 x 212984
    with pytest.raises(CapacityError, match=r"sbuf allocation 'c' \(64, 37500\) float32 needs 64 partitions x "
                                            r"150000 bytes but 19200000 of 27261952 bytes"):
        run(three_halves)

    def mixed(x):
        a = nl.ndarray((128, 105000 // 4), dtype=nl.float32, buffer=nl.sbuf)
        b = nl.ndarray((65, 110000 // 4), dtype=nl.float32, buffer=nl.sbuf, name="b")
        use(a, b)                                       # partitions 63 and 64 would need 215000 B
    with pytest.raises(CapacityError, match=r"'b' \(65, 27500\) float32 needs 65 partitions x 110000 bytes but "
                                            r"tiles of more than 64 partitions, which all cover partitions 63 "
                                            r"and 64, already hold 105000 of the 212984 bytes there"):
        run(mixed)

    def side_by_side(x):
        a = nl.ndarray((128, 105000 // 4), dtype=nl.float32, buffer=nl.sbuf)
        b = nl.ndarray((64, 107000 // 4), dtype=nl.float32, buffer=nl.sbuf)
        use(a, b)                                       # 105000 + 107000 <= 212984 on every partition
    run(side_by_side)

    def three_long(x):
        tiles = [nl.ndarray((64, 110000 // 4), dtype=nl.float32, buffer=nl.sbuf, name=f"t{i}") for i in range(3)]
        use(*tiles)                                     # area fits, but no two share a partition
    with pytest.raises(CapacityError, match=r"'t2' .* but tiles of more than 106492 bytes per partition, which "
                                            r"cannot share a partition, already take 128 of the 128 partitions"):
        run(three_long)

    def too_wide(x):
        a = nl.ndarray((1, USABLE_TRN2 // 4 + 1), dtype=nl.float32, buffer=nl.sbuf)
        use(a)
    with pytest.raises(CapacityError):
        run(too_wide)


def test_a_tile_is_live_from_its_first_access_not_its_creation():
    """An output tile made up front and first written after the inputs died costs nothing before."""
    big = 110 * 1024 // 4                               # two live 110 KiB tiles exceed 212984 B
    def made_up_front(x):
        a = nl.ndarray((128, big), dtype=nl.float32, buffer=nl.sbuf)
        out = nl.ndarray((128, big), dtype=nl.float32, buffer=nl.sbuf)   # only named here
        nisa.memset(dst=a, value=1.0)
        nisa.tensor_scalar(dst=a, data=a, op0=nl.multiply, operand0=2.0)  # a's last use
        nisa.memset(dst=out, value=0.0)                 # out is born here, a is dead
        return x
    run(made_up_front)

    def both_operands(x):
        a = nl.ndarray((128, big), dtype=nl.float32, buffer=nl.sbuf)
        nisa.memset(dst=a, value=1.0)
        out = nl.ndarray((128, big), dtype=nl.float32, buffer=nl.sbuf, name="out")
        nisa.tensor_copy(dst=out, src=a)                # one instruction's operands are live together
        return x
    with pytest.raises(CapacityError, match="sbuf allocation 'out'"):
        run(both_operands)


def test_psum_eight_banks_then_overflow():
    def eight(x):
        banks = [nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.psum) for _ in range(8)]
        use(*banks)
    run(eight)

    def nine(x):
        banks = [nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.psum) for _ in range(9)]
        use(*banks)
    with pytest.raises(CapacityError, match=r"psum allocation \(128, 512\) float32 needs 2048 bytes per "
                                            r"partition \(1 bank\(s\)\) but 16384 of 16384"):
        run(nine)


def test_psum_tiles_in_a_loop_reuse_banks():
    def kernel(x):
        for i in nl.affine_range(16):
            banks = [nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.psum) for _ in range(8)]
            use(*banks)
    run(kernel)


def test_small_psum_tiles_do_not_straddle_banks():
    def fits(x):       # 1536 B tiles: one per bank (two would straddle), so 8 fit
        tiles = [nl.ndarray((128, 384), dtype=nl.float32, buffer=nl.psum) for _ in range(8)]
        use(*tiles)
    run(fits)

    def too_many(x):
        tiles = [nl.ndarray((128, 384), dtype=nl.float32, buffer=nl.psum) for _ in range(9)]
        use(*tiles)
    with pytest.raises(CapacityError, match=r"needs 1536 bytes per partition \(1 bank\(s\)\) but 12288 of 16384"):
        run(too_many)

    def packed(x):     # 512 B tiles: four per bank, so 32 fit
        tiles = [nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.psum) for _ in range(32)]
        use(*tiles)
    run(packed)


def test_matmul_dst_crossing_a_bank_is_rejected_on_trn2_but_not_trn3():
    def kernel(x):
        st = nl.ndarray((128, 128), dtype=nl.bfloat16, buffer=nl.sbuf)
        mv = nl.ndarray((128, 512), dtype=nl.bfloat16, buffer=nl.sbuf)
        nisa.memset(dst=st, value=0.0)
        nisa.memset(dst=mv, value=0.0)
        ps = nl.ndarray((128, 1024), dtype=nl.float32, buffer=nl.psum)  # two banks
        nisa.nc_matmul(dst=ps[:, 256:768], stationary=st, moving=mv)
    with pytest.raises(ShapeError, match=r"^nisa\.nc_matmul: dst spans PSUM bytes 1024\.\.3071 of its tensor, "
                                         r"crossing a 2048-byte bank boundary; a matmul destination must lie "
                                         r"within one bank on trn2 \(test_capacity\.py:\d+\)$"):
        run(kernel)
    run(kernel, target="trn3")


def test_capacity_error_leaves_inputs_untouched():
    x = np.ones((2, 2), np.float32)

    def kernel(x):
        t = nl.ndarray((2, 2), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x)
        nisa.tensor_scalar(dst=t, data=t, op0=nl.multiply, operand0=5.0)
        nisa.dma_copy(dst=x, src=t)
        a = nl.ndarray((128, 40000), dtype=nl.float32, buffer=nl.sbuf)
        b = nl.ndarray((128, 40000), dtype=nl.float32, buffer=nl.sbuf)
        use(a, b)
    with pytest.raises(CapacityError):
        nki.simulate(kernel, target="trn2")(x)
    np.testing.assert_array_equal(x, np.ones((2, 2)))


def test_capacity_released_between_kernel_calls():
    def kernel(x):
        t = nl.ndarray((128, 40000), dtype=nl.float32, buffer=nl.sbuf)
        use(t)
        return x
    for _ in range(3):
        run(kernel)
