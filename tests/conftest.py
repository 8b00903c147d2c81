"""Shared test helpers: run a kernel body in the simulator on NumPy inputs."""
import os
import sys

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


BENCH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "benchmarks")


def bench_module(name):
    """Import ``benchmarks/<name>.py`` (the directory is not a package) as module ``name``."""
    sys.path.insert(0, BENCH)
    try:
        return __import__(name)
    finally:
        sys.path.remove(BENCH)


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


def fake_estimate(events, target, lnc, loop_buffers=None):
    """A stand-in for ``trace.schedule.estimate`` (tests of the profile layer only): every
    instruction takes 100 ns, one after the other; a span waits on the one before it when that
    one ran on another track. Tracks ``core<c>.<engine>``, DMAs on ``core<c>.dma0``; TensorE flops
    2*K*M*N of nc_matmul; hbm_bytes the HBM operands' bytes; peak 1000 flop/ns, 100 B/ns."""
    from nkisim.trace.timeline import Span, Timeline

    spans = []
    for i, e in enumerate(events):
        track = f"core{e.core}.{'dma0' if e.engine == 'dma' else e.engine}"
        flops = 0
        if e.op == "nc_matmul":
            st = next(o for o in e.reads if o.role == "stationary")
            mv = next(o for o in e.reads if o.role == "moving")
            flops = 2 * st.shape[0] * st.shape[1] * mv.shape[1]
        hbm = sum(o.nbytes for o in e.reads + e.writes if o.buffer.endswith("hbm"))
        waited = i - 1 if i and spans[-1].track != track else None
        spans.append(Span(e, track, 100.0 * i, 100.0 * (i + 1), flops, hbm, waited, "fake 100 ns"))
    return Timeline(target=target.name, lnc=lnc, spans=spans, total_ns=100.0 * len(spans),
                    peak_flops_per_ns=1000.0, hbm_bytes_per_ns=100.0)


@pytest.fixture
def fake_schedule(monkeypatch):
    """``nkisim.trace.schedule`` replaced by a module whose ``estimate`` is ``fake_estimate``."""
    import sys
    import types
    mod = types.ModuleType("nkisim.trace.schedule")
    mod.estimate = fake_estimate
    monkeypatch.setitem(sys.modules, "nkisim.trace.schedule", mod)
    return mod
