"""`python -m collectors`: see :mod:`collectors.runtime.cli`."""

import sys

from collectors.runtime.cli import main

if __name__ == "__main__":
    sys.exit(main())
