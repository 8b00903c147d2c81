"""The example kernels (nkisim.examples) against their NumPy references, and ``nkisim demo``."""
import inspect
import io
import os
import subprocess
import sys

import ml_dtypes
import numpy as np
import pytest

import nkisim.nki as nki
from nkisim import demo, examples
from nkisim.cli import main as cli_main

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ISSUE_EXAMPLES = {"tensor_add", "matmul", "transpose", "rmsnorm", "layernorm", "softmax", "cumsum",
                  "attention"}


def small_case(name, seed=0):
    mod = examples.load(name)
    return mod, mod.make_inputs(np.random.default_rng(seed), small=True)


@pytest.mark.parametrize("name", examples.NAMES)
def test_example_matches_reference(name):
    mod, inputs = small_case(name)
    got = nki.simulate(mod.KERNEL)(*inputs)
    want = mod.reference(*inputs)
    assert got.shape == want.shape
    np.testing.assert_allclose(got.astype(np.float32), want, rtol=mod.RTOL, atol=mod.ATOL)


@pytest.mark.parametrize("name", examples.NAMES)
def test_example_is_clean_under_strict_checks(name):
    """Shuffled affine loops, race detection and raising uninitialised reads change nothing."""
    mod, inputs = small_case(name, seed=1)
    got = nki.simulate(mod.KERNEL, detect_races=True, iteration_order="shuffled",
                       uninitialized_reads="raise", seed=5)(*inputs)
    np.testing.assert_allclose(got.astype(np.float32), mod.reference(*inputs), rtol=mod.RTOL,
                               atol=mod.ATOL)


@pytest.mark.parametrize("target", ["trn1", "trn2"])
@pytest.mark.parametrize("name", examples.NAMES)
def test_example_runs_on_older_targets(name, target):
    mod, inputs = small_case(name)
    got = nki.simulate(mod.KERNEL, target=target)(*inputs)
    np.testing.assert_allclose(got.astype(np.float32), mod.reference(*inputs), rtol=mod.RTOL,
                               atol=mod.ATOL)


def test_registry_covers_the_issue_list():
    assert ISSUE_EXAMPLES <= set(examples.NAMES)
    with pytest.raises(ValueError, match="unknown example 'nope'"):
        examples.load("nope")


@pytest.mark.parametrize("name", examples.NAMES)
def test_example_module_shape_and_public_api_style(name):
    mod = examples.load(name)
    src = inspect.getsource(mod)
    assert mod.__doc__ and "Shows:" in mod.__doc__
    for line in ("import nki\n", "import nki.isa as nisa\n", "import nki.language as nl\n"):
        assert line in src
    assert "nkisim" not in src.replace("nkisim.examples", "")   # only the public nki API
    assert isinstance(mod.KERNEL, nki.Kernel)
    assert mod.RTOL >= 0 and mod.ATOL >= 0
    lines = src.splitlines()
    i = next(i for i, line in enumerate(lines) if line.startswith("RTOL, ATOL ="))
    assert "#" in lines[i] or lines[i - 1].startswith("#"), "the tolerance needs its reason beside it"


def test_default_sizes_are_realistic():
    rng = np.random.default_rng(0)
    lhsT, rhs = examples.load("matmul").make_inputs(rng)
    assert lhsT.shape == (1024, 1024) and rhs.shape == (1024, 1024)
    x, gamma = examples.load("rmsnorm").make_inputs(rng)
    assert x.shape == (2048, 4096) and x.dtype == ml_dtypes.bfloat16 and gamma.shape == (4096,)


def test_rmsnorm_output_is_bf16_and_rows_need_not_fill_a_tile():
    mod, (x, gamma) = small_case("rmsnorm")
    assert x.shape[0] % 128 != 0
    got = nki.simulate(mod.KERNEL)(x, gamma)
    assert got.dtype == ml_dtypes.bfloat16


def test_exact_examples_are_bit_exact():
    for name in ("tensor_add", "transpose"):
        mod, inputs = small_case(name)
        assert (mod.RTOL, mod.ATOL) == (0.0, 0.0)
        np.testing.assert_array_equal(nki.simulate(mod.KERNEL)(*inputs), mod.reference(*inputs))


def test_attention_mask_is_causal():
    """Changing a future key/value leaves earlier query rows untouched."""
    mod, (q, k, v) = small_case("attention")
    sim = nki.simulate(mod.KERNEL)
    base = sim(q, k, v)
    k2, v2 = k.copy(), v.copy()
    k2[200] += 5.0
    v2[200] -= 5.0
    moved = sim(q, k2, v2)
    np.testing.assert_array_equal(moved[:200], base[:200])
    assert not np.allclose(moved[200:], base[200:])


# ---- demo ---------------------------------------------------------------------------------------

