"""Alert rules, the alert lifecycle and the durability posture, table-driven on hand-made records."""

from __future__ import annotations

from typing import Any

import pytest

from collectors.alerting.catalogue import RULES
from collectors.alerting.evaluation import judge
from collectors.alerting.lifecycle import AlertTracker
from collectors.alerting.rules import ZK_NOT_SERVING_WHY
from collectors.config import Thresholds
from collectors.model.durability import failures_before_data_loss, failures_before_write_stop
from collectors.model.records import (
    BrokerRecord,
    ClusterSnapshot,
    GroupPartitionRecord,
    GroupRecord,
    KRaftVoterRecord,
    PartitionRecord,
    ProducerRecord,
    TopicRecord,
    TransactionRecord,
    ZkServerRecord,
)
from collectors.model.state import ClusterState
from collectors.model.vocabulary import ZK_PROBE_FAILURES

NOW = 1_800_000_000.0
TH = Thresholds()


def part(topic: str = "t", p: int = 0, leader: int = 1, replicas: tuple[int, ...] = (1, 2, 3),
         isr: tuple[int, ...] = (1, 2, 3), min_isr: int = 2, **kw: Any) -> PartitionRecord:
    return PartitionRecord("c", topic, p, leader, 1, list(replicas), list(isr), [], min_isr, **kw)


def topic(name: str = "t", rf: int = 3, min_isr: int = 2, unclean: bool = False) -> TopicRecord:
    return TopicRecord("c", name, False, 1, rf, min_isr, unclean, 604_800_000, "delete")


def snap(**kw: Any) -> ClusterSnapshot:
    s = ClusterSnapshot(cluster="c", time=NOW, controller_id=1)
    s.brokers = [BrokerRecord("c", i, "h", 9092, is_controller=i == 1, reachable=True) for i in (1, 2, 3)]
    for k, v in kw.items():
        setattr(s, k, v)
    return s


def rules(s: ClusterSnapshot, st: ClusterState | None = None, now: float = NOW) -> set[tuple[str, str]]:
    return {(c.rule, c.subject) for c in judge(s, st or ClusterState(), TH, now)}


@pytest.mark.parametrize(("partition", "expected"), [
    (part(), set()),
    (part(leader=-1, isr=(1,)), {("offline_partition", "t-0")}),
    (part(isr=(1,)), {("under_min_isr", "t-0")}),
    (part(isr=(1, 2)), {("at_min_isr", "t-0")}),
    (part(replicas=(1, 2), isr=(1, 2), min_isr=2), set()),  # RF == min ISR: a config risk, not an ISR alert
    (part(isr=(1, 2), min_isr=1), set()),  # under-replicated but inside the grace period
    # min.insync.replicas above RF: every acks=all write fails, one configuration cause (unsafe_durability says it,
    # once per topic), not a state of each partition; a replica falling out is under-replicated as anywhere
    (part(replicas=(1, 2), isr=(1, 2), min_isr=3), set()),
    (part(replicas=(1, 2), isr=(1,), min_isr=3), set()),  # (under_replicated after its grace)
])
def test_partition_rules(partition: PartitionRecord, expected: set[tuple[str, str]]) -> None:
    assert rules(snap(partitions=[partition])) == expected


def test_under_replicated_needs_the_grace_period() -> None:
    st = ClusterState()
    s = snap(partitions=[part(isr=(1, 2), min_isr=1)])
    assert ("under_replicated", "t-0") not in rules(s, st, NOW)
    assert ("under_replicated", "t-0") not in rules(s, st, NOW + TH.under_replicated_grace_s - 1)
    assert ("under_replicated", "t-0") in rules(s, st, NOW + TH.under_replicated_grace_s)
    healthy = snap(partitions=[part()])
    rules(healthy, st, NOW + 100)
    assert ("under_replicated", "t-0") not in rules(s, st, NOW + 101)  # the clock restarts


