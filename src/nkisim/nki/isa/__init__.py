"""The ``nki.isa`` face."""
from nkisim.isa import *  # noqa: F401,F403
from nkisim.isa import __all__  # noqa: F401
from . import constants  # noqa: F401
