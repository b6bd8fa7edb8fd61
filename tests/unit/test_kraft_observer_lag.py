"""A broker whose metadata lags the KRaft quorum (`kraft_observer_lagging`).

A broker is an observer of the metadata log: DescribeQuorum gives, on the leader's clock, when it last caught up.
One that last caught up more than `kraft_observer_lag_s` (30 s) before the freshest fetch answers clients with
metadata that old. Judged on the leader's clock on both sides (never the monitor's), only for brokers up and
answering (a broker down stays among the leader's observers for minutes), and never without a leader or times.
The sandbox's `metadata_lag` incident stops a KRaft broker's fetch, as DescribeQuorum then shows.
"""

from __future__ import annotations

from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from collectors.alerting.catalogue import CONSENSUS_RULES, RISK_RULES, RULES, kept_over_stale
from collectors.alerting.correlation import correlate
from collectors.alerting.evaluation import judge
from collectors.alerting.lifecycle import AlertTracker
from collectors.alerting.rules import Candidate
from collectors.alerting.thresholds import Thresholds
from collectors.model.observations import KafkaObservation
from collectors.model.snapshot import build_snapshot
from collectors.model.state import ClusterState
from collectors.outputs.exporter import MetricsEndpoint
from sandbox.controller import KRAFT_OBSERVER_SESSION_S
from sandbox.handlers import Handlers
from tests.unit.test_kraft_quorum_health import replica
from tests.unit.test_sandbox_model import make, run

T0 = 1_800_000_000.0
TH = Thresholds()


def observed(t: float, caught_up_s: dict[int, float | None], leader_clock: float | None = None,
             unreachable: frozenset[int] = frozenset(), brokers: tuple[int, ...] = (1, 2, 3, 4, 5),
             leader: int = 1) -> KafkaObservation:
    """A poll at `t` (the monitor's clock): voters 1, 2, 3 caught up; observers node -> seconds before the leader's
    time they last caught up (None: -1, unknown). The leader's clock reads `leader_clock` (default `t`)."""
    now = t if leader_clock is None else leader_clock
    voters = [replica(i, 6000, now) for i in (1, 2, 3)]
    # a fetch that stopped: its last fetch and catch-up stay at the time it stopped, 2 records a second behind
    observers = [replica(node, 6000 - int(2 * (behind or 0)), None if behind is None else now - behind)
                 for node, behind in caught_up_s.items()]
    q: Any = {"leader_id": leader, "leader_epoch": 7, "high_watermark": 6000, "voters": voters,
              "observers": observers}
    obs = KafkaObservation(time=t, cluster_id="c", controller_id=1, quorum=q, kraft=True,
                           brokers=[(i, f"h{i}", 9092, None) for i in brokers])
    obs.unreachable_brokers |= set(unreachable)
    return obs


def judged(obs: KafkaObservation, st: ClusterState | None = None, th: Thresholds = TH) -> list[Candidate]:
    st = st or ClusterState()
    snap = build_snapshot("c", obs, None, st, th, obs.time, kraft=True)
    return [a for a in judge(snap, st, th, obs.time) if a.rule == "kraft_observer_lagging"]


def test_a_broker_caught_up_45s_before_the_leader_is_lagging_and_says_by_how_much() -> None:
    (a,) = judged(observed(T0, {4: 45.0, 5: 0.2}))
    assert (a.severity, a.subject) == ("warning", "broker-4")
    assert a.value == 45.0
    assert "broker 4's metadata (a KRaft observer) last caught up with the leader's log 45s before the leader's " \
           "latest time, 90 records behind the leader's log end offset 6000" in a.summary, a.summary


def test_the_threshold_is_strict_and_configurable() -> None:
    assert judged(observed(T0, {4: 30.0})) == []
    assert [a.subject for a in judged(observed(T0, {4: 31.0}))] == ["broker-4"]
    assert judged(observed(T0, {4: 31.0}), th=Thresholds(kraft_observer_lag_s=60)) == []


def test_the_leaders_clock_is_on_both_sides_not_the_monitors() -> None:
    """The monitor's clock 10 minutes ahead of the leader's: every observer's last catch-up looks 600 s old to the
    monitor; against the leader's own latest time they are current."""
    assert judged(observed(T0, {4: 0.3, 5: 0.2}, leader_clock=T0 - 600)) == []
    assert [a.value for a in judged(observed(T0, {4: 40.0}, leader_clock=T0 - 600))] == [40.0]


