"""NKIObject construction: the docs' ``NKIObject.__init__(**kwargs)``
(aws-neuron-sdk nki/api/nki/language/__init__.py), for plain and ``@dataclass`` subclasses."""
import dataclasses

import pytest

import nkisim.nki.language as nl


@dataclasses.dataclass
class Section(nl.NKIObject):
    index = None            # un-annotated: a dataclass makes no field of it
    offset = None
    size: int = 128
    tags: list = dataclasses.field(default_factory=list)


def test_unannotated_class_attributes_are_keywords_of_a_dataclass_subclass():
    s = Section(index=3, offset=256)
    assert (s.index, s.offset, s.size, s.tags) == (3, 256, 128, [])
    assert Section().index is None


def test_dataclass_fields_keep_their_dataclass_meaning():
    @dataclasses.dataclass
    class Plain:            # the reference: Python's own dataclass on the same fields
        size: int = 128
        tags: list = dataclasses.field(default_factory=list)
    for args, kwargs in [((), {}), ((64,), {}), ((64, [1]), {}), ((), {"tags": [2]})]:
        ours, ref = Section(*args, **kwargs), Plain(*args, **kwargs)
        assert (ours.size, ours.tags) == (ref.size, ref.tags)
    assert Section().tags is not Section().tags          # default_factory runs per object


def test_plain_subclass_takes_its_class_attributes_as_keywords():
    class Tile(nl.NKIObject):
        rows = 128
        cols = 512
    t = Tile(cols=64)
    assert (t.rows, t.cols) == (128, 64)
    assert Tile.cols == 512                              # the class attribute is untouched


def test_required_fields_post_init_and_frozen():
    @dataclasses.dataclass(frozen=True)
    class Cfg(nl.NKIObject):
        d: int
        half: int = 0

        def __post_init__(self):
            object.__setattr__(self, "half", self.d // 2)
    assert Cfg(d=64).half == 32
    with pytest.raises(AttributeError, match=r"'d'"):   # a field left out stays unset ...
        Cfg()                                          # ... and __post_init__ reads it here
    with pytest.raises(dataclasses.FrozenInstanceError):
        Cfg(d=2).d = 3


def test_a_field_without_default_may_be_left_out_and_stays_unset():
    @dataclasses.dataclass
    class Sizes(nl.NKIObject):
        T: int
        unused: int
        K: int = 4
    s = Sizes(T=8)
    assert (s.T, s.K) == (8, 4) and not hasattr(s, "unused")
    with pytest.raises(AttributeError, match="unused"):
        s.unused


def test_a_hand_written_init_wins_and_is_inherited():
    class Own(nl.NKIObject):
        def __init__(self, q):
            self.q = q * 2

    class Sub(Own):
        pass
    assert Own(2).q == 4 and Sub(3).q == 6


@pytest.mark.parametrize("call, message", [
    (lambda: Section(idx=1), r"unexpected keyword argument 'idx'; did you mean 'index'\?"),
    (lambda: Section(1, [], 3), r"takes 2 positional arguments but 3 were given"),
    (lambda: Section(64, size=32), r"multiple values for argument 'size'"),
])
def test_bad_construction_is_a_type_error(call, message):
    with pytest.raises(TypeError, match=message):
        call()
