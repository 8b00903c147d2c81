"""The Beta-1 ``nki.compiler`` face: allocation and compilation hints, accepted as no-ops."""
from nkisim.nki.compiler import *  # noqa: F401,F403
from nkisim.nki.compiler import __all__  # noqa: F401
from nkisim.language.misc import no_reorder  # noqa: F401

__all__ = list(__all__) + ["no_reorder"]
