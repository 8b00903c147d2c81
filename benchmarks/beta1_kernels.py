"""The public Beta-1 (``neuronxcc.nki``) kernels, run unmodified from checkouts, each against a
reference: one PASS / FAIL / SKIP line per kernel and a total (issue 15's closing figures).

Usage: python benchmarks/beta1_kernels.py SDK_CHECKOUT SAMPLES_CHECKOUT [--only SUBSTR ...]
       [--skip SUBSTR ...] [--list] [--timeout SECONDS] [--no-unit]

- ``SDK_CHECKOUT``: aws-neuron/aws-neuron-sdk at a release with the Beta-1 tutorials (2.2x, e.g.
  v2.26.0: ``general/nki/examples``): RMSNorm, LayerNorm, SPMD tensor add (one and two cores),
  average pool, transpose, Mamba v1-v3, the five matmul kernels, SD attention, attention v1-v11.
- ``SAMPLES_CHECKOUT``: aws-neuron/nki-samples. Its tutorials (``src/nki_samples/tutorials``)
  are Beta 1 at every commit; ``contributed/`` and the reference kernels with their unit tests
  (``src/nki_samples/reference``, ``test/unit``) exist until commit c4b806e (use its parent).
  Cases whose files a checkout lacks print SKIP ("not in this checkout"): a missing directory or
  file, or an ``nki_samples`` module the case's file imports (nki-samples HEAD keeps
  ``test/unit`` but not the reference kernels its tests import).

Nothing of those checkouts is copied here: each case imports the files from the checkout in a
child process (the kernel's directory first on ``sys.path``, the cwd a scratch directory) and
compares the kernel's result with its own reference where it ships one (its ``__main__``
asserts, ``check_correct()``, the tutorials' ``numpy_attention``, the unit tests, run as their
CI runs them: ``pytest test/unit --simulation-only``), else with a NumPy formula written here
from the kernel's documented intent. Device-framework modules a kernel file imports but its
kernel never uses (``torch_xla``, ``torch_neuronx``, ``loguru``, ``transformers``) are stubbed.
Not part of CI (the checkouts come from the network); ``tests/test_benchmarks.py`` checks only
that the script starts and rejects a missing checkout.
"""
from __future__ import annotations

import argparse
import contextlib
import importlib.util
import io
import os
import re
import runpy
import subprocess
import sys
import tempfile
import time
import traceback
import types

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.join(HERE, "..", "src")

# ---- references written here (NumPy) ---------------------------------------------------------------


def _rng():
    import numpy as np
    return np.random.default_rng(0)


def _close(got, want, atol, rtol=0.0):
    import numpy as np
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    assert got.shape == want.shape, f"shape {got.shape}, expected {want.shape}"
    err = np.abs(got - want)
    assert np.all(err <= atol + rtol * np.abs(want)), f"max abs error {err.max():.3g} (atol {atol}, rtol {rtol})"


def _import(path, name=None):
    name = name or os.path.splitext(os.path.basename(path))[0]
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def _run_main(path, argv=()):
    """Run a kernel file as ``__main__`` (its own reference check asserts)."""
    sys.argv = [path, *argv]
    runpy.run_path(path, run_name="__main__")


def _own_check(path, fn="check_correct"):
    """Call a contributed kernel's ``check_correct()``: it prints ``Is close... True/False``."""
    mod = _import(path)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        getattr(mod, fn)()
    text = out.getvalue()
    lines = [ln for ln in text.splitlines() if "close" in ln.lower()]
    assert lines, f"{fn}() printed no 'Is close' line: {text[-300:]!r}"
    assert all(ln.rstrip().endswith("True") for ln in lines), lines


