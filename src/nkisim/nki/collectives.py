"""The ``nki.collectives`` face (``import nki.collectives as ncc``)."""
from nkisim.collectives import *  # noqa: F401,F403
from nkisim.collectives import __all__  # noqa: F401
