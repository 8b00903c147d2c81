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
