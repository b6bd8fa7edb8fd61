"""The KRaft voter set: a quorum that survives no voter's loss, and a change of the set (KIP-853).

A. `kraft_quorum_fragile`: 1 or 2 voters in DescribeQuorum's voter set, so losing any one stops the quorum (a majority
   of 2 is 2). A configuration risk, never part of an incident. A voter merely down is still in the set: a quorum of
   3 with one voter not fetching is `kraft_voter_lagging`'s, not this.
B. `kraft_voters_changed`: the set differs from the last one seen (`ClusterState.kraft_quorum`), open for 10 minutes
   like `kraft_leader_election`, naming the voters added and removed; nothing at the first sight of a cluster. The
   last set and the last change are checkpointed, so a change while the monitor was down is seen after a restart.
C. The gauge `kafka_kraft_voters` its Prometheus twins read.
D. The sandbox's KIP-853 incidents: `kraft_remove_voter`, `kraft_add_voter`.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from collectors.alerting.catalogue import RISK_RULES, RULES, kept_over_stale
from collectors.alerting.correlation import correlate
from collectors.alerting.evaluation import judge
from collectors.alerting.lifecycle import AlertTracker
from collectors.alerting.rules import ELECTION_ALERT_S, Candidate
from collectors.model.observations import KafkaObservation
from collectors.model.records import AlertRecord
from collectors.model.snapshot import build_snapshot
from collectors.model.state import ClusterState
from collectors.outputs.checkpoint import Checkpoint, CheckpointError, load_checkpoint, save_checkpoint
from collectors.outputs.exporter import MetricsEndpoint
from sandbox.handlers import Handlers
from sandbox.incidents import apply
from sandbox.scenario import ScenarioError, parse_scenario
from sandbox.spec import INCIDENT_TYPES, IncidentSpec
from tests.unit.test_checkpoint import edit_meta
from tests.unit.test_kraft_quorum_health import TH, answered, replica
from tests.unit.test_sandbox_model import make, run

T0 = 1_800_000_000.0


def quorum(t: float, ids: list[int], leader: int | None = None, behind: dict[int, float] | None = None
           ) -> KafkaObservation:
    """DescribeQuorum answered at `t` with voters `ids` (the leader the first unless named), all caught up and
    fetching, save those in `behind`: node -> seconds since their last fetch (and 5000 records behind)."""
    behind = behind or {}
    voters = [replica(i, 1000 if i in behind else 6000, t - behind.get(i, 0.5)) for i in ids]
    return answered(t, voters, hw=6000, leader=ids[0] if leader is None else leader)


def judged(st: ClusterState, obs: KafkaObservation) -> list[Candidate]:
    snap = build_snapshot("c", obs, None, st, TH, obs.time, kraft=True)
    return judge(snap, st, TH, obs.time)


def one(alerts: list[Candidate], rule: str) -> Candidate | None:
    found = [a for a in alerts if a.rule == rule]
    assert len(found) <= 1, found
    return found[0] if found else None


# ------------------------------------------------------------------------------------------------ A

@pytest.mark.parametrize("ids", [[1], [1, 2], [1, 2, 3]])
def test_one_or_two_voters_survive_no_voters_loss_three_do(ids: list[int]) -> None:
    """The collector's rule fires for 1 and 2 voters only; the gauge its Prometheus twin reads (<= 2) says how many."""
    assert voters_gauge(ClusterState(), quorum(T0, ids)) == [({"cluster": "c"}, float(len(ids)))]
    fragile = one(judged(ClusterState(), quorum(T0, ids)), "kraft_quorum_fragile")
    if len(ids) == 3:
        assert fragile is None
        return
    assert fragile is not None and (fragile.severity, fragile.subject, fragile.value) == ("warning", "c", len(ids))
    assert fragile.summary == {
        1: "the KRaft quorum has 1 voter (1): losing it stops it (a majority of 1 is 1); 3 voters survive the loss "
           "of one",
        2: "the KRaft quorum has 2 voters (1, 2): losing either stops it (a majority of 2 is 2); 3 voters survive "
           "the loss of one"}[len(ids)]


