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
    """Every tile written, then read, then read again: all of them live together (a tile is live
    from its first access by an instruction that is not a sinkable write to its last access)."""
    for t in tiles:
        nisa.memset(dst=t[:, 0:1], value=0)
    for _ in range(2):
        for t in tiles:
            nisa.tensor_copy(dst=t[:, 0:1], src=t[:, 0:1])


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


# ---- sinkable loads and hoistable stores (capacity's lifetime model, Decision) ---------------
# A write that reads nothing on-chip (a DMA from HBM, a memset, an iota) into a tile no instruction
# has accessed yet can be sunk by the compiler until just before the tile's next access; a DMA
# store reads a tile whose values are final, so it can be hoisted to right after the tile's last
# other access. nki-library's output_projection_tkg loads every head's weights up front "to give
# the compiler finer control over pre-fetching" (27 x 104 x 14336 B, more than SBUF).

W = 20000                       # (128, 20000) float32: 80000 B per partition; four > 212984


def _prefetch_kernel(twice):
    def kernel(x):              # x (4, 128, W): four weight tiles, loaded up front
        out = nl.ndarray((4, 128, 1), dtype=nl.float32, buffer=nl.shared_hbm)
        tiles = []
        for i in range(4):
            t = nl.ndarray((128, W), dtype=nl.float32, buffer=nl.sbuf)
            nisa.dma_copy(dst=t, src=x[i])
            tiles.append(t)
        for rnd in range(2 if twice else 1):
            for i in range(4):
                s = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
                nisa.tensor_reduce(dst=s, data=tiles[i], op=nl.add, axis=1)
                nisa.dma_copy(dst=out[i], src=s)
        return out
    return kernel


def test_loads_made_up_front_are_born_at_their_first_read():
    x = np.random.default_rng(0).integers(-4, 5, (4, 128, W)).astype(np.float32)
    out = nki.simulate(_prefetch_kernel(twice=False), target="trn2")(x)
    np.testing.assert_array_equal(out, x.sum(axis=2, keepdims=True))


def test_loaded_tiles_read_in_two_passes_are_live_together():
    x = np.zeros((4, 128, W), np.float32)
    with pytest.raises(CapacityError, match=r"needs 128 partitions x 80000 bytes but 20480000 of 27261952 "):
        nki.simulate(_prefetch_kernel(twice=True), target="trn2")(x)


