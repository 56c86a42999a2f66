"""`python -m workers.cli`: the `jobpost` command, as this Python runs it."""

import sys

from workers.cli import main

sys.exit(main())
