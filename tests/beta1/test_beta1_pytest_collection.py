"""A Beta-1 kernel named ``test_*`` at module level is not collected by pytest as a test (it is a
kernel, not a function; see Beta1Kernel's Decision): a test file holding one runs cleanly."""
import os
import subprocess
import sys
import textwrap

import neuronxcc.nki as nki


def test_beta1_kernel_is_not_a_test_item():
    @nki.jit(mode="simulation")
    def test_kernel(in_tensor):
        return in_tensor
    assert test_kernel.__test__ is False
    assert callable(test_kernel) and test_kernel.__wrapped__.__name__ == "test_kernel"


def test_a_file_with_a_kernel_named_test_runs_its_real_tests(tmp_path):
    (tmp_path / "test_kernel_named_test.py").write_text(textwrap.dedent('''
        import numpy as np
        import neuronxcc.nki as nki
        import neuronxcc.nki.language as nl

        @nki.jit(mode="simulation")
        def test_copy(in_tensor):
            out = nl.ndarray(in_tensor.shape, in_tensor.dtype, buffer=nl.shared_hbm)
            nl.store(out, nl.load(in_tensor))
            return out

        def test_uses_the_kernel():
            a = np.arange(8, dtype=np.float32).reshape(2, 4)
            assert (test_copy(a) == a).all()
    '''))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path)],
                         capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "1 passed" in run.stdout and "error" not in run.stdout.lower()
