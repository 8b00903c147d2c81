"""Shared test helpers: run a kernel body in the simulator on NumPy inputs."""
import numpy as np
import pytest

import nkisim.nki as nki


def simulate(kernel, *args, target=None, lnc=1, **kwargs):
    """Run ``kernel`` (jitted or plain) in the simulator; ``target`` overrides the environment."""
    opts = {"target": target} if target else {}
    k = nki.simulate(kernel, **opts)
    if lnc != 1:
        k = k[lnc]
    return k(*args, **kwargs)


def tile_out(*tiles):
    """Inside a test kernel: on-chip tiles read out as NumPy arrays (one, or a tuple), to return.

    Kernels return HBM tensors (returning an SBUF/PSUM tile raises MemorySpaceError); tests that
    check an instruction's on-chip result return its values this way, without issuing any
    instruction, so the kernel's events are only its own."""
    from nkisim.memory import access

    def out(v):
        if isinstance(v, access.NkiTensor):
            return access.to_numpy(v)
        if isinstance(v, (tuple, list)):
            return type(v)(out(x) for x in v)
        return v
    return out(tiles[0]) if len(tiles) == 1 else out(tiles)


def sbuf_copy(t):
    """Inside a test kernel: a PSUM tile copied into a new SBUF tile (one nisa.tensor_copy), since
    nl.store takes SBUF values only; any other tile is returned as it is."""
    import nkisim.nki.isa as nisa
    import nkisim.nki.language as nl
    if t.buffer is not nl.psum:
        return t
    s = nl.ndarray(t.shape, dtype=t.dtype, buffer=nl.sbuf)
    nisa.tensor_copy(dst=s, src=t)
    return s


@pytest.fixture
def rng():
    return np.random.default_rng(0)
