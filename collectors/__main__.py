"""`python -m collectors --config FILE [--once] [--json]`: poll clusters, evaluate alerts.

Exit codes: 0 healthy poll; 1 poll done but a cluster, broker or ZooKeeper
server could not be reached (the snapshot is still printed, with the error and
an alert); 2 bad configuration or arguments (the message names the field).
"""

from __future__ import annotations

import argparse
import json
import logging
import signal
import sys
import threading
import time
from typing import Any

from collectors.records import SCHEMA_VERSION, snapshot_to_dict

log = logging.getLogger("collectors")


class _ArgParser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # argparse's default also exits 2; keep the message short
        self.print_usage(sys.stderr)
        print(f"error: {message}", file=sys.stderr)
        sys.exit(2)


def build_parser() -> argparse.ArgumentParser:
    p = _ArgParser(prog="python -m collectors", description="Kafka reliability monitor: collectors and alerts")
    p.add_argument("--config", required=True, help="YAML config file (see collectors/config.example.yaml)")
    p.add_argument("--once", action="store_true", help="poll once and exit")
    p.add_argument("--json", action="store_true", help="print the snapshot(s) as JSON on stdout")
    p.add_argument("--log-level", help="override the config's log_level")
    return p


def document(results: list[Any], now: float) -> dict[str, Any]:
    return {"schema_version": SCHEMA_VERSION, "generated_at": now,
            "clusters": [snapshot_to_dict(r.snapshot) for r in results]}


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
    from collectors.poller import Monitor

    monitor = Monitor(config)
    try:
        if args.once:
            now = time.time()
            results = monitor.poll_once(now)
            if args.json:
                json.dump(document(results, now), sys.stdout, indent=1, default=str)
                sys.stdout.write("\n")
            else:
                for r in results:
                    _print_summary(r)
            return 1 if any(r.node_unreachable for r in results) else 0
        return _run_forever(monitor, config, args.json)
    finally:
        monitor.close()


def _print_summary(r: Any) -> None:
    s = r.snapshot
    print(f"{s.cluster}: reachable={s.reachable} brokers={sum(b.alive for b in s.brokers)}/{len(s.brokers)} "
          f"partitions={len(s.partitions)} groups={len(s.groups)} alerts={len(s.alerts)} "
          f"poll={s.poll_duration_s:.2f}s requests={s.requests}")
    for a in s.alerts:
        print(f"  [{a.severity}] {a.rule} {a.subject}: {a.summary}")


def _run_forever(monitor: Any, config: Any, as_json: bool) -> int:
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    sinks = _sinks(config)
    while not stop.is_set():
        started = time.monotonic()
        now = time.time()
        try:
            results = monitor.poll_once(now)
        except Exception:
            log.exception("poll failed")
            results = []
        for r in results:
            for a in r.opened:
                log.warning("alert opened [%s] %s %s: %s", a.severity, a.rule, a.subject, a.summary)
            for a in r.resolved:
                log.info("alert resolved %s %s", a.rule, a.subject)
        for sink in sinks:
            try:
                sink(results, now)
            except Exception:
                log.exception("output %s failed", getattr(sink, "__name__", sink))
        if as_json:
            print(json.dumps(document(results, now), default=str), flush=True)
        stop.wait(max(0.0, config.poll_interval_s - (time.monotonic() - started)))
    for sink in sinks:
        close = getattr(sink, "close", None)
        if close:
            close()
    return 0


def _sinks(config: Any) -> list[Any]:
    """Outputs fed after every poll (exporter, history, latest state) — see collectors.outputs."""
    try:
        from collectors.outputs import build_sinks
    except ImportError:
        return []
    return build_sinks(config)


if __name__ == "__main__":
    sys.exit(main())