def ref_mamba(delta, u, A, B, C):
    """Mamba's selective scan (fused_mamba tutorial): h_t = exp(delta_t A) h_{t-1} + delta_t B_t u_t,
    y_t = sum over the state of C_t h_t; shapes delta, u [b, c, s], A [c, n], B, C [b, n, s]."""
    import numpy as np
    delta, u, A, B, C = (np.asarray(x, np.float64) for x in (delta, u, A, B, C))
    dA = np.exp(delta[:, :, None, :] * A[None, :, :, None])
    dBu = delta[:, :, None, :] * B[:, None, :, :] * u[:, :, None, :]
    h = np.zeros(dA.shape[:-1])
    y = np.empty(delta.shape)
    for t in range(delta.shape[-1]):
        h = dA[..., t] * h + dBu[..., t]
        y[..., t] = (C[:, None, :, t] * h).sum(-1)
    return y


def ref_softmax(x, axis=-1):
    import numpy as np
    x = np.asarray(x, np.float64)
    e = np.exp(x - x.max(axis, keepdims=True))
    return e / e.sum(axis, keepdims=True)


def ref_rope(x, cos, sin):
    """Rotary embedding (Llama's apply_rotary_pos_emb): x cos + rotate_half(x) sin, rotate_half(x) =
    [-x2, x1] of the two halves of the head dim."""
    import numpy as np
    h = x.shape[-1] // 2
    rot = np.concatenate([-x[..., h:], x[..., :h]], -1)
    return x * cos + rot * sin


# ---- SDK 2.2x tutorial checks (run inside the tutorial's directory) ---------------------------------

def sdk_matmul(name):
    def check(d):
        m = _import(os.path.join(d, "matrix_multiplication_nki_kernels.py"))
        K, M, N = {"nki_matmul_basic_": (128, 64, 512), "nki_matmul_fully_optimized_": (1024, 2048, 1024)}.get(
            name, (1024, 1024, 2048))
        rng = _rng()
        lhsT = rng.standard_normal((K, M)).astype("float32")
        rhs = rng.standard_normal((K, N)).astype("float32")
        _close(getattr(m, name)(lhsT, rhs), lhsT.T.astype("float64") @ rhs, atol=1e-2, rtol=1e-3)
    return check


def sdk_attention(name, seqlen):
    def check(d):
        ak = _import(os.path.join(d, "attention_kernels.py"))
        ta = _import(os.path.join(d, "test_attention.py"))      # its module-level v1 check runs on import
        rng = _rng()
        q, k, v = (((rng.random((128, seqlen)) - 0.5) * 2).astype("float32") for _ in range(3))
        _close(getattr(ak, name)(q, k, v), ta.numpy_attention(q, k, v), atol=1e-2)
    return check


def sdk_layernorm(version):
    def check(d):
        import numpy as np
        m = _import(os.path.join(d, "layernorm_nki_kernel.py"))
        k = getattr(m, f"nki_layernorm_kernel_{version}")
        rng = _rng()
        x = rng.random((256, 1024), dtype=np.float32)
        g, b = rng.random(1024, dtype=np.float32), rng.random(1024, dtype=np.float32)
        eps = 1e-5
        want = (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + eps) * g + b
        _close(k(x, eps, g, b), want, atol=1e-3, rtol=1e-2)
    return check


def mamba_check(version):
    def check(d):
        import numpy as np
        m = _import(os.path.join(d, "mamba_nki_kernels.py"))
        rng = _rng()
        b, c, s, n = 1, 256, 512, 16          # channels: two 128-partition tiles; seq_len: one 512 tile
        delta = rng.uniform(0.01, 0.1, (b, c, s)).astype(np.float32)
        u = rng.standard_normal((b, c, s)).astype(np.float32)
        A = -rng.uniform(0.5, 1.5, (c, n)).astype(np.float32)
        B = rng.standard_normal((b, n, s)).astype(np.float32)
        C = rng.standard_normal((b, n, s)).astype(np.float32)
        got = getattr(m, f"mamba_{version}")(delta, u, A, B, C)
        _close(got, ref_mamba(delta, u, A, B, C), atol=2e-3, rtol=2e-3)
    return check


