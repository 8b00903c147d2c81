"""nki_kernel_wrapper: one implementation per dispatch key / mode, aliases kept in every mode."""
import pytest

torch = pytest.importorskip("torch")

from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode  # noqa: E402
from torch.fx.experimental.proxy_tensor import make_fx  # noqa: E402

import nkisim.nki.language as nl  # noqa: E402
from nkisim.torch import nki_kernel_wrapper, nki_kernel_wrapper_functional, wrap_nki  # noqa: E402
from nkisim.torch.hop import _clones  # noqa: E402
from nki_torch_kernels import (add_into, add_mul, cache_write, clean_env, copy,  # noqa: E402,F401
                               scale_inplace, scale_inplace_silent)


@pytest.fixture(autouse=True)
def sim(monkeypatch):
    monkeypatch.setenv("NKI_SIMULATOR", "1")


def _hop_nodes(gm, hop):
    return [n for n in gm.graph.nodes if n.op == "call_function" and n.target is hop]


def _program(x, a, kv):
    s, p = wrap_nki(add_mul)(a, a)
    wrap_nki(scale_inplace_silent)(x, 0.5)
    wrap_nki(cache_write)(kv[1], a[:1], 1)
    return s + p


def _inputs():
    return torch.ones(2, 4), torch.full((2, 4), 2.0), torch.zeros(2, 4, 4)


def test_make_fx_records_one_node_per_call():
    gm = make_fx(_program)(*_inputs())
    nodes = _hop_nodes(gm, nki_kernel_wrapper)
    names = [n.kwargs["kernel_idx"].split("#")[0] for n in nodes]
    assert names == ["nki_torch_kernels.add_mul", "nki_torch_kernels.scale_inplace_silent",
                     "nki_torch_kernels.cache_write"]
    x, a, kv = _inputs()
    got = gm(x, a, kv)
    x2, a2, kv2 = _inputs()
    want = _program(x2, a2, kv2)
    assert torch.equal(got, want) and torch.equal(x, x2) and torch.equal(kv, kv2)


def test_functionalized_graph_keeps_writes_to_inputs_and_views():
    gm = make_fx(torch.func.functionalize(_program, remove="mutations_and_views"))(*_inputs())
    assert not _hop_nodes(gm, nki_kernel_wrapper)
    nodes = _hop_nodes(gm, nki_kernel_wrapper_functional)
    assert [n.kwargs["tensors_to_clone"] for n in nodes] == [(), ("x",), ("cache",)]
    assert [n.kwargs["operand_output_aliases"] for n in nodes] == [{}, {}, {0: 0}]
    assert nodes[1].kwargs["arg_names"] == ("x",)                # the constant left the graph
    x, a, kv = _inputs()
    got = gm(x, a, kv)
    x2, a2, kv2 = _inputs()
    assert torch.equal(got, _program(x2, a2, kv2))
    assert torch.equal(x, torch.full((2, 4), 0.5))
    assert torch.equal(kv, kv2) and torch.equal(kv[1, 1], torch.full((4,), 2.0))


def test_fake_mode_uses_declared_output_spec_and_never_runs_the_kernel():
    calls = []

    def counted_add_mul(a, b):
        calls.append(1)
        return add_mul.func(a, b)
    w = wrap_nki(counted_add_mul, output_spec=lambda a, b: ((a.shape, nl.float32), (a.shape, torch.float32)))
    with FakeTensorMode():
        s, p = w(torch.empty(3, 5), torch.empty(3, 5))
    assert isinstance(s, FakeTensor) and s.shape == (3, 5) and p.dtype == torch.float32
    assert calls == []


def test_without_spec_one_shape_run_per_signature():
    calls = []

    def counted_copy(x):
        calls.append(tuple(x.shape))
        return copy.func(x)
    w = wrap_nki(counted_copy)
    with FakeTensorMode():
        for shape in [(2, 3), (2, 3), (4, 3), (2, 3)]:
            y = w(torch.empty(shape, dtype=torch.bfloat16))
            assert y.shape == shape and y.dtype == torch.bfloat16
    assert calls == [(2, 3), (4, 3)]


def test_meta_outputs_and_aliases():
    w = wrap_nki(scale_inplace, output_spec=lambda x, factor: "x")
    x = torch.empty(2, 3, device="meta")
    assert w(x) is x
    s, p = wrap_nki(add_mul)(x, x)
    assert s.device.type == "meta" and s.shape == (2, 3)


def test_fake_outputs_prefer_a_non_meta_device():
    w = wrap_nki(add_mul, output_spec=lambda a, b: ((b.shape, b.dtype), (b.shape, b.dtype)))
    with FakeTensorMode(allow_non_fake_inputs=False) as mode:
        a = torch.empty(2, 2, device="meta")
        b = mode.from_tensor(torch.empty(2, 2))
        s, _ = w(a, b)
    assert s.device.type == "cpu"


def test_output_spec_forms():
    x = torch.empty(2, 3, device="meta")
    w = wrap_nki(scale_inplace, output_spec=lambda x, factor: x)          # an argument: alias
    assert w(x) is x
    bad = wrap_nki(scale_inplace_silent, output_spec=lambda x, factor: "y")
    with pytest.raises(ValueError, match=r"^output_spec names 'y', which is not an argument of the kernel$"):
        bad(x)


def test_one_clone_per_distinct_storage():
    base = torch.arange(12.0)
    a, b = base[:6], base[6:]
    c1, c2, c3 = _clones([a, a, b])
    assert c1 is c2 and c1.untyped_storage().data_ptr() == c3.untyped_storage().data_ptr()
    assert c1.data_ptr() != a.data_ptr() and torch.equal(c3, b)


def test_same_tensor_passed_to_two_written_parameters_stays_aliased():
    def f(x):
        wrap_nki(add_into)(x, x)
        return x + 0
    want = torch.zeros(2, 2)
    f(want)
    gm = make_fx(torch.func.functionalize(f, remove="mutations_and_views"))(torch.zeros(2, 2))
    x = torch.zeros(2, 2)
    gm(x)
    assert torch.equal(x, want)


def test_cpu_impl_needs_the_simulator(monkeypatch):
    monkeypatch.setenv("NKI_SIMULATOR", "0")
    with pytest.raises(RuntimeError, match="set NKI_SIMULATOR=1"):
        wrap_nki(copy)(torch.ones(1, 1))