def test_rules_are_pure_and_the_poller_keeps_the_timers() -> None:
    import copy

    from collectors.alerting.evaluation import advance_timers
    from collectors.alerting.rules import evaluate, families_evaluated

    st = ClusterState()
    s = snap(partitions=[part(isr=(1, 2), min_isr=1), part(p=1, leader=-1, isr=(1,))])
    held = {("under_replicated", "t-0"): NOW - TH.under_replicated_grace_s, ("under_replicated", "gone-0"): NOW - 5}
    before_state, before_held = copy.deepcopy(st), dict(held)
    first = evaluate(s, st, held, TH, NOW)
    assert evaluate(s, st, held, TH, NOW) == first  # same inputs, same answer
    assert held == before_held and st.condition_since == before_state.condition_since  # nothing written
    by_rule = {c.rule: c for c in first}
    assert not by_rule["under_replicated"].pending and "for 60s" in by_rule["under_replicated"].summary
    # the timers after this poll: t-0 keeps its start, gone-0 stopped holding (dropped), nothing new
    after = advance_timers(held, first, families_evaluated(s), NOW)
    assert after == {("under_replicated", "t-0"): NOW - TH.under_replicated_grace_s}
    # a condition seen for the first time is pending and starts its timer now
    fresh = evaluate(s, st, {}, TH, NOW)
    assert [c.pending for c in fresh if c.rule == "under_replicated"] == [True]
    assert advance_timers({}, fresh, families_evaluated(s), NOW) == {("under_replicated", "t-0"): NOW}
    # an unreachable cluster judges only itself and ZooKeeper: partition timers are kept as they were
    down = snap()
    down.reachable = False
    assert advance_timers(held, evaluate(down, st, held, TH, NOW), families_evaluated(down), NOW) == held


@pytest.mark.parametrize(("t", "flagged"), [
    (topic(), False),
    (topic(unclean=True), True),
    (topic(min_isr=1), True),
    (topic(min_isr=3), True),
    (topic(min_isr=4), True),
    (topic(rf=1, min_isr=1), False),
    (topic(rf=2, min_isr=1), False),
])
def test_unsafe_durability(t: TopicRecord, flagged: bool) -> None:
    assert (("unsafe_durability", "t") in rules(snap(topics=[t]))) is flagged


def test_minisr_above_rf_is_critical() -> None:
    c = [c for c in judge(snap(topics=[topic(min_isr=4)]), ClusterState(), TH, NOW)]
    assert c[0].severity == "critical" and "always fail" in c[0].summary


def test_minisr_above_rf_is_one_cause_and_no_incident() -> None:
    """Before, each healthy partition of the topic raised a critical under_min_isr and correlation made a critical
    topic incident of them: a second page beside KafkaTopicMinIsrAboveReplicationFactor for one setting, and one
    raised on the first poll for a setting that may be years old. The risk is reported once; risks are no
    incidents."""
    from collectors.alerting.correlation import correlate
    from collectors.alerting.lifecycle import AlertTracker

    s = snap(topics=[topic(rf=2, min_isr=3)],
             partitions=[part(p=i, replicas=(1, 2), isr=(1, 2), min_isr=3) for i in range(4)])
    current, _, _ = AlertTracker().update("c", judge(s, ClusterState(), TH, NOW), NOW)
    assert [(a.rule, a.subject, a.severity) for a in current] == [("unsafe_durability", "t", "critical")]
    assert correlate(s, current) == []


def test_broker_down_unreachable_and_controller() -> None:
    s = snap()
    s.brokers[1].alive = False
    s.brokers[2].reachable = False
    s.controller_id = None
    got = rules(s)
    assert {("broker_down", "broker-2"), ("broker_unreachable", "broker-3"), ("no_controller", "c")} <= got


@pytest.mark.parametrize(("mode", "words"), [
    ("zookeeper", "broker 2 is not registered"),  # no /brokers/ids/2
    (None, "broker 2 is not registered"),
    # a crashed or stopped KRaft broker stays registered, fenced: Metadata leaves it out all the same
    ("kraft", "broker 2 is not in the metadata: fenced (stopped, crashed or missing heartbeats) or unregistered"),
])
def test_broker_down_says_what_missing_means_in_its_mode(mode: str | None, words: str) -> None:
    s = snap(mode=mode)
    s.brokers[1].alive = False
    (c,) = [c for c in judge(s, ClusterState(), TH, NOW) if c.rule == "broker_down"]
    assert c.summary == words


