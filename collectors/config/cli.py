"""``python -m collectors.config FILE``: check a configuration before deploying it, and see what it amounts to.

It prints the configuration as the monitor would use it (defaults filled in, ``${VAR}`` and ``KMON__``
overrides applied) with every secret masked, so the output can be read and shared safely; problems go to
stderr, one line each.
"""

from __future__ import annotations

import argparse
import json
import sys

from collectors.config.explain import explain, policy_lines
from collectors.config.loader import load_config
from collectors.config.problems import ConfigError
from collectors.config.redaction import redacted

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    """``python -m collectors.config FILE``: validate a configuration and print it, redacted, as JSON.

    ``python -m collectors.config explain FILE --group NAME | --topic NAME [--cluster NAME]``: what the filters
    and the policies make of one group or topic (`collectors.config.explain`)."""
    args = sys.argv[1:] if argv is None else argv
    if args and args[0] == "explain":
        return _explain(args[1:])
    if len(args) != 1 or args[0].startswith("-"):
        print("usage: python -m collectors.config CONFIG_FILE\n"
              "       python -m collectors.config explain CONFIG_FILE (--group NAME | --topic NAME) [--cluster NAME]",
              file=sys.stderr)
        return 2
    try:
        config = load_config(args[0])
    except ConfigError as e:
        print(e, file=sys.stderr)
        return 1
    print(json.dumps(redacted(config), indent=2, ensure_ascii=False))
    return 0


def _explain(args: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="python -m collectors.config explain",
                                 description="What the filters and policies make of a group or topic.")
    ap.add_argument("config")
    ap.add_argument("--group")
    ap.add_argument("--topic")
    ap.add_argument("--cluster")
    a = ap.parse_args(args)
    if a.group is None and a.topic is None:
        ap.error("give --group NAME or --topic NAME")
    try:
        config = load_config(a.config)
    except ConfigError as e:
        print(e, file=sys.stderr)
        return 1
    print("\n".join(explain(config, a.group, a.topic, a.cluster, policy_lines(a.config))))
    return 0
