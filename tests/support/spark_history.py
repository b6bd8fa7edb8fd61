"""Support for the Spark report tests: one shared SparkSession, hand-made frames, and a history with known incidents.

`spark_session()` builds one local session per test process (JVM start-up costs ~10 s) and every Spark test
module's session-scoped fixture returns it. `frame()` turns a few dicts into a DataFrame with a history
table's exact schema. `build_history()` runs the REAL collector against the sandbox through a timeline of
incidents whose lengths are known, on the sandbox's simulated clock, and writes the Parquet history with
the real `HistoryWriter` (recording the collector's thresholds, as the collector's history sink does: a lag
SLO of `LAG_SLO_S`, the report must read it from there); it returns what the incidents did according to the
model's own event log and to the poll results (alerts, and the incidents the collector correlated them into), so
the report's figures can be checked against both.
"""

from __future__ import annotations

import atexit
import os
import re
import threading
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

_SPARK: Any = None


def spark_session() -> Any:
    """The test process's one local SparkSession (2 cores, driver on 127.0.0.1, no UI)."""
    global _SPARK
    if _SPARK is None:
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        from spark_analytics.session import build_session

        # Tiny inputs: whole-stage code generation costs more than it saves (about half of each small job).
        _SPARK = build_session("local[2]", app_name="kmon-tests", conf={
            "spark.sql.shuffle.partitions": "4", "spark.sql.codegen.wholeStage": "false"})
        atexit.register(_stop)
    return _SPARK


def _stop() -> None:
    global _SPARK
    if _SPARK is not None:
        _SPARK.stop()
        _SPARK = None


def frame(spark: Any, table: str, rows: list[dict[str, Any]], cluster: str = "c1") -> Any:
    """A DataFrame with `table`'s history schema; unspecified columns are null, ``cluster`` defaults to c1."""
    from pyspark.sql.types import DoubleType

    from spark_analytics.io import spark_schema

    schema = spark_schema(table)
    floats = {f.name for f in schema.fields if isinstance(f.dataType, DoubleType)}

    def value(r: dict[str, Any], name: str) -> Any:
        v = r.get(name)
        return float(v) if name in floats and isinstance(v, int) else v

    data = [tuple(value({"cluster": cluster, "schema_version": 1, **r}, f.name) for f in schema.fields)
            for r in rows]
    return spark.createDataFrame(data, schema)


def headline_rows(spark: Any, tables: dict[str, Any], period: Any) -> list[dict[str, Any]]:
    """The headline figures of `period` computed the way the CLI does (tables collected, then combined)."""
    from spark_analytics.aggregations import Options
    from spark_analytics.weekly_report import collect_week, headline_table

    return headline_table(collect_week(spark, tables, period, Options())).to_pylist()


def empty_tables(spark: Any) -> dict[str, Any]:
    from spark_analytics.io import REPORT_TABLES, empty_frame

    return {t: empty_frame(spark, t) for t in REPORT_TABLES}


# ----------------------------------------------------------------------------------------------- sandbox history

TX_TIMEOUT_MS = 60_000
CRASH_AT, CRASH_FOR = 20.0, 120.0  # brokers 2 and 3: orders (RF 3, min ISR 2) goes under min ISR
HANGING_AT, HANGING_FOR = 200.0, 40.0
ZK_KILLS_AT = (175.0, 245.0)  # simulated seconds after start; each kill is restarted 15 s later
ZK_RESTART_AFTER = 15.0
RESTARTS_AT = (280.0, 290.0)  # producer "tx" restarts: two epoch bumps
STALL_AT, STALL_FOR = 255.0, 60.0  # group billing stalls: lag seconds grow past a 30 s SLO
CLUSTER = "sandbox eu-ü"  # a space and a non-ASCII letter: the report's directory is its safe_name, not the name
LAG_SLO_S = 30.0  # the collector's lag_seconds_slo: billing's 60 s stall goes past it


def spark_cluster() -> dict[str, Any]:
    from tests.support.sandbox import TEST_CLUSTER

    c = dict(TEST_CLUSTER)
    c["transactional_producers"] = [
        *TEST_CLUSTER["transactional_producers"],
        # A long transaction on the RF 1 topic: when broker 2 dies, single-1 goes offline, the producer aborts and
        # the abort markers cannot be written until broker 2 is back: the transaction stays open past its timeout.
        {"transactional_id": "tx-single", "topics": ["single"], "timeout_ms": TX_TIMEOUT_MS,
         "transaction_duration_s": 40}]
    return c


INCIDENTS: list[dict[str, Any]] = [
    {"type": "broker_crash", "at": CRASH_AT, "duration": CRASH_FOR, "broker": 2},
    {"type": "broker_crash", "at": CRASH_AT, "duration": CRASH_FOR, "broker": 3},
    {"type": "hanging_transaction", "at": HANGING_AT, "duration": HANGING_FOR, "topic": "orders", "partition": 1},
    {"type": "consumer_stall", "at": STALL_AT, "duration": STALL_FOR, "group": "billing"},
    *({"type": "producer_restart", "at": t, "transactional_id": "tx"} for t in RESTARTS_AT),
]


