"""``python -m nkisim``: the ``nkisim`` command (``nkisim.cli.main``)."""
import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