def test_a_voter_down_in_a_quorum_of_three_is_lagging_not_fragile() -> None:
    """Voter 3 stopped fetching a minute ago and is 5000 records behind: still a voter of a quorum of 3."""
    st = ClusterState()
    for k in range(3):
        alerts = judged(st, quorum(T0 + 30 * k, [1, 2, 3], behind={3: 60.0 + 30 * k}))
        rules = {a.rule for a in alerts}
        assert "kraft_voter_lagging" in rules and not rules & {"kraft_quorum_fragile", "kraft_voters_changed"}, k
    # nor for the Prometheus twin: the gauge counts the voter set, the voter down included
    assert voters_gauge(st, quorum(T0 + 90, [1, 2, 3], behind={3: 150.0})) == [({"cluster": "c"}, 3.0)]


def test_fragile_stays_while_the_quorum_has_no_leader_and_is_a_risk_not_an_incident() -> None:
    st = ClusterState()
    judged(st, quorum(T0, [1, 2]))
    obs = KafkaObservation(time=T0 + 30, cluster_id="c", controller_id=1, kraft=True,
                           brokers=[(i, f"h{i}", 9092, None) for i in (1, 2, 3)])
    obs.quorum_no_leader = "DescribeQuorum: NOT_LEADER_OR_FOLLOWER"
    obs.fail("quorum", obs.quorum_no_leader)
    snap = build_snapshot("c", obs, None, st, TH, obs.time, kraft=True)
    alerts = judge(snap, st, TH, obs.time)
    assert one(alerts, "kraft_quorum_fragile") is not None  # the last voter set known: still 2
    assert "kraft_quorum_fragile" in RISK_RULES and RULES["kraft_quorum_fragile"].keep_when_stale >= {"quorum"}
    records = [AlertRecord(a.rule, a.severity, "c", a.subject, a.summary, T0, T0) for a in alerts]
    placed = {a.rule for cause in correlate(snap, records) for a in cause.alerts}
    assert "kraft_quorum_fragile" not in placed


# ------------------------------------------------------------------------------------------------ B

def test_a_removed_voter_is_named_for_ten_minutes_then_resolved_and_is_a_consensus_incident() -> None:
    st, tracker = ClusterState(), AlertTracker()
    first = judged(st, quorum(T0, [1, 2, 3]))
    assert one(first, "kraft_voters_changed") is None and one(first, "kraft_quorum_fragile") is None
    at = T0 + 30
    opened_at: list[float] = []
    resolved_at: list[float] = []
    for t in [at, at + 300, at + ELECTION_ALERT_S - 1, at + ELECTION_ALERT_S, at + ELECTION_ALERT_S + 30]:
        obs = quorum(t, [1, 2])
        snap = build_snapshot("c", obs, None, st, TH, t, kraft=True)
        kept = kept_over_stale(snap)
        alerts = judge(snap, st, TH, t, kept)
        current, opened, resolved = tracker.update("c", alerts, t, kept)
        opened_at += [t for a in opened if a.rule == "kraft_voters_changed"]
        resolved_at += [t for a in resolved if a.rule == "kraft_voters_changed"]
        changed = one(alerts, "kraft_voters_changed")
        assert one(alerts, "kraft_quorum_fragile") is not None  # 2 voters left, all along
        if t == at:
            assert changed is not None and (changed.severity, changed.subject) == ("info", "c")
            assert changed.summary == "KRaft voter set changed 0s ago: voter 3 removed (voters now 1, 2)"
            causes = correlate(snap, [a for a in current if a.rule not in RISK_RULES])
            assert [(c.kind, c.subject, {a.rule for a in c.alerts}) for c in causes] == [
                ("consensus", "kraft", {"kraft_voters_changed"})]
        elif t < at + ELECTION_ALERT_S:
            assert changed is not None and changed.summary.startswith(f"KRaft voter set changed {t - at:.0f}s ago")
        else:
            assert changed is None
    assert opened_at == [at] and resolved_at == [at + ELECTION_ALERT_S]


