"""`python -m streamlab`: the entry point that runs the command line (`streamlab.tools.cli`)."""

import sys

from streamlab.tools.cli import main

sys.exit(main())
