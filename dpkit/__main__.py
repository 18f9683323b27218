"""``python -m dpkit`` is the ``dpkit`` command."""

import sys

from dpkit.cli import main

sys.exit(main())
