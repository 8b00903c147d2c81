"""Documented allocation and view rules: integer shapes, buffer objects, explicit addresses
(nl.ndarray address=(partition_offset, free_offset)), and no partition striding in an
instruction's on-chip operands.

Sources (aws-neuron-sdk): nki/api/nki/language/__init__.py (ndarray), nki/migration/index.rst
("String buffer names no longer supported", "Improved allocation API"),
nki/library/kernel-utils/allocator.rst (byte addresses), nki/guides/architecture/
trainium_inferentia2_arch.rst ("hardware does not allow P dimension striding", start_partition),
nki/deep-dives/nki-aps.rst (partition step of .ap).
"""
import re

import numpy as np
import pytest

import nkisim.nki.isa as nisa
import nkisim.nki.language as nl
from nkisim.errors import ArgumentError, CapacityError, ShapeError
from conftest import simulate


def err(op, what):
    return rf"^{re.escape(op)}: {re.escape(what)} \(test_allocation_rules\.py:\d+\)$"


def run(body, target="trn2"):
    def kernel(x):
        body()
    return simulate(kernel, np.zeros((1, 1), np.float32), target=target)


# ---- shapes: integers only -------------------------------------------------------------------

@pytest.mark.parametrize("shape,dim,bad", [((128.5, 4), 0, "float 128.5"), ((128, 4.0), 1, "float 4.0"),
                                           ((np.float32(8), 4), 0, "float32 8.0"), ((8, True), 1, "bool True"),
                                           ((8, "4"), 1, "str '4'"), ((2, 2, np.float64(2.5)), 2, "float64 2.5")])
def test_non_integer_shape_raises(shape, dim, bad):
    with pytest.raises(ShapeError, match=err("nl.ndarray", f"shape {shape!r} must hold integers; dim "
                                                           f"{dim} is {bad}")):
        run(lambda: nl.ndarray(shape, dtype=nl.float32, buffer=nl.sbuf))


def test_float_shape_is_not_found_through_the_memo():
    """128.0 == 128 and hashes alike: an int shape checked first must not let the float pass."""
    def body():
        nl.ndarray((16, 4), dtype=nl.float32, buffer=nl.sbuf)
        nl.ndarray((16.0, 4), dtype=nl.float32, buffer=nl.sbuf)
    with pytest.raises(ShapeError, match=err("nl.ndarray", "shape (16.0, 4) must hold integers; dim 0 is "
                                                           "float 16.0")):
        run(body)


@pytest.mark.parametrize("make", [lambda s: nl.zeros(s, nl.float32), lambda s: nl.full(s, 1.0, nl.float32),
                                  lambda s: nl.ones(s, nl.float32, buffer=nl.shared_hbm)])
def test_creation_functions_reject_float_shapes(make):
    with pytest.raises(ShapeError, match="must hold integers"):
        run(lambda: make((4, 2.5)))


def test_numpy_integer_shapes_are_fine():
    def kernel(x):
        t = nl.ndarray((np.int64(2), np.int32(3)), dtype=nl.float32, buffer=nl.sbuf)
        assert t.shape == (2, 3) and all(type(s) is int for s in t.shape)
        nisa.dma_copy(dst=t, src=x)
        out = nl.ndarray((2, 3), dtype=nl.float32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=t)
        return out
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_array_equal(simulate(kernel, x), x)


# ---- buffers: objects, not strings -----------------------------------------------------------

@pytest.mark.parametrize("name,obj", [("sbuf", "nl.sbuf"), ("psum", "nl.psum"), ("hbm", "nl.hbm"),
                                      ("shared_hbm", "nl.shared_hbm"), ("private_hbm", "nl.private_hbm")])
def test_string_buffer_raises(name, obj):
    with pytest.raises(ArgumentError, match=err("nl.ndarray", f"buffer {name!r} is a string; creation ops "
                                                              f"take a buffer object (nl.sbuf, nl.psum, nl.hbm, "
                                                              f"nl.private_hbm, nl.shared_hbm); use {obj}")):
        run(lambda: nl.ndarray((4, 4), dtype=nl.float32, buffer=name))