def gp(group: str = "g", lag: int | None = 10, secs: float | None = 5.0, status: str = "OK", below: bool = False,
       to_ret: float | None = None) -> GroupPartitionRecord:
    return GroupPartitionRecord("c", group, "t", 0, 100, 0, 110, 110, lag, secs, status, NOW, below, to_ret)


def grp(status: str = "OK", secs: float | None = 5.0, worst: str = "OK") -> GroupRecord:
    return GroupRecord("c", "g", "Stable", 2, 1, status=status, worst_partition_status=worst, lag_sum=10,
                       lag_seconds_max=secs)


@pytest.mark.parametrize(("g", "gps", "expected"), [
    (grp(), [gp()], set()),
    (grp("WARN", worst="WARN"), [gp(status="WARN")], {"consumer_lag_status"}),
    (grp("ERR", worst="STALL"), [gp(status="STALL")], {"consumer_lag_status"}),
    (grp(secs=TH.lag_seconds_slo + 1), [gp()], {"consumer_lag_seconds"}),
    # a commit found below the log start is shown, not paged: retention_data_loss follows the ledger (loss family)
    (grp(), [gp(below=True)], set()),
    (grp(), [gp(to_ret=TH.retention_risk_s - 1)], {"retention_risk"}),
    (grp(), [gp(lag=0, to_ret=1.0)], set()),  # caught up: nothing unread to lose
])
def test_group_rules(g: GroupRecord, gps: list[GroupPartitionRecord], expected: set[str]) -> None:
    assert {r for r, _ in rules(snap(groups=[g], group_partitions=gps))} == expected


def test_lag_status_severity() -> None:
    cands = judge(snap(groups=[grp("ERR", worst="STOP")], group_partitions=[gp(status="STOP")]),
                     ClusterState(), TH, NOW)
    assert [c.severity for c in cands if c.rule == "consumer_lag_status"] == ["critical"]


def txn(state: str = "Ongoing", age: float | None = 10.0, timeout_ms: int = 60_000, epoch: int = 0,
        tid: str = "tx") -> TransactionRecord:
    return TransactionRecord("c", tid, 1, state, 7, epoch, timeout_ms, NOW - (age or 0), age, ["t-0"])


def test_transaction_rules() -> None:
    assert rules(snap(transactions=[txn()])) == set()
    assert ("stuck_transaction", "tx") in rules(snap(transactions=[txn(age=60 + TH.txn_timeout_grace_s + 1)]))
    st = ClusterState()
    st.txn_state_since["tx"] = ("PrepareCommit", NOW - TH.txn_prepare_stuck_s - 1)
    assert ("stuck_transaction", "tx") in rules(snap(transactions=[txn("PrepareCommit", None)]), st)
    st.txn_state_since["tx"] = ("PrepareCommit", NOW - 1)
    assert ("stuck_transaction", "tx") not in rules(snap(transactions=[txn("PrepareCommit", None)]), st)


def test_hanging_and_lso_gap() -> None:
    prod = ProducerRecord("c", "t", 0, 99, 0, 50, NOW, None, hanging=True)
    p = part(high_watermark=100 + TH.lso_gap_messages + 1, last_stable_offset=100)
    got = rules(snap(producers=[prod], partitions=[p]))
    assert {("hanging_transaction", "t-0"), ("lso_gap", "t-0")} <= got


def test_producer_epoch_bumps_counted_in_window() -> None:
    st = ClusterState()
    from collections import deque

    st.producer_epochs["tx"] = deque([(NOW - 10 * i, 10 - i) for i in range(TH.producer_epoch_bumps + 1)][::-1])
    assert ("producer_epoch_bumps", "tx") in rules(snap(transactions=[txn(epoch=10)]), st)
    st.producer_epochs["tx"] = deque([(NOW - TH.producer_epoch_window_s - 100, 1), (NOW, 2)])
    assert ("producer_epoch_bumps", "tx") not in rules(snap(transactions=[txn(epoch=2)]), st)


