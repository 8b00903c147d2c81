"""Small NKI kernels the torch-layer tests call (only ops already implemented in nkisim.isa)."""
import pytest

import nkisim.nki as nki
import nkisim.nki.isa as nisa
import nkisim.nki.language as nl


@nki.jit
def copy(x):
    """A new HBM tensor with x's bits."""
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=x)
    return out


@nki.jit
def scale_inplace(x, factor=2.0):
    """x *= factor, written through x; returns x."""
    t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    nisa.tensor_scalar(dst=t, data=t, op0=nl.multiply, operand0=factor)
    nisa.dma_copy(dst=x, src=t)
    return x


@nki.jit
def scale_inplace_silent(x, factor=2.0):
    """x *= factor, written through x; returns nothing."""
    t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    nisa.tensor_scalar(dst=t, data=t, op0=nl.multiply, operand0=factor)
    nisa.dma_copy(dst=x, src=t)


@nki.jit
def add_mul(a, b):
    """Two outputs: (a + b, a * b)."""
    ta = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    tb = nl.ndarray(b.shape, dtype=b.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=ta, src=a)
    nisa.dma_copy(dst=tb, src=b)
    s = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    p = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    nisa.tensor_tensor(dst=s, data1=ta, data2=tb, op=nl.add)
    nisa.tensor_tensor(dst=p, data1=ta, data2=tb, op=nl.multiply)
    o1 = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    o2 = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=o1, src=s)
    nisa.dma_copy(dst=o2, src=p)
    return o1, o2


@nki.jit
def cache_write(cache, new, pos=0):
    """cache[pos:pos+len(new)] = new (a KV-cache update); returns cache."""
    t = nl.ndarray(new.shape, dtype=new.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=new)
    nisa.dma_copy(dst=cache[pos:pos + new.shape[0], :], src=t)
    return cache


@nki.jit
def add_into(x, y):
    """x += 1 then y += 1, both written in place (x and y may be the same tensor)."""
    for dst in (x, y):
        t = nl.ndarray(dst.shape, dtype=dst.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=dst)
        nisa.tensor_scalar(dst=t, data=t, op0=nl.add, operand0=1.0)
        nisa.dma_copy(dst=dst, src=t)


@nki.jit
def core_ids(x):
    """out[0, 0] = number of programs (1 or 2): proves the LNC the kernel ran with."""
    out = nl.ndarray((1, 1), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.ndarray((1, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=t, value=float(nl.num_programs(0)))
    nisa.dma_copy(dst=out, src=t)
    return out


@nki.jit
def write_y_read_x(x, y):
    """y += 1 in place, then a new tensor with x's values (read after the write; x may alias y)."""
    t = nl.ndarray(y.shape, dtype=y.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=y)
    nisa.tensor_scalar(dst=t, data=t, op0=nl.add, operand0=1.0)
    nisa.dma_copy(dst=y, src=t)
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=x)
    return out


@nki.jit
def add_const_inplace(x, c):
    """x += c (c a constant array of x's shape); returns x."""
    t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    tc = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    nisa.dma_copy(dst=tc, src=c)
    nisa.tensor_tensor(dst=t, data1=t, data2=tc, op=nl.add)
    nisa.dma_copy(dst=x, src=t)
    return x


@nki.jit
def too_many_partitions(x):
    """x *= 2, then an SBUF tile of 129 partitions: always a ShapeError."""
    scale_inplace.func(x)
    return nl.ndarray((129, 1), dtype=nl.float32, buffer=nl.sbuf)


@nki.jit
def copy_as_list(x):
    """[copy of x, x]: a list result."""
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=x)
    return [out, x]


@nki.jit
def returns_int(x):
    """Not a tensor result."""
    return 3


_ENV = ("VLLM_NEURON_CPU_MODE", "NKI_SIMULATOR", "NKI_PRECISE_FP", "VLLM_NEURON_DISABLE_NKI_KERNELS",
        "NEURON_PLATFORM_TARGET_OVERRIDE", "NKI_NC_VERSION")


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    """Every torch test starts with no Neuron/vLLM switches set and zeroed route counters."""
    for name in _ENV:
        monkeypatch.delenv(name, raising=False)
    from nkisim.torch import reset_route_stats
    reset_route_stats()
    yield
