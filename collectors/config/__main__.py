"""`python -m collectors.config FILE`: validate a configuration and print it, redacted, as JSON."""

import sys

from collectors.config.cli import main

sys.exit(main())