def test_a_broker_down_or_not_answering_is_not_also_lagging() -> None:
    """The leader keeps a broker that stopped fetching among its observers for minutes: that broker is
    `broker_down`'s (fenced, out of the metadata) or `broker_unreachable`'s, not a second alert."""
    assert judged(observed(T0, {4: 200.0}, brokers=(1, 2, 3, 5))) == []
    assert judged(observed(T0, {4: 200.0}, unreachable=frozenset({4}))) == []


def test_no_evidence_no_alert_unknown_times_or_no_leader() -> None:
    assert judged(observed(T0, {4: None})) == []  # Kafka before 3.3 answers -1
    assert judged(observed(T0, {4: 200.0}, leader=-1)) == []  # no leader: no log to be behind


def test_it_is_a_consensus_rule_with_its_twin_and_joins_the_consensus_incident() -> None:
    spec = RULES["kraft_observer_lagging"]
    assert spec.prometheus == ("KafkaKRaftObserverLagging",) and spec.subject == "broker"
    assert "kraft_observer_lagging" in CONSENSUS_RULES and "kraft_observer_lagging" not in RISK_RULES
    obs = observed(T0, {4: 45.0})
    st = ClusterState()
    snap = build_snapshot("c", obs, None, st, TH, obs.time, kraft=True)
    current, _, _ = AlertTracker().update("c", judge(snap, st, TH, obs.time), T0)
    snap.alerts = current
    (cause,) = correlate(snap, current)
    assert (cause.kind, cause.subject) == ("consensus", "kraft") and cause.members == {"kraft_observer_lagging": 1}


def test_a_broker_seen_lagging_stays_lagging_when_the_leader_stops_listing_it() -> None:
    """The leader drops an observer 5 minutes after its last fetch (and a new leader lists only those that fetched
    from it): the broker still stuck must not read as resolved. Before, it did at the poll it was dropped."""
    st = ClusterState()
    assert [a.subject for a in judged(observed(T0, {4: 40.0, 5: 0.2}), st)] == ["broker-4"]
    assert [a.subject for a in judged(observed(T0 + 270, {4: 310.0, 5: 0.2}), st)] == ["broker-4"]
    (gone,) = judged(observed(T0 + 300, {5: 0.2}), st)  # 4 up, answering, no longer listed
    assert (gone.subject, gone.value) == ("broker-4", None)
    assert "seen behind the leader's log 300s ago and the leader no longer lists it" in gone.summary, gone.summary
    assert judged(observed(T0 + 330, {4: 0.3, 5: 0.2}), st) == []  # it fetches again, caught up: resolved


def test_a_broker_never_seen_lagging_and_not_listed_is_not_judged() -> None:
    """During a ZooKeeper migration the brokers not yet moved to KRaft fetch nothing and are no observers; a
    monitor started after the leader dropped a stuck broker has no evidence either."""
    st = ClusterState()
    assert judged(observed(T0, {5: 0.2}), st) == [] and judged(observed(T0 + 60, {5: 0.2}), st) == []


def test_a_broker_listed_twice_is_its_freshest_entry() -> None:
    """Kafka keys an observer by node and metadata log directory: a broker back with a new directory is listed
    twice until the old entry expires. The old entry read as the broker lagging, and exported two series."""
    obs = observed(T0, {4: 120.0, 5: 0.2})
    obs.quorum["observers"].append(replica(4, 6000, T0 - 0.1))  # type: ignore[index]
    assert judged(obs) == []
    assert _ages(obs) == {("1", "leader"): 0.0, ("2", "voter"): 0.0, ("3", "voter"): 0.0, ("4", "observer"): 0.1,
                          ("5", "observer"): 0.2}


def _ages(obs: KafkaObservation) -> dict[tuple[str, str], float]:
    snap = build_snapshot("c", obs, None, ClusterState(), TH, obs.time, kraft=True)
    ep = MetricsEndpoint()
    ep.update([snap])
    found = [((x.labels["node"], x.labels["role"]), round(x.value, 3))
             for fam in text_string_to_metric_families(ep.render().decode()) for x in fam.samples
             if x.name == "kafka_kraft_voter_caught_up_age_seconds"]
    assert len(found) == len(dict(found)), found  # one series per node and role
    return dict(found)


def test_the_exported_age_is_on_the_leaders_clock_as_the_rule_reads_it() -> None:
    """The gauge the twin reads was the poll's time less the catch-up: the monitor's clock against the leader's,
    and DescribeQuorum answers seconds into the poll, so an age clamped at 0 for the leader and short for the
    rest. Now the leader's latest time less the catch-up."""
    assert _ages(observed(T0, {4: 33.0}, leader_clock=T0 + 4))[("4", "observer")] == 33.0  # answered 4 s in
    assert _ages(observed(T0, {4: 40.0}, leader_clock=T0 - 600)) == {
        ("1", "leader"): 0.0, ("2", "voter"): 0.0, ("3", "voter"): 0.0, ("4", "observer"): 40.0}


