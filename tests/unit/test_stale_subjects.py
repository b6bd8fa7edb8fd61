"""Stale evidence keeps open alerts subject by subject when the failure says whom it concerns.

A failure that concerns some subjects only (one group's OffsetFetch refused, one broker's ListOffsets timed out,
one transactional id's coordinator not found) keeps the open alerts of those subjects; every other subject's alerts
resolve as usual. Before, any failure in a section kept every alert of every rule that depends on it: one group
denied by an ACL held every group's alerts open (and a group that recovered never resolved) for as long as it
lasted. A failure of the whole section (ListGroups failed, nothing answered) still keeps them all.
"""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from collectors.alerting.catalogue import CATALOGUE, SUBJECTS, kept_over_stale, kept_when_stale
from collectors.alerting.evaluation import advance_timers, judge
from collectors.alerting.lifecycle import AlertTracker
from collectors.alerting.rules import Candidate, families_evaluated
from collectors.config import Thresholds
from collectors.model.observations import KafkaObservation, PartitionMeta
from collectors.model.records import (
    ClusterSnapshot,
    GroupPartitionRecord,
    PartitionRecord,
    TopicRecord,
    TransactionRecord,
    snapshot_to_dict,
)
from collectors.model.snapshot import build_snapshot
from collectors.model.state import ClusterState
from collectors.model.vocabulary import STALE_SECTIONS, STALE_SUBJECT_KINDS
from tests.support.observed import T0, ObservedPoller

TH = Thresholds(consumer_stop_after_s=60)
LEADERS = {0: 1, 1: 2}  # t-0 is led by broker 1, t-1 by broker 2


def observation(now: float, commits: Mapping[str, int], hw: int) -> KafkaObservation:
    """Groups `a` (reads t-0) and `b` (reads t-1), each committed at its offset in `commits`; both partitions at
    high watermark `hw`, their last stable offset at 0 (an open transaction holds both back)."""
    obs = KafkaObservation(time=now, cluster_id="c", controller_id=1,
                           brokers=[(i, "h", 9092, None) for i in (1, 2, 3)],
                           partitions=[PartitionMeta("t", p, leader, 1, [1, 2, 3], [1, 2, 3], [])
                                       for p, leader in LEADERS.items()],
                           topic_configs={"t": {"min.insync.replicas": "2"}},
                           groups={g: {"state": "Stable", "members": 1, "coordinator": 1, "protocol_type": "consumer"}
                                   for g in ("a", "b")},
                           commits={g: {("t", p): commits[g]} for g, p in (("a", 0), ("b", 1)) if g in commits})
    for p in LEADERS:
        obs.high_watermark[("t", p)], obs.log_start[("t", p)], obs.last_stable[("t", p)] = hw, 0, 0
    return obs


def stalled() -> ObservedPoller:
    """Both groups' commits stand still while the partitions grow: both groups in ERR, and an LSO gap on both."""
    p = ObservedPoller(TH)
    for i in range(4):
        opened, _ = p.poll(observation(p.now, {"a": 0, "b": 0}, 20_000 * (i + 1)))
    assert {("consumer_lag_status", "a"), ("consumer_lag_status", "b"), ("lso_gap", "t-0"),
            ("lso_gap", "t-1")} <= opened
    return p


def recovered(now: float, *, hw: int = 100_000, commits: Mapping[str, int] | None = None) -> KafkaObservation:
    """Both groups caught up, no transaction open any more."""
    obs = observation(now, {"a": hw, "b": hw} if commits is None else commits, hw)
    for p in LEADERS:
        obs.last_stable[("t", p)] = hw
    return obs


def lag(subject: str) -> tuple[str, str]:
    return ("consumer_lag_status", subject)


def test_a_group_whose_offsets_cannot_be_fetched_keeps_its_alert_and_the_other_group_resolves() -> None:
    """The case of the issue: OffsetFetch for group `a` answers GROUP_AUTHORIZATION_FAILED poll after poll; `b`
    catches up and its alert resolves, `a`'s stays open on the evidence it had."""
    p = stalled()
    for i in range(3):  # a persistent failure: every poll the same
        obs = recovered(p.now, commits={"b": 100_000})
        obs.fail("groups", "OffsetFetch a: GROUP_AUTHORIZATION_FAILED", subjects=["a"])
        current, resolved = p.poll(obs)
        assert lag("a") in current and lag("a") not in resolved and lag("b") not in current
        assert (lag("b") in resolved) == (i == 0)  # resolved once, at the first poll that sees it caught up
    # a's fetch works again: it caught up meanwhile, its alert resolves too
    current, resolved = p.poll(recovered(p.now))
    assert lag("a") in resolved and lag("a") not in current


