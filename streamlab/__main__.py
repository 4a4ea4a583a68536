"""`python -m streamlab`: the entry point that runs the command line (`streamlab.tools.cli.main`)."""

import sys

from streamlab.tools.cli.main import main

sys.exit(main())
