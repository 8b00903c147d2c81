"""The import faces: ``nki_cpu_simulator`` (the module name nki-library's simulation harness
imports, test/utils/simulation_setup.py in aws-neuron/nki-library) serves the same objects as ``nki``."""
import subprocess
import sys
import textwrap

import numpy as np

import nkisim.language


HARNESS = textwrap.dedent("""
    import builtins, sys
    import numpy as np
    import nki_cpu_simulator.nki.builtin as sim_builtin
    import nki_cpu_simulator.nki.compiler as sim_ncc
    import nki_cpu_simulator.nki.isa as sim_nisa
    import nki_cpu_simulator.nki.isa.constants as sim_nisa_constants
    import nki_cpu_simulator.nki.language as sim_nl
    import nki_cpu_simulator.nki.language.dtypes as sim_dtypes
    import nki_cpu_simulator.nki.tensor as sim_ntensor
    import nki_cpu_simulator.nki.typing as sim_nt
    from nki_cpu_simulator import nki as sim_nki
    builtins.builtin = sim_builtin
    sys.modules["nki"] = sim_nki
    sys.modules["nki.language"] = sim_nl
    sys.modules["nki.isa"] = sim_nisa
    sys.modules["nki.isa.constants"] = sim_nisa_constants
    sys.modules["nki.typing"] = sim_nt
    sys.modules["nki.compiler"] = sim_ncc
    sys.modules["nki.dtype"] = sim_dtypes
    sys.modules["nki.tensor"] = sim_ntensor
    import nki, nki.isa as nisa, nki.language as nl
    from nki.isa.constants import oob_mode

    def add(a, b):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        ta = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
        tb = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=ta, src=a)
        nisa.dma_copy(dst=tb, src=b)
        nisa.tensor_tensor(dst=ta, data1=ta, data2=tb, op=nl.add)
        nisa.dma_copy(dst=out, src=ta)
        return out

    a = np.arange(128 * 4, dtype=np.float32).reshape(128, 4)
    for lnc in (1, 2):
        out = nki.cpu_simulate(add)[lnc](a=a, b=a)
        assert np.array_equal(np.asarray(out), a + a), lnc
    assert sim_dtypes.bfloat16 == nl.bfloat16 and isinstance(sim_ntensor.NkiTensor, type)
    assert oob_mode is sim_nisa.oob_mode and builtin.isa.nc_matmul is nisa.nc_matmul
    print("ok")
""")


def test_harness_imports_and_runs_a_kernel_under_nki_cpu_simulator():
    done = subprocess.run([sys.executable, "-c", HARNESS], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


def test_dtypes_face_lists_every_language_dtype_and_nothing_else():
    from nkisim.nki.language import dtypes
    expected = {n for n in nkisim.language.__all__ if isinstance(getattr(nkisim.language, n), np.dtype)}
    assert set(dtypes.__all__) == expected
    assert {"float32", "bfloat16", "float8_e4m3", "int32"} <= expected
    assert all(getattr(dtypes, n) == getattr(nkisim.language, n) for n in expected)


def test_the_wrapper_face_yields_to_a_real_package(tmp_path):
    """A real ``nki_cpu_simulator`` on the path wins over the face (the finder is consulted last)."""
    pkg = tmp_path / "nki_cpu_simulator"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("REAL = True\n")
    code = "import nki_cpu_simulator as m; print(getattr(m, 'REAL', False))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                          env={**__import__("os").environ, "PYTHONPATH": str(tmp_path)})
    assert done.stdout.strip() == "True", done.stderr
