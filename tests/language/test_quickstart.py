"""The official getting-started kernels run unmodified (only the module-level run moved into tests).

Sources: aws-neuron-sdk nki/examples/simulate/nki_simulate_example.py (NKI_EXAMPLE_SIMULATE, the
simulator quick start) and the NKI getting-started example getting_started.py (Beta 1 imports).
"""
import numpy as np

import nki
import nki.language as nl
import nki.isa as nisa  # noqa: F401  (imported by the official example)


# ---- nki/examples/simulate/nki_simulate_example.py, verbatim -----------------------------------
@nki.jit
def add_kernel(a_ptr, b_ptr):
    # Load tiles from HBM into SBUF
    a = nl.load(a_ptr)
    b = nl.load(b_ptr)
    # Element-wise add
    result = nl.add(a, b)
    # Store result back to HBM
    out = nl.ndarray(a_ptr.shape, dtype=a_ptr.dtype, buffer=nl.shared_hbm)
    nl.store(out, value=result)
    return out


def test_simulate_quick_start():
    # Create example inputs
    a = np.random.rand(128, 512).astype(np.float32)
    b = np.random.rand(128, 512).astype(np.float32)

    # Run on the CPU simulator
    result = nki.simulate(add_kernel)(a, b)

    # Verify correctness
    np.testing.assert_allclose(result, a + b, rtol=1e-5)
    np.testing.assert_array_equal(result, a + b)      # fp32 add is exact here: same rounding


# ---- getting_started.py (Beta 1 spelling), verbatim --------------------------------------------
from neuronxcc import nki as nki_beta1  # noqa: E402
import neuronxcc.nki.language as nl_beta1  # noqa: E402


@nki_beta1.jit
def nki_tensor_add_kernel(a_input, b_input):
    """NKI kernel to compute element-wise addition of two input tensors
    """

    # Check all input/output tensor shapes are the same for element-wise operation
    assert a_input.shape == b_input.shape

    # Check size of the first dimension does not exceed on-chip memory tile size limit,
    # so that we don't need to tile the input to keep this example simple
    assert a_input.shape[0] <= nl_beta1.tile_size.pmax

    # Load the inputs from device memory to on-chip memory
    a_tile = nl_beta1.load(a_input)
    b_tile = nl_beta1.load(b_input)

    # Specify the computation (in our case: a + b)
    c_tile = nl_beta1.add(a_tile, b_tile)

    # Create a HBM tensor as the kernel output
    c_output = nl_beta1.ndarray(a_input.shape, dtype=a_input.dtype, buffer=nl_beta1.shared_hbm)

    # Store the result to c_output from on-chip memory to device memory
    nl_beta1.store(c_output, value=c_tile)

    # Return kernel output as function output
    return c_output


def test_getting_started_fp16():
    a = np.ones((4, 3), dtype=np.float16)
    b = np.ones((4, 3), dtype=np.float16)
    c = nki_beta1.simulate_kernel(nki_tensor_add_kernel, a, b)
    assert c.dtype == np.float16
    np.testing.assert_array_equal(c, np.full((4, 3), 2, np.float16))


def test_getting_started_rounds_once_into_fp16():
    rng = np.random.default_rng(1)
    a = rng.standard_normal((128, 64)).astype(np.float16)
    b = rng.standard_normal((128, 64)).astype(np.float16)
    c = nki.simulate(nki_tensor_add_kernel)(a, b)
    np.testing.assert_array_equal(c, (a.astype(np.float32) + b.astype(np.float32)).astype(np.float16))


def test_operator_spelling_of_the_add_kernel():
    """The same kernel with ``a_tile + b_tile`` (the Beta 1 tutorial spelling)."""
    def kernel(a_input, b_input):
        c = nl.ndarray(a_input.shape, dtype=a_input.dtype, buffer=nl.shared_hbm)
        nl.store(c, value=nl.load(a_input) + nl.load(b_input))
        return c
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    np.testing.assert_array_equal(nki.simulate(kernel)(a, a * 3), a * 4)


QUICKSTART_SRC = '''
import nki
import nki.language as nl
import nki.isa as nisa

@nki.jit(platform_target="trn1")
def nki_tensor_add_kernel(a_input, b_input):
    """
    NKI kernel to compute element-wise addition of two input tensors.
    """

    # Check both input tensor shapes are the same for element-wise operation.
    assert a_input.shape == b_input.shape

    # Check the first dimension's size to ensure it does not exceed on-chip
    # memory tile size, since this simple kernel does not tile inputs.
    assert a_input.shape[0] <= nl.tile_size.pmax

    # Allocate space for the input tensors in SBUF and copy the inputs from HBM
    # to SBUF with DMA copy. Note: 'sbuf' is a keyword in NKI.
    a_tile = sbuf.view(dtype=a_input.dtype, shape=a_input.shape)
    nisa.dma_copy(dst=a_tile, src=a_input)

    b_tile = sbuf.view(dtype=b_input.dtype, shape=b_input.shape)
    nisa.dma_copy(dst=b_tile, src=b_input)

    # Allocate space for the result and use tensor_tensor to perform
    # element-wise addition. Note: the first argument of 'tensor_tensor'
    # is the destination tensor.
    c_tile = sbuf.view(dtype=a_input.dtype, shape=a_input.shape)
    nisa.tensor_tensor(dst=c_tile, data1=a_tile, data2=b_tile, op=nl.add)

    # Create a tensor in HBM and copy the result into HBM. Note: Simlar to
    # 'sbuf', 'hbm' is a keyword in NKI.
    c_output = hbm.view(dtype=a_input.dtype, shape=a_input.shape)
    nisa.dma_copy(dst=c_output, src=c_tile)

    # Return kernel output as function output.
    return c_output
'''


def test_current_docs_quickstart_with_bare_sbuf_and_hbm_keywords(tmp_path, monkeypatch):
    """nki/get-started/quickstart-implement-run-kernel.rst, verbatim: `sbuf`/`hbm` are keywords."""
    (tmp_path / "add_kernel.py").write_text(QUICKSTART_SRC)
    monkeypatch.syspath_prepend(str(tmp_path))
    import importlib
    mod = importlib.import_module("add_kernel")
    a = np.ones((4, 3), dtype=np.float16)
    monkeypatch.setenv("NKI_SIMULATOR", "1")
    c = mod.nki_tensor_add_kernel(a, a)
    np.testing.assert_array_equal(c, np.full((4, 3), 2, np.float16))
    assert "sbuf" not in vars(mod)          # the module was not modified


def test_docs_assert_on_tile_equality_runs():
    """The docs' ``assert nl.equal(...)`` runs; as in a compiled kernel the tile is truthy
    whatever its values (its values are only known at run time)."""
    def kernel(a):
        t = nl.load(a)
        assert nl.equal(t + t, t * 2)
        assert nl.equal(t, t + 1)           # all-False values, still a (truthy) tensor
        return a
    nki.simulate(kernel)(np.arange(6, dtype=np.float32).reshape(2, 3))
