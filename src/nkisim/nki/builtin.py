"""The ``nki.builtin`` face: nki-library's simulation harness installs this module as the global
``builtin``. Decision: the public docs list no member of it, so it holds just the two namespaces a
kernel reaches through it, ``language`` and ``isa``."""
from nkisim.nki import isa, language  # noqa: F401

__all__ = ["isa", "language"]
