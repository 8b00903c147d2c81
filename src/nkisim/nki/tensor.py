"""The ``nki.tensor`` face: the tensor type, ``NkiTensor`` (nki-library's simulation harness imports
this module as ``nki.tensor``)."""
from nkisim.memory.tensor import NkiTensor

__all__ = ["NkiTensor"]
