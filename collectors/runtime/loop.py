"""The poll loop shared by `python -m collectors` and the demo: poll, log alert changes, feed outputs."""

from __future__ import annotations

import json
import logging
import sys
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from collectors.model.poll import PollResult
from collectors.model.records import SCHEMA_VERSION, AlertRecord, snapshot_to_dict

if TYPE_CHECKING:
    from collectors.runtime.poller import Monitor
    from collectors.runtime.sinks import Sink

log = logging.getLogger("collectors")


def document(results: list[PollResult], now: float) -> dict[str, Any]:
    """The JSON document of `--json`: schema version, time, one snapshot per cluster (docs/snapshot-schema.md)."""
    return {"schema_version": SCHEMA_VERSION, "generated_at": now,
            "clusters": [snapshot_to_dict(r.snapshot) for r in results]}


def install_stop_handlers(stop: threading.Event) -> None:
    """SIGTERM/SIGINT set `stop` from a helper thread.

    Setting an Event inside a signal handler can deadlock: the handler runs in the
    main thread, possibly while that thread holds the Event's lock inside
    `stop.wait()`, and the lock is not reentrant. A short-lived thread takes the
    lock instead, once the main thread lets go of it.
    """
    import signal

    def handler(signum: int, frame: object) -> None:
        threading.Thread(target=stop.set, name="stop", daemon=True).start()

    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGINT, handler)


def _log_changes(cluster: str, opened: list[AlertRecord], resolved: list[AlertRecord], per_rule: int = 3) -> None:
    """One line per alert, but one summary line per rule when a single event opens many (a broker crash)."""
    for verb, alerts, level in (("opened", opened, logging.WARNING), ("resolved", resolved, logging.INFO)):
        by_rule: dict[str, list[AlertRecord]] = {}
        for a in alerts:
            by_rule.setdefault(a.rule, []).append(a)
        for rule, items in by_rule.items():
            if len(items) <= per_rule:
                for a in items:
                    log.log(level, "%s: alert %s [%s] %s %s: %s", cluster, verb, a.severity, rule, a.subject, a.summary)
            else:
                subjects = ", ".join(a.subject for a in items[:per_rule])
                log.log(level, "%s: alert %s [%s] %s on %d subjects (%s, ...)", cluster, verb, items[0].severity,
                        rule, len(items), subjects)


def run_loop(monitor: Monitor, interval_s: float, sinks: list[Sink], stop: threading.Event,
             clock: Callable[[], float] = time.time, as_json: bool = False) -> None:
    """Poll every `interval_s` until `stop` is set; outputs failing never stop the polling."""
    while not stop.is_set():
        started = time.monotonic()
        now = clock()
        try:
            results = monitor.poll_once(now)
        except Exception:
            log.exception("poll failed")
            results = []
        for r in results:
            _log_changes(r.snapshot.cluster, r.opened, r.resolved)
        for sink in sinks:
            try:
                sink(results, now)
            except Exception:
                log.exception("output %s failed", type(sink).__name__)
        if as_json:
            sys.stdout.write(json.dumps(document(results, now), default=str) + "\n")
            sys.stdout.flush()
        stop.wait(max(0.0, interval_s - (time.monotonic() - started)))
    for sink in sinks:
        close = getattr(sink, "close", None)
        if close is not None:
            try:
                close()
            except Exception:
                log.exception("closing output %s failed", type(sink).__name__)
