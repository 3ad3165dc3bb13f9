"""`python -m harness.cli`."""

import sys

from harness.cli.main import main

sys.exit(main())