def main_of(filename, *argv):
    def check(d):
        _run_main(os.path.join(d, filename), argv)
    return check


SDK_CASES = [
    ("sdk rmsnorm", "rmsnorm", main_of("rmsnorm_nki_kernels.py")),
    ("sdk tensor_addition SPMD", "tensor_addition", main_of("spmd_tensor_addition_nki_kernels.py")),
    ("sdk tensor_addition SPMD nc(2)", "tensor_addition", main_of("spmd_multiple_nc_tensor_addition_nki_kernels.py")),
    ("sdk average_pool2d", "average_pool2d", main_of("average_pool2d_nki_kernels.py")),
    ("sdk transpose2d", "transpose2d", main_of("transpose2d_nki_kernels.py")),
    *[(f"sdk fused_mamba {v} (NumPy scan)", "fused_mamba", mamba_check(v)) for v in ("v1", "v2", "v3")],
    ("sdk fused_mamba v2/v3 == v1 (its accuracy mode)", "fused_mamba",
     main_of("mamba_nki_kernels.py", "--mode", "accuracy")),
    *[(f"sdk matrix_multiplication {k.rstrip('_')}", "matrix_multiplication", sdk_matmul(k)) for k in
      ("nki_matmul_basic_", "nki_matmul_tiled_", "nki_matmul_hoist_load_", "nki_matmul_block_free_dimension_",
       "nki_matmul_fully_optimized_")],
    ("sdk sd_attention (its __main__, scipy reference)", "sd_attention", main_of("sd_attention_nki_kernels.py")),
    *[(f"sdk attention attn_fwd_{v} seq={n}", "attention", sdk_attention(f"attn_fwd_{v}", n))
      for v, n in (("v1", 128), ("v2", 128), ("v3", 512), ("v4", 512), ("v5", 512), ("v6", 512), ("v7", 512),
                   ("v8", 512), ("v8a", 512), ("v9", 512), ("v10", 512), ("v11", 512))],
    *[(f"sdk layernorm {v}", "layernorm", sdk_layernorm(v)) for v in ("v1", "v2")],
]


# ---- nki-samples checks --------------------------------------------------------------------------

def _stub_frameworks():
    """Empty stand-ins for device-framework modules some kernel files import at the top but whose
    kernels never use them (the files are imported unmodified)."""
    for name in ("torch_xla", "torch_xla.core", "torch_xla.core.xla_model", "torch_neuronx", "loguru",
                 "transformers", "transformers.models", "transformers.models.llama",
                 "transformers.models.llama.modeling_llama"):
        if name in sys.modules:
            continue
        mod = types.ModuleType(name)
        mod.__path__ = []
        mod.logger = mod.xla_device = mod.apply_rotary_pos_emb = lambda *a, **k: None
        sys.modules[name] = mod


def samples_attention(name, seqlen):
    return sdk_attention(name, seqlen)


def samples_softmax(d):
    import numpy as np
    m = _import(os.path.join(d, "softmax_nki_kernels.py"))
    x = _rng().standard_normal((128, 512)).astype(np.float32)
    _close(m.nki_softmax_kernel(x), ref_softmax(x), atol=1e-5, rtol=1e-4)


def samples_rotary(d):
    import numpy as np
    m = _import(os.path.join(d, "rotary_nki_kernels.py"))
    rng = _rng()
    bs, nh, sl, hd = 2, 4, 200, 64            # seq_len 200: a full 128-row tile and a masked one
    q = rng.standard_normal((bs, nh, sl, hd)).astype(np.float32)
    k = rng.standard_normal((bs, nh, sl, hd)).astype(np.float32)
    inv = 1.0 / (10000 ** (np.arange(0, hd, 2) / hd))
    freqs = np.arange(sl)[:, None] * inv[None, :]
    emb = np.concatenate([freqs, freqs], -1)
    cos = np.broadcast_to(np.cos(emb), (bs, sl, hd)).astype(np.float32).copy()
    sin = np.broadcast_to(np.sin(emb), (bs, sl, hd)).astype(np.float32).copy()
    out = m.nki_apply_rotary_embedding[bs, nh](q, k, cos, sin)
    _close(out[0], ref_rope(q, cos[:, None], sin[:, None]), atol=1e-5, rtol=1e-5)
    _close(out[1], ref_rope(k, cos[:, None], sin[:, None]), atol=1e-5, rtol=1e-5)


