"""The import faces: ``neuronxcc.nki.*`` is the Beta-1 face; ``nki.*`` and
``nki_cpu_simulator.nki.*`` stay Beta 2."""
import numpy as np
import pytest


def test_neuronxcc_is_the_beta1_face():
    import neuronxcc.nki as nki
    import neuronxcc.nki.compiler as ncc
    import neuronxcc.nki.isa as nisa
    import neuronxcc.nki.language as nl
    import neuronxcc.nki.typing as nt
    from neuronxcc import nki as nki_again
    from neuronxcc.nki.isa.constants import dge_mode
    from neuronxcc.nki.language import par_dim
    from nkisim.language import beta1, beta1_isa, indexing
    from nkisim.runtime.beta1 import Beta1Kernel
    assert nki is nki_again and nki.__file__.endswith("nki_beta1/__init__.py")
    assert isinstance(nki.jit(lambda a: a), Beta1Kernel)
    assert nl.load is beta1.load and nl.arange is indexing.arange and par_dim is indexing.par_dim
    assert nl.mgrid is indexing.mgrid and nl.program_id is beta1.program_id
    assert nisa.nc_matmul is beta1_isa.nc_matmul and dge_mode is beta1_isa.dge_mode and dge_mode.none == 0
    assert callable(ncc.enable_stack_allocator(lambda: 1)) and nt.tensor[2, 3].shape == (2, 3)
    assert nl.float32 == np.float32 and nl.tile_size.pmax == 128


def test_nki_and_nki_cpu_simulator_stay_beta2():
    import nki
    import nki.isa
    import nki_cpu_simulator.nki.isa as sim_nisa
    from nkisim.isa import enums
    from nkisim.runtime.kernel import Kernel
    from nkisim.runtime.beta1 import Beta1Kernel
    k = nki.jit(lambda a: a)
    assert isinstance(k, Kernel) and not isinstance(k, Beta1Kernel)
    assert nki.isa.dge_mode is enums.dge_mode and sim_nisa.dge_mode is enums.dge_mode
    assert nki.isa.dge_mode.none == 3


def test_beta1_ops_beta1_never_had_are_the_beta2_ones():
    import neuronxcc.nki.isa as nisa
    import nkisim.isa as isa2
    assert nisa.tensor_scalar_cumulative is isa2.tensor_scalar_cumulative


def test_missing_top_level_names():
    import neuronxcc.nki as nki
    from nkisim.errors import UnsupportedError
    with pytest.raises(UnsupportedError, match=r"^nki\.FrameworkKernel: is not part of nkisim's Beta 1 face; "
                                              r"use the torch layer"):
        nki.FrameworkKernel
    with pytest.raises(AttributeError):
        nki.no_such_name