def test_a_memset_then_a_load_chain_is_sunk_together():
    def kernel(x):              # x (4, 128, W): each tile zeroed, accumulated into, then read
        out = nl.ndarray((4, 128, 1), dtype=nl.float32, buffer=nl.shared_hbm)
        tiles = [nl.ndarray((128, W), dtype=nl.float32, buffer=nl.sbuf) for _ in range(4)]
        for i in range(4):
            nisa.memset(dst=tiles[i], value=1.0)
            nisa.dma_copy(dst=tiles[i][:, 0:W // 2], src=x[i][:, 0:W // 2])
        for i in range(4):
            s = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_reduce(dst=s, data=tiles[i], op=nl.add, axis=1)
            nisa.dma_copy(dst=out[i], src=s)
        return out
    x = np.random.default_rng(1).integers(-4, 5, (4, 128, W)).astype(np.float32)
    want = x[:, :, :W // 2].sum(axis=2, keepdims=True) + (W - W // 2)
    np.testing.assert_array_equal(nki.simulate(kernel, target="trn2")(x), want)


def test_stores_at_the_end_do_not_keep_tiles_live():
    def kernel(x):              # x (128, W): four results computed, then all stored at the end
        out = nl.ndarray((4, 128, W), dtype=nl.float32, buffer=nl.shared_hbm)
        res = []
        for i in range(4):
            t = nl.ndarray((128, W), dtype=nl.float32, buffer=nl.sbuf)
            nisa.dma_copy(dst=t, src=x)
            nisa.tensor_scalar(dst=t, data=t, op0=nl.multiply, operand0=float(i + 1))
            res.append(t)
        for i in range(4):
            nisa.dma_copy(dst=out[i], src=res[i])
        return out
    x = np.random.default_rng(2).integers(-4, 5, (128, W)).astype(np.float32)
    np.testing.assert_array_equal(nki.simulate(kernel, target="trn2")(x), x * np.arange(1, 5)[:, None, None])


def test_a_tile_only_loaded_and_stored_still_occupies_sbuf():
    def kernel(x):              # x (128, W)
        out = nl.ndarray((128, W), dtype=nl.float32, buffer=nl.shared_hbm)
        keep = nl.ndarray((128, 50000), dtype=nl.float32, buffer=nl.sbuf)     # 200000 B
        nisa.memset(dst=keep, value=0.0)
        nisa.tensor_copy(dst=keep[:, 0:1], src=keep[:, 0:1])
        through = nl.ndarray((128, W), dtype=nl.float32, buffer=nl.sbuf, name="through")
        nisa.dma_copy(dst=through, src=x)
        nisa.dma_copy(dst=out, src=through)
        nisa.tensor_copy(dst=keep[:, 0:1], src=keep[:, 0:1])                  # keep live across
        return out
    with pytest.raises(CapacityError, match=r"sbuf allocation 'through' \(128, 20000\) float32 needs 128 "
                                            r"partitions x 80000 bytes but 25600000 of 27261952 "):
        nki.simulate(kernel, target="trn2")(np.zeros((128, W), np.float32))


# ---- the rule in general: a chain of writes before a tile's first read sinks to that read when
# its on-chip sources are unchanged since and still live there (PSUM accumulators of a K loop:
# nki-library's bwmm_shard_on_I keeps 12 in program order, 8 banks hold them one chain at a time)

def _accumulators(reload_moving):
    def kernel(st, mv):                     # st (K, 128, 128), mv (K, 128, 512): 12 outputs
        out = nl.ndarray((12, 128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
        accs = [nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.psum) for _ in range(12)]
        s_tiles = []
        for k in range(2):
            s = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.sbuf)
            nisa.dma_copy(dst=s, src=st[k])
            s_tiles.append(s)
        m_tiles = [nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf) for _ in range(2)]
        m_one = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf)
        for k in range(2):
            m = m_one if reload_moving else m_tiles[k]
            nisa.dma_copy(dst=m, src=mv[k])       # reload_moving: the same tile rewritten per k
            for a in accs:
                nisa.nc_matmul(dst=a, stationary=s_tiles[k], moving=m, accumulate=k > 0)
        for i, a in enumerate(accs):
            r = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_copy(dst=r, src=a)
            nisa.dma_copy(dst=out[i], src=r)
        for s in s_tiles + m_tiles:               # the sources stay live past the reads
            nisa.tensor_copy(dst=s[:, 0:1], src=s[:, 0:1])
        return out
    return kernel


def test_psum_accumulator_chains_sink_to_their_first_read():
    rng = np.random.default_rng(3)
    st = rng.integers(-2, 3, (2, 128, 128)).astype(np.float32)
    mv = rng.integers(-2, 3, (2, 128, 512)).astype(np.float32)
    out = nki.simulate(_accumulators(reload_moving=False), target="trn2")(st, mv)
    want = st[0].T @ mv[0] + st[1].T @ mv[1]
    for i in range(12):
        np.testing.assert_array_equal(out[i], want)


def test_a_chain_whose_source_is_rewritten_before_the_read_does_not_sink():
    st, mv = np.zeros((2, 128, 128), np.float32), np.zeros((2, 128, 512), np.float32)
    with pytest.raises(CapacityError, match=r"psum allocation \(128, 512\) float32 needs 2048 bytes per "
                                            r"partition \(1 bank\(s\)\) but 16384 of 16384 "):
        nki.simulate(_accumulators(reload_moving=True), target="trn2")(st, mv)


def test_a_write_does_not_sink_past_the_end_of_its_source():
    def kernel(x):                          # x (128, W)
        out = nl.ndarray((128, W), dtype=nl.float32, buffer=nl.shared_hbm)
        s = nl.ndarray((128, W), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=s, src=x)
        t = nl.ndarray((128, W), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=t, src=s)     # s's last use: t cannot wait for its first read
        big = nl.ndarray((128, 35000), dtype=nl.float32, buffer=nl.sbuf, name="big")    # 140000 B
        nisa.memset(dst=big, value=0.0)
        nisa.tensor_copy(dst=big[:, 0:1], src=big[:, 0:1])
        nisa.tensor_copy(dst=t, src=t)
        nisa.dma_copy(dst=out, src=t)
        return out
    with pytest.raises(CapacityError, match=r"sbuf allocation 'big' \(128, 35000\) float32 needs 128 "
                                            r"partitions x 140000 bytes but 10240000 of 27261952 "):
        nki.simulate(kernel, target="trn2")(np.zeros((128, W), np.float32))


def test_a_source_rewritten_after_an_overwriting_matmul_read_it_stops_the_sinking():
    """The first matmul of each chain (accumulate=False) reads the moving tile the next k
    rewrites, though the tile is live at the reads: no chain sinks (the fast path takes the
    destination's view before it reads the operands; its reads still count as the write's sources)."""
    def kernel(st, mv):
        out = nl.ndarray((12, 128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
        accs = [nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.psum) for _ in range(12)]
        s = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=s, src=st[0])
        m = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf)
        for k in range(2):
            nisa.dma_copy(dst=m, src=mv[k])              # the same tile rewritten per k
            for a in accs:
                nisa.nc_matmul(dst=a, stationary=s, moving=m, accumulate=k > 0)
        for i, a in enumerate(accs):
            r = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_copy(dst=r, src=a)
            nisa.dma_copy(dst=out[i], src=r)
        nisa.tensor_copy(dst=m[:, 0:1], src=m[:, 0:1])    # m and s live past the reads
        nisa.tensor_copy(dst=s[:, 0:1], src=s[:, 0:1])
        return out
    st, mv = np.zeros((1, 128, 128), np.float32), np.zeros((2, 128, 512), np.float32)
    with pytest.raises(CapacityError, match=r"psum allocation \(128, 512\) float32 needs 2048 bytes per "
                                            r"partition \(1 bank\(s\)\) but 16384 of 16384 "):
        nki.simulate(kernel, target="trn2")(st, mv)


