"""wrap_nki / NKIHOPCaller argument binding and LNC, simulate_nki_kernel, the kernel side table."""
import os
import subprocess
import sys
import threading

import pytest

torch = pytest.importorskip("torch")

import nkisim.nki as nki  # noqa: E402
from nkisim.torch import NKIHOPCaller, kernel_side_table, simulate_nki_kernel, wrap_nki  # noqa: E402
from nki_torch_kernels import add_mul, clean_env, core_ids, scale_inplace  # noqa: E402,F401


@pytest.fixture
def sim(monkeypatch):
    monkeypatch.setenv("NKI_SIMULATOR", "1")


def test_wrap_reads_signature_and_defaults():
    w = wrap_nki(scale_inplace)
    assert isinstance(w, NKIHOPCaller)
    assert w.arg_names == ("x", "factor") and w.defaults == {"factor": 2.0}
    assert w.kernel_name == "nki_torch_kernels.scale_inplace" and w.kernel_key.startswith(w.kernel_name)


def test_bind_orders_by_signature_and_fills_defaults():
    w = wrap_nki(scale_inplace)
    x = torch.ones(1)
    assert w.bind((x,), {}) == (x, 2.0)
    assert w.bind((), {"factor": 5.0, "x": x}) == (x, 5.0)


@pytest.mark.parametrize("args, kwargs, msg", [
    ((), {}, r"^scale_inplace\(\) missing required argument 'x'$"),
    ((), {"factor": 1.0}, r"^scale_inplace\(\) missing required argument 'x'$"),
    ((1, 2, 3), {}, r"^scale_inplace\(\) takes 2 arguments but 3 were given$"),
    ((1,), {"y": 2}, r"^scale_inplace\(\) got an unexpected keyword argument 'y'$"),
    ((1,), {"x": 2}, r"^scale_inplace\(\) got multiple values for argument 'x'$"),
])
def test_bad_arguments_raise_type_error(args, kwargs, msg):
    with pytest.raises(TypeError, match=msg):
        wrap_nki(scale_inplace)(*args, **kwargs)


def test_plain_function_is_accepted(sim):
    def double(x):
        return scale_inplace.func(x, 2.0)
    x = torch.ones(2, 2)
    assert wrap_nki(double)(x) is x
    assert torch.equal(x, torch.full((2, 2), 2.0))


def test_getitem_returns_a_new_caller_with_the_grid():
    w = wrap_nki(scale_inplace)
    w2 = w[2]
    assert w2 is not w and w2.grid == (2,) and w.grid == ()
    assert (w2.lnc, w.lnc, w[1].lnc) == (2, 1, 1)


@pytest.mark.parametrize("wrapped, want", [
    (lambda: wrap_nki(core_ids), 1.0),
    (lambda: wrap_nki(core_ids)[2], 2.0),
    (lambda: wrap_nki(core_ids[2]), 2.0),         # the kernel's own LNC is kept (not dropped)
    (lambda: wrap_nki(core_ids[2])[2], 2.0),      # agreeing is fine
])
def test_lnc_comes_from_grid_or_kernel(sim, wrapped, want):
    assert wrapped()(torch.zeros(1, 1)).item() == want


def test_conflicting_lnc_is_an_error():
    with pytest.raises(ValueError, match=r"^wrap_nki: core_ids was jitted as kernel\[2\] but called with "
                                         r"grid \[1\]; the two LNC degrees must agree$"):
        wrap_nki(core_ids[2])[1]


@pytest.mark.parametrize("grid, err, msg", [
    ((4, 2), ValueError, r"^wrap_nki: launch grid \[4, 2\] is not supported; the grid is the LNC degree"),
    (3, ValueError, r"^wrap_nki: launch grid \[3\] is not supported"),
    ("a", TypeError, r"^wrap_nki: launch grid must be integers, got \['a'\]$"),
])
def test_bad_grid(grid, err, msg):
    with pytest.raises(err, match=msg):
        wrap_nki(scale_inplace)[grid]


def test_simulate_nki_kernel_tensors_and_scalars_in_tuple_out():
    a, b = torch.full((2, 3), 2.0), torch.full((2, 3), 5.0)
    s, p = simulate_nki_kernel(add_mul, 1, {"a": a, "b": b})
    assert torch.equal(s, torch.full((2, 3), 7.0)) and torch.equal(p, torch.full((2, 3), 10.0))
    x = torch.ones(2, 2)
    assert simulate_nki_kernel(scale_inplace, 1, {"x": x, "factor": 4.0}) is x
    assert torch.equal(x, torch.full((2, 2), 4.0))


def test_simulate_nki_kernel_trn2_fp8_e4m3fn_is_bit_symmetric(monkeypatch):
    monkeypatch.setenv("NEURON_PLATFORM_TARGET_OVERRIDE", "trn2")
    x = torch.tensor([[1.0, -2.5, 240.0, 0.0]]).to(torch.float8_e4m3fn)
    from nki_torch_kernels import copy
    y = simulate_nki_kernel(copy, 1, {"x": x})
    assert y.dtype == torch.float8_e4m3fn
    assert y.view(torch.uint8).tolist() == x.view(torch.uint8).tolist()


def test_side_table_dedups_and_is_thread_safe():
    def kernel(x):
        return x
    keys = []
    threads = [threading.Thread(target=lambda: keys.append(kernel_side_table.add_kernel(kernel)))
               for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(keys)) == 1 and keys[0].endswith("test_side_table_dedups_and_is_thread_safe.<locals>.kernel")


def test_same_name_distinct_functions_get_distinct_keys():
    def make():
        def kernel(x):
            return x
        return kernel
    k1, k2 = kernel_side_table.add_kernel(make()), kernel_side_table.add_kernel(make())
    assert k1 != k2 and k2.startswith(k1.split("#")[0]) and "#" in k2


def test_constant_keys_are_stable_across_processes():
    consts = {"mode": "rms", "eps": 1e-6, "dtype": torch.bfloat16, "none": None}
    here = kernel_side_table.add_constant_args(consts)
    code = ("import torch; from nkisim.torch import kernel_side_table as t; "
            "print(t.add_constant_args({'none': None, 'dtype': torch.bfloat16, 'eps': 1e-6, 'mode': 'rms'}))")
    env = dict(os.environ, PYTHONHASHSEED="123")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == here
    assert kernel_side_table.get_constant_args(here) == consts


def test_jitted_kernel_still_simulates_directly(sim):
    x = torch.ones(1, 2)
    assert nki.simulate(scale_inplace)(x) is x
