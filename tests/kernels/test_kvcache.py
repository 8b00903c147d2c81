"""write_kv_cache: kernel vs fallback vs a per-token Python loop; -1 and out-of-range slots are
skipped; writes land in the caller's caches; routes; gate refusals."""
import pytest

torch = pytest.importorskip("torch")

from nkisim.kernels import kvcache, write_kv_cache  # noqa: E402
from nkisim.torch import reset_route_stats, route_stats  # noqa: E402
from _fixtures import clean_env, cpu, sim  # noqa: E402,F401

NAME = "nkisim.kernels.kvcache.write_kv_cache_kernel"


def setup(T, NB, bs, Hkv, D, dtype, seed=0, pad=()):
    g = torch.Generator().manual_seed(seed)
    k, v = (torch.randn(T, Hkv, D, generator=g).to(dtype) for _ in range(2))
    caches = [torch.randn(NB, bs, Hkv, D, generator=g).to(dtype) for _ in range(2)]
    slots = torch.randperm(NB * bs, generator=g)[:T].to(torch.int32)
    for t in pad:
        slots[t] = -1
    return k, v, caches, slots


def loop_reference(k, v, caches, slots):
    """The contract, one token at a time: block slot // bs, offset slot % bs; -1 skipped."""
    kc, vc = (c.clone() for c in caches)
    bs = kc.shape[1]
    for t, s in enumerate(slots.tolist()):
        if s >= 0:
            kc[s // bs, s % bs] = k[t]
            vc[s // bs, s % bs] = v[t]
    return kc, vc


@pytest.mark.parametrize("T,pad", [(1, ()), (7, (2, 5)), (130, (0, 64, 129))])
def test_fallback_matches_loop(T, pad):
    k, v, caches, slots = setup(T, 40, 16, 2, 8, torch.float32, seed=T, pad=pad)
    want = loop_reference(k, v, caches, slots)
    kvcache.write_kv_cache_fallback(k, v, *caches, slots)
    assert torch.equal(caches[0], want[0]) and torch.equal(caches[1], want[1])


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("T,pad", [(1, ()), (7, (2, 5)), (130, (0, 64, 129))])
def test_kernel_writes_the_callers_caches_bit_exactly(sim, T, pad, dtype):
    k, v, caches, slots = setup(T, 40, 16, 2, 8, dtype, seed=T, pad=pad)
    want = loop_reference(k, v, caches, slots)
    ids = [id(c) for c in caches]
    assert write_kv_cache(k, v, *caches, slots) is None
    assert [id(c) for c in caches] == ids
    assert torch.equal(caches[0], want[0]) and torch.equal(caches[1], want[1])
    assert route_stats()[NAME] == {"kernel": 1, "fallback": 0}


def test_all_slots_padding_leaves_caches_untouched(sim):
    k, v, caches, slots = setup(3, 4, 8, 1, 4, torch.float32, pad=(0, 1, 2))
    before = [c.clone() for c in caches]
    write_kv_cache(k, v, *caches, slots)
    assert torch.equal(caches[0], before[0]) and torch.equal(caches[1], before[1])
    kvcache.write_kv_cache_fallback(k, v, *caches, slots)
    assert torch.equal(caches[0], before[0]) and torch.equal(caches[1], before[1])


def test_fallback_function_skips_out_of_range_slots():
    """Without the eager check (compiled graphs), a slot outside the cache is skipped like -1."""
    k, v, caches, slots = setup(4, 2, 4, 1, 4, torch.float32)
    slots[:] = torch.tensor([8, 3, -5, 7], dtype=torch.int32)     # 8 slots in all
    want = loop_reference(k[1:2], v[1:2], caches, slots[1:2])
    want = loop_reference(k[3:4], v[3:4], want, slots[3:4])
    kvcache.write_kv_cache_fallback(k, v, *caches, slots)
    assert torch.equal(caches[0], want[0]) and torch.equal(caches[1], want[1])


@pytest.mark.parametrize("route", ["kernel", "fallback"])
@pytest.mark.parametrize("bad,msg", [
    ([8, 3, -1, 7], r"write_kv_cache: slot_mapping\[0\] = 8 outside -1 \.\. 7 \(num_blocks \* block_size = 8\)"),
    ([0, 3, -5, 7], r"write_kv_cache: slot_mapping\[2\] = -5 outside -1 \.\. 7 \(num_blocks \* block_size = 8\)"),
    ([5, -1, -1, 5], r"write_kv_cache: slot 5 is written by tokens 0 and 3; slots must be distinct"),
])
def test_decision_invalid_slot_mapping_raises_on_both_routes(monkeypatch, route, bad, msg):
    """Decision: in eager mode bad slots raise the same ValueError before routing; caches untouched."""
    monkeypatch.setenv("VLLM_NEURON_CPU_MODE", "1")
    monkeypatch.setenv("NKI_SIMULATOR", "1" if route == "kernel" else "0")
    reset_route_stats()
    k, v, caches, slots = setup(4, 2, 4, 1, 4, torch.float32)
    slots[:] = torch.tensor(bad, dtype=torch.int32)
    before = [c.clone() for c in caches]
    with pytest.raises(ValueError, match=f"^{msg}$"):
        write_kv_cache(k, v, *caches, slots)
    assert torch.equal(caches[0], before[0]) and torch.equal(caches[1], before[1])
    assert route_stats().get(NAME, {"kernel": 0, "fallback": 0}) == {"kernel": 0, "fallback": 0}


def test_repeated_minus_one_slots_are_fine(sim):
    k, v, caches, slots = setup(4, 2, 4, 1, 4, torch.float32, pad=(0, 2))
    want = loop_reference(k, v, caches, slots)
    write_kv_cache(k, v, *caches, slots)
    assert torch.equal(caches[0], want[0]) and torch.equal(caches[1], want[1])


def test_simulator_off_takes_the_fallback(cpu):
    k, v, caches, slots = setup(5, 8, 4, 2, 4, torch.bfloat16, pad=(1,))
    want = loop_reference(k, v, caches, slots)
    write_kv_cache(k, v, *caches, slots)
    assert torch.equal(caches[0], want[0]) and torch.equal(caches[1], want[1])
    assert route_stats()[NAME] == {"kernel": 0, "fallback": 1}


@pytest.mark.parametrize("case", ["int64_slots", "dtype_mismatch", "strided_cache"])
def test_gate_refuses_and_the_fallback_still_writes(sim, case):
    k, v, caches, slots = setup(5, 8, 4, 2, 4, torch.float32, pad=(3,))
    if case == "int64_slots":
        slots = slots.to(torch.int64)
    elif case == "dtype_mismatch":
        k, v = k.to(torch.bfloat16).float(), v.to(torch.bfloat16)
    want = loop_reference(k, v.float(), caches, slots)
    if case == "strided_cache":       # a view into a bigger buffer: the kernel needs contiguous caches
        big = [torch.zeros(8, 4, 2, 8) for _ in range(2)]
        for b, c in zip(big, caches):
            b[..., :4] = c
        caches = [b[..., :4] for b in big]
    assert not kvcache.kernel_fits(k, v, *caches, slots)
    write_kv_cache(k, v, *caches, slots)
    assert torch.equal(caches[0], want[0]) and torch.equal(caches[1], want[1])
    assert route_stats()[NAME] == {"kernel": 0, "fallback": 1}
