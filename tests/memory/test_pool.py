"""The process-wide storage pool and staggered storage (memory.capacity)."""
import numpy as np

from nkisim.memory.capacity import StoragePool, staggered

F32 = np.dtype(np.float32)      # pool keys are dtypes (as allocations pass them)


def test_staggered_arrays_start_at_different_page_offsets():
    arrays = [staggered(65536, np.float32) for _ in range(16)]
    offsets = {a.ctypes.data % 4096 for a in arrays}
    assert len(offsets) == 16
    for a in arrays:
        assert a.shape == (65536,) and a.dtype == np.float32 and a.flags.c_contiguous
        assert a.ctypes.data % 64 == 0
    small = staggered(100, np.float16)
    assert small.shape == (100,) and small.dtype == np.float16


def test_pool_never_hands_out_storage_still_viewed():
    pool = StoragePool(per_key=4)
    a = staggered(65536, np.float32)
    view = a.reshape(128, 512)[:, 3:9]          # a view of a view: its base is a's buffer
    pool.give(a)
    del a
    assert pool.take(65536, F32) is None  # the view still reads that memory
    b = staggered(65536, np.float32)
    pool.give(b)
    del b, view
    got = pool.take(65536, F32)
    assert got is not None and got.size == 65536
    assert pool.take(65536, F32) is None  # (the first one was dropped, not kept)


def test_pool_limits_and_cold_order():
    pool = StoragePool(per_key=2, max_bytes=3 * 4096 * 4)
    hot, cold, extra = (np.zeros(4096, np.float32) for _ in range(3))
    ids = (id(hot), id(cold))
    pool.give(cold, cold=True)
    pool.give(hot)
    pool.give(extra)                              # over per_key: not kept
    del hot, cold, extra
    first = pool.take(4096, F32)
    second = pool.take(4096, F32)
    assert (id(first), id(second)) == ids         # most recently given (hot) first, cold last
    assert pool.take(4096, F32) is None
    assert pool.take(4096, np.dtype(np.float64)) is None


def test_a_full_pool_makes_room_for_the_sizes_in_use_now():
    pool = StoragePool(per_key=8, max_bytes=4 * 4096 * 4)
    old = [np.zeros(4096, np.float32) for _ in range(4)]      # fills the pool with one size
    for a in old:
        pool.give(a)
    del a, old
    new = np.zeros(2 * 4096, np.float32)
    keep = id(new)
    pool.give(new)                               # a new size evicts the least recently given
    del new
    got = pool.take(2 * 4096, F32)
    assert got is not None and id(got) == keep
    assert pool.nbytes <= pool.max_bytes
    left = [pool.take(4096, F32) for _ in range(4)]
    assert sum(x is not None for x in left) == 2   # two old ones made room for the new one
    huge = np.zeros(5 * 4096, np.float32)          # larger than the whole pool: not kept
    pool.give(huge)
    assert pool.take(5 * 4096, F32) is None


def test_the_size_given_most_recently_is_evicted_last():
    """Sizes leave a full pool in the order they were last given (A, B, A again: B goes first),
    also when the same size is given several times in a row."""
    pool = StoragePool(per_key=8, max_bytes=4 * 4096 * 4)
    a = [np.zeros(4096, np.float32) for _ in range(2)]
    b = [np.zeros(2048, np.float32) for _ in range(2)]
    pool.give(a[0])
    pool.give(b[0])
    pool.give(b[1])
    pool.give(a[1])                                # a's size is now the most recent
    ids_a = {id(x) for x in a}
    del a, b
    c = np.zeros(2 * 4096, np.float32)             # needs 2 * 4096 * 4 bytes: evicts 4 * 4096 bytes
    pool.give(c)
    del c
    assert pool.take(2048, F32) is None            # b's size went first (both arrays)
    assert pool.take(2048, F32) is None
    left = pool.take(4096, F32)
    assert left is not None and id(left) in ids_a and pool.nbytes <= pool.max_bytes