def test_describe_and_offsets_of_one_group_failing_keep_that_group_only() -> None:
    p = stalled()
    obs = recovered(p.now, commits={"b": 100_000})
    obs.fail("groups", "DescribeGroups a: GROUP_AUTHORIZATION_FAILED", subjects=["a"])
    obs.fail("groups", "OffsetFetch a: GROUP_AUTHORIZATION_FAILED", subjects=["a"])
    current, resolved = p.poll(obs)
    assert lag("b") in resolved and lag("a") in current and lag("a") not in resolved


def test_a_failure_of_the_whole_section_still_keeps_every_groups_alerts() -> None:
    """ListGroups failed: which groups exist is unknown, nothing may resolve on it (as before)."""
    p = stalled()
    obs = recovered(p.now, commits={"b": 100_000})
    obs.fail("groups", "OffsetFetch a: GROUP_AUTHORIZATION_FAILED", subjects=["a"])
    obs.fail("groups", "ListGroups to broker 2 failed: KafkaTimeoutError")
    current, resolved = p.poll(obs)
    assert {lag("a"), lag("b")} <= current and not {lag("a"), lag("b")} & resolved


def test_a_broker_whose_offsets_fail_keeps_the_alerts_of_what_it_leads_only() -> None:
    """ListOffsets to broker 2 times out: t-1 (led by 2) and group `b` (reads t-1) keep their alerts; t-0 and `a`,
    measured, resolve."""
    p = stalled()
    obs = recovered(p.now)
    del obs.high_watermark[("t", 1)], obs.log_start[("t", 1)], obs.last_stable[("t", 1)]
    obs.unreachable_brokers.add(2)
    obs.fail("offsets", "ListOffsets to broker 2 failed: KafkaTimeoutError", subjects=["t-1"])
    current, resolved = p.poll(obs)
    assert {lag("a"), ("lso_gap", "t-0")} <= resolved
    assert {lag("b"), ("lso_gap", "t-1")} <= current


def test_observation_fail_names_subjects_until_a_failure_of_the_whole_section() -> None:
    obs = KafkaObservation(time=T0)
    obs.fail("groups", "OffsetFetch a: GROUP_AUTHORIZATION_FAILED", subjects=["a"])
    obs.fail("groups", "DescribeGroups b: GROUP_AUTHORIZATION_FAILED", subjects=("b",))
    assert obs.stale_sections == {"groups"} and obs.stale_subjects == {"groups": {"a", "b"}}
    obs.fail("groups", "ListGroups to broker 1 failed: KafkaTimeoutError")  # the whole section, whatever the order
    obs.fail("groups", "OffsetFetch c: GROUP_AUTHORIZATION_FAILED", subjects=["c"])
    assert obs.stale_sections == {"groups"} and obs.stale_subjects == {}
    # naming nobody, or naming subjects of a section that has none, is the whole section
    obs.fail("offsets", "ListOffsets to broker 3 failed: KafkaTimeoutError", subjects=[])
    obs.fail("quorum", "DescribeQuorum: NOT_LEADER_OR_FOLLOWER", subjects=["voter-1"])
    assert obs.stale_sections == {"groups", "offsets", "quorum"} and obs.stale_subjects == {}
    assert len(obs.errors) == 6


def test_the_snapshot_carries_the_named_subjects_of_its_stale_sections() -> None:
    obs = recovered(T0)
    obs.fail("groups", "OffsetFetch b: GROUP_AUTHORIZATION_FAILED", subjects=["b"])
    obs.fail("groups", "OffsetFetch a: GROUP_AUTHORIZATION_FAILED", subjects=["a"])
    obs.fail("configs", "DescribeConfigs failed: KafkaTimeoutError")
    snap = build_snapshot("c", obs, None, ClusterState(), TH, T0)
    assert snap.stale_sections == ["configs", "groups"] and snap.stale_subjects == {"groups": ["a", "b"]}
    assert snapshot_to_dict(snap)["stale_subjects"] == {"groups": ["a", "b"]}
    # an adapter that names nobody (or one from before the field): every stale section is stale as a whole
    assert ClusterSnapshot(cluster="c", time=T0).stale_subjects == {}


def test_without_named_subjects_the_same_rules_are_kept_as_before() -> None:
    for section in STALE_SECTIONS:
        s = ClusterSnapshot(cluster="c", time=T0, stale_sections=[section])
        kept = kept_over_stale(s)
        assert set(kept) == kept_when_stale([section]) and all(v is None for v in kept.values())


def test_subject_kinds_are_alert_subjects_and_every_rule_keeps_by_its_own() -> None:
    assert set(STALE_SUBJECT_KINDS) <= set(STALE_SECTIONS) and set(STALE_SUBJECT_KINDS.values()) <= set(SUBJECTS)
    stale_groups = ClusterSnapshot(cluster="c", time=T0, stale_sections=["groups"], stale_subjects={"groups": ["a"]})
    kept = kept_over_stale(stale_groups)
    assert set(kept) == kept_when_stale(["groups"])
    assert all(kept[r.name] == frozenset({"a"}) for r in CATALOGUE if "groups" in r.keep_when_stale)