def test_compare_uses_the_example_tolerance_and_rejects_nan():
    want = np.array([[1.0, -2.0, 0.0]], np.float32)
    step = np.float32(2.0 ** -10)                       # exact in fp32 next to 1, -2 and 0
    assert demo.compare(want + step, want, rtol=0.0, atol=2.0 ** -10)[0]
    assert not demo.compare(want + 2 * step, want, rtol=0.0, atol=2.0 ** -10)[0]
    passed, max_abs, max_rel = demo.compare(want * np.float32(1.01), want, rtol=0.02, atol=0.0)
    assert passed and max_abs == pytest.approx(0.02, rel=1e-3) and max_rel == pytest.approx(0.01, rel=1e-3)
    assert not demo.compare(np.array([[np.nan, -2.0, 0.0]], np.float32), want, rtol=1.0, atol=1.0)[0]
    with pytest.raises(ValueError, match=r"output shape \(3,\) differs from the reference's \(1, 3\)"):
        demo.compare(want[0], want, rtol=0.0, atol=0.0)


def test_describe_merges_equal_inputs():
    a = np.zeros((4, 8), np.float32)
    g = np.zeros(8, ml_dtypes.bfloat16)
    assert demo.describe((a, a, g)) == "4x8 f32 x2, 8 bf16"


def test_demo_small_passes_and_lists_every_example():
    buf = io.StringIO()
    assert demo.run(small=True, file=buf) == 0
    lines = buf.getvalue().splitlines()
    for name in examples.NAMES:
        row = next(line for line in lines if line.startswith(name + " "))
        assert " PASS " in row
    assert f"{len(examples.NAMES)} passed, 0 failed" in lines[-1]
    header = next(line for line in lines if line.startswith("kernel"))
    for col in ("inputs", "max abs err", "max rel err", "check", "sim ms", "numpy ms", "ratio", "est. us"):
        assert col in header
    for name in examples.NAMES:             # every example gets an estimate (a positive number)
        row = next(line for line in lines if line.startswith(name + " "))
        assert float(row.split()[-1]) > 0


def test_demo_reports_a_wrong_result_and_exits_1(monkeypatch):
    mod = examples.load("tensor_add")
    monkeypatch.setattr(mod, "reference", lambda a, b: a + b + np.float32(1.0))
    buf = io.StringIO()
    assert demo.run(small=True, only=["tensor_add"], file=buf) == 1
    row = next(line for line in buf.getvalue().splitlines() if line.startswith("tensor_add"))
    assert " FAIL " in row and "1.00e+00" in row


def test_demo_reports_a_raising_kernel_and_keeps_going(monkeypatch):
    mod = examples.load("tensor_add")

    def broken(a, b):
        raise RuntimeError("boom")
    monkeypatch.setattr(mod, "KERNEL", nki.jit(broken))
    buf = io.StringIO()
    assert demo.run(small=True, only=["tensor_add", "softmax"], file=buf) == 1
    text = buf.getvalue()
    assert next(line for line in text.splitlines() if line.startswith("tensor_add")).split()[-5] == "ERROR"
    assert "tensor_add: RuntimeError: boom [test_examples.py:" in text
    assert " PASS " in next(line for line in text.splitlines() if line.startswith("softmax"))
    assert "1 passed, 1 failed" in text


def test_demo_rejects_unknown_names():
    buf = io.StringIO()
    assert demo.run(small=True, only=["nope"], file=buf) == 2
    assert "unknown example(s) nope" in buf.getvalue()


def test_cli_demo_only(capsys):
    assert cli_main(["demo", "--small", "--only", "tensor_add,cumsum"]) == 0
    out = capsys.readouterr().out
    assert "tensor_add" in out and "cumsum" in out and "softmax" not in out


def test_root_example_script_runs_one_example():
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "examples", "softmax.py"), "--small"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "softmax" in proc.stdout and " PASS " in proc.stdout
    for name in examples.NAMES:
        assert os.path.isfile(os.path.join(ROOT, "examples", f"{name}.py"))


def test_demo_error_line_keeps_the_kernel_location_of_an_nki_error(monkeypatch):
    import nki.isa as nisa
    import nki.language as nl
    mod = examples.load("tensor_add")

    def bad(a, b):
        t = nl.ndarray((128, 4), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a)          # 128 x 4 tile, 300 x 96 source
    monkeypatch.setattr(mod, "KERNEL", nki.jit(bad))
    buf = io.StringIO()
    assert demo.run(small=True, only=["tensor_add"], file=buf) == 1
    line = next(line for line in buf.getvalue().splitlines() if line.startswith("tensor_add: "))
    assert line.startswith("tensor_add: ShapeError: nisa.dma_copy: ")
    assert line.endswith("(test_examples.py:%d)" % (inspect.getsourcelines(bad)[1] + 2))


def test_demo_summary_says_skipped_when_torch_is_absent(monkeypatch):
    """A core-only install: ``import torch`` fails (None in sys.modules), the model section is
    skipped, and the closing line says so (not PASS); the exit code stays 0."""
    monkeypatch.setitem(sys.modules, "torch", None)
    buf = io.StringIO()
    assert demo.run(small=True, only=["tensor_add", demo.MODEL], file=buf) == 0
    lines = buf.getvalue().splitlines()
    assert any(line.startswith("tiny model: skipped (torch is not installed") for line in lines)
    assert lines[-1] == "examples: 1 passed, 0 failed; tiny model: skipped"
    assert demo.run_model(small=True, file=io.StringIO()) is None
