"""torch.compile(fullgraph=True) over wrapped kernels: eager parity, in-place writes, no recompiles."""
import pytest

torch = pytest.importorskip("torch")

from nkisim.torch import route_stats, wrap_nki  # noqa: E402
from nki_torch_kernels import (add_mul, cache_write, clean_env, scale_inplace,  # noqa: E402,F401
                               scale_inplace_silent)

scale = wrap_nki(scale_inplace)
scale_silent = wrap_nki(scale_inplace_silent)
two_out = wrap_nki(add_mul)
kv_write = wrap_nki(cache_write, output_spec=lambda cache, new, pos: "cache")


class Block(torch.nn.Module):
    """Writes x in place (returned) and y (not returned), uses a two-output kernel, and updates one
    layer of a KV cache buffer through a view."""

    def __init__(self):
        super().__init__()
        self.register_buffer("kv", torch.zeros(2, 4, 8))

    def forward(self, x, y, a, b, new):
        s, p = two_out(a, b)
        scale(x, 0.5)
        scale_silent(y, factor=3.0)
        layer = kv_write(self.kv[1], new, 2)
        return s * 2 + p, layer.sum(dim=0)


def _inputs():
    return (torch.ones(2, 4), torch.ones(3, 2), torch.full((2, 4), 2.0), torch.full((2, 4), 3.0),
            torch.arange(8.0).reshape(1, 8))


@pytest.mark.parametrize("backend", ["eager", "aot_eager", "inductor"])
def test_compiled_module_matches_eager_and_keeps_in_place_writes(monkeypatch, backend):
    monkeypatch.setenv("NKI_SIMULATOR", "1")
    torch._dynamo.reset()
    ref_mod, ref_in = Block(), _inputs()
    ref_out = ref_mod(*ref_in)
    mod = Block()
    compiled = torch.compile(mod, backend=backend, fullgraph=True)
    for call in range(3):
        ins = _inputs()
        if call == 0:
            out = compiled(*ins)
        else:
            with torch.compiler.set_stance("fail_on_recompile"):
                out = compiled(*ins)
        assert all(torch.equal(o, r) for o, r in zip(out, ref_out))
        assert torch.equal(ins[0], ref_in[0])                       # x written in place
        assert torch.equal(ins[1], torch.full((3, 2), 3.0))         # y written in place
    assert torch.equal(mod.kv, ref_mod.kv)                         # the KV cache layer was updated
    assert torch.equal(mod.kv[1, 2], torch.arange(8.0)) and not mod.kv[0].any()
    stats = route_stats()
    assert stats["nki_torch_kernels.scale_inplace"]["kernel"] == 4   # 1 eager + 3 compiled runs
    assert stats["nki_torch_kernels.add_mul"]["kernel"] == 4


def test_force_eager_stance(monkeypatch):
    monkeypatch.setenv("NKI_SIMULATOR", "1")
    torch._dynamo.reset()
    ref_out = Block()(*_inputs())
    compiled = torch.compile(Block(), fullgraph=True)
    with torch.compiler.set_stance("force_eager"):
        ins = _inputs()
        out = compiled(*ins)
    assert all(torch.equal(o, r) for o, r in zip(out, ref_out))
    assert torch.equal(ins[0], torch.full((2, 4), 0.5))
