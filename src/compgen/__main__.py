"""``python -m compgen ...``: the command line of :mod:`compgen.cli`, the same as the ``compgen-cli`` script."""

import sys

from compgen.cli import entry_point

if __name__ == "__main__":
    sys.exit(entry_point())