def test_a_rule_whose_subjects_a_failure_cannot_name_keeps_all_of_them() -> None:
    """One transactional id not described: its stuck_transaction is kept, another id's resolves; but which
    partitions' hanging transactions it explains is unknown (no producer is judged hanging meanwhile), so every
    hanging_transaction alert is kept."""
    s = ClusterSnapshot(cluster="c", time=T0, stale_sections=["transactions"],
                        stale_subjects={"transactions": ["payments-1"]})
    kept = kept_over_stale(s)
    assert kept["stuck_transaction"] == kept["producer_epoch_bumps"] == frozenset({"payments-1"})
    assert kept["hanging_transaction"] is None
    tr = AlertTracker()
    stuck = ClusterSnapshot(cluster="c", time=T0, controller_id=1, transactions=[
        TransactionRecord("c", tid, 1, "Ongoing", 7, 0, 60_000, T0 - 600, 600.0) for tid in ("payments-1", "orders-1")])
    tr.update("c", judge(stuck, ClusterState(), TH, T0), T0)
    assert {(k[1], k[2]) for k in tr.open} == {("stuck_transaction", "payments-1"), ("stuck_transaction", "orders-1")}
    current, _, resolved = tr.update("c", [], T0 + 30, kept)
    assert [a.subject for a in current] == ["payments-1"] and [a.subject for a in resolved] == ["orders-1"]


def test_offsets_of_some_partitions_keep_the_groups_reading_them() -> None:
    s = ClusterSnapshot(cluster="c", time=T0, stale_sections=["offsets"], stale_subjects={"offsets": ["t-1"]},
                        group_partitions=[GroupPartitionRecord("c", g, "t", p, 0, 0, 9, 9, 9, None)
                                          for g, p in (("a", 0), ("b", 1))])
    kept = kept_over_stale(s)
    assert kept["consumer_lag_status"] == frozenset({"b"}) and kept["lso_gap"] == frozenset({"t-1"})
    # a section named in part and another stale as a whole: the whole one decides
    s.stale_sections = ["groups", "offsets"]
    assert kept_over_stale(s)["consumer_lag_status"] is None


def test_topic_settings_not_read_keep_that_topics_alert_and_the_others_are_judged() -> None:
    """DescribeConfigs failed for topic `t` only: `t` (its settings carried, or Kafka's defaults) is not judged and
    its open alert is kept; `u`, read, is judged: its alert opens. A failure of every topic's settings (or the
    broker's defaults) judges none, as before."""
    topics = [TopicRecord("c", name, False, 1, 3, 1, False, 604_800_000, "delete") for name in ("t", "u")]
    s = ClusterSnapshot(cluster="c", time=T0, controller_id=1, topics=topics, stale_sections=["configs"],
                        stale_subjects={"configs": ["t"]})
    def unsafe() -> set[str]:
        return {c.subject for c in judge(s, ClusterState(), TH, T0) if c.rule == "unsafe_durability"}

    assert unsafe() == {"u"} and kept_over_stale(s)["unsafe_durability"] == frozenset({"t"})
    s.stale_subjects = {}
    assert unsafe() == set() and kept_over_stale(s)["unsafe_durability"] is None
    s.stale_sections = []
    assert unsafe() == {"t", "u"}


def test_timers_are_kept_for_the_kept_subjects_only() -> None:
    held = {("under_replicated", "t-0"): T0 - 100, ("under_replicated", "t-1"): T0 - 100}
    s = ClusterSnapshot(cluster="c", time=T0, partitions=[PartitionRecord("c", "t", 2, 1, 1, [1, 2, 3], [1, 2, 3],
                                                                          [], 2)])
    families = families_evaluated(s)
    # neither condition reported this poll: t-0's timer is kept (its evidence is stale), t-1's dropped
    assert advance_timers(held, [], families, T0, {"under_replicated": frozenset({"t-0"})}) == {
        ("under_replicated", "t-0"): T0 - 100}
    assert advance_timers(held, [], families, T0, {"under_replicated": None}) == held
    assert advance_timers(held, [], families, T0, frozenset({"under_replicated"})) == held
    assert advance_timers(held, [], families, T0) == {}


@pytest.mark.parametrize("keep", [frozenset({"consumer_lag_status"}), {"consumer_lag_status": None}])
def test_the_tracker_still_keeps_whole_rules(keep: frozenset[str] | Mapping[str, frozenset[str] | None]) -> None:
    tr = AlertTracker()
    tr.update("c", [Candidate("consumer_lag_status", "critical", g, f"group {g} ERR") for g in ("a", "b")], T0)
    current, _, resolved = tr.update("c", [], T0 + 30, keep)
    assert {a.subject for a in current} == {"a", "b"} and not resolved

