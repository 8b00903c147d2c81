"""The ``nki.language`` face."""
from nkisim.language import *  # noqa: F401,F403
from nkisim.language import __all__  # noqa: F401