# ---- the second schedule: chains whose SBUF sources are unchanged but dead at the first read
# (the last chain is the weights' last reader, as in bwmm_shard_on_I) sink too, their sources
# kept live until that read; tried when the first schedule does not fit, checked like it.

def _last_reader_accumulators(big_between=0, reread=False):
    def kernel(st, mv):                     # st (2, 128, 128), mv (2, 128, 512): 12 outputs
        out = nl.ndarray((12, 128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
        accs = [nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.psum) for _ in range(12)]
        s_tiles, m_tiles = [], []
        for k in range(2):
            s = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.sbuf)
            nisa.dma_copy(dst=s, src=st[k])
            m = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf)
            nisa.dma_copy(dst=m, src=mv[k])
            s_tiles.append(s)
            m_tiles.append(m)
        for a in accs:                      # chain by chain: the twelfth is the sources' last reader
            for k in range(2):
                nisa.nc_matmul(dst=a, stationary=s_tiles[k], moving=m_tiles[k], accumulate=k > 0)
        if big_between:                     # a tile live between the chains and the reads
            big = nl.ndarray((128, big_between), dtype=nl.float32, buffer=nl.sbuf, name="big")
            nisa.memset(dst=big, value=0.0)
            nisa.tensor_copy(dst=big[:, 0:1], src=big[:, 0:1])
        res = []
        for a in accs:
            r = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_copy(dst=r, src=a)
            res.append(r)
        for i, r in enumerate(res):
            if reread:                      # every copy read again later, all together
                nisa.tensor_scalar(dst=r, data=r, op0=nl.multiply, operand0=1.0)
            nisa.dma_copy(dst=out[i], src=r)
        return out
    return kernel


