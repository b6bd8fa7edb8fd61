"""`python -m collectors --config FILE [--once] [--json]`: poll clusters, evaluate alerts.

Exit codes: 0 healthy poll; 1 poll done but a cluster, broker or ZooKeeper
server could not be reached, or a cluster's poll failed (the snapshot is still
printed, with the error and an alert); 2 bad configuration or arguments (the
message names the field). Polling forever: 0 once stopped (SIGTERM, SIGINT) or
once ``--json``'s reader has gone (``| head``), the outputs closed either way.
"""

from __future__ import annotations

import argparse
import logging
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

from collectors.runtime.loop import quiet_stdout, write_document

if TYPE_CHECKING:
    from collectors.config import MonitorConfig
    from collectors.model.poll import PollResult
    from collectors.runtime.poller import Monitor

log = logging.getLogger("collectors")

LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")
"""What ``--log-level`` takes, in any case: the config's ``log_level`` values."""


class _ArgParser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # argparse's default also exits 2; keep the message short
        self.print_usage(sys.stderr)
        print(f"error: {message}", file=sys.stderr)
        sys.exit(2)


def build_parser() -> argparse.ArgumentParser:
    prog = "kafka-monitor" if Path(sys.argv[0]).name == "kafka-monitor" else "python -m collectors"
    p = _ArgParser(prog=prog, description="Kafka reliability monitor: collectors and alerts")
    p.add_argument("--config", required=True, help="YAML config file (see collectors/config.example.yaml)")
    p.add_argument("--once", action="store_true", help="poll once and exit")
    p.add_argument("--json", action="store_true", help="print the snapshot(s) as JSON on stdout")
    p.add_argument("--log-level", type=str.upper, choices=LOG_LEVELS, metavar="LEVEL",
                   help=f"override the config's log_level: {', '.join(LOG_LEVELS)} (any case)")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from collectors.config import ConfigError, load_config

    try:
        config = load_config(args.config)
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    logging.basicConfig(level=args.log_level or config.log_level, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("kafka").setLevel(logging.CRITICAL)  # its connection errors become our alerts
    logging.getLogger("kazoo").setLevel(logging.CRITICAL)
    hide_secrets_in_logs(config)
    from collectors.runtime.poller import Monitor

    monitor = Monitor(config, clock=time.time)
    try:
        if args.once:
            now = time.time()
            results = monitor.poll_once(now)
            try:
                if args.json:
                    sys.stdout.flush()
                    write_document(results, now, sys.stdout.buffer)
                else:
                    for r in results:
                        _print_summary(r)
                    sys.stdout.flush()
            except BrokenPipeError:  # its reader has read what it wanted (``| head``)
                quiet_stdout()
            return 1 if any(r.node_unreachable for r in results) else 0
        return _run_forever(monitor, config, args.json)
    finally:
        monitor.close()


def hide_secrets_in_logs(config: MonitorConfig) -> None:
    """Every root log handler hides the config's secret values (`ScrubLogs`): behind the redaction by name, for
    a library's message or a traceback that quotes one."""
    from collectors.config.redaction import secret_values
    from collectors.model.secrets import Scrubber, ScrubLogs

    scrub = Scrubber.of(secret_values(config))
    if scrub:
        for handler in logging.getLogger().handlers:
            if not any(isinstance(f, ScrubLogs) for f in handler.filters):
                handler.addFilter(ScrubLogs(scrub))


def _print_summary(r: PollResult) -> None:
    s = r.snapshot
    print(f"{s.cluster}: reachable={s.reachable} brokers={sum(b.alive for b in s.brokers)}/{len(s.brokers)} "
          f"partitions={len(s.partitions)} groups={len(s.groups)} alerts={len(s.alerts)} "
          f"poll={s.poll_duration_s:.2f}s requests={s.requests}")
    for a in s.alerts:
        print(f"  [{a.severity}] {a.rule} {a.subject}: {a.summary}")


def _run_forever(monitor: Monitor, config: MonitorConfig, as_json: bool) -> int:
    from collectors.runtime.loop import install_stop_handlers, run_loop
    from collectors.runtime.sinks import build_sinks

    stop = threading.Event()
    install_stop_handlers(stop)
    for line in monitor.resume(Path(config.state_dir)):
        log.info("%s", line)
    try:
        sinks = build_sinks(config, monitor)
    except OSError as e:
        print(f"error: cannot start outputs: {e}", file=sys.stderr)
        return 1
    run_loop(monitor, config.poll_interval_s, sinks, stop, as_json=as_json)
    return 0