def test_string_buffer_after_the_object_still_raises():
    """'sbuf' == nl.sbuf (a str enum) and hashes alike: the memo must not accept the string."""
    def body():
        nl.ndarray((4, 4), dtype=nl.float32, buffer=nl.sbuf)
        nl.zeros((4, 4), dtype=nl.float32, buffer="sbuf")
    with pytest.raises(ArgumentError, match=err("nl.zeros", "buffer 'sbuf' is a string; creation ops take a "
                                                           "buffer object (nl.sbuf, nl.psum, nl.hbm, "
                                                           "nl.private_hbm, nl.shared_hbm); use nl.sbuf")):
        run(body)


def test_unknown_buffer_raises():
    with pytest.raises(ArgumentError, match=err("nl.ndarray", "buffer 3 is not a buffer; expected nl.sbuf, "
                                                              "nl.psum, nl.hbm, nl.private_hbm or nl.shared_hbm")):
        run(lambda: nl.ndarray((4, 4), dtype=nl.float32, buffer=3))


# ---- explicit addresses ----------------------------------------------------------------------

def test_address_round_trips_and_values_are_right():
    """The SbufManager page's manual layout: byte addresses, reuse after a tensor is dead."""
    def kernel(x):
        top = nl.tile_size.total_available_sbuf_size - 512
        w = nl.ndarray((128, 256), dtype=nl.bfloat16, buffer=nl.sbuf, address=(0, top))
        b1 = nl.ndarray((128, 512), dtype=nl.bfloat16, buffer=nl.sbuf, address=(0, 0))
        b2 = nl.ndarray((128, 256), dtype=nl.bfloat16, buffer=nl.sbuf, address=(0, 1024))
        b3 = nl.ndarray((128, 256), dtype=nl.bfloat16, buffer=nl.sbuf, address=(0, 1536))
        assert (w.address, b1.address, b2.address, b3.address) == ((0, top), (0, 0), (0, 1024), (0, 1536))
        t = nl.ndarray((4, 8), dtype=nl.float32, buffer=nl.sbuf, address=(64, 4096))
        nisa.dma_copy(dst=t, src=x)
        out = nl.ndarray((4, 8), dtype=nl.float32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=t)
        return out
    x = np.arange(32, dtype=np.float32).reshape(4, 8)
    np.testing.assert_array_equal(simulate(kernel, x, target="trn2"), x)


def test_address_none_when_not_given():
    def body():
        assert nl.ndarray((4, 4), dtype=nl.float32).address is None
    run(body)


@pytest.mark.parametrize("target,limit", [("trn1", 180224), ("trn2", 212984), ("trn3", 245752)])
def test_sbuf_address_past_the_partition_size(target, limit):
    """free_offset + bytes per partition <= total_available_sbuf_size (per generation)."""
    def fits():
        nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.sbuf, address=(0, limit - 512))
    run(fits, target)
    with pytest.raises(CapacityError, match=err(
            "nl.ndarray", f"sbuf tensor (128, 128) at free_offset {limit - 508} needs 512 bytes per partition, "
                          f"ending at byte {limit + 4}, beyond the {limit} bytes per partition of sbuf on "
                          f"{target}")):
        run(lambda: nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.sbuf, address=(0, limit - 508)),
            target)


def test_psum_address_bounds_and_bank_alignment():
    """PSUM: 16 KiB per partition, 8 banks of 2 KiB; "must start at the beginning of each bank"."""
    def ok():
        nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.psum, address=(0, 3 * 2048))
        nl.ndarray((128, 1024), dtype=nl.float32, buffer=nl.psum, address=(0, 6 * 2048))
    run(ok)
    with pytest.raises(ShapeError, match=err("nl.ndarray", "psum tensor (128, 8) at free_offset 1024 does not "
                                                           "start at a PSUM bank boundary (a multiple of 2048 "
                                                           "bytes) on trn2")):
        run(lambda: nl.ndarray((128, 8), dtype=nl.float32, buffer=nl.psum, address=(0, 1024)))
    with pytest.raises(CapacityError, match=err("nl.ndarray", "psum tensor (128, 1024) at free_offset 14336 "
                                                              "needs 4096 bytes per partition, ending at byte "
                                                              "18432, beyond the 16384 bytes per partition of "
                                                              "psum on trn2")):
        run(lambda: nl.ndarray((128, 1024), dtype=nl.float32, buffer=nl.psum, address=(0, 7 * 2048)))


