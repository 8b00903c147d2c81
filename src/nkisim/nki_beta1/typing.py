"""The Beta-1 ``nki.typing`` face (``import neuronxcc.nki.typing as nt``): the same annotation
objects as Beta 2's ``nki.typing`` (so Beta-2 kernels annotated through ``neuronxcc.nki.typing``
keep working); a Beta-1 launch checks the shapes of annotated kernel parameters."""
from nkisim.nki.typing import mutable_tensor, tensor

__all__ = ["tensor", "mutable_tensor"]
