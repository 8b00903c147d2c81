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


@pytest.fixture
def rng():
    return np.random.default_rng(0)