def contributed(filename):
    def check(d):
        _own_check(os.path.join(d, filename))
    return check


def pipelined_attention(d):
    """Its module-level check (16k sequence, its cpu_attention_forward reference, asserts)."""
    _import(os.path.join(d, "pipelined_attention.py"))


def double_row_matmul(d):
    """quantized_double_row_matmul on trn2 (its unit test runs only where the host's DMI product
    name says trn2): the test's own reference, fp8 column-quantised rhs, tiles interleaved."""
    import numpy as np
    os.environ["NEURON_PLATFORM_TARGET_OVERRIDE"] = "trn2"
    sys.path.insert(0, os.path.join(d, "..", "..", "src"))
    import neuronxcc.nki as nki
    import neuronxcc.nki.language as nl
    t = _import(os.path.join(d, "test_double_row_matmul.py"), "double_row_unit_test")
    rng = _rng()
    M, K, N = 512, 16 * 1024, 1024            # the test's shape and first block config
    lhs, rhs = rng.random((M, K)), rng.random((K, N))
    want = lhs @ rhs
    scale, rq = t.column_wise_quantize(rhs)
    got = nki.simulate_kernel(nki.baremetal(t.quantized_double_row_matmul), nl.static_cast(lhs, nl.bfloat16),
                              nl.static_cast(t.reshape(rq), nl.float8_e4m3), nl.static_cast(scale, nl.bfloat16),
                              2, 2, 16)
    assert np.allclose(want, np.asarray(got, np.float32), rtol=2e-2), "result differs (rtol 2e-2)"


TUT = "src/nki_samples/tutorials"
SAMPLES_CASES = [
    ("samples tensor_addition", f"{TUT}/tensor_addition", main_of("tensor_addition_nki_kernels.py")),
    ("samples tensor_addition SPMD", f"{TUT}/tensor_addition", main_of("spmd_tensor_addition_nki_kernels.py")),
    ("samples tensor_addition SPMD nc(2)", f"{TUT}/tensor_addition",
     main_of("spmd_multiple_nc_tensor_addition_nki_kernels.py")),
    ("samples average_pool2d", f"{TUT}/average_pool2d", main_of("average_pool2d_nki_kernels.py")),
    ("samples transpose2d", f"{TUT}/transpose2d", main_of("transpose2d_nki_kernels.py")),
    *[(f"samples fused_mamba {v} (NumPy scan)", f"{TUT}/fused_mamba", mamba_check(v)) for v in ("v1", "v2", "v3")],
    ("samples attention_fwd_performance v1 (test_attention.py)", f"{TUT}/attention_fwd_performance",
     main_of("test_attention.py")),
    *[(f"samples attention_fwd_performance attn_fwd_{v} seq={n}", f"{TUT}/attention_fwd_performance",
       samples_attention(f"attn_fwd_{v}", n))
      for v, n in (("v1", 128), ("v2", 128), ("v3", 512), ("v4", 512), ("v5", 512), ("v6", 512), ("v7", 512),
                   ("v8", 512), ("v8a", 512), ("v9", 512), ("v10", 512), ("v11", 512))],
    ("samples softmax (NumPy softmax)", f"{TUT}/softmax", samples_softmax),
    ("samples rotary (NumPy RoPE)", f"{TUT}/rotary", samples_rotary),
    ("samples contributed interpolate_bilinear_fwd", "contributed", contributed("interpolate_bilinear_fwd.py")),
    ("samples contributed interpolate_trilinear_fwd", "contributed", contributed("interpolate_trilinear_fwd.py")),
    ("samples contributed matmul", "contributed", contributed("matmul.py")),
    ("samples contributed maxpooling", "contributed", contributed("maxpooling.py")),
    ("samples contributed pipelined_attention (16k, its own check)", "contributed", pipelined_attention),
    ("samples reference double_row_matmul on trn2 (its test's reference)", "test/unit", double_row_matmul),
]
UNIT_TESTS = ["test_SD_attention_small_head.py", "test_adaptive_avg_pool2d.py",
              "test_allocated_SD_attention_small_head.py", "test_flash_attn_bwd.py", "test_flash_attn_fwd.py",
              "test_resize_nearest.py", "test_rmsnorm_qkv.py", "test_select_and_scatter.py"]