@dataclass
class HistoryRun:
    root: Path
    cluster: str
    start: float  # sb.cluster.start (simulated epoch seconds)
    end: float
    poll_every: float
    polls: int = 0
    poll_times: list[float] = field(default_factory=list)
    events: list[tuple[int, float, str]] = field(default_factory=list)  # the model's event log
    zk_kills: list[tuple[float, int]] = field(default_factory=list)  # (simulated time, killed sid)
    # per kill, the simulated time by which a new leader served with its new epoch's zxid (the ensemble's own
    # answers, watched beside the polls): how long the election took depends on the machine, not on the collector
    zk_quorum_back: list[float] = field(default_factory=list)
    opened: list[tuple[str, str, float]] = field(default_factory=list)  # (rule, subject, first_seen)
    resolved: list[tuple[str, str, float, float]] = field(default_factory=list)
    # the collector's incident events: (time, event, id, kind, severity, opened, resolved_at)
    incident_events: list[tuple[float, str, str, str, str, float, float | None]] = field(default_factory=list)
    thresholds: dict[str, Any] = field(default_factory=dict)  # what the collector ran with (and recorded)
    # per poll: under-min-ISR partitions of "orders" as the collector saw them
    orders_under_min_isr: list[tuple[float, int]] = field(default_factory=list)
    txn_max_age: dict[tuple[str, float], tuple[float, int]] = field(default_factory=dict)  # -> (age, timeout)
    hanging: set[tuple[str, int, int]] = field(default_factory=set)
    txn_epochs: dict[str, list[tuple[float, int, int]]] = field(default_factory=lambda: defaultdict(list))
    zk_epochs: list[tuple[float, int | None]] = field(default_factory=list)  # max serving epoch per poll
    zk_serving: list[tuple[float, int, int]] = field(default_factory=list)  # (time, serving, servers) per poll
    lag_seconds: dict[tuple[str, str], list[float | None]] = field(default_factory=lambda: defaultdict(list))
    real_seconds: float = 0.0
    losses: list[tuple[str, str, int | None, float]] = field(default_factory=list)  # (kind, subject, messages, time)


WEEK_SLACK_S = 600.0
"""Simulated seconds a run may go past its planned end (the last flush, a slow machine's last poll)."""


def one_week_start(now: float, sim_seconds: float) -> float | None:
    """Where a run of `sim_seconds` starting `now` should start its simulated clock so that it ends in the ISO week
    it begins: None (now) unless it would cross into the next week, else early enough before it. The report tests
    read the week containing the run's start and hold it to the whole run's ground truth; a run started at 23:55 on
    a Sunday (UTC) put its last incidents in the next week, and six tests failed."""
    from spark_analytics.period import Period

    week_end = Period.containing(now).end
    return None if now + sim_seconds + WEEK_SLACK_S < week_end else week_end - sim_seconds - WEEK_SLACK_S


def build_history(root: Path, sim_seconds: float = 330.0, poll_every: float = 10.0, speed: float = 10.0) -> HistoryRun:
    """Run sandbox (with a real ZooKeeper ensemble) + collector through `INCIDENTS` and the ZooKeeper kills.

    Polls happen on a fixed simulated schedule (start + k x `poll_every`), each written to the history with
    ``HistoryWriter(root, flush_interval_s=0)``; the writer is flushed every few polls and at the end.
    """
    from collectors.outputs.history import HistoryWriter
    from collectors.runtime.poller import ClusterPoller
    from collectors.sources.zk_fourletter import split_zxid
    from tests.support.monitor import monitor_config
    from tests.support.sandbox import running_sandbox, scenario

    started = time.monotonic()
    sc = scenario(spark_cluster(), INCIDENTS)
    with running_sandbox(sc, speed=speed, zookeeper=True, start=one_week_start(time.time(), sim_seconds)) as sb:
        t0 = sb.cluster.start
        run = HistoryRun(Path(root), CLUSTER, t0, t0 + sim_seconds, poll_every)
        cfg = monitor_config(sb, name=CLUSTER, lag_seconds_slo=LAG_SLO_S)
        run.thresholds = cfg.thresholds.model_dump(mode="json")
        poller = ClusterPoller(cfg.clusters[0], cfg)
        writer = HistoryWriter(Path(root), flush_interval_s=0, retention_days=None,
                               thresholds=cfg.thresholds.model_dump_json())
        kills = list(ZK_KILLS_AT)
        restart: tuple[float, int] | None = None
        watcher: threading.Thread | None = None
        watch_failed: list[BaseException] = []

        def watch_quorum(epoch_before: int) -> None:
            # a new leader answers as leader a moment before it sets its epoch's zxid, and the collector counts the
            # election by that epoch: back once both hold
            try:
                deadline = time.monotonic() + 60
                while True:
                    stats = sb.ensemble.wait_for_quorum(timeout=max(1.0, deadline - time.monotonic()))
                    if any(st["mode"] == "leader" and split_zxid(st["zxid"])[0] > epoch_before
                           for st in stats.values()):  # the leader's epoch, as the collector counts
                        run.zk_quorum_back.append(sb.clock.now())
                        return
                    if time.monotonic() >= deadline:
                        raise TimeoutError(f"no leader of an epoch above {epoch_before} within 60s")
                    time.sleep(0.02)
            except BaseException as e:  # raised in the building thread, at the join
                watch_failed.append(e)

        def join_watcher() -> None:
            if watcher is not None:
                watcher.join()  # it bounds itself (60 s), then records a time or a failure
            if watch_failed:
                raise RuntimeError("the ZooKeeper quorum watch failed") from watch_failed[0]
        try:
            k = 1
            while t0 + k * poll_every <= run.end:
                due = t0 + k * poll_every
                k += 1
                if kills and due - t0 >= kills[0]:
                    kills.pop(0)
                    sb.advance_to(due - poll_every / 2)
                    epoch_before = max(split_zxid(st["zxid"])[0] for st in sb.ensemble.wait_for_quorum().values())
                    sid = sb.ensemble.kill_leader()
                    run.zk_kills.append((sb.clock.now(), sid))
                    restart = (sb.clock.now() + ZK_RESTART_AFTER, sid)
                    watcher = threading.Thread(target=watch_quorum, args=(epoch_before,), name="zk-quorum-watch",
                                               daemon=True)
                    watcher.start()
                if restart is not None and due >= restart[0]:
                    join_watcher()  # the two survivors' quorum first (a slow machine's election may be long)
                    sb.ensemble.start_node(restart[1])
                    restart = None
                sb.advance_to(due)
                result = poller.poll(sb.clock.now())
                writer.add(result)
                _observe(run, result)
                if run.polls % 6 == 0:
                    writer.flush()
            if restart is not None:
                join_watcher()
                sb.ensemble.start_node(restart[1])
            run.events = sb.call(lambda c: list(c.events))
        finally:
            writer.close()
            poller.close()
    if writer.last_error:
        raise RuntimeError(f"history flush failed: {writer.last_error}")
    run.real_seconds = time.monotonic() - started
    return run


