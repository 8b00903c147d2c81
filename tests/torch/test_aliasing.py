"""Torch arguments that share memory: one HBM allocation in eager (every entry point), and in the
functional path every alias of a written argument reads the one clone, so compiled == eager."""
import pytest

torch = pytest.importorskip("torch")

from torch.fx.experimental.proxy_tensor import make_fx  # noqa: E402

import nkisim.nki as nki  # noqa: E402
from nkisim.torch import nki_kernel_wrapper_functional, simulate_nki_kernel, wrap_nki  # noqa: E402
from nki_torch_kernels import add_into, clean_env, write_y_read_x  # noqa: E402,F401


@pytest.fixture(autouse=True)
def sim(monkeypatch):
    monkeypatch.setenv("NKI_SIMULATOR", "1")


def _add_into_ref(shape, *views):
    want = torch.zeros(shape)
    for sl in views:
        want[sl] += 1
    return want


ENTRY_POINTS = {
    "simulate": lambda x, y: nki.simulate(add_into)(x, y),
    "simulate_nki_kernel": lambda x, y: simulate_nki_kernel(add_into, 1, {"x": x, "y": y}),
    "wrap_nki": lambda x, y: wrap_nki(add_into)(x, y),
}


@pytest.mark.parametrize("entry", ENTRY_POINTS)
def test_same_non_contiguous_view_twice_gets_both_writes(entry):
    x = torch.zeros(2, 8)
    v = x[:, ::2]
    ENTRY_POINTS[entry](v, v)
    assert torch.equal(x, _add_into_ref((2, 8), (slice(None), slice(None, None, 2)),
                                        (slice(None), slice(None, None, 2))))


@pytest.mark.parametrize("entry", ENTRY_POINTS)
def test_overlapping_views_see_each_others_writes(entry):
    x = torch.zeros(2, 8)
    ENTRY_POINTS[entry](x[:, 0:4], x[:, 2:6])
    assert torch.equal(x, _add_into_ref((2, 8), (slice(None), slice(0, 4)), (slice(None), slice(2, 6))))


CASES = {
    "same tensor": lambda a: (a, a),
    "same view, two objects": lambda a: (a[:, :4], a[:, :4]),
    "tensor and .view": lambda a: (a, a.view(2, 8)),
    "overlapping views": lambda a: (a[:, 0:4], a[:, 2:6]),
}


def _program(case):
    W = wrap_nki(write_y_read_x)

    def f(a):
        x, y = CASES[case](a)
        return W(x, y)
    return f


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
@pytest.mark.parametrize("case", CASES)
def test_compiled_read_after_write_through_an_alias_matches_eager(backend, case):
    a_eager = torch.zeros(2, 8)
    want = _program(case)(a_eager)
    assert want.eq(1).any()                          # the kernel's read saw its own write
    torch._dynamo.reset()
    a = torch.zeros(2, 8)
    got = torch.compile(_program(case), backend=backend, fullgraph=True)(a)
    assert torch.equal(got, want) and torch.equal(a, a_eager)


def test_functional_hop_clones_every_alias_of_a_written_argument():
    gm = make_fx(torch.func.functionalize(_program("tensor and .view"), remove="mutations"))(
        torch.zeros(2, 8))
    node = next(n for n in gm.graph.nodes if n.target is nki_kernel_wrapper_functional)
    assert node.kwargs["tensors_to_clone"] == ("x", "y")
    a = torch.zeros(2, 8)
    assert torch.equal(gm(a), torch.ones(2, 8)) and torch.equal(a, torch.ones(2, 8))


def test_functionalize_keeping_views_keeps_overlapping_aliases():
    gm = make_fx(torch.func.functionalize(_program("overlapping views"), remove="mutations"))(
        torch.zeros(2, 8))
    a = torch.zeros(2, 8)
    want_a = torch.zeros(2, 8)
    want_a[:, 2:6] += 1
    assert torch.equal(gm(a), want_a[:, 0:4]) and torch.equal(a, want_a)


@pytest.mark.parametrize("case", ["tensor and .view", "overlapping views"])
def test_functionalize_copying_views_refuses_aliases_it_cannot_keep(case):
    with pytest.raises(NotImplementedError, match=r"^nki_kernel_wrapper: arguments 'x', 'y' are different "
                                                  r"views of one tensor and the kernel writes one of them"):
        make_fx(torch.func.functionalize(_program(case), remove="mutations_and_views"))(torch.zeros(2, 8))


def test_functionalize_copying_views_keeps_one_tensor_passed_twice():
    gm = make_fx(torch.func.functionalize(_program("same tensor"), remove="mutations_and_views"))(
        torch.zeros(2, 8))
    a = torch.zeros(2, 8)
    assert torch.equal(gm(a), torch.ones(2, 8)) and torch.equal(a, torch.ones(2, 8))
