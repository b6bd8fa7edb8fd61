"""``python -m collectors.config FILE``: check a configuration before deploying it, and see what it amounts to.

It prints the configuration as the monitor would use it (defaults filled in, ``${VAR}`` and ``KMON__``
overrides applied) with every secret masked, so the output can be read and shared safely; problems go to
stderr, one line each.
"""

from __future__ import annotations

import json
import sys

from collectors.config.loader import load_config
from collectors.config.problems import ConfigError
from collectors.config.redaction import redacted

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    """``python -m collectors.config FILE``: validate a configuration and print it, redacted, as JSON."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1 or args[0].startswith("-"):
        print("usage: python -m collectors.config CONFIG_FILE", file=sys.stderr)
        return 2
    try:
        config = load_config(args[0])
    except ConfigError as e:
        print(e, file=sys.stderr)
        return 1
    print(json.dumps(redacted(config), indent=2, ensure_ascii=False))
    return 0
