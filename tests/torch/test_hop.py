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


# --- constants, devices, errors while tracing, autograd, result kinds ---------------------------

def test_constant_arrays_with_equal_shortened_repr_get_different_keys():
    from nkisim.torch import kernel_side_table
    import numpy as np
    c1 = np.zeros((128, 64), np.float32)
    c2 = c1.copy()
    c2[60, 30] = 5.0
    assert repr(c1) == repr(c2)                                       # NumPy shortens the repr
    keys = {kernel_side_table.add_constant_args({"c": c}) for c in
            (c1, c2, c1.astype(np.float16), c1.reshape(64, 128), c1.copy())}
    assert len(keys) == 4                                             # the copy of c1 shares c1's key
    t1 = torch.zeros(128, 64)
    t2 = t1.clone()
    t2[60, 30] = 5.0
    assert kernel_side_table.add_constant_args({"c": t1}) != kernel_side_table.add_constant_args({"c": t2})


def test_functionalized_graph_uses_its_own_constant_array():
    import numpy as np
    from nki_torch_kernels import add_const_inplace
    c1 = np.zeros((128, 64), np.float32)
    c2 = c1.copy()
    c2[60, 30] = 5.0
    W = wrap_nki(add_const_inplace)
    make_fx(torch.func.functionalize(lambda x: W(x, c1) + 0))(torch.zeros(128, 64))
    g2 = make_fx(torch.func.functionalize(lambda x: W(x, c2) + 0))(torch.zeros(128, 64))
    assert torch.equal(g2(torch.zeros(128, 64)), torch.from_numpy(c2))


@pytest.mark.parametrize("meta_first", [True, False])
def test_meta_and_cpu_tensors_in_one_call_raise_like_torch(meta_first):
    x = torch.ones(2, 4)
    a, b = (x.to("meta"), x) if meta_first else (x, x.to("meta"))
    meta, real = ("a", "b") if meta_first else ("b", "a")
    with pytest.raises(RuntimeError, match=rf"^nki_kernel_wrapper: Tensor argument '{meta}' on device meta is "
                                           rf"not on the expected device cpu \(argument '{real}'\); pass every "
                                           rf"tensor argument on one device$"):
        wrap_nki(add_mul)(a, b)


def test_kernel_error_while_compiling_is_catchable_as_the_nki_error():
    from nkisim.errors import NkiError, ShapeError
    from nki_torch_kernels import too_many_partitions
    W = wrap_nki(too_many_partitions)
    msg = r"^nl\.ndarray: partition dim 129 of sbuf tensor \(129, 1\) exceeds 128 on trn3 \(nki_torch_kernels\.py:\d+\)"
    torch._dynamo.reset()
    with pytest.raises(ShapeError, match=msg) as info:                # fullgraph: the traced twin
        torch.compile(lambda x: W(x) + 1, backend="aot_eager", fullgraph=True)(torch.ones(2, 2))
    assert isinstance(info.value, NkiError) and type(info.value.__cause__) is ShapeError
    torch._dynamo.reset()
    x = torch.ones(2, 2)
    with pytest.raises(ShapeError, match=msg + "$") as info:          # graph break: eager raises it
        torch.compile(lambda x: W(x) + 1, backend="aot_eager")(x)
    assert type(info.value) is ShapeError and torch.equal(x, torch.ones(2, 2))


def test_traced_error_pickles_as_the_plain_error():
    import pickle
    from torch._guards import TracingContext, tracing
    from nkisim.errors import ShapeError
    from nkisim.torch.hop import _traceable
    with tracing(TracingContext(None)):
        e = _traceable(ShapeError("nl.ndarray", "bad", where="k.py:1"))
    assert type(e) is not ShapeError and isinstance(e, (ShapeError, torch._dynamo.exc.Unsupported))
    back = pickle.loads(pickle.dumps(e))
    assert type(back) is ShapeError and str(back) == "nl.ndarray: bad (k.py:1)"
    plain = ValueError("v")
    assert _traceable(plain) is plain                                 # not tracing: unchanged


GRAD_MSG = (r"^nkisim\.torch: kernel argument requires grad \('a'\); NKI kernels run outside autograd — "
            r"pass tensor\.detach\(\)")


@pytest.mark.parametrize("backend", [None, "eager", "aot_eager", "inductor"])
def test_requires_grad_argument_is_refused_in_every_mode(backend):
    a = torch.ones(2, 2, requires_grad=True)
    f = lambda a, b: wrap_nki(add_mul)(a, b)[0] * 2               # noqa: E731
    if backend:
        torch._dynamo.reset()
        f = torch.compile(f, backend=backend, fullgraph=True)
    with pytest.raises(ValueError, match=GRAD_MSG):
        f(a, torch.ones(2, 2))
    with torch.no_grad():
        assert torch.equal(f(a, torch.ones(2, 2)), torch.full((2, 2), 4.0))


def test_a_list_result_is_a_tuple_in_every_mode():
    from nki_torch_kernels import copy_as_list
    W = wrap_nki(copy_as_list)
    x = torch.ones(2, 2)
    eager = W(x)
    assert type(eager) is tuple and eager[1] is x and torch.equal(eager[0], x)
    with FakeTensorMode():
        assert type(W(torch.empty(2, 2))) is tuple
    torch._dynamo.reset()
    compiled = torch.compile(lambda a: W(a), backend="aot_eager", fullgraph=True)(x)
    assert type(compiled) is tuple and compiled[1] is x


def test_a_non_tensor_result_is_a_type_error_in_every_mode():
    from nki_torch_kernels import returns_int
    W = wrap_nki(returns_int)
    msg = (r"^nki_torch_kernels\.returns_int: a wrapped kernel must return None, a tensor or a tuple/list of "
           r"tensors, got int$")
    with pytest.raises(TypeError, match=msg):
        W(torch.ones(2, 2))
    with FakeTensorMode(), pytest.raises(TypeError, match=msg):
        W(torch.empty(2, 2))


def test_eager_plain_cpu_call_skips_the_dispatch_only_where_torch_would_reach_the_cpu_impl():
    from torch.utils._python_dispatch import TorchDispatchMode
    from nkisim.torch.hop import _plain_cpu_route
    hop, a, b = nki_kernel_wrapper, torch.ones(2, 2), torch.full((2, 2), 3.0)
    assert _plain_cpu_route(hop, (a, b, 1.5, None)) is not None
    assert _plain_cpu_route(hop, ([a], b)) is None                  # a container: full dispatch
    assert _plain_cpu_route(hop, (1, 2)) is None                    # no tensor
    g = torch.ones(2, 2, requires_grad=True)
    assert _plain_cpu_route(hop, (g, b)) is None                    # the autograd impl refuses it
    with torch.no_grad():
        assert _plain_cpu_route(hop, (g, b)) is not None

    class Seen(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            return func(*args, **(kwargs or {}))
    with Seen():
        assert _plain_cpu_route(hop, (a, b)) is None
    with FakeTensorMode() as mode:
        fa = mode.from_tensor(a)
        assert _plain_cpu_route(hop, (fa, fa)) is None
    assert _plain_cpu_route(hop, (a.to("meta"), b)) is None
    # the results are torch's formula on both routes (the full dispatch forced by a list argument
    # is not available for add_mul, so compare the eager call with the reference directly)
    s, p = wrap_nki(add_mul)(a, b)
    assert torch.equal(s, a + b) and torch.equal(p, a * b)
    with torch.no_grad():
        s, p = wrap_nki(add_mul)(g, b)
    assert torch.equal(s, torch.full((2, 2), 4.0)) and not s.requires_grad
