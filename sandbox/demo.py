"""`./run.sh demo`: the sandbox cluster with its default incident timeline.

Grows with the product: as the collector, exporter and dashboard land they are
started from here too, so the README's first command always shows everything.
"""

from __future__ import annotations

import sys

from sandbox.__main__ import main as sandbox_main


def main(argv: list[str] | None = None) -> int:
    return sandbox_main(argv if argv is not None else sys.argv[1:])


if __name__ == "__main__":
    sys.exit(main())
