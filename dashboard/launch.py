"""`kafka-monitor-dashboard`: start the Streamlit dashboard of an installed package.

    kafka-monitor-dashboard --state-dir /var/lib/kmon/state --history /var/lib/kmon/history [--reports DIR]
    kafka-monitor-dashboard --address 0.0.0.0 --port 8501 ... --server.maxUploadSize 1   # inside a container

It runs ``python -m streamlit run <this package's app.py>`` (the installed file, not a path relative to the
working directory), bound to 127.0.0.1:8501, headless and without usage statistics unless told otherwise.
Options it does not know (``--server.*``, ``--theme.*``...) go to ``streamlit run`` after its own, so they win.
The dashboard options (``--state-dir``, ``--history``, ``--reports``, ``--refresh``, ``--poll-interval``) go to
the app; each keeps its environment fallback (``KMON_STATE_DIR``... see `dashboard.data`) when not given.
Needs the ``dashboard`` extra: ``pip install 'kafka-reliability-monitor[dashboard]'``.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
from collections.abc import Sequence
from pathlib import Path

APP = Path(__file__).resolve().parent / "app.py"
APP_OPTIONS = ("--state-dir", "--history", "--reports", "--refresh", "--poll-interval")


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="kafka-monitor-dashboard", description="Start the Kafka reliability dashboard (streamlit run).",
        epilog="Other --section.option arguments are passed to `streamlit run` (see `streamlit run --help`).")
    p.add_argument("--address", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8501, help="port (default 8501)")
    p.add_argument("--state-dir", help="the collector's state_dir (env KMON_STATE_DIR)")
    p.add_argument("--history", help="the collector's history root (env KMON_HISTORY)")
    p.add_argument("--reports", help="the weekly reports' --out directory (env KMON_REPORTS)")
    p.add_argument("--refresh", type=float, help="seconds between checks for new data, 0 = off (env KMON_REFRESH)")
    p.add_argument("--poll-interval", type=float,
                   help="the collector's poll interval in seconds (env KMON_POLL_INTERVAL; default: inferred)")
    return p


def command(argv: Sequence[str] | None = None) -> list[str]:
    """The `streamlit run` command line for these arguments."""
    args, extra = parser().parse_known_args(list(sys.argv[1:] if argv is None else argv))
    stray = [a for a in extra if a.startswith("-") and "." not in a.split("=", 1)[0]]
    if stray:
        parser().error(f"unrecognized arguments: {' '.join(stray)}")
    cmd = [sys.executable, "-m", "streamlit", "run", str(APP),
           "--server.address", args.address, "--server.port", str(args.port),
           "--server.headless", "true", "--browser.gatherUsageStats", "false", *extra]
    app_args: list[str] = []
    for option in APP_OPTIONS:
        value = getattr(args, option[2:].replace("-", "_"))
        if value is not None:
            app_args += [option, f"{value:g}" if isinstance(value, float) else value]
    return cmd + (["--", *app_args] if app_args else [])


def main(argv: Sequence[str] | None = None) -> int:
    cmd = command(argv)
    if importlib.util.find_spec("streamlit") is None:
        print("kafka-monitor-dashboard: error: Streamlit is not installed; install the dashboard extra: "
              "pip install 'kafka-reliability-monitor[dashboard]'", file=sys.stderr)
        return 2
    os.execv(sys.executable, cmd)  # streamlit becomes this process: signals and exit code are its own
    return 0  # not reached


if __name__ == "__main__":
    sys.exit(main())