# unit test files that cannot pass on a CPU machine, and why (printed as SKIP)
UNIT_SKIPPED = {
    "test_double_row_matmul.py": "reads the host's DMI product name (needs a trn2 host; without it the test "
                                 "raises NameError: it never imports warnings); see the trn2 case above",
    "test_neuron_profile.py": "needs hardware: checks the NEFF, NTFF and json_reports neuron-profile writes",
}


# the cause of a failure found to be the kernel's or the test's, not the simulator's (printed after FAIL)
KNOWN = {
    "samples reference double_row_matmul on trn2 (its test's reference)":
        "known: the kernel multiplies a (128, 1024) tile by a (128, 1) tile with nisa.tensor_tensor, whose "
        "Beta-1 docs require the same number of elements per partition (free-dim broadcast is "
        "nisa.tensor_scalar's); its test never runs off a trn2 host",
    "samples contributed pipelined_attention (16k, its own check)":
        "known: its module-level check launches flash_fwd[0], a grid of zero programs (the file says it is "
        "tested only against internal nightly builds)",
}


# the file of a case that imports the kernels it runs (its nki_samples imports must be in the checkout)
CASE_FILES = {"samples reference double_row_matmul on trn2 (its test's reference)": "test_double_row_matmul.py"}


# ---- the runner --------------------------------------------------------------------------------------

def missing(d, filename, samples):
    """What a case (its directory ``d``, the file it runs or imports, if any) needs that the
    checkout lacks, as a path relative to ``samples``: the directory, the file, or the first
    ``nki_samples`` module the file imports (``from nki_samples.reference.vision import ...``)
    that is not under ``samples/src``; None when nothing is missing."""
    path = d if filename is None else os.path.join(d, filename)
    if not os.path.exists(path):
        return os.path.relpath(path, samples)
    if filename is None:
        return None
    with open(path, encoding="utf-8", errors="replace") as f:
        text = f.read()
    for mod in re.findall(r"^\s*(?:from|import)\s+(nki_samples(?:\.\w+)*)", text, re.M):
        base = os.path.join(samples, "src", *mod.split("."))
        if not (os.path.isdir(base) or os.path.isfile(base + ".py")):
            return os.path.relpath(base, samples)
    return None



def _cases(sdk, samples, unit=True):
    ex = os.path.join(sdk, "general", "nki", "examples")
    out = [(n, os.path.join(ex, d), fn, None) for n, d, fn in SDK_CASES]
    out += [(n, os.path.join(samples, d), fn, None) for n, d, fn in SAMPLES_CASES]
    if unit:
        udir = os.path.join(samples, "test", "unit")
        out += [(f"samples unit {f} --simulation-only", udir, None, f) for f in UNIT_TESTS]
        out += [(f"samples unit {f}", udir, None, "skip:" + why) for f, why in UNIT_SKIPPED.items()]
    return out


def _child(name, sdk, samples):
    """Run one case in this process (the parent starts one child per case)."""
    for n, d, fn, _ in _cases(sdk, samples):
        if n == name:
            break
    else:
        raise SystemExit(f"no case {name!r}")
    os.chdir(tempfile.mkdtemp(prefix="nkisim-beta1-"))
    sys.path.insert(0, d)
    _stub_frameworks()
    fn(d)


