"""The one dispatch path: every nisa op is a generated OpSpec function; nothing in the source
hand-rolls what the dispatcher does (no ``**ignored``, no per-op memo tables, no ad-hoc trace
calls); findings="all" treats nisa and nl alike; errors inside nkisim's own kernels name their
line there."""
import enum
import inspect
import pathlib
import re
import types

import numpy as np
import pytest

import nkisim
import nkisim.nki as nki
import nkisim.nki.isa as nisa
import nkisim.nki.language as nl
from nkisim.errors import FindingsError
from nkisim.isa import dispatch
from conftest import tile_out


SRC = pathlib.Path(nkisim.__file__).parent
# nisa functions that issue no instruction of their own (each says why in its docstring):
# a helper, target queries, an accumulator view, the unsimulated custom op (it raises), and
# register_alloc (an api_function: its initial value is one register_move instruction).
NOT_INSTRUCTIONS = {"as_enum", "get_nc_version", "get_nc_sub_version", "accumulator",
                    "builtin_custom_op", "register_alloc"}


def _sources():
    return [(p, p.read_text()) for p in SRC.rglob("*.py")]


def test_every_nisa_function_is_one_spec():
    not_specs = []
    for name in nisa.__all__:
        obj = getattr(nisa, name)
        if isinstance(obj, type) or isinstance(obj, enum.Enum) or not callable(obj):
            continue
        if name in NOT_INSTRUCTIONS:
            continue
        if not hasattr(obj, "spec"):
            not_specs.append(name)
    assert not_specs == []
    assert nisa.register_alloc.api == "nisa.register_alloc"


def test_specs_have_documented_signatures_and_docstrings():
    for api, spec in dispatch.SPECS.items():
        assert api.startswith(("nisa.", "nl.", "ncc.")), api
        assert spec.writes or spec.reads or api.startswith(("nisa.", "ncc.")), api
        fn_sig = spec.signature
        assert all(p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) for p in fn_sig.parameters.values())
    for name in nisa.__all__:
        obj = getattr(nisa, name)
        if hasattr(obj, "spec"):
            assert obj.__doc__ and len(obj.__doc__) > 40, name
            assert "**" not in str(inspect.signature(obj)), name


@pytest.mark.parametrize("pattern, why", [
    (r"\*\*ignored", "a misspelt keyword must raise TypeError"),
    (r"trace\.emit\(", "events come from the dispatcher only"),
    (r"^_[A-Z_]*PASSED\b", "rule memo tables live in isa/dispatch.py only"),
    (r"\bremember\(", "rule memo tables live in isa/dispatch.py only"),
])
def test_no_hand_rolled_pipeline_pieces(pattern, why):
    hits = [f"{p.relative_to(SRC)}:{i}" for p, text in _sources()
            for i, line in enumerate(text.splitlines(), 1) if re.search(pattern, line)]
    assert hits == [], why


def _bad_nl_kernel(x):
    t = nl.load(x)
    u = nl.add(t, t[:, 0:3])          # not broadcastable: an nl-level rule
    v = nl.ndarray((128, 8), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_tensor(dst=v, data1=t, data2=t[:, 0:4], op=nl.add)   # a nisa rule
    return tile_out(u)


def test_findings_all_records_nl_and_nisa_rules_alike(capsys):
    x = np.ones((128, 8), np.float32)
    sim = nki.simulate(_bad_nl_kernel, findings="all")
    with pytest.raises(FindingsError):          # runs to the end, then raises one error
        sim(x)
    ops = [e.op for e in sim.findings]
    assert ops == ["nl.add", "nisa.tensor_tensor"], ops
    assert all("test_dispatch.py:" in e.where for e in sim.findings)


def test_errors_inside_nkisim_kernels_name_the_kernel_line():
    pytest.importorskip("torch")
    from nkisim.errors import CapacityError
    from nkisim.kernels.norm import rms_norm_kernel
    h = 70000                                    # a (128, h) fp32 gamma tile cannot fit SBUF
    x, w = np.ones((4, h), np.float32), np.ones(h, np.float32)
    with pytest.raises(CapacityError) as err:
        nki.simulate(rms_norm_kernel)(x, w, 1e-6)
    src = inspect.getsource(inspect.getmodule(rms_norm_kernel.func)).splitlines()
    m = re.search(r"\(norm\.py:(\d+)\)$", str(err.value))
    assert m, str(err.value)
    assert "gamma = nl.ndarray" in src[int(m.group(1)) - 1]


def test_no_bare_nki_error_where_a_specific_class_fits():
    hits = [f"{p.relative_to(SRC)}:{i}" for p, text in _sources()
            for i, line in enumerate(text.splitlines(), 1) if "raise NkiError(" in line]
    # only "called outside a simulated kernel" stays generic: no rule of an op is broken
    assert sorted(h.split(":")[0] for h in hits) == ["isa/dispatch.py", "state.py"], hits


@pytest.mark.parametrize("call", [
    lambda t: nisa.tensor_tensor(dst=t, data1=t, data2=t, op="not_an_op"),
    lambda t: nisa.tensor_reduce(dst=t[:, 0:1], op=nl.exp, data=t, axis=1),
    lambda t: nisa.tensor_copy(dst=t, src=t, engine="warp_drive"),
])
def test_a_bad_argument_value_is_an_argument_error(call):
    from nkisim.errors import ArgumentError

    def kernel(x):
        t = nl.load(x)
        call(t)
        return x
    with pytest.raises(ArgumentError) as err:
        nki.simulate(kernel)(np.ones((128, 8), np.float32))
    assert isinstance(err.value, ValueError)
    assert "test_dispatch.py:" in str(err.value)