def test_a_lagging_alert_kept_over_a_stale_quorum_joins_its_brokers_outage() -> None:
    """Broker 4 lagging, then down while DescribeQuorum does not answer (its alert kept over the stale section):
    the broker is not also a consensus cause."""
    st, tracker = ClusterState(), AlertTracker()
    obs = observed(T0, {4: 45.0})
    snap = build_snapshot("c", obs, None, st, TH, obs.time, kraft=True)
    tracker.update("c", judge(snap, st, TH, obs.time), T0)
    down = KafkaObservation(time=T0 + 30, cluster_id="c", controller_id=1, kraft=True,
                            brokers=[(i, f"h{i}", 9092, None) for i in (1, 2, 3, 5)])
    down.fail("quorum", "DescribeQuorum failed: KafkaTimeoutError")
    snap = build_snapshot("c", down, None, st, TH, down.time, kraft=True)
    kept = kept_over_stale(snap)
    outage = Candidate("broker_down", "critical", "broker-4", "broker 4 is not in the metadata")
    current, _, _ = tracker.update("c", [*judge(snap, st, TH, down.time, kept), outage], T0 + 30, kept)
    assert {"kraft_observer_lagging", "broker_down"} <= {a.rule for a in current}
    snap.alerts = current
    members = {c.kind: c.members for c in correlate(snap, current)}
    assert members["broker"] == {"broker_down": 1, "kraft_observer_lagging": 1}, members
    assert "kraft_observer_lagging" not in members.get("consensus", {}), members


def test_the_sandbox_leader_stops_listing_a_broker_whose_fetch_stopped_5_minutes_ago() -> None:
    from sandbox.handlers import metadata_answer

    c = make(mode="kraft", brokers=4)
    run(c, 5)
    c.lag_metadata(4, metadata_answer(c))
    run(c, KRAFT_OBSERVER_SESSION_S - 1)
    assert _observer(c, 4)["replica_id"] == 4
    run(c, 1)
    part = Handlers(c).describe_quorum(1, None)["topics"][0]["partitions"][0]  # type: ignore[arg-type]
    assert [o["replica_id"] for o in part["observers"]] == []
    c.lag_metadata(4, None)
    assert _observer(c, 4)["last_caught_up_timestamp"] == int(c.now * 1000)


def _observer(c: Any, node: int) -> dict[str, int]:
    part = Handlers(c).describe_quorum(1, None)["topics"][0]["partitions"][0]  # type: ignore[arg-type]
    return next(o for o in part["observers"] if o["replica_id"] == node)


def test_the_sandbox_stops_a_kraft_brokers_metadata_fetch_and_says_how_far_behind_it_fell() -> None:
    from sandbox.handlers import metadata_answer

    c = make(mode="kraft", brokers=4)
    run(c, 5)
    c.lag_metadata(4, metadata_answer(c))
    stopped = _observer(c, 4)
    run(c, 40)
    now = _observer(c, 4)
    assert now == stopped  # its log end offset and fetch times stay where they stopped
    assert c.metadata_hwm - now["log_end_offset"] >= 79  # the leader writes a record every 0.5 s
    assert c.brokers[4].registered and c.brokers[4].process_up  # its heartbeats go on: nobody fences it
    c.lag_metadata(4, None)
    assert c.events[-1][2] == "broker 4: metadata cache caught up after 40s, 80 records behind"
    assert _observer(c, 4)["last_caught_up_timestamp"] == int(c.now * 1000)


def test_a_voter_whose_metadata_fetch_stops_falls_behind() -> None:
    from sandbox.handlers import metadata_answer

    c = make(mode="kraft", brokers=3)
    run(c, 5)
    follower = next(i for i in (1, 2, 3) if i != c.quorum_leader)
    c.lag_metadata(follower, metadata_answer(c))
    run(c, 20)
    part = Handlers(c).describe_quorum(1, None)["topics"][0]["partitions"][0]  # type: ignore[arg-type]
    leo = {v["replica_id"]: v["log_end_offset"] for v in part["current_voters"]}
    assert leo[c.quorum_leader] - leo[follower] >= 39


def test_a_zookeeper_brokers_metadata_lag_logs_as_before() -> None:
    from sandbox.handlers import metadata_answer

    c = make(brokers=3)
    c.lag_metadata(3, metadata_answer(c))
    assert c.events[-1][2] == "broker 3: metadata cache stops following the controller"
    assert c.brokers[3].metadata_stopped is None
