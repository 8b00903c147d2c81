"""The kernel library's shape contract (nkisim.kernels.contract): a kernel called with shapes that
disagree stops before its first instruction with a ValueError naming the kernel, the argument, its
shape and the expected one; the caller's arrays are left as they were. Expected messages are
written out here in full."""
import re
from types import SimpleNamespace

import numpy as np
import pytest

import nkisim.nki as nki
from nkisim.kernels.attention import flash_attention_kernel, paged_attention_decode_kernel
from nkisim.kernels.contract import check_grouped_heads, check_shapes
from nkisim.kernels.kvcache import write_kv_cache_kernel
from nkisim.kernels.linear import linear_kernel
from nkisim.kernels.mlp import swiglu_mlp_kernel
from nkisim.kernels.norm import rms_norm_kernel
from nkisim.kernels.rope import rope_kernel
from nkisim.kernels.sampling import greedy_sample_kernel

F32 = np.float32


def t(*shape):
    return SimpleNamespace(shape=shape)


def test_check_shapes_binds_names_in_keyword_order():
    assert check_shapes("k", x=(t(2, 3), "T H"), w=(t(3, 5), "H I"), b=(t(5,), ("I",))) == {"T": 2, "H": 3, "I": 5}


@pytest.mark.parametrize("args, message", [
    (dict(x=(t(2, 3), "T H"), w=(t(4, 5), "H I")), "k: w has shape [4, 5], expected [H, I] = [3, I] (H from x)"),
    (dict(x=(t(2, 3), "T H"), w=(t(3, 5), "I T")), "k: w has shape [3, 5], expected [I, T] = [I, 2] (T from x)"),
    (dict(x=(t(2, 3, 4), "T H")), "k: x has shape [2, 3, 4], expected [T, H]"),
    (dict(x=(t(2, 6), "T D"), c=(t(2, 4), (2, 3))), "k: c has shape [2, 4], expected [2, 3]"),
    (dict(a=(t(2, 3), "B H"), b=(t(7, 3), "B H")), "k: b has shape [7, 3], expected [B, H] = [2, 3] (B from a, H from a)"),
])
def test_check_shapes_names_argument_shape_and_expectation(args, message):
    with pytest.raises(ValueError, match="^" + re.escape(message) + "$"):
        check_shapes("k", **args)


def test_check_grouped_heads():
    check_grouped_heads("k", {"Hq": 8, "Hkv": 2})
    with pytest.raises(ValueError, match=r"^k: Hq = 6 query heads must be a multiple of Hkv = 4 kv heads$"):
        check_grouped_heads("k", {"Hq": 6, "Hkv": 4})


def a(*shape, dtype=F32):
    return np.random.default_rng(sum(shape)).standard_normal(shape).astype(dtype)


def i32(*shape):
    return np.zeros(shape, np.int32)


# each kernel with one argument of the wrong shape, and the message it must give
CASES = [
    (swiglu_mlp_kernel, lambda: (a(2, 200), a(200, 300), a(200, 300), a(305, 200)),
     "swiglu_mlp_kernel: w_down has shape [305, 200], expected [I, H] = [300, 200] (I from w_gate, H from x)"),
    (swiglu_mlp_kernel, lambda: (a(2, 200), a(201, 300), a(200, 300), a(300, 200)),
     "swiglu_mlp_kernel: w_gate has shape [201, 300], expected [H, I] = [200, I] (H from x)"),
    (swiglu_mlp_kernel, lambda: (a(2, 3, 200), a(200, 300), a(200, 300), a(300, 200)),
     "swiglu_mlp_kernel: x has shape [2, 3, 200], expected [T, H]"),
    (linear_kernel, lambda: (a(4, 64), a(65, 32)),
     "linear_kernel: weight has shape [65, 32], expected [K, N] = [64, N] (K from x)"),
    (rms_norm_kernel, lambda: (a(4, 64), a(63), 1e-5),
     "rms_norm_kernel: weight has shape [63], expected [H] = [64] (H from x)"),
    (rope_kernel, lambda: (a(4, 2, 16), a(4, 16), a(4, 8)),
     "rope_kernel: cos has shape [4, 16], expected [4, 8]"),
    (greedy_sample_kernel, lambda: (a(2, 3, 4),), "greedy_sample_kernel: logits has shape [2, 3, 4], expected [B, V]"),
    (write_kv_cache_kernel, lambda: (a(3, 2, 8), a(3, 2, 8), a(4, 16, 2, 8), a(4, 16, 2, 8), i32(2)),
     "write_kv_cache_kernel: slot_mapping has shape [2], expected [T] = [3] (T from k)"),
    (flash_attention_kernel, lambda: (a(16, 4, 8), a(16, 2, 8), a(15, 2, 8), 0.5, True),
     "flash_attention_kernel: v has shape [15, 2, 8], expected [S, Hkv, D] = [16, 2, 8] (S from q, Hkv from k, "
     "D from q)"),
    (flash_attention_kernel, lambda: (a(16, 6, 8), a(16, 4, 8), a(16, 4, 8), 0.5, True),
     "flash_attention_kernel: Hq = 6 query heads must be a multiple of Hkv = 4 kv heads"),
    (paged_attention_decode_kernel,
     lambda: (a(2, 4, 8), a(2, 2, 8), a(2, 2, 8), a(4, 16, 2, 8), a(4, 16, 2, 8), i32(2, 3), i32(3), 0.5),
     "paged_attention_decode_kernel: context_lens has shape [3], expected [B] = [2] (B from q)"),
]


@pytest.mark.parametrize("lnc", [1, 2])
@pytest.mark.parametrize("kernel, make, message", CASES, ids=[f"{c[0].__name__}-{i}" for i, c in enumerate(CASES)])
def test_kernels_refuse_inconsistent_shapes(kernel, make, message, lnc):
    args = make()
    before = [x.copy() if isinstance(x, np.ndarray) else x for x in args]
    with pytest.raises(ValueError, match="^" + re.escape(message) + "$"):
        nki.simulate(kernel[lnc])(*args)
    for x, y in zip(args, before):
        if isinstance(x, np.ndarray):
            np.testing.assert_array_equal(x, y)