def test_producer_epoch_bumps_count_the_first_rise_after_a_quiet_spell() -> None:
    """The epoch first seen (the deque's first entry) is the base; every later entry is a rise, the first of them
    too when the base was recorded before the window. Before, the rises inside the window minus one were counted,
    so after a quiet spell it took one rise more than `producer_epoch_bumps` (KafkaProducerEpochBumps, counting
    `changes()`, fired alone)."""
    from collections import deque

    st = ClusterState()
    w = TH.producer_epoch_window_s
    st.producer_epochs["tx"] = deque([(NOW - 2 * w, 0), (NOW - 20, 1), (NOW - 10, 2), (NOW, 3)])
    got = [c for c in judge(snap(transactions=[txn(epoch=3)]), st, TH, NOW) if c.rule == "producer_epoch_bumps"]
    assert [(c.subject, c.value) for c in got] == [("tx", 3.0)]
    st.producer_epochs["tx"] = deque([(NOW - 2 * w, 0), (NOW - 20, 1), (NOW - 10, 2)])
    assert ("producer_epoch_bumps", "tx") not in rules(snap(transactions=[txn(epoch=2)]), st)  # two rises


def zk(server: str, mode: str | None, serving: bool = True, lag: int | None = 0) -> ZkServerRecord:
    return ZkServerRecord("c", server, serving, mode, lag_behind_leader=lag if mode == "follower" else None)


@pytest.mark.parametrize(("servers", "expected"), [
    ([zk("a", "leader"), zk("b", "follower"), zk("c", "follower")], set()),
    ([zk("a", "leader"), zk("b", "follower"), zk("c", None, False)], {("zk_node_not_serving", "c")}),
    ([zk("a", None, False), zk("b", None, False), zk("c", "follower")],  # quorum lost: timed (below)
     {("zk_node_not_serving", "a"), ("zk_node_not_serving", "b")}),
    ([zk("a", "follower"), zk("b", "follower"), zk("c", "follower")], {("zk_no_leader", "c")}),
    ([zk("a", "leader"), zk("b", "leader"), zk("c", "follower")], {("zk_multiple_leaders", "c")}),
    ([zk("a", "standalone")], set()),
])
def test_zookeeper_rules(servers: list[ZkServerRecord], expected: set[tuple[str, str]]) -> None:
    assert rules(snap(zookeeper=servers)) == expected


def test_zookeeper_quorum_lost_pages_only_past_its_grace_and_over_two_polls() -> None:
    """During an election every surviving server answers "not currently serving" for a moment: a poll landing then
    saw 0 of 3 serving, and paged critical for an election. Lost for the grace (30 s) and two polls: it pages."""
    electing = [zk("a", None, False), zk("b", None, False), zk("c", None, False)]
    st = ClusterState()

    def quorum_lost(servers: list[ZkServerRecord], now: float) -> list[str]:
        return [c.summary for c in judge(snap(zookeeper=servers), st, TH, now) if c.rule == "zk_quorum_lost"]

    assert quorum_lost(electing, NOW) == []  # the condition starts its timer; nothing pages
    assert st.condition_since[("zk_quorum_lost", "c")] == NOW
    assert quorum_lost(electing, NOW + TH.zk_quorum_lost_grace_s - 1) == []
    assert quorum_lost(electing, NOW + TH.zk_quorum_lost_grace_s) == ["only 0 of 3 ZooKeeper servers serve, for 30s"]
    elected = [zk("a", "leader"), zk("b", "follower"), zk("c", "follower")]
    assert quorum_lost(elected, NOW + 45) == []
    assert ("zk_quorum_lost", "c") not in st.condition_since  # the election over: a next one starts afresh


