"""The ``nki.typing`` face: shape annotations (``nt.tensor[d0, d1]``, ``nt.mutable_tensor``)."""


class _Annotation:
    is_nki_annotation = True        # a Beta-1 launch checks parameters annotated with a shape

    def __init__(self, name, shape=None):
        self.name, self.shape = name, shape

    def __getitem__(self, shape):
        return _Annotation(self.name, shape if isinstance(shape, tuple) else (shape,))

    def __repr__(self):
        return f"nt.{self.name}[{', '.join(map(str, self.shape or ()))}]"


tensor = _Annotation("tensor")
mutable_tensor = _Annotation("mutable_tensor")
__all__ = ["tensor", "mutable_tensor"]