def test_the_first_sight_of_a_cluster_is_no_change_whatever_its_voters() -> None:
    for ids in ([1], [1, 2], [1, 2, 3], [4, 5, 6, 7, 8]):
        st = ClusterState()
        assert one(judged(st, quorum(T0, ids)), "kraft_voters_changed") is None
        assert st.kraft_voters_changed_at is None and st.kraft_quorum is not None


@pytest.mark.parametrize(("before", "after", "words"), [
    ([1, 2], [1, 2, 3], "voter 3 added (voters now 1, 2, 3)"),
    ([1, 2, 3], [1, 2, 4], "voter 3 removed; voter 4 added (voters now 1, 2, 4)"),  # same count: only we see it
    ([1, 2, 3, 4, 5], [1, 2, 3], "voters 4, 5 removed (voters now 1, 2, 3)"),
])
def test_voters_added_and_removed_are_named(before: list[int], after: list[int], words: str) -> None:
    st = ClusterState()
    judged(st, quorum(T0, before))
    changed = one(judged(st, quorum(T0 + 30, after)), "kraft_voters_changed")
    assert changed is not None and changed.summary == f"KRaft voter set changed 0s ago: {words}"


def test_the_order_of_the_voters_in_an_answer_is_no_change() -> None:
    """Voters answered in another order are the same set: the change seen before keeps its time and words."""
    st = ClusterState()
    judged(st, quorum(T0, [1, 2, 3]))
    judged(st, quorum(T0 + 30, [1, 3]))
    changed = one(judged(st, quorum(T0 + 60, [3, 1], leader=1)), "kraft_voters_changed")
    assert changed is not None
    assert changed.summary == "KRaft voter set changed 30s ago: voter 2 removed (voters now 1, 3)"
    st = ClusterState()
    judged(st, quorum(T0, [1, 2, 3]))
    assert one(judged(st, quorum(T0 + 30, [3, 1, 2], leader=1)), "kraft_voters_changed") is None
    assert st.kraft_voters_changed_at is None


def save(tmp_path: Path, st: ClusterState, saved_at: float) -> Path:
    return save_checkpoint(tmp_path, Checkpoint("prod", "cid-1", saved_at, st))[0]


def load(tmp_path: Path, now: float) -> Checkpoint | None:
    return load_checkpoint(tmp_path, "prod", lag_points=60, window_size=10, now=now, max_age_s=3600)


def test_a_change_while_the_monitor_was_down_is_seen_after_a_restart(tmp_path: Path) -> None:
    st = ClusterState()
    judged(st, quorum(T0, [1, 2, 3]))
    save(tmp_path, st, T0)
    cp = load(tmp_path, T0 + 600)  # restarted 10 minutes later; meanwhile voter 2 was removed
    assert cp is not None and cp.state.kraft_quorum is not None and cp.state.kraft_quorum[0] == (1, 2, 3)
    changed = one(judged(cp.state, quorum(T0 + 600, [1, 3])), "kraft_voters_changed")
    assert changed is not None  # when is not known, only between which reads: not "0s ago"
    assert changed.summary == ("KRaft voter set changed between 600s and 0s ago (no voter set was read in between): "
                               "voter 2 removed (voters now 1, 3)")
    # without the checkpoint the same poll is a first sight: nothing
    assert one(judged(ClusterState(), quorum(T0 + 600, [1, 3])), "kraft_voters_changed") is None


def test_a_change_while_the_monitor_was_down_for_hours_is_still_seen(tmp_path: Path) -> None:
    """A checkpoint older than `checkpoint_max_age_s` resumes only what is still true whatever happened meanwhile
    (`evidence_of`): the voter set last read is, so a controller removed during a long downtime is still seen."""
    st = ClusterState()
    judged(st, quorum(T0, [1, 2, 3]))
    save(tmp_path, st, T0)
    cp = load(tmp_path, T0 + 7200)
    assert cp is not None and cp.evidence_only and cp.state.kraft_quorum is not None
    changed = one(judged(cp.state, quorum(T0 + 7200, [1, 3])), "kraft_voters_changed")
    assert changed is not None and changed.summary.startswith("KRaft voter set changed between 7200s and 0s ago")