@pytest.mark.parametrize(("error", "words"), [
    ("not serving", "is not serving: it answers that it is not currently serving requests (no quorum, or electing"),
    ("refused", "is not serving: its client port refused the connection (is the process down?)"),
    ("timeout", "is not serving: no answer to srvr within the poll's timeout"),
    ("unreachable", "is not serving: unreachable (no route"),
    ("i/o error", "is not serving: the connection broke off mid-answer"),
    ("4lw not whitelisted: srvr, mntr", "is not serving: 4lw not whitelisted: srvr, mntr"),
    ("TLS failed: srvr", "is not serving: the monitor's TLS connection to it failed (its certificate not trusted"),
    (None, "is not serving: no answer"),
])
def test_a_server_not_serving_is_said_in_words(error: str | None, words: str) -> None:
    """The alert said "ZooKeeper h:2181 not serving: not serving"; on-call needs to know whether it answered."""
    down = ZkServerRecord("c", "h:2181", False, None, error=error)
    servers = [zk("a", "leader"), zk("b", "follower"), down]
    summary = next(c.summary for c in judge(snap(zookeeper=servers), ClusterState(), TH, NOW)
                   if c.rule == "zk_node_not_serving")
    assert summary.startswith(f"ZooKeeper h:2181 {words}"), summary
    assert set(ZK_NOT_SERVING_WHY) == set(ZK_PROBE_FAILURES)  # every short reason has its words


def test_follower_behind_needs_duration_and_election_is_visible() -> None:
    st = ClusterState()
    servers = [zk("a", "leader"), zk("b", "follower", lag=5), zk("c", "follower")]
    assert ("zk_follower_behind", "b") not in rules(snap(zookeeper=servers), st, NOW)
    assert ("zk_follower_behind", "b") in rules(snap(zookeeper=servers), st, NOW + TH.zk_follower_behind_s)
    st.zk_election_at, st.zk_leader_epoch = NOW, 4
    assert ("zk_leader_election", "c") in rules(snap(zookeeper=servers[:1]), st, NOW + 60)


def test_kraft_rules() -> None:
    voters = [KRaftVoterRecord("c", i, "leader" if i == 1 else "voter", 1000 - (5000 if i == 3 else 0) * (i == 3),
                               None, NOW, NOW, 1, 3, 1000) for i in (1, 2, 3)]
    voters[2].log_end_offset, voters[2].lag = 0, 1000
    got = rules(snap(kraft_voters=voters))
    assert ("kraft_voter_lagging", "voter-3") not in got  # 1000 records: at the default threshold, not over
    voters[2].lag = TH.kraft_voter_lag_records + 1
    assert ("kraft_voter_lagging", "voter-3") in rules(snap(kraft_voters=voters))
    for v in voters:
        v.leader_id = -1
    # no leader: pending at first sight (an election takes seconds); fired once it held 30 s and two polls
    assert rules(snap(kraft_voters=voters)) == set()  # nor any voter "lagging" behind a leader there is not
    st = ClusterState(condition_since={("kraft_no_leader", "c"): NOW - 30})
    assert rules(snap(kraft_voters=voters), st) == {("kraft_no_leader", "c")}


def test_unreachable_cluster_only_reports_that() -> None:
    s = snap(partitions=[part(leader=-1)])
    s.reachable = False
    s.errors = ["Metadata failed"]
    assert rules(s) == {("cluster_unreachable", "c")}


def test_every_rule_in_the_catalogue_is_documented() -> None:
    assert all(RULES.values())


def test_alert_lifecycle_keeps_first_seen_and_resolves_once() -> None:
    from collectors.alerting.rules import Candidate

    tr = AlertTracker()
    c = Candidate("offline_partition", "critical", "t-0", "down")
    current, opened, resolved = tr.update("c", [c], NOW)
    assert [a.first_seen for a in current] == [NOW] and len(opened) == 1 and not resolved
    current, opened, resolved = tr.update("c", [c], NOW + 30)
    assert current[0].first_seen == NOW and current[0].last_seen == NOW + 30 and not opened
    current, opened, resolved = tr.update("c", [], NOW + 60, keep_rules=frozenset({"offline_partition"}))
    assert len(current) == 1 and not resolved  # stale data: kept, not resolved on missing evidence
    current, opened, resolved = tr.update("c", [], NOW + 90)
    assert not current and [(r.rule, r.resolved_at) for r in resolved] == [("offline_partition", NOW + 90)]
    assert tr.update("c", [], NOW + 120)[2] == []