def _observe(run: HistoryRun, result: Any) -> None:
    s = result.snapshot
    run.cluster = s.cluster
    run.polls += 1
    run.poll_times.append(s.time)
    run.opened += [(a.rule, a.subject, a.first_seen) for a in result.opened]
    run.resolved += [(a.rule, a.subject, a.first_seen, a.resolved_at) for a in result.resolved]
    run.incident_events += [(e.time, e.event, e.incident.id, e.incident.kind, e.incident.severity, e.incident.opened,
                             e.incident.resolved_at) for e in result.incident_events]
    run.losses += [(x.kind, x.subject, x.messages, x.time) for x in s.losses]
    run.orders_under_min_isr.append((s.time, sum(t.under_min_isr for t in s.topics if t.topic == "orders")))
    for t in s.transactions:
        if t.start_time is not None and t.age_seconds is not None:
            key = (t.transactional_id, t.start_time)
            age, _ = run.txn_max_age.get(key, (0.0, t.timeout_ms))
            run.txn_max_age[key] = (max(age, t.age_seconds), t.timeout_ms)
            run.txn_epochs[t.transactional_id].append((s.time, t.producer_id, t.producer_epoch))
    run.hanging |= {(p.topic, p.partition, p.producer_id) for p in s.producers if p.hanging}
    epochs = [z.zxid_epoch for z in s.zookeeper if z.serving and z.zxid]
    run.zk_epochs.append((s.time, max(epochs) if epochs else None))
    if s.zookeeper:
        run.zk_serving.append((s.time, sum(z.serving for z in s.zookeeper), len(s.zookeeper)))
    for g in s.groups:
        for topic in g.topics:
            run.lag_seconds[(g.group_id, topic)].append(g.lag_seconds_max)


def under_min_isr_window(events: list[tuple[int, float, str]],
                         brokers: tuple[int, ...] = (2, 3)) -> tuple[float, float]:
    """From the model's event log: when "orders" (RF 3 over brokers 1-3, min ISR 2) was under min ISR.

    With brokers 2 and 3 crashed together, every orders ISR drops to [1] when the controller fences the second
    of them (session expiry, logged "broker N fenced"), and is back to two members when the first of them
    rejoins after its restart (logged "broker N rejoined the ISR of ..." — or "ISR expand ...: N joined" in the
    model's older wording; "broker N restarted" if neither is logged).
    """
    fenced = [t for _, t, w in events for n in brokers if w.startswith(f"broker {n} fenced")]
    restarted = [t for _, t, w in events for n in brokers if w.startswith(f"broker {n} restarted")]
    if len(fenced) < len(brokers) or not restarted:
        raise AssertionError(f"the event log does not show brokers {brokers} fenced and restarted: {events}")
    start = max(fenced)
    back = min(restarted)
    rejoined = [t for _, t, w in events if t >= back and any(
        w.startswith(f"broker {n} rejoined") or re.search(rf"^ISR expand orders-\d+: {n} joined", w) for n in brokers)]
    return start, (min(rejoined) if rejoined else back)


def event_time(events: list[tuple[int, float, str]], text: str) -> float:
    return next(t for _, t, what in events if text in what)