def test_a_change_seen_before_a_restart_stays_open_as_long_saying_the_same(tmp_path: Path) -> None:
    st = ClusterState()
    judged(st, quorum(T0, [1, 2, 3]))
    judged(st, quorum(T0 + 30, [1, 2, 3, 4]))
    save(tmp_path, st, T0 + 60)
    cp = load(tmp_path, T0 + 90)
    assert cp is not None
    assert (cp.state.kraft_voters_changed_at, cp.state.kraft_voters_change) == (T0 + 30, ((4,), (), T0))
    changed = one(judged(cp.state, quorum(T0 + 90, [1, 2, 3, 4])), "kraft_voters_changed")
    assert changed is not None and changed.summary == \
        "KRaft voter set changed 60s ago: voter 4 added (voters now 1, 2, 3, 4)"
    assert one(judged(cp.state, quorum(T0 + 30 + ELECTION_ALERT_S, [1, 2, 3, 4])), "kraft_voters_changed") is None


def changed_state() -> ClusterState:
    st = ClusterState()
    judged(st, quorum(T0, [1, 2, 3]))
    judged(st, quorum(T0 + 30, [1, 2]))
    return st


def test_an_older_checkpoint_without_the_change_loads_with_none(tmp_path: Path) -> None:
    path = save(tmp_path, changed_state(), T0 + 60)

    def drop(meta: dict[str, Any]) -> None:
        del meta["kraft_voters_changed_at"], meta["kraft_voters_change"]

    edit_meta(path, drop)
    cp = load(tmp_path, T0 + 90)
    assert cp is not None and cp.state.kraft_voters_changed_at is None and cp.state.kraft_voters_change is None
    assert cp.state.kraft_quorum is not None and cp.state.kraft_quorum[0] == (1, 2)


@pytest.mark.parametrize(("field", "value"), [
    ("kraft_voters_changed_at", "soon"), ("kraft_voters_changed_at", float("nan")),
    ("kraft_voters_change", [[3], [1], [2], 5.0]), ("kraft_voters_change", [[], ["3"], None]),
    ("kraft_voters_change", [[], [3.5], None]), ("kraft_voters_change", [[3], [1]]),
    ("kraft_voters_change", [[], [], None]),  # well typed, but no change: it would page "changed: (voters …)"
    ("kraft_voters_change", None),  # a change time without the change
])
def test_a_damaged_change_is_refused_naming_the_field(tmp_path: Path, field: str, value: Any) -> None:
    path = save(tmp_path, changed_state(), T0 + 60)
    edit_meta(path, lambda meta: meta.__setitem__(field, value))
    with pytest.raises(CheckpointError, match=field):
        load(tmp_path, T0 + 90)


# ------------------------------------------------------------------------------------------------ C

def voters_gauge(st: ClusterState, obs: KafkaObservation) -> list[tuple[dict[str, str], float]]:
    snap = build_snapshot("c", obs, None, st, TH, obs.time, kraft=True)
    ep = MetricsEndpoint()
    ep.update([snap])
    return [(s.labels, s.value) for fam in text_string_to_metric_families(ep.render().decode())
            for s in fam.samples if s.name == "kafka_kraft_voters"]


def test_the_voters_gauge_counts_the_voter_set_a_voter_down_included() -> None:
    st = ClusterState()
    obs = quorum(T0, [1, 2, 3], behind={3: 120.0})
    obs.quorum["observers"] = [replica(4, 6000, T0)]  # type: ignore[index]
    assert voters_gauge(st, obs) == [({"cluster": "c"}, 3.0)]  # the observer is no voter
    nobody = KafkaObservation(time=T0 + 30, cluster_id="c", controller_id=1, kraft=True,
                              brokers=[(i, f"h{i}", 9092, None) for i in (1, 2, 3)])
    nobody.quorum_no_leader = "DescribeQuorum: NOT_LEADER_OR_FOLLOWER"
    nobody.fail("quorum", nobody.quorum_no_leader)
    assert voters_gauge(st, nobody) == [({"cluster": "c"}, 3.0)]  # the last set answered
    assert voters_gauge(ClusterState(), nobody) == []  # never answered: not known