def test_an_alert_open_a_day_since_its_last_event_is_recorded_again() -> None:
    """Before, an alert wrote an event when it opened and when it resolved only: one open for three weeks had no
    event in the two weeks the weekly report reads, so it was missing from the report's alert episodes, and from
    what a collector taking the history over reads (two days)."""
    from collectors.alerting.lifecycle import RESTATE_S
    from collectors.alerting.rules import Candidate
    from collectors.model.records import AlertRecord

    tr = AlertTracker()
    c = Candidate("offline_partition", "critical", "t-0", "down")
    tr.update("c", [c], NOW)
    assert tr.restate_due("c", NOW) == []  # its opening is its event
    tr.update("c", [c], NOW + RESTATE_S - 30)
    assert tr.restate_due("c", NOW + RESTATE_S - 30) == []
    tr.update("c", [c], NOW + RESTATE_S)
    assert [(a.rule, a.first_seen) for a in tr.restate_due("c", NOW + RESTATE_S)] == [("offline_partition", NOW)]
    assert tr.restate_due("c", NOW + RESTATE_S + 30) == []  # once a day
    assert len(tr.restate_due("c", NOW + 2 * RESTATE_S)) == 1
    assert tr.restate_due("other", NOW + 3 * RESTATE_S) == []  # per cluster
    tr.update("c", [], NOW + 3 * RESTATE_S)
    assert tr.restate_due("c", NOW + 4 * RESTATE_S) == []  # resolved: nothing to restate

    restored = AlertRecord("under_min_isr", "critical", "c", "t-1", "", NOW - 9 * RESTATE_S, NOW)
    tr.open[restored.key] = restored  # a checkpoint's alert: its last event is not known
    assert tr.restate_due("c", NOW) == []  # a restart records nothing...
    assert tr.restate_due("c", NOW + RESTATE_S) == [restored]  # ...and counts the day from itself


def test_adopted_alerts_keep_the_recorded_first_seen() -> None:
    """`AlertTracker.adopt`: ours of the same alert takes the recorded first_seen (the history keeps one episode),
    one we do not have is carried and the next poll resolves it when its condition is gone."""
    from collectors.alerting.rules import Candidate
    from collectors.model.records import AlertRecord

    tr = AlertTracker()
    down = Candidate("broker_down", "critical", "broker-3", "down")
    tr.update("c", [down], NOW)
    recorded = [AlertRecord("broker_down", "critical", "c", "broker-3", "", NOW - 600, NOW - 30),
                AlertRecord("under_min_isr", "critical", "c", "t-1", "", NOW - 500, NOW - 30)]
    assert tr.adopt(recorded) == {("c", "broker_down", "broker-3"): NOW, ("c", "under_min_isr", "t-1"): None}
    current, opened, resolved = tr.update("c", [down], NOW + 30)
    assert [(a.rule, a.first_seen) for a in current] == [("broker_down", NOW - 600)] and not opened
    assert [(a.rule, a.first_seen, a.resolved_at) for a in resolved] == [("under_min_isr", NOW - 500, NOW + 30)]

    exact = NOW - 599.9999996  # a resumed checkpoint's alert; the history holds it to the microsecond
    current[0].first_seen = exact
    assert tr.adopt([recorded[0]]) == {("c", "broker_down", "broker-3"): None}
    assert current[0].first_seen == exact  # the same episode: its time is not rounded


def test_alerts_sorted_by_severity_then_age() -> None:
    from collectors.alerting.rules import Candidate

    tr = AlertTracker()
    tr.update("c", [Candidate("a", "info", "x", "")], NOW)
    current, _, _ = tr.update("c", [Candidate("a", "info", "x", ""), Candidate("b", "critical", "y", "")], NOW + 1)
    assert [a.rule for a in current] == ["b", "a"]


@pytest.mark.parametrize(("isr", "min_isr", "online", "write", "loss"), [
    (3, 2, True, 1, 2), (2, 2, True, 0, 1), (1, 2, True, 0, 0), (3, 1, True, 2, 2), (0, 2, False, 0, 0),
])
def test_durability_posture(isr: int, min_isr: int, online: bool, write: int, loss: int) -> None:
    assert failures_before_write_stop(isr, min_isr, online) == write
    assert failures_before_data_loss(isr, online) == loss