@pytest.mark.parametrize("n,good,bad", [(128, [0], []), (65, [0], [32, 63]), (64, [0, 64], [32, 16]), (33, [0, 64], [32]),
                                        (32, [0, 32, 64, 96], [16, 8]), (1, [0, 96], [1, 95])])
def test_start_partition_rule(n, good, bad):
    for p in good:
        run(lambda: nl.ndarray((n, 4), dtype=nl.float32, buffer=nl.sbuf, address=(p, 0)))
    step = 128 if n > 64 else 64 if n > 32 else 32
    starts = ", ".join(str(k) for k in range(0, 128, step))
    for p in bad:
        with pytest.raises(ShapeError, match=err("nl.ndarray", f"sbuf tensor ({n}, 4) spans {n} partitions and "
                                                               f"must start at partition {starts}; got "
                                                               f"partition_offset {p} on trn2")):
            run(lambda: nl.ndarray((n, 4), dtype=nl.float32, buffer=nl.sbuf, address=(p, 0)))


def test_partition_offset_past_pmax():
    with pytest.raises(ShapeError, match=err("nl.ndarray", "sbuf tensor (64, 4) at partition_offset 96 with 64 "
                                                           "partitions reaches partition 159, beyond the 128 "
                                                           "partitions on trn2")):
        run(lambda: nl.ndarray((64, 4), dtype=nl.float32, buffer=nl.sbuf, address=(96, 0)))


@pytest.mark.parametrize("address,what", [((0, -4), "address free_offset must be a non-negative integer, got -4"),
                                          ((0, 1.5), "address free_offset must be a non-negative integer, got 1.5"),
                                          ((-1, 0), "address partition_offset must be a non-negative integer, "
                                                    "got -1"),
                                          (7, "address must be (partition_offset, free_offset), got 7"),
                                          ((0, 1, 2), "address must be (partition_offset, free_offset), got "
                                                      "(0, 1, 2)")])
def test_malformed_address(address, what):
    with pytest.raises(ArgumentError, match=err("nl.ndarray", what)):
        run(lambda: nl.ndarray((4, 4), dtype=nl.float32, buffer=nl.sbuf, address=address))


def test_address_on_hbm_raises():
    with pytest.raises(ArgumentError, match=err("nl.ndarray", "address=(0, 0) given for shared_hbm tensor (4, 4); "
                                                              "only SBUF and PSUM tensors take an address "
                                                              "(partition_offset, free_offset)")):
        run(lambda: nl.ndarray((4, 4), dtype=nl.float32, buffer=nl.shared_hbm, address=(0, 0)))


def _use(*tiles):
    """Each tile written, then read (a tile first written by a memset is born at the read)."""
    for t in tiles:
        nisa.memset(dst=t, value=0.0)
        nisa.tensor_copy(dst=t, src=t)


def test_overlapping_live_placed_tensors_raise():
    def body():
        a = nl.ndarray((128, 256), dtype=nl.float32, buffer=nl.sbuf, address=(0, 0), name="a")
        b = nl.ndarray((128, 256), dtype=nl.float32, buffer=nl.sbuf, address=(0, 512), name="b")
        _use(a, b, a)                           # a is used again after b's first use
    with pytest.raises(CapacityError, match=r"^nl\.ndarray: sbuf allocation 'b' \(128, 256\) float32 at address "
                                            r"\(0, 512\) \(1024 bytes per partition\) overlaps 'a' \(128, 256\) "
                                            r"float32 at address \(0, 0\) \(1024 bytes per partition, allocated at "
                                            r"test_allocation_rules\.py:\d+\), which is still live at that point "
                                            r"on trn2 \(test_allocation_rules\.py:\d+\)$"):
        run(body)


def test_placed_tensors_in_disjoint_partitions_or_after_death_do_not_overlap():
    def body():
        a = nl.ndarray((64, 256), dtype=nl.float32, buffer=nl.sbuf, address=(0, 0))
        b = nl.ndarray((64, 256), dtype=nl.float32, buffer=nl.sbuf, address=(64, 0))
        _use(a, b)                              # same bytes, other partitions
        c = nl.ndarray((128, 256), dtype=nl.float32, buffer=nl.sbuf, address=(0, 0))
        _use(c)                                 # a and b are dead: their memory is reused
        d = nl.ndarray((128, 256), dtype=nl.float32, buffer=nl.sbuf, address=(0, 1024))
        _use(c, d)                              # adjacent, not overlapping
    run(body)