# ------------------------------------------------------------------------------------------------ D

def quorum_voters(c: Any) -> list[int]:
    part = Handlers(c).describe_quorum(1, None)["topics"][0]["partitions"][0]  # type: ignore[arg-type]
    return [v["replica_id"] for v in part["current_voters"]]


def observers(c: Any) -> list[int]:
    part = Handlers(c).describe_quorum(1, None)["topics"][0]["partitions"][0]  # type: ignore[arg-type]
    return [v["replica_id"] for v in part["observers"]]


def events(c: Any) -> list[str]:
    return [what for _, _, what in c.events]


def test_the_sandbox_removes_a_follower_voter_and_adds_it_back() -> None:
    c = make(mode="kraft", brokers=4)
    run(c, 5)
    leader, epoch = c.quorum_leader, c.quorum_epoch
    assert quorum_voters(c) == [1, 2, 3] and observers(c) == [4]
    assert c.remove_voter(3)
    assert events(c)[-1] == "voter 3 removed from the KRaft quorum: voters 1, 2"
    assert quorum_voters(c) == [1, 2] and observers(c) == [3, 4] and (c.quorum_leader, c.quorum_epoch) == (leader,
                                                                                                             epoch)
    run(c, 5)
    hw = c.metadata_hwm
    c.crash_broker(2)  # 2 voters: losing one stops the quorum
    run(c, 10)
    assert c.quorum_leader == -1 and c.metadata_hwm == hw
    c.restart_broker(2)
    run(c, 1)
    assert c.add_voter(3)
    assert events(c)[-1] == "voter 3 added to the KRaft quorum: voters 1, 2, 3"
    assert quorum_voters(c) == [1, 2, 3] and observers(c) == [4]
    lag = {v["replica_id"]: v["log_end_offset"] for v in Handlers(c).describe_quorum(1, None)[  # type: ignore[arg-type]
        "topics"][0]["partitions"][0]["current_voters"]}
    assert lag[3] == lag[c.quorum_leader]  # caught up from the start
    assert c.add_voter(4) and quorum_voters(c) == [1, 2, 3, 4] and observers(c) == []


def test_the_sandbox_leader_removed_resigns_and_another_is_elected() -> None:
    c = make(mode="kraft")
    run(c, 5)
    assert c.quorum_leader == 1
    epoch, controller_epoch = c.quorum_epoch, c.controller_epoch
    assert c.remove_voter(1)
    assert events(c)[-3:] == ["voter 1 removed from the KRaft quorum: voters 2, 3",
                              "KRaft leader 1 resigned: no longer a voter",
                              f"controller 1 -> 2 (epoch {controller_epoch + 1})"]
    assert (c.quorum_leader, c.controller_id, c.quorum_epoch) == (2, 2, epoch + 1) and quorum_voters(c) == [2, 3]
    assert 1 in observers(c)  # its broker stays


def test_the_sandbox_refuses_what_the_leader_refuses() -> None:
    c = make(mode="kraft", brokers=4)
    run(c, 5)
    assert not c.remove_voter(4) and events(c)[-1] == "voter 4 not removed from the KRaft quorum: not a voter"
    assert not c.add_voter(2) and events(c)[-1] == "voter 2 not added to the KRaft quorum: already a voter"
    c.crash_broker(4)
    assert not c.add_voter(4) and events(c)[-1].startswith("voter 4 not added to the KRaft quorum: no running node")
    assert c.remove_voter(3) and c.remove_voter(2)
    assert not c.remove_voter(1) and events(c)[-1] == "voter 1 not removed from the KRaft quorum: the last voter"
    assert quorum_voters(c) == [1]


class _Target:
    def __init__(self, c: Any) -> None:
        self.cluster, self.ensemble = c, None
        self.zk_killed: list[int] = []
        self.zk_paused: list[int] = []
        self.config_before: dict[tuple[str, str], str | None] = {}