def _env(samples):
    env = dict(os.environ)
    extra = [os.path.abspath(SRC), os.path.join(samples, "src")]
    env["PYTHONPATH"] = os.pathsep.join(extra + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    return env


def _last_line(text):
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1][:300] if lines else "?"


def run(sdk, samples, only=(), timeout=1800, unit=True, out=sys.stdout, skip=()):
    """Run every case (those naming one of ``only``, none of ``skip``); returns (passed, failed,
    skipped)."""
    counts = {"PASS": 0, "FAIL": 0, "SKIP": 0}
    env = _env(samples)
    for name, d, fn, unit_file in _cases(sdk, samples, unit):
        if (only and not any(o in name for o in only)) or any(o in name for o in skip):
            continue
        t = time.time()
        if unit_file is not None and unit_file.startswith("skip:"):
            status, note = "SKIP", unit_file[5:]
        elif (lack := missing(d, unit_file or CASE_FILES.get(name), samples if name.startswith("samples") else sdk)):
            status, note = "SKIP", f"not in this checkout ({lack})"
        else:
            if unit_file is None:
                cmd = [sys.executable, os.path.abspath(__file__), "--case", name, sdk, samples]
                cwd = None
            else:
                cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:warnings",
                       "--simulation-only", unit_file]
                cwd = d
            try:
                r = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
                ok = r.returncode == 0
                note = _last_line(r.stdout) if unit_file else ("" if ok else _last_line(r.stderr))
            except subprocess.TimeoutExpired:
                ok, note = False, f"timeout {timeout} s"
            status = "PASS" if ok else "FAIL"
        if status == "FAIL" and name in KNOWN:
            note = f"{note} [{KNOWN[name]}]"
        counts[status] += 1
        print(f"{status} {name} ({time.time() - t:.0f} s){' ' + note if note else ''}", file=out, flush=True)
    print(f"total: {counts['PASS']} passed, {counts['FAIL']} failed, {counts['SKIP']} skipped", file=out, flush=True)
    return counts["PASS"], counts["FAIL"], counts["SKIP"]


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("sdk", metavar="SDK_CHECKOUT", help="aws-neuron-sdk at a 2.2x release (general/nki/examples)")
    p.add_argument("samples", metavar="SAMPLES_CHECKOUT", help="nki-samples (c4b806e^ for every kernel)")
    p.add_argument("--only", nargs="*", default=(), help="run only the cases whose name contains one of these")
    p.add_argument("--skip", nargs="*", default=(), help="leave out the cases whose name contains one of these")
    p.add_argument("--list", action="store_true", help="list the case names and exit")
    p.add_argument("--timeout", type=float, default=1800, help="seconds per case (default 1800)")
    p.add_argument("--no-unit", action="store_true", help="leave out the nki-samples unit test files")
    p.add_argument("--case", help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    sdk, samples = os.path.abspath(a.sdk), os.path.abspath(a.samples)
    for what, path, probe in (("SDK_CHECKOUT", sdk, os.path.join(sdk, "general", "nki", "examples")),
                              ("SAMPLES_CHECKOUT", samples, os.path.join(samples, "src", "nki_samples"))):
        if not os.path.isdir(probe):
            p.error(f"{what} {path}: no {os.path.relpath(probe, path)} there")
    if a.case:
        try:
            _child(a.case, sdk, samples)
        except BaseException as exc:           # noqa: BLE001  (the parent prints the last line)
            if isinstance(exc, SystemExit) and not exc.code:
                return 0
            traceback.print_exc()
            print(f"{type(exc).__name__}: {exc}"[:300], file=sys.stderr)
            return 1
        return 0
    if a.list:
        for name, *_ in _cases(sdk, samples, not a.no_unit):
            print(name)
        return 0
    _, failed, _ = run(sdk, samples, a.only, a.timeout, not a.no_unit, skip=a.skip)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
