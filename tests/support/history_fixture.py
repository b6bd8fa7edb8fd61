"""A realistic dashboard data dir, made by a REAL collector polling the sandbox through a scripted incident timeline.

`build_data_dir(root)` starts the sandbox (with a real ZooKeeper ensemble by default), polls it with the real
`ClusterPoller` on the sandbox's simulated clock, writes every poll to the Parquet history with the real
`HistoryWriter` and the latest snapshot with `write_latest`, exactly as the collector's sinks do, and stops
everything. Layout under `root`::

    state/<cluster>.json   latest snapshot (snapshot_to_dict + written_at)
    history/<table>/date=YYYY-MM-DD/part-*.parquet
    reports/               empty (the weekly Spark job writes there; tests add what they need)

The default timeline (simulated seconds after the sandbox clock starts; the real ZooKeeper ensemble takes a
couple of real seconds, i.e. ~40 simulated seconds at x20, to come up before the first poll) runs ~330
simulated seconds, about 20 s of real time, and leaves both finished and still-open incidents in the data,
so a dashboard has something to show on every page:

- broker 3 crashes at 60 s and comes back at 120 s (resolved alerts in ``alert_events``),
- group ``billing`` stalls at 70 s and stays stalled (``consumer_lag_status`` open at the end),
- a hanging transaction is injected on ``orders-1`` at 90 s and stays (``hanging_transaction``, LSO gap),
- the ZooKeeper leader is killed at 160 s for 20 s (a zxid epoch change in ``consensus``),
- broker 2 crashes at 250 s and stays down (``broker_down``, the ``single`` partition it holds offline,
  ``orders`` under-replicated).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

DEFAULT_INCIDENTS: list[dict[str, Any]] = [
    {"type": "broker_crash", "at": 60, "duration": 60, "broker": 3},
    {"type": "consumer_stall", "at": 70, "group": "billing"},
    {"type": "hanging_transaction", "at": 90, "topic": "orders", "partition": 1},
    {"type": "zk_leader_kill", "at": 160, "duration": 20},
    {"type": "broker_crash", "at": 250, "broker": 2},
]


@dataclass
class DataDir:
    root: Path
    state_dir: Path
    history_dir: Path
    reports_dir: Path
    cluster: str
    polls: int = 0
    real_seconds: float = 0.0
    final_alerts: list[tuple[str, str]] = field(default_factory=list)  # (rule, subject) open at the end
    seen_alerts: set[tuple[str, str]] = field(default_factory=set)  # every (rule, subject) ever open
    last_snapshot: dict[str, Any] = field(default_factory=dict)


def build_data_dir(root: Path, *, incidents: list[dict[str, Any]] | None = None, sim_seconds: float = 330.0,
                   speed: float = 20.0, zookeeper: bool = True, poll_every_s: float = 5.0, flush_every: int = 8,
                   cluster: dict[str, Any] | None = None) -> DataDir:
    """Run sandbox + collector through `incidents` and leave the state and history under `root`."""
    from collectors.model.records import snapshot_to_dict
    from collectors.outputs.history import HistoryWriter
    from collectors.outputs.latest_state import write_latest
    from tests.support.monitor import make_poller
    from tests.support.sandbox import running_sandbox, scenario

    root = Path(root)
    out = DataDir(root, root / "state", root / "history", root / "reports", "sandbox")
    for d in (out.state_dir, out.history_dir, out.reports_dir):
        d.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    sc = scenario(cluster, incidents if incidents is not None else DEFAULT_INCIDENTS)
    with running_sandbox(sc, speed=speed, zookeeper=zookeeper) as sb:
        poller = make_poller(sb)
        writer = HistoryWriter(out.history_dir, flush_interval_s=0, retention_days=None)
        try:
            t0 = sb.cluster.start
            end = t0 + sim_seconds
            next_poll = sb.clock.now()
            while True:
                now = sb.clock.now()
                if now >= end:
                    break
                if now < next_poll:
                    time.sleep(sb.clock.real_seconds(next_poll - now))
                    continue
                next_poll = now + poll_every_s
                result = poller.poll(now)
                writer.add(result)
                snap = result.snapshot
                doc = snapshot_to_dict(snap)
                write_latest(out.state_dir, doc)
                out.cluster = snap.cluster
                out.polls += 1
                out.seen_alerts |= {(a.rule, a.subject) for a in snap.alerts}
                out.final_alerts = [(a.rule, a.subject) for a in snap.alerts]
                out.last_snapshot = doc
                if out.polls % flush_every == 0:
                    writer.flush()
        finally:
            writer.close()
            poller.close()
    if writer.last_error:
        raise RuntimeError(f"history flush failed: {writer.last_error}")
    out.real_seconds = time.monotonic() - started
    return out


def broker_incident_snapshot(now: float | None = None, cluster: str = "inc") -> Any:
    """A small `ClusterSnapshot` with a broker incident and its neighbours, made by the real correlation and
    incident tracker from hand-made alerts (for the dashboard's unit and AppTest tests; no sandbox):

    - broker 3 is down: ``orders`` (RF 3 on 1-2-3, min ISR 2) has its 3 partitions at min ISR and
      under-replicated, ``single-0`` (RF 1 on broker 3) is offline — all members of the broker incident;
    - group ``billing`` is stuck on ``single-0`` only: a consequence of the broker incident;
    - ``slow-0`` (replicas 1-2-4, ISR 1-2) is under-replicated with no broker down among its replicas: a topic
      incident; group ``late`` lags on ``orders``, whose leaders are up: a group incident of its own;
    - ``unsafe_durability`` on ``single`` is a risk: never an incident.
    """
    from collectors.alerting.correlation import correlate
    from collectors.alerting.incidents import IncidentTracker
    from collectors.model.records import (
        AlertRecord,
        BrokerRecord,
        ClusterSnapshot,
        GroupPartitionRecord,
        PartitionRecord,
        TopicRecord,
    )

    t = time.time() if now is None else now
    opened = t - 600

    def alert(rule: str, severity: str, subject: str, summary: str) -> AlertRecord:
        return AlertRecord(rule, severity, cluster, subject, summary, opened, t)

    parts = [PartitionRecord(cluster, "orders", p, 1, 4, [1, 2, 3], [1, 2], [3], 2) for p in range(3)]
    parts.append(PartitionRecord(cluster, "single", 0, -1, 2, [3], [], [3], 1))
    parts.append(PartitionRecord(cluster, "slow", 0, 1, 1, [1, 2, 4], [1, 2], [], 2))
    snap = ClusterSnapshot(
        cluster=cluster, time=t, mode="kraft", controller_id=1,
        brokers=[BrokerRecord(cluster, i, "127.0.0.1", 9090 + i, reachable=i != 3, alive=i != 3) for i in (1, 2, 3, 4)],
        topics=[TopicRecord(cluster, "orders", False, 3, 3, 2, False, 86_400_000, "delete", under_replicated=3,
                            at_min_isr=3),
                TopicRecord(cluster, "single", False, 1, 1, 1, False, 86_400_000, "delete", offline=1),
                TopicRecord(cluster, "slow", False, 1, 3, 2, False, 86_400_000, "delete", under_replicated=1,
                            at_min_isr=1)],
        partitions=parts,
        group_partitions=[
            GroupPartitionRecord(cluster, "billing", "single", 0, 10, 0, 50, 50, 40, None, status="STALL"),
            GroupPartitionRecord(cluster, "late", "orders", 1, 10, 0, 5000, 5000, 4990, 900.0, status="WARN")])
    alerts = [alert("broker_down", "critical", "broker-3", "broker 3 is down (not registered)")]
    for p in range(3):
        alerts.append(alert("at_min_isr", "warning", f"orders-{p}", f"orders-{p} ISR at min.insync.replicas (2)"))
        alerts.append(alert("under_replicated", "warning", f"orders-{p}", f"orders-{p} ISR 2 of 3"))
    alerts += [alert("offline_partition", "critical", "single-0", "single-0 has no leader"),
               alert("under_replicated", "warning", "slow-0", "slow-0 ISR 2 of 3"),
               alert("consumer_lag_status", "critical", "billing", "billing is STALL on single-0"),
               alert("consumer_lag_status", "warning", "late", "late is WARN: lag growing"),
               alert("unsafe_durability", "warning", "single", "single has RF 1: one broker loss loses data")]
    snap.alerts = alerts
    snap.incidents, _ = IncidentTracker().update(cluster, correlate(snap, alerts), t)
    return snap


def main() -> None:  # pragma: no cover - a manual helper: python -m tests.support.history_fixture DIR
    import sys

    d = build_data_dir(Path(sys.argv[1] if len(sys.argv) > 1 else "data/fixture"))
    print(f"{d.polls} polls in {d.real_seconds:.1f}s real; open alerts at the end: {sorted(d.final_alerts)}")
    print(f"seen: {sorted(d.seen_alerts)}")


if __name__ == "__main__":  # pragma: no cover
    main()
