"""``python -m gnnplan``: the command line (same as the ``gnnplan`` console script)."""

import sys

from gnnplan.autotune.cli import main

sys.exit(main())
