"""`python -m toolpath.cli`, the same as the `toolpath` command."""

import sys

from . import main

sys.exit(main())
