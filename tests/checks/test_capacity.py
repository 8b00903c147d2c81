"""SBUF/PSUM capacity and the lifetime model (memory/capacity.py)."""
import numpy as np
import pytest

import nkisim.nki as nki
import nkisim.nki.isa as nisa
import nkisim.nki.language as nl
from nkisim.errors import CapacityError, ShapeError

X = np.zeros((1, 1), np.float32)


def run(kernel, target="trn2"):
    return nki.simulate(kernel, target=target)(X)


def test_sbuf_fills_exactly_then_overflows_trn2():
    # trn2 usable SBUF: 212984 bytes per partition (tile_size.total_available_sbuf_size)
    def exact(x):
        keep = [nl.ndarray((128, 212984 // 4), dtype=nl.float32, buffer=nl.sbuf)]
        keep.append(nl.ndarray((128, 2), dtype=nl.uint8, buffer=nl.sbuf))
    with pytest.raises(CapacityError, match=r"^nl\.ndarray: sbuf allocation \(128, 2\) uint8 \(test_capacity\.py:\d+\) "
                                            r"needs 2 bytes per partition but 212984 of 212984 bytes per "
                                            r"partition are live on trn2; largest live: \(128, 53246\) float32 "
                                            r"\(test_capacity\.py:\d+\) 212984 B \(test_capacity\.py:\d+\)$"):
        run(exact)

    def fits(x):
        keep = [nl.ndarray((128, 212984 // 4), dtype=nl.float32, buffer=nl.sbuf)]
        del keep
        nl.ndarray((128, 212984 // 4), dtype=nl.float32, buffer=nl.sbuf)
    run(fits)


def test_tiles_rebound_in_a_loop_count_once():
    def kernel(x):
        for i in nl.affine_range(64):
            t = nl.ndarray((128, 16384), dtype=nl.float32, buffer=nl.sbuf)   # 64 KiB per partition
            nisa.memset(dst=t, value=0.0)
    run(kernel)


def test_tiles_kept_in_a_list_stay_live():
    def kernel(x):
        keep = []
        for i in nl.affine_range(4):
            keep.append(nl.ndarray((128, 16384), dtype=nl.float32, buffer=nl.sbuf))
    with pytest.raises(CapacityError, match=r"needs 65536 bytes per partition but 196608 of 212984"):
        run(kernel)


def test_psum_eight_banks_then_overflow():
    def eight(x):
        banks = [nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.psum) for _ in range(8)]
    run(eight)

    def nine(x):
        banks = [nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.psum) for _ in range(9)]
    with pytest.raises(CapacityError, match=r"psum allocation \(128, 512\) float32 .* needs 2048 bytes per "
                                            r"partition \(1 bank\(s\)\) but 16384 of 16384"):
        run(nine)


def test_small_psum_tiles_do_not_straddle_banks():
    def kernel(x):
        a = nl.ndarray((128, 384), dtype=nl.float32, buffer=nl.psum)     # 1536 B in bank 0
        b = nl.ndarray((128, 384), dtype=nl.float32, buffer=nl.psum)     # must start in bank 1
        assert (a.alloc.psum_offset, b.alloc.psum_offset) == (0, 2048)
        c = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.psum)     # 512 B fits after a
        assert c.alloc.psum_offset == 1536
    run(kernel)


def test_matmul_dst_crossing_a_bank_is_rejected_on_trn2_but_not_trn3():
    def kernel(x):
        st = nl.ndarray((128, 128), dtype=nl.bfloat16, buffer=nl.sbuf)
        mv = nl.ndarray((128, 512), dtype=nl.bfloat16, buffer=nl.sbuf)
        nisa.memset(dst=st, value=0.0)
        nisa.memset(dst=mv, value=0.0)
        ps = nl.ndarray((128, 1024), dtype=nl.float32, buffer=nl.psum)  # two banks
        nisa.nc_matmul(dst=ps[:, 256:768], stationary=st, moving=mv)
    with pytest.raises(ShapeError, match=r"^nisa\.nc_matmul: dst spans PSUM bytes 1024\.\.3071 of each partition, "
                                         r"crossing a 2048-byte bank boundary; a matmul destination must lie "
                                         r"within one bank on trn2 \(test_capacity\.py:\d+\)$"):
        run(kernel)
    run(kernel, target="trn3")


def test_capacity_released_between_kernel_calls():
    def kernel(x):
        keep = [nl.ndarray((128, 40000), dtype=nl.float32, buffer=nl.sbuf)]
        return x
    for _ in range(3):
        run(kernel)