def test_placed_tensors_live_from_first_access_so_circular_buffers_made_up_front_work():
    """Several tensors made at one address before any is used (a circular buffer, as nki-library's
    ModularAllocator makes them) are legal while each one's uses end before the next one's begin."""
    def ring(order):
        def body():
            bufs = [nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf, address=(0, 256 * (i % 2)),
                               name=f"buf{i}") for i in range(6)]
            for i in order:
                _use(bufs[i])
        return body
    run(ring([0, 1, 2, 3, 4, 5]))               # buf2 reuses buf0's bytes after buf0's last use
    run(ring([0, 1, 0, 1, 2, 3]))               # a tensor may be used many times before the next
    with pytest.raises(CapacityError, match=r"^nl\.ndarray: sbuf allocation 'buf2' \(128, 64\) float32 at "
                                            r"address \(0, 0\) \(256 bytes per partition\) overlaps 'buf0' "):
        run(ring([0, 1, 2, 0]))                 # buf0 used again after buf2 took its bytes


def test_a_placed_tensor_never_accessed_occupies_nothing():
    def body():
        a = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf, address=(0, 0), name="a")
        b = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf, address=(0, 0), name="b")
        _use(b)
        return a
    run(body)


def test_overlapping_psum_banks_raise():
    def body():
        a = nl.ndarray((128, 1024), dtype=nl.float32, buffer=nl.psum, address=(0, 0), name="acc")
        b = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.psum, address=(0, 2048), name="acc2")
        _use(a, b, a)
    with pytest.raises(CapacityError, match=r"^nl\.ndarray: psum allocation 'acc2' \(128, 512\) float32 at address "
                                            r"\(0, 2048\) \(2048 bytes per partition\) overlaps 'acc' "):
        run(body)


def test_automatic_psum_tensors_go_around_placed_ones():
    """Eight 1-bank PSUM tiles: seven automatic ones fit beside one placed on bank 5."""
    def body():
        tiles = [nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.psum, address=(0, 5 * 2048))]
        tiles += [nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.psum) for _ in range(7)]
        _use(*tiles)
    run(body)


# ---- no partition striding in instruction operands -------------------------------------------

def _strided_copy(view_of):
    def kernel(x):
        t = nl.ndarray((128, 8), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x)
        u = nl.ndarray((64, 8), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=u, src=view_of(t))
        out = nl.ndarray((64, 8), dtype=nl.float32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=u)
        return out
    return kernel


@pytest.mark.parametrize("view_of,stride", [(lambda t: t[0:128:2], 16), (lambda t: t[1:128:2, :], 16),
                                            (lambda t: t.slice(0, 0, 128, 2), 16),
                                            (lambda t: t[0:128:2].reshape((64, 2, 4)), 16)])
def test_partition_strided_operand_raises(view_of, stride):
    x = np.zeros((128, 8), np.float32)
    with pytest.raises(ShapeError, match=r"^nisa\.tensor_copy: src \(64, (8|2, 4)\) in sbuf has partition stride "
                                         rf"{stride} elements; it must be 8 \(the elements per partition\): no "
                                         r"partition striding, an operand occupies consecutive partitions "
                                         r"\(test_allocation_rules\.py:\d+\)$"):
        simulate(_strided_copy(view_of), x)


