"""The poll loop shared by `python -m collectors` and the demo: poll, log alert changes, feed outputs."""

from __future__ import annotations

import contextlib
import gc
import logging
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, BinaryIO

import orjson

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


def write_document(results: list[PollResult], now: float, out: BinaryIO, pretty: bool = True) -> None:
    """`document` as one write of JSON bytes: orjson, indented by 2 (``pretty``) or on one line for the loop's
    one-document-a-poll stream. The standard library's indented dump made millions of small writes (about 13 s
    at 20,000 partitions); NaN, which no record should hold, becomes null rather than invalid JSON."""
    option = orjson.OPT_APPEND_NEWLINE | orjson.OPT_NON_STR_KEYS | (orjson.OPT_INDENT_2 if pretty else 0)
    out.write(orjson.dumps(document(results, now), option=option, default=str))
    out.flush()


class PollGc:
    """Keeps Python's cyclic garbage collector out of a poll's way.

    A poll of a big cluster allocates millions of short-lived objects while the collector holds millions of
    long-lived ones (log-end histories, commit windows, the last snapshot). Left alone, the cyclic collector
    runs full collections over all of them several times a poll: 3.7 s of a 8.8 s poll of 100,000 partitions
    (`bench.bench_poll_cpu`). Reference counting frees nearly everything a poll drops; the cyclic collector is
    only needed for cycles. So: no automatic collection during a poll; after it, one collection of what is not
    frozen, then everything still alive is frozen (moved where collections do not look, `gc.freeze`). Every
    `unfreeze_every` polls, everything is unfrozen and collected once, so cycles that became garbage after being
    frozen are reclaimed within that many polls."""

    def __init__(self, unfreeze_every: int = 20) -> None:
        self.unfreeze_every = unfreeze_every
        self.polls = 0

    @contextlib.contextmanager
    def poll(self) -> Iterator[None]:
        was_enabled = gc.isenabled()
        gc.disable()
        try:
            yield
        finally:
            self.polls += 1
            if self.polls % self.unfreeze_every == 0:
                gc.unfreeze()
            gc.collect()
            gc.freeze()
            if was_enabled:
                gc.enable()


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


def quiet_stdout() -> None:
    """Point stdout at /dev/null once its reader has gone (``| head``): the bytes still buffered are then flushed
    there at exit, rather than failing again and printing "Exception ignored ... BrokenPipeError" (the recipe of
    Python's `signal` documentation, "Note on SIGPIPE")."""
    with contextlib.suppress(OSError, ValueError):  # a stdout with no file behind it (captured): nothing to do
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, sys.stdout.fileno())
        finally:
            os.close(devnull)


def _print_document(results: list[PollResult], now: float) -> bool:
    """The poll's line of ``--json`` on stdout; False when its reader has gone: nobody wants more."""
    try:
        write_document(results, now, sys.stdout.buffer, pretty=False)
    except BrokenPipeError:
        log.info("stdout closed by its reader: stopping")
        quiet_stdout()
        return False
    return True


def run_loop(monitor: Monitor, interval_s: float, sinks: list[Sink], stop: threading.Event,
             clock: Callable[[], float] = time.time, as_json: bool = False) -> None:
    """Poll every `interval_s` until `stop` is set (or, with `as_json`, stdout's reader goes away); outputs failing
    never stop the polling. However the loop ends, the outputs are closed (the history flushed, the checkpoint
    saved)."""
    collector_gc = PollGc()
    try:
        while not stop.is_set():
            started = time.monotonic()
            now = clock()
            try:
                with collector_gc.poll():
                    results = monitor.poll_once(now)
            except Exception:  # each cluster's failure is its own result (`Monitor.poll_once`): this is a bug of ours
                log.exception("poll failed")
                results = []
            for r in results:
                _log_changes(r.snapshot.cluster, r.opened, r.resolved)
            for sink in sinks:
                try:
                    sink(results, now)
                except Exception:
                    log.exception("output %s failed", type(sink).__name__)
            if as_json and not _print_document(results, now):
                break
            stop.wait(max(0.0, interval_s - (time.monotonic() - started)))
    finally:
        for sink in sinks:
            close = getattr(sink, "close", None)
            if close is not None:
                try:
                    close()
                except Exception:
                    log.exception("closing output %s failed", type(sink).__name__)