def _want(st, mv):
    return st[0].T @ mv[0] + st[1].T @ mv[1]


def test_chains_whose_sources_die_at_the_last_chain_sink_with_their_sources_kept_live():
    rng = np.random.default_rng(4)
    st = rng.integers(-2, 3, (2, 128, 128)).astype(np.float32)
    mv = rng.integers(-2, 3, (2, 128, 512)).astype(np.float32)
    out = nki.simulate(_last_reader_accumulators(), target="trn2")(st, mv)
    for i in range(12):
        np.testing.assert_array_equal(out[i], _want(st, mv))


def test_the_copies_of_sunk_chains_do_not_keep_psum_sources_live():
    """Only PSUM chains are sunk by stretching SBUF sources: the SBUF copies, first read later
    together, stay born at their copy (stretching their PSUM sources would hold all 12 banks)."""
    rng = np.random.default_rng(5)
    st = rng.integers(-2, 3, (2, 128, 128)).astype(np.float32)
    mv = rng.integers(-2, 3, (2, 128, 512)).astype(np.float32)
    out = nki.simulate(_last_reader_accumulators(reread=True), target="trn2")(st, mv)
    for i in range(12):
        np.testing.assert_array_equal(out[i], _want(st, mv))


def test_stretched_sources_must_fit_sbuf_else_the_first_schedules_error():
    # sources 2 x (512 + 2048) B; big 52000 x 4 = 208000 B: 208000 + 5120 > 212984 when stretched
    st, mv = np.zeros((2, 128, 128), np.float32), np.zeros((2, 128, 512), np.float32)
    with pytest.raises(CapacityError, match=r"psum allocation \(128, 512\) float32 needs 2048 bytes per "
                                            r"partition \(1 bank\(s\)\) but 16384 of 16384 "):
        nki.simulate(_last_reader_accumulators(big_between=52000), target="trn2")(st, mv)
    # a big tile that leaves room for the stretched sources fits
    out = nki.simulate(_last_reader_accumulators(big_between=50000), target="trn2")(st, mv)
    np.testing.assert_array_equal(out, np.zeros((12, 128, 512), np.float32))


@pytest.mark.parametrize("seed", range(8))
def test_the_all_at_once_shortcut_agrees_with_the_sweep(seed, monkeypatch):
    """``CoreMemory.check`` skips a buffer's sweep when its tiles would fit even all live at once;
    on random tile sets (some fitting, some not, some live only in turn) the outcome -- pass, or
    the CapacityError's text -- is the same with the shortcut turned off."""
    from nkisim.memory import capacity
    rng = np.random.default_rng(seed)
    n_sb, n_ps = int(rng.integers(1, 12)), int(rng.integers(1, 12))
    sb = [(int(rng.choice([16, 64, 65, 128])), int(rng.choice([1000, 20000, 40000]))) for _ in range(n_sb)]
    ps = [(int(rng.choice([32, 128])), int(rng.choice([128, 384, 512, 1024]))) for _ in range(n_ps)]
    apart = bool(rng.integers(0, 2))

    def kernel(x):
        tiles = [nl.ndarray(s, dtype=nl.float32, buffer=nl.sbuf) for s in sb]
        tiles += [nl.ndarray(s, dtype=nl.float32, buffer=nl.psum) for s in ps]
        if apart:
            for t in tiles:
                use(t)
        else:
            use(*tiles)

    def outcome():
        try:
            run(kernel)
        except CapacityError as exc:
            return str(exc)
        return "passed"
    with_shortcut = outcome()
    monkeypatch.setattr(capacity, "_sbuf_fits_at_once", lambda recs, t: False)
    monkeypatch.setattr(capacity, "_psum_fits_at_once", lambda recs, t: False)
    assert outcome() == with_shortcut