def test_partition_strided_view_is_legal_until_used():
    """Decision: the view itself is legal (the view docs allow step >= 1); shape and strides are NumPy's."""
    def body():
        t = nl.ndarray((128, 8), dtype=nl.float32, buffer=nl.sbuf)
        v = t[0:128:4]
        ref = np.zeros((128, 8), np.float32)[0:128:4]
        assert v.shape == ref.shape and v.strides == tuple(s // 4 for s in ref.strides)
    run(body)


@pytest.mark.parametrize("view_of", [lambda t: t[64:128], lambda t: t[0:1:2], lambda t: t[5:6],
                                     lambda t: t[0:64, 0:8:2].reshape((64, 4))[:, 0:4]])
def test_contiguous_partitions_are_fine(view_of, rng):
    x = rng.standard_normal((128, 8)).astype(np.float32)

    def kernel(x):
        t = nl.ndarray((128, 8), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x)
        v = view_of(t)
        u = nl.ndarray(v.shape, dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=u, src=v)
        out = nl.ndarray(v.shape, dtype=nl.float32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=u)
        return out
    np.testing.assert_array_equal(simulate(kernel, x), view_of(x))


def test_partition_strided_dma_destination_raises():
    """The .ap rule (nki-aps.rst) covers DMA operands too: dst t[0:16:2] of an HBM load."""
    def kernel(x):
        t = nl.ndarray((16, 4), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t[0:16:2], src=x)
    with pytest.raises(ShapeError, match=err("nisa.dma_copy", "dst (8, 4) in sbuf has partition stride 8 elements; "
                                                              "it must be 4 (the elements per partition): no "
                                                              "partition striding, an operand occupies "
                                                              "consecutive partitions")):
        simulate(kernel, np.zeros((8, 4), np.float32))


def test_hbm_operands_may_stride_any_dim(rng):
    x = rng.standard_normal((16, 4)).astype(np.float32)

    def kernel(x):
        t = nl.ndarray((8, 4), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x[0:16:2])
        out = nl.ndarray((8, 4), dtype=nl.float32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=t)
        return out
    np.testing.assert_array_equal(simulate(kernel, x), x[0:16:2])


@pytest.mark.parametrize("shape", [(0, 4), (4, 0), (2, -1), ()])
def test_shape_dims_must_be_positive(shape):
    """NkiTensor: "shape: tuple of positive integers"."""
    with pytest.raises(ShapeError, match=err("nl.ndarray", f"shape {shape} must have at least one dim, each a "
                                                           f"positive integer")):
        run(lambda: nl.ndarray(shape, dtype=nl.float32, buffer=nl.sbuf))


# ---- at most 4 free access-pattern dims per engine operand -----------------------------------

def _copy_view(shape, view_of):
    def kernel(x):
        t = nl.ndarray(shape, dtype=nl.float32, buffer=nl.sbuf)
        nisa.memset(dst=t, value=1.0)
        v = view_of(t)
        u = nl.ndarray(v.shape, dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=u, src=v)
        return x
    return kernel


def test_four_free_dims_are_fine_and_contiguous_ones_merge():
    x = np.zeros((1, 1), np.float32)
    simulate(_copy_view((2, 2, 2, 2, 2, 2), lambda t: t), x)                       # 5 dims merge into 1
    simulate(_copy_view((2, 3, 4, 5, 6), lambda t: t.permute((0, 4, 3, 2, 1))), x)  # 4 free dims
    simulate(_copy_view((2, 1, 3, 1, 4, 1, 5, 1, 6), lambda t: t.permute((0, 8, 7, 6, 5, 4, 3, 2, 1))), x)


def test_five_free_dims_raise():
    """Arch guide: "up to four-dimensional tensorized access pattern ... within each partition"."""
    x = np.zeros((1, 1), np.float32)
    kernel = _copy_view((2, 2, 3, 2, 3, 2), lambda t: t.permute((0, 5, 4, 3, 2, 1)))
    with pytest.raises(ShapeError, match=r"^nisa\.tensor_copy: src \(2, 2, 3, 2, 3, 2\) with strides "
                                         r"\(72, 1, 2, 6, 12, 36\) needs 5 free-dim access-pattern dims \(after "
                                         r"merging contiguous dims\); an engine instruction takes at most 4 "
                                         r"\(test_allocation_rules\.py:\d+\)$"):
        simulate(kernel, x)


def test_dma_operands_take_any_number_of_free_dims(rng):
    x = rng.standard_normal((2, 2, 3, 2, 3, 2)).astype(np.float32)

    def kernel(x):
        t = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x)
        v = t.permute((0, 5, 4, 3, 2, 1))
        out = nl.ndarray(v.shape, dtype=nl.float32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=v)
        return out
    np.testing.assert_array_equal(simulate(kernel, x), x.transpose(0, 5, 4, 3, 2, 1))