def test_retention_data_loss_says_how_many_messages() -> None:
    """From the ledger's retention_skipped rows of the group within the hold (tests/unit/test_retention_witnessed.py
    has the polls that make them): their sum, on the partitions named."""
    from collectors.alerting.rules import losses
    from collectors.model.records import ClusterSnapshot, LossRecord
    from collectors.model.state import ClusterState

    st = ClusterState()
    st.recent_losses = [
        LossRecord("c", NOW - 90, "retention_skipped", "orders", 0, 30, "...", group_id="billing"),
        LossRecord("c", NOW - 60, "retention_skipped", "orders", 0, 20, "...", group_id="billing"),
        LossRecord("c", NOW - 7_200, "retention_skipped", "orders", 1, 900, "...", group_id="billing"),  # expired
        LossRecord("c", NOW - 60, "retention_skipped", "orders", 2, 5, "...", group_id="audit")]
    got = {(c.rule, c.subject): c for c in losses(ClusterSnapshot(cluster="c", time=NOW), st, {}, Thresholds(), NOW)}
    assert set(got) == {("retention_data_loss", "billing"), ("retention_data_loss", "audit")}
    billing = got[("retention_data_loss", "billing")]
    assert billing.value == 50 and billing.severity == "critical"
    assert billing.summary == "group billing: retention deleted 50 unread messages on orders-0, the last 60s ago"


def test_loss_rules_come_from_the_ledger_and_expire() -> None:
    from collectors.alerting.rules import losses
    from collectors.model.records import ClusterSnapshot, LossRecord
    from collectors.model.state import ClusterState

    st = ClusterState()
    st.recent_losses = [
        LossRecord("c", NOW - 60, "truncation", "orders", 3, 1_200, "hw 50,000 ...", 1, 2, 5, 7, True, offset=48_800),
        LossRecord("c", NOW - 60, "unclean_election", "orders", 3, None, "leader 1 -> 2", 1, 2, 5, 7, True),
        LossRecord("c", NOW - 60, "offset_beyond_log_end", "orders", 3, 1_190, "...", group_id="billing",
                   offset=48_800),
        LossRecord("c", NOW - 7_200, "truncation", "old", 0, 5, "...", 1, 2, 1, 2, False, offset=1)]  # expired
    got = {(c.rule, c.subject): c for c in losses(ClusterSnapshot(cluster="c", time=NOW), st, {}, Thresholds(), NOW)}
    assert set(got) == {("data_truncated", "orders-3"), ("unclean_election", "orders-3"),
                        ("offset_beyond_log_end", "billing")}
    assert got[("data_truncated", "orders-3")].value == 1_200
    assert got[("offset_beyond_log_end", "billing")].value == 1_190
    assert all(c.severity == "critical" for c in got.values())


def test_back_to_back_transactions_caught_in_prepare_are_not_one_stuck_transaction() -> None:
    """Through the snapshot builder: a producer committing every few seconds, polled every 30 s, can be caught
    in PrepareCommit at two polls in a row -- two transactions, each a moment in Prepare. The clock of "in
    PrepareCommit since" restarts with each new transaction (told by its start time), so nothing is stuck; the
    same transaction still in PrepareCommit a poll later is."""
    from collectors.model.observations import KafkaObservation
    from collectors.model.snapshot import build_snapshot

    def poll(st: ClusterState, now: float, started: float) -> set[tuple[str, str]]:
        obs = KafkaObservation(time=now)
        obs.transactions = [{"transactional_id": "tx", "coordinator": 1, "transaction_state": "PrepareCommit",
                             "producer_id": 7, "producer_epoch": 0, "transaction_timeout_ms": 60_000,
                             "transaction_start_time_ms": int(started * 1000), "partitions": [("t", 0)]}]
        obs.listed_transactions = {"tx": 7}
        s = build_snapshot("c", obs, None, st, TH, now)
        return {(c.rule, c.subject) for c in judge(s, st, TH, now)}

    step = TH.txn_prepare_stuck_s + 5
    back_to_back = ClusterState()
    for k in range(4):  # a new transaction each poll, each caught in PrepareCommit
        assert ("stuck_transaction", "tx") not in poll(back_to_back, NOW + k * step, NOW + k * step - 1)
    stuck = ClusterState()
    poll(stuck, NOW, NOW - 1)
    assert ("stuck_transaction", "tx") in poll(stuck, NOW + step, NOW - 1)  # the same one, still in Prepare
