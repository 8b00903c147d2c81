"""What nkisim cannot simulate: ``nisa.builtin_custom_op`` runs a custom GpSimd library (compiled
device code, on the NKI Beta 1 API page only; the current page no longer lists it), so it raises
UnsupportedError naming itself, never an AttributeError. Every instruction of the current API is
simulated (``nkisim ops``). Imports errors.
"""
from __future__ import annotations

from ..errors import UnsupportedError


def builtin_custom_op(function_name, lib_file_name, ulib_to_ucode_version, ulib_to_isa_version, srcs, dsts,
                      **kwargs):
    """Run a custom GpSimd library op. Not simulated: raises UnsupportedError.

    Decision: not an ``@instruction`` spec: its documented signature (the NKI Beta 1 API page; the
    current page no longer lists it) forwards ``**kwargs`` to the custom op, so there is no
    unknown keyword to reject.
    """
    raise UnsupportedError("nisa.builtin_custom_op", "it runs a custom GpSimd library (device code), "
                                                      "which nkisim cannot run on a CPU")


__all__ = ["builtin_custom_op"]
