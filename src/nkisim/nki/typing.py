"""The ``nki.typing`` face: shape annotations (``nt.tensor[d0, d1]``, ``nt.mutable_tensor``), also
the Beta-1 tensor spec ``nt.tensor[[d0, d1], dtype]`` (a shape and dtype, e.g. for nki.benchmark)."""


class _Annotation:
    is_nki_annotation = True        # a Beta-1 launch checks parameters annotated with a shape

    def __init__(self, name, shape=None, dtype=None):
        self.name, self.shape, self.dtype = name, shape, dtype

    def __getitem__(self, shape):
        if isinstance(shape, tuple) and len(shape) == 2 and isinstance(shape[0], (list, tuple)):
            return _Annotation(self.name, tuple(shape[0]), shape[1])       # nt.tensor[[d0, d1], dtype]
        return _Annotation(self.name, shape if isinstance(shape, tuple) else (shape,))

    @property
    def ndim(self):
        return len(self.shape or ())

    def __repr__(self):
        dims = ", ".join(map(str, self.shape or ()))
        return f"nt.{self.name}[[{dims}], {self.dtype}]" if self.dtype is not None else f"nt.{self.name}[{dims}]"


tensor = _Annotation("tensor")
mutable_tensor = _Annotation("mutable_tensor")
__all__ = ["tensor", "mutable_tensor"]
