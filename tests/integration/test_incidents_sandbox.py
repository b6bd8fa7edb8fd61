"""One broker crash on the sandbox is one incident whose blast radius is what the cluster really shows.

The sandbox is ground truth: after the crash, with simulated time frozen, the partitions that have the
dead broker among their replicas and their classes (offline, under / at min ISR) are read from its model
and compared with the incident the collector opened from what it saw over TCP.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from collectors.model.poll import PollResult
from collectors.model.records import IncidentRecord
from sandbox.model import Cluster
from sandbox.runner import Sandbox
from tests.support.monitor import make_poller, poll, poll_until
from tests.support.sandbox import TEST_CLUSTER, frozen, running_sandbox, scenario

pytestmark = pytest.mark.integration

DEAD = 2


@pytest.fixture(scope="module")
def sb() -> Iterator[Sandbox]:
    cluster: dict[str, Any] = {**TEST_CLUSTER, "topics": [
        *TEST_CLUSTER["topics"],
        {"name": "risky", "partitions": 4, "replication_factor": 3, "produce_rate": 3,
         "configs": {"unclean.leader.election.enable": "true"}},
    ]}
    with running_sandbox(scenario(cluster), speed=10.0) as s:
        s.advance_to(s.cluster.start + 10)
        yield s


def _truth(c: Cluster) -> dict[str, Any]:
    hit = [p for t in c.topics.values() for p in t.partitions if DEAD in p.replicas]  # internal topics too
    classes: Counter[str] = Counter()
    for p in hit:
        isr, mi = len(p.isr), c.min_isr(p.topic)
        if not p.online:
            classes["offline"] += 1
        elif isr < mi:
            classes["under_min_isr"] += 1
        elif isr == mi and len(p.replicas) > mi:
            classes["at_min_isr"] += 1
    topics = {p.topic for p in hit}
    return {"partitions": len(hit), "topics": len(topics), **classes,
            "unclean": sum(1 for t in topics if c.unclean_allowed(t))}


def test_a_broker_crash_is_one_incident_with_the_real_blast_radius(sb: Sandbox) -> None:
    poller = make_poller(sb)
    try:
        first = poll(poller, sb)
        assert first.snapshot.incidents == [] and first.incident_events == []
        sb.call(lambda c: c.crash_broker(DEAD))
        r = poll_until(poller, sb, lambda r: any(i.kind == "broker" and i.offline for i in r.snapshot.incidents)
                       and any(a.rule == "at_min_isr" for a in r.snapshot.alerts))
        with frozen(sb):
            r = poll(poller, sb)
            truth = sb.call(_truth)
        broker = [i for i in r.snapshot.incidents if i.kind == "broker"]
        assert len(broker) == 1, r.snapshot.incidents
        inc = broker[0]
        assert inc.subject == f"broker {DEAD}" and inc.brokers == [DEAD] and inc.severity == "critical"
        assert (inc.partitions, inc.topics) == (truth["partitions"], truth["topics"])
        assert (inc.offline, inc.under_min_isr, inc.at_min_isr) == (
            truth.get("offline", 0), truth.get("under_min_isr", 0), truth.get("at_min_isr", 0))
        assert inc.offline > 0 and inc.at_min_isr > 0  # the RF-1 topic lost partitions, the RF-3 ones a replica
        assert inc.unclean_topics == truth["unclean"] == 1
        # every partition-level alert is inside the broker incident; nothing else is a cause of its own
        partition_rules = {"offline_partition", "under_min_isr", "at_min_isr", "under_replicated", "isr_flapping"}
        symptoms = sum(1 for a in r.snapshot.alerts if a.rule in partition_rules)
        assert sum(n for rule, n in inc.members.items() if rule in partition_rules) == symptoms > 0
        assert len(r.snapshot.incidents) <= 3, [(i.kind, i.subject) for i in r.snapshot.incidents]
        ids = {i.id for i in r.snapshot.incidents}
        # the incident keeps its id while the broker stays down, and resolves once when it is back
        sb.call(lambda c: c.restart_broker(DEAD))
        done = poll_until(poller, sb, lambda r: not any(i.kind == "broker" for i in r.snapshot.incidents),
                          timeout=60)
        assert inc.id in ids
        assert not any(e.event == "opened" and e.incident.kind == "broker" for e in done.incident_events)
    finally:
        poller.close()


def test_a_growing_outage_is_in_the_report_at_its_peak(sb: Sandbox, tmp_path: Path) -> None:
    """Broker 3 crashes, then broker 2; 2 comes back first, then 3: one incident, whose two brokers and peak the
    weekly report must show. The report reads incidents from the history's events alone. Before the tracker
    recorded growth, the events were "opened" (broker 3) and "resolved" (broker 3 again): the report's incident
    held broker 3 only, and the partitions of one broker down, not two.

    Ground truth: the incident as the collector saw it at every poll (its blast radius against the sandbox's
    model is the test above); the report's row comes from the real history through the real Spark aggregation.
    """
    from collectors.outputs.history import HistoryWriter
    from spark_analytics import aggregations as A
    from spark_analytics import io
    from spark_analytics.period import Period
    from tests.support.spark_history import spark_session

    poller = make_poller(sb)
    writer = HistoryWriter(tmp_path, retention_days=None)
    seen: list[dict[str, Any]] = []  # the broker incident at every poll (values: the records live on)

    def until(done: Callable[[IncidentRecord | None], bool]) -> None:
        def record(r: PollResult) -> bool:
            writer.add(r)
            inc = next((i for i in r.snapshot.incidents if i.kind == "broker"), None)
            if inc is not None:
                seen.append({"id": inc.id, "time": r.snapshot.time, "brokers": list(inc.brokers),
                             **{f: getattr(inc, f) or 0 for f in ("partitions", "offline", "under_min_isr", "alerts")}})
            return done(inc)

        poll_until(poller, sb, record, timeout=60)

    try:
        until(lambda inc: inc is None)
        sb.call(lambda c: c.crash_broker(3))
        until(lambda inc: inc is not None and inc.brokers == [3] and bool(inc.offline))
        sb.call(lambda c: c.crash_broker(2))
        until(lambda inc: inc is not None and inc.brokers == [2, 3] and bool(inc.under_min_isr))
        for _ in range(3):  # the controller's fencing settles over a few polls
            until(lambda inc: True)
        sb.call(lambda c: c.restart_broker(2))
        until(lambda inc: inc is not None and inc.brokers == [3])
        sb.call(lambda c: c.restart_broker(3))
        until(lambda inc: inc is None)
    finally:
        poller.close()
        sb.call(lambda c: [c.restart_broker(b) for b in (2, 3)])  # no-ops when they are up
    assert writer.flush()
    assert len({i["id"] for i in seen}) == 1  # one cause throughout
    assert {b for i in seen for b in i["brokers"]} == {2, 3}
    peak = {f: max(i[f] for i in seen) for f in ("partitions", "offline", "under_min_isr", "alerts")}

    spark = spark_session()
    times = [i["time"] for i in seen]
    period = Period(min(times) - 60, max(times) + 3600, "sandbox")
    events = io.read_table(spark, str(tmp_path), "incident_events", period.start, period.end).df
    polls = A.poll_intervals(io.read_table(spark, str(tmp_path), "cluster", period.start, period.end).df, period)
    (row,) = [r.asDict() for r in A.incidents(events, polls, period).collect() if r["kind"] == "broker"]
    assert row["status"] == "resolved" and row["brokers"] == [2, 3]
    for f, most in peak.items():  # the report's "most at once": within the tracker's 10 % of the real peak
        assert most > 0 and most / 1.1 <= row[f] <= most, (f, row[f], most)


def test_a_collector_restarted_without_its_memory_leaves_no_incident_open_for_good(sb: Sandbox,
                                                                                   tmp_path: Path) -> None:
    """Broker 3 crashes; the collector that saw it stops and a new one that cannot carry its incident on opens its
    own for the same broker, which resolves when 3 is back. The collector carries a recorded incident on when the
    last one wrote the history within `checkpoint_max_age_s` (`HistorySink._take_over`, tested in test_faults.py);
    past that, or for history written some other way (here: bare pollers and a plain writer), the first incident
    is never resolved in the history. Before, the report kept it open for good (open at the end, the longest
    incident); now it is superseded by the second, which is the one resolved."""
    from collectors.outputs.history import HistoryWriter
    from spark_analytics import aggregations as A
    from spark_analytics import io
    from spark_analytics.period import Period
    from tests.support.spark_history import spark_session

    writer = HistoryWriter(tmp_path, retention_days=None)
    ids: list[str] = []

    def until(poller: Any, done: Callable[[IncidentRecord | None], bool]) -> float:
        def record(r: PollResult) -> bool:
            writer.add(r)
            inc = next((i for i in r.snapshot.incidents if i.kind == "broker"), None)
            if inc is not None and inc.id not in ids:
                ids.append(inc.id)
            return done(inc)

        return poll_until(poller, sb, record, timeout=60).snapshot.time

    first, second = make_poller(sb), None
    try:
        start = until(first, lambda inc: inc is None)
        sb.call(lambda c: c.crash_broker(3))
        until(first, lambda inc: inc is not None and inc.brokers == [3])
        first.close()  # gone, with its memory
        second = make_poller(sb)
        until(second, lambda inc: inc is not None and inc.brokers == [3])
        sb.call(lambda c: c.restart_broker(3))
        end = until(second, lambda inc: inc is None)
    finally:
        first.close()
        if second is not None:
            second.close()
        sb.call(lambda c: c.restart_broker(3))  # a no-op when it is up
    assert writer.flush()
    assert len(ids) == 2  # what happened: the second collector could not know the first one's incident

    spark = spark_session()
    period = Period(start - 60, end + 3600, "sandbox")
    events = io.read_table(spark, str(tmp_path), "incident_events", period.start, period.end).df
    polls = A.poll_intervals(io.read_table(spark, str(tmp_path), "cluster", period.start, period.end).df, period)
    rows = {r["id"]: r.asDict() for r in A.incidents(events, polls, period).collect() if r["kind"] == "broker"}
    assert {i: rows[i]["status"] for i in ids} == {ids[0]: "superseded", ids[1]: "resolved"}
    assert rows[ids[0]]["open_for_s"] is None
    (broker,) = [r.asDict() for r in A.incident_kinds(A.incidents(events, polls, period)).collect()
                 if r["kind"] == "broker"]
    assert (broker["opened"], broker["open_at_end"], broker["resolved"]) == (2, 0, 1)