def test_the_incidents_change_the_voter_set_and_their_end_undoes_it() -> None:
    assert {"kraft_remove_voter", "kraft_add_voter"} <= set(INCIDENT_TYPES)
    c = make(mode="kraft", brokers=4)
    run(c, 5)
    sb = _Target(c)
    remove = IncidentSpec(type="kraft_remove_voter", at=0, node=3)
    add = IncidentSpec(type="kraft_add_voter", at=0, node=4)
    apply(sb, remove, True)
    assert quorum_voters(c) == [1, 2]
    apply(sb, remove, False)
    assert quorum_voters(c) == [1, 2, 3]
    apply(sb, add, True)
    assert quorum_voters(c) == [1, 2, 3, 4]
    apply(sb, add, False)
    assert quorum_voters(c) == [1, 2, 3]


KRAFT = """
cluster:
  brokers: 3
  mode: kraft
incidents:
"""


def test_the_scenario_checks_the_voter_incidents() -> None:
    s = parse_scenario(KRAFT + "  - {type: kraft_remove_voter, at: 5, duration: 60, node: 3}\n")
    assert (s.incidents[0].type, s.incidents[0].node) == ("kraft_remove_voter", 3)
    with pytest.raises(ScenarioError, match="needs node"):
        parse_scenario(KRAFT + "  - {type: kraft_add_voter, at: 5}\n")
    with pytest.raises(ScenarioError, match=re.escape("node 7 not in 1..3")):
        parse_scenario(KRAFT + "  - {type: kraft_add_voter, at: 5, node: 7}\n")
    with pytest.raises(ScenarioError, match=re.escape("need cluster.mode kraft")):
        parse_scenario(KRAFT.replace("mode: kraft", "mode: zookeeper") + "  - {type: kraft_remove_voter, at: 5, "
                                                                          "node: 3}\n")
    with pytest.raises(ScenarioError, match="node is for"):
        parse_scenario(KRAFT + "  - {type: broker_crash, at: 5, node: 3}\n")


def test_another_cluster_at_the_bootstrap_servers_is_no_change_of_its_voter_set() -> None:
    """The bootstrap servers of a running monitor start reaching another cluster (a DNS or load balancer change, or
    the cluster rebuilt: a new cluster id). Compared with the old cluster's memory, its voters read as "voters 1, 2
    removed; 4, 5, 6 added" and sent on-call looking for who ran `remove-controller`. The memory of the old cluster
    is dropped instead, as at a restart that resumes another cluster's checkpoint: its open alerts end as lost."""
    from collectors.config import MonitorConfig
    from collectors.runtime.poller import Monitor

    cfg = MonitorConfig.model_validate({
        "clusters": [{"name": "k", "bootstrap_servers": "127.0.0.1:1", "kraft": True}],
        "request_timeout_s": 1, "history": {"enabled": False}})
    monitor = Monitor(cfg)
    try:
        (p,) = monitor.pollers
        answers = {"cid-A": [1, 2], "cid-B": [4, 5, 6]}

        def polled(t: float, cluster_id: str) -> Any:
            obs = quorum(t, answers[cluster_id])
            obs.cluster_id = cluster_id
            p.kafka.observe = lambda now, watch, **_: obs  # type: ignore[method-assign]
            (r,) = monitor.poll_once(t)
            return r

        r = polled(T0, "cid-A")
        assert {a.rule for a in r.snapshot.alerts} == {"kraft_quorum_fragile"}  # cluster A: 2 voters
        r = polled(T0 + 30, "cid-B")
        assert not [a for a in r.snapshot.alerts if a.rule == "kraft_voters_changed"], r.snapshot.alerts
        assert [(a.rule, a.cluster) for a in r.lost] == [("kraft_quorum_fragile", "k")]  # A's, ended unseen
        assert p.state.kraft_quorum is not None and p.state.kraft_quorum[0] == (4, 5, 6)
        r = polled(T0 + 60, "cid-B")
        assert r.snapshot.alerts == [] and r.lost == []
    finally:
        monitor.close()
