"""Alert rules: pure functions from a snapshot to alert candidates.

A rule sees the poll's snapshot, the poller's memory of earlier polls (`ClusterState`: ISR change times,
producer epochs, election times — read, never written), how long each timed condition has held (`held`:
(rule, subject) → since when, as of the previous poll) and the thresholds. It changes nothing: the poller
advances the timers from what the rules report (`collectors.alerting.evaluation`) and the alert lifecycle
(`collectors.alerting.lifecycle`) gives candidates their identity and history. A timed condition that holds
but not yet for long enough is reported as a *pending* candidate: it keeps its timer running and raises no
alert.

What each rule means, its severity, its Prometheus twin and its runbook entry are in
`collectors.alerting.catalogue`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, replace

from collectors.alerting.catalogue import RULES
from collectors.alerting.thresholds import Thresholds
from collectors.model.records import (
    ClusterSnapshot,
    GroupPartitionRecord,
    GroupRecord,
    KRaftVoterRecord,
    LossRecord,
    leader_clock,
)
from collectors.model.state import ClusterState
from collectors.model.vocabulary import (
    ACTIVE_GROUP,
    AT_MIN_ISR,
    BEYOND_LOG_END,
    CRITICAL,
    INFO,
    OFFLINE,
    PREPARE_TXN_STATES,
    RETENTION_SKIPPED,
    SEVERITY_RANK,
    STALE_SUBJECT_KINDS,
    TRUNCATION,
    UNCLEAN_ELECTION,
    UNDER_MIN_ISR,
    WARNING,
    ZK_IO_ERROR,
    ZK_NOT_SERVING,
    ZK_REFUSED,
    ZK_TIMEOUT,
    ZK_TLS_FAILED,
    ZK_UNREACHABLE,
    ZXID_REGRESSED,
    broker_subject,
    partition_subject,
    voter_subject,
)
from collectors.model.wording import count_of, plural

Held = Mapping[tuple[str, str], float]
"""(rule, subject) → the time its condition started holding, as of the previous poll."""

ZK_NOT_SERVING_WHY: Mapping[str, str] = {
    ZK_NOT_SERVING: "it answers that it is not currently serving requests (no quorum, or electing a leader)",
    ZK_REFUSED: "its client port refused the connection (is the process down?)",
    ZK_TIMEOUT: "no answer to srvr within the poll's timeout (paused, overloaded or cut off?)",
    ZK_UNREACHABLE: "unreachable (no route to the host, or its name does not resolve)",
    ZK_IO_ERROR: "the connection broke off mid-answer",
}
"""The ``zk_node_not_serving`` alert's words for a probe's short reason (`ZK_PROBE_FAILURES`): on-call reads "not
serving: not serving" as nothing, and needs to know whether the process answered at all."""


def zk_not_serving_why(error: str | None) -> str:
    """Why a ZooKeeper server counts as not serving, in words: `ZK_NOT_SERVING_WHY`, a TLS failure's, else the
    record's own error (``4lw not whitelisted: srvr, mntr``), else "no answer"."""
    if error and error.startswith(ZK_TLS_FAILED):
        return ("the monitor's TLS connection to it failed (its certificate not trusted or not naming this host, ours "
                "refused, or no TLS on that port: the poll's errors say which)")
    return ZK_NOT_SERVING_WHY.get(error or "", error or "no answer")


@dataclass(frozen=True, slots=True)
class Candidate:
    rule: str
    severity: str
    subject: str
    summary: str
    value: float | None = None
    pending: bool = False  # the condition holds but not yet for as long as the rule requires: no alert
    team: str | None = None  # the owner team of its group or topic (`apply_policy`)
    topic: str | None = None  # the topic it is about (its subject's, for a partition): whose policy applies


ELECTION_ALERT_S = 600.0  # how long an election stays visible as an alert
# A controller failover reaches ZooKeeper's /controller first and the brokers' metadata only once the new
# controller has loaded the cluster state and sent UpdateMetadata (seconds, tens on big clusters): a mismatch
# must hold this long, and over two polls, before it is alerted, however often the monitor polls.
CONTROLLER_MISMATCH_GRACE_S = 30.0
# A KRaft quorum between two leaders answers no DescribeQuorum (only the leader does) for the seconds an election
# takes (controller.quorum.fetch.timeout.ms, 2 s, then a vote): "no leader" must hold this long, and over two
# polls, before it is alerted.
KRAFT_NO_LEADER_GRACE_S = 30.0
# A voter whose last fetch is this much behind the freshest replica's (all the leader's clock) is not fetching: many
# fetch timeouts (controller.quorum.fetch.timeout.ms, 2 s) without one, far beyond a pause between two fetches.
KRAFT_NOT_FETCHING_S = KRAFT_NO_LEADER_GRACE_S
# A change of the KRaft voter set found this long after the set before was last read (the monitor down, the quorum
# unanswered: several default polls) is said to have happened in that window, not "0s ago".
VOTER_SET_GAP_S = 120.0


Rule = Callable[[ClusterSnapshot, ClusterState, Held, Thresholds, float], Iterator[Candidate]]


def cluster_health(s: ClusterSnapshot, st: ClusterState, held: Held, th: Thresholds, now: float) -> Iterator[Candidate]:
    if not s.reachable:
        yield Candidate("cluster_unreachable", CRITICAL, s.cluster,
                        f"cluster {s.cluster} unreachable: {s.errors[0] if s.errors else 'no answer'}")
    elif s.stale_sections:
        yield Candidate("data_stale", WARNING, s.cluster,
                        f"stale sections: {', '.join(stale_section_words(s))}", float(len(s.stale_sections)))


def _first(names: list[str], n: int = 5) -> str:
    """The first `n` of `names` as a summary lists them, an ellipsis saying there are more."""
    return ", ".join(names[:n]) + (" …" if len(names) > n else "")


STALE_NAMED = 3  # subjects named per stale section in `data_stale`'s summary; the rest counted


def stale_section_words(s: ClusterSnapshot) -> list[str]:
    """Each stale section as `data_stale` says it: whole (``zookeeper``), or with the subjects it is stale for
    (``offsets (4 partitions: a-0, b-1, orders-0 and 1 more)``, ``partitions (topic doomed)``): on-call reads which
    topic or group to look at, not only that some part of the poll failed."""
    words = []
    for section in s.stale_sections:
        subjects = sorted(s.stale_subjects.get(section, ()))
        if not subjects:
            words.append(section)
            continue
        kind = STALE_SUBJECT_KINDS[section].replace("_", " ")
        named = ", ".join(subjects[:STALE_NAMED])
        more = f" and {len(subjects) - STALE_NAMED:,} more" if len(subjects) > STALE_NAMED else ""
        count = plural(len(subjects), kind) if len(subjects) > 1 else kind
        words.append(f"{section} ({count}{':' if len(subjects) > 1 else ''} {named}{more})")
    return words


def partitions(s: ClusterSnapshot, st: ClusterState, held: Held, th: Thresholds, now: float) -> Iterator[Candidate]:
    for p in s.partitions:
        subj = partition_subject(p.topic, p.partition)
        isr, rf, mi = len(p.isr), p.replication_factor, p.min_insync_replicas
        cls = p.partition_class
        if cls == OFFLINE:
            yield Candidate("offline_partition", CRITICAL, subj,
                            f"{subj} has no leader (replicas {p.replicas}, ISR {p.isr})", topic=p.topic)
            continue
        # min.insync.replicas above RF: no ISR can meet it, and the topic's setting is the one cause of the failing
        # writes (`unsafe_durability`, once a topic), not a state of each partition
        if cls == UNDER_MIN_ISR and not 0 < rf < mi:
            yield Candidate("under_min_isr", CRITICAL, subj,
                            f"{subj} ISR {p.isr} below min.insync.replicas={mi}: acks=all writes fail", float(isr),
                            topic=p.topic)
        elif cls == AT_MIN_ISR:
            yield Candidate("at_min_isr", WARNING, subj,
                            f"{subj} ISR {p.isr} at min.insync.replicas={mi}: one more failure stops writes",
                            float(isr), topic=p.topic)
        if p.under_replicated:
            since = held.get(("under_replicated", subj), now)
            yield Candidate("under_replicated", WARNING, subj,
                            f"{subj} under-replicated for {now - since:.0f}s: ISR {p.isr} of {p.replicas}",
                            float(rf - isr), pending=now - since < th.under_replicated_grace_s, topic=p.topic)
        changes = st.isr_changes.get((p.topic, p.partition))
        if changes:
            recent = sum(1 for t in changes if t >= now - th.isr_flap_window_s)
            if recent >= th.isr_flap_changes:
                yield Candidate("isr_flapping", WARNING, subj,
                                f"{subj} ISR changed {recent} times in {th.isr_flap_window_s:.0f}s", float(recent),
                                topic=p.topic)
        if p.zk_isr is not None and p.zk_isr_mismatch:
            since = held.get(("zk_isr_mismatch", subj), now)
            yield Candidate("zk_isr_mismatch", WARNING, subj,
                            f"{subj} ISR in ZooKeeper {p.zk_isr} differs from metadata {p.isr}",
                            pending=not now > since, topic=p.topic)  # seen on two polls
    online = [p for p in s.partitions if not p.offline]
    if online:
        off = sum(1 for p in online if not p.leader_is_preferred)
        ratio = off / len(online)
        if ratio > th.preferred_leader_imbalance_ratio:
            since = held.get(("preferred_leader_imbalance", s.cluster), now)
            yield Candidate("preferred_leader_imbalance", INFO, s.cluster,
                            f"{off} of {len(online)} partitions ({ratio:.0%}) led by a non-preferred replica", ratio,
                            pending=now - since < th.under_replicated_grace_s)


def topics(s: ClusterSnapshot, st: ClusterState, held: Held, th: Thresholds, now: float) -> Iterator[Candidate]:
    not_read: set[str] = set()
    if "configs" in s.stale_sections:
        # DescribeConfigs failed this poll (e.g. the controller answers too late): the snapshot then holds the
        # settings last read, or Kafka's defaults (min.insync.replicas=1), not the topics' settings. Open alerts are
        # kept (keep_when_stale); new ones wait for real answers. Where only some topics failed
        # (`stale_subjects`), the others are judged.
        if "configs" not in s.stale_subjects:
            return
        not_read = set(s.stale_subjects["configs"])
    for t in s.topics:
        if t.internal and t.topic == "__consumer_offsets":
            continue  # its durability is the broker's offsets.topic.* business, checked by the broker
        if t.topic in not_read:
            continue
        problems, severity = [], WARNING
        if t.unclean_leader_election:
            problems.append("unclean.leader.election.enable=true (acknowledged writes can be lost)")
        if t.min_insync_replicas > t.replication_factor:
            problems.append(f"min.insync.replicas={t.min_insync_replicas} > RF {t.replication_factor} "
                            "(acks=all writes always fail)")
            severity = CRITICAL
        elif t.min_insync_replicas == t.replication_factor and t.replication_factor > 1:
            problems.append(f"min.insync.replicas={t.min_insync_replicas} = RF (one failure stops acks=all writes)")
        if t.replication_factor >= 3 and t.min_insync_replicas < 2:
            problems.append(f"min.insync.replicas={t.min_insync_replicas} with RF {t.replication_factor} "
                            "(acks=all acknowledged by one replica)")
        if problems:
            yield Candidate("unsafe_durability", severity, t.topic, f"{t.topic}: " + "; ".join(problems),
                            topic=t.topic)


def brokers(s: ClusterSnapshot, st: ClusterState, held: Held, th: Thresholds, now: float) -> Iterator[Candidate]:
    for b in s.brokers:
        subj = broker_subject(b.broker_id)
        if not b.alive:
            yield Candidate("broker_down", CRITICAL, subj, f"broker {b.broker_id} is not in the metadata: fenced "
                            "(stopped, crashed or missing heartbeats) or unregistered" if s.mode == "kraft" else
                            f"broker {b.broker_id} is not registered")
        elif b.reachable is False:
            yield Candidate("broker_unreachable", CRITICAL, subj,
                            f"broker {b.broker_id} ({b.host}:{b.port}) is registered but did not answer")
    if s.mode != "kraft":
        yield from _metadata_lagging(s, held, th, now)
    # In KRaft the active controller is the quorum leader (`snapshot._controller_id`): none known means no
    # DescribeQuorum ever named one, which is `kraft_no_leader`'s to judge, over its grace and only on evidence that
    # the quorum has no leader (a quorum unreadable for another reason is `data_stale`'s); one condition, one page.
    if s.controller_id is None and s.mode != "kraft":
        yield Candidate("no_controller", CRITICAL, s.cluster, "metadata reports no active controller")


def _metadata_lagging(s: ClusterSnapshot, held: Held, th: Thresholds, now: float) -> Iterator[Candidate]:
    """`broker_metadata_lagging`: brokers up whose answer shows leader epochs another answer had replaced more than
    `broker_metadata_lag_s` before (`collectors.model.metadata_lag`: a lower bound, evidence). A broker up that was
    lagging and that this poll could not judge (no answer, none about what it is behind on, or only a younger lag
    than it is remembered behind on) stays so: nothing says it caught up. A broker down is `broker_down`'s or
    `broker_unreachable`'s."""
    for b in s.brokers:
        if not b.up:
            continue
        subj = broker_subject(b.broker_id)
        if b.metadata_behind_s is not None and b.metadata_behind_s > th.broker_metadata_lag_s:
            yield Candidate("broker_metadata_lagging", WARNING, subj,
                            f"broker {b.broker_id}'s metadata cache lags the controller by {b.metadata_behind_s:.0f}s "
                            f"at least: it answered {plural(b.metadata_behind_partitions or 0, 'partition')} at a "
                            "leader epoch replaced that long ago, so the clients it answers go to old leaders",
                            b.metadata_behind_s)
        elif b.metadata_behind_s is None and (since := held.get(("broker_metadata_lagging", subj))) is not None:
            yield Candidate("broker_metadata_lagging", WARNING, subj,
                            f"broker {b.broker_id}'s metadata cache was found lagging the controller "
                            f"{now - since:.0f}s ago, and this poll has no answer of it to judge: nothing says it "
                            "caught up")


def groups(s: ClusterSnapshot, st: ClusterState, held: Held, th: Thresholds, now: float) -> Iterator[Candidate]:
    by_group: dict[str, list[GroupPartitionRecord]] = {}
    for gp in s.group_partitions:
        by_group.setdefault(gp.group_id, []).append(gp)
    topic_horizon = {t.topic: t.retention_risk_s for t in s.topics if t.retention_risk_s is not None}
    for g in s.groups:
        if g.activity != ACTIVE_GROUP:
            continue  # nobody runs it (INACTIVE / ABANDONED): info in its record, never an alert
        parts = by_group.get(g.group_id, [])
        if g.status in ("WARN", "ERR"):
            bad = [f"{p.topic}-{p.partition}:{p.status}" for p in parts if p.status != "OK"]
            yield Candidate("consumer_lag_status", CRITICAL if g.status == "ERR" else WARNING, g.group_id,
                            f"group {g.group_id} {g.status} ({g.worst_partition_status}; state {g.state}, "
                            f"{plural(g.members, 'member')}): {_first(bad)}",
                            float(g.lag_sum or 0))
        slo = g.lag_seconds_slo if g.lag_seconds_slo is not None else th.lag_seconds_slo
        if g.lag_seconds_max is not None and g.lag_seconds_max > slo and not g.idle:
            yield Candidate("consumer_lag_seconds", WARNING, g.group_id,
                            f"group {g.group_id} is {g.lag_seconds_max:.0f}s behind (SLO {slo:.0f}s)",
                            g.lag_seconds_max)
        # a commit below the log start is shown (`below_log_start`) but not judged here: what retention deleted is
        # `retention_data_loss` once the ledger saw it happen (`losses`), not whenever the state is found
        def horizon(p: GroupPartitionRecord, g: GroupRecord = g) -> float:
            if g.retention_risk_s is not None:
                return g.retention_risk_s
            return topic_horizon.get(p.topic, th.retention_risk_s)

        at_risk = [p for p in parts if not p.below_log_start and p.seconds_to_retention is not None
                   and p.lag and p.seconds_to_retention < horizon(p)]
        if at_risk:
            worst = min(p.seconds_to_retention for p in at_risk if p.seconds_to_retention is not None)
            yield Candidate("retention_risk", WARNING, g.group_id,
                            f"group {g.group_id}: unread messages deleted by retention in about {worst:.0f}s",
                            worst)


def transactions(s: ClusterSnapshot, st: ClusterState, held: Held, th: Thresholds, now: float) -> Iterator[Candidate]:
    for t in s.transactions:
        if t.state == "Ongoing" and t.age_seconds is not None and \
                t.age_seconds > t.timeout_ms / 1000.0 + th.txn_timeout_grace_s:
            yield Candidate("stuck_transaction", CRITICAL, t.transactional_id,
                            f"transaction {t.transactional_id} Ongoing for {t.age_seconds:.0f}s "
                            f"(timeout {t.timeout_ms / 1000:.0f}s)", t.age_seconds)
        elif t.state in PREPARE_TXN_STATES:
            _, since = st.txn_state_since.get(t.transactional_id, (t.state, now))
            if now - since > th.txn_prepare_stuck_s:
                yield Candidate("stuck_transaction", CRITICAL, t.transactional_id,
                                f"transaction {t.transactional_id} in {t.state} for {now - since:.0f}s",
                                now - since)
        # with Transaction V2 every end bumps the epoch: the snapshot keeps only the rises of a producer proven to
        # keep V1's rules there (`collectors.model.txn_clients`)
        epochs = st.producer_epochs.get(t.transactional_id)
        if epochs:
            # every entry but the first (the epoch first seen) is a rise: the first rise after a quiet spell counts
            bumps = sum(1 for i, (when, _) in enumerate(epochs) if i and when >= now - th.producer_epoch_window_s)
            if bumps >= th.producer_epoch_bumps:
                yield Candidate("producer_epoch_bumps", WARNING, t.transactional_id,
                                f"producer {t.transactional_id} epoch rose {bumps} times in "
                                f"{th.producer_epoch_window_s:.0f}s (now {t.producer_epoch})", float(bumps))
    for p in s.producers:
        if p.hanging:
            subj = partition_subject(p.topic, p.partition)
            yield Candidate("hanging_transaction", CRITICAL, subj,
                            f"{subj}: producer {p.producer_id} has a transaction open since "
                            f"offset {p.txn_start_offset} that no coordinator knows (LSO held back)")
    for part in s.partitions:
        gap = part.lso_gap
        if gap is not None and gap > th.lso_gap_messages:
            subj = partition_subject(part.topic, part.partition)
            yield Candidate("lso_gap", WARNING, subj, f"{subj}: LSO {gap} messages behind the high watermark",
                            float(gap))


def zookeeper(s: ClusterSnapshot, st: ClusterState, held: Held, th: Thresholds, now: float) -> Iterator[Candidate]:
    servers = s.zookeeper
    if not servers:
        return
    serving = [z for z in servers if z.serving]
    leaders = [z for z in serving if z.mode == "leader"]
    standalone = len(servers) == 1 and serving and serving[0].mode == "standalone"
    if len(serving) <= len(servers) // 2:
        since = held.get(("zk_quorum_lost", s.cluster), now)
        yield Candidate("zk_quorum_lost", CRITICAL, s.cluster,
                        f"only {len(serving)} of {len(servers)} ZooKeeper servers serve, for {now - since:.0f}s",
                        float(len(serving)), pending=not (now > since and now - since >= th.zk_quorum_lost_grace_s))
    elif not leaders and not standalone:
        yield Candidate("zk_no_leader", CRITICAL, s.cluster, "no ZooKeeper server reports mode leader")
    if len(leaders) > 1:
        yield Candidate("zk_multiple_leaders", CRITICAL, s.cluster,
                        f"{len(leaders)} ZooKeeper servers report leader: {', '.join(z.server for z in leaders)}")
    for z in servers:
        if not z.serving:
            yield Candidate("zk_node_not_serving", WARNING, z.server,
                            f"ZooKeeper {z.server} is not serving: {zk_not_serving_why(z.error)}")
        if z.lag_behind_leader is not None and z.lag_behind_leader > 0:
            since = held.get(("zk_follower_behind", z.server), now)
            yield Candidate("zk_follower_behind", WARNING, z.server,
                            f"ZooKeeper {z.server} {plural(z.lag_behind_leader, 'transaction')} behind the leader for "
                            f"{now - since:.0f}s", float(z.lag_behind_leader),
                            pending=now - since < th.zk_follower_behind_s)
    if st.zk_election_at is not None and now - st.zk_election_at < ELECTION_ALERT_S:
        yield Candidate("zk_leader_election", INFO, s.cluster,
                        f"ZooKeeper elected a new leader (epoch {st.zk_leader_epoch}) "
                        f"{now - st.zk_election_at:.0f}s ago", float(st.zk_leader_epoch or 0))
    controllers = {b.broker_id for b in s.brokers if b.is_controller}
    zk_controller = st.zk_controller
    if zk_controller is not None and controllers and zk_controller not in controllers:
        since = held.get(("controller_mismatch", s.cluster), now)
        yield Candidate("controller_mismatch", CRITICAL, s.cluster,
                        f"/controller says {zk_controller}, metadata says {sorted(controllers)}",
                        pending=not (now > since and now - since >= CONTROLLER_MISMATCH_GRACE_S))


def kraft(s: ClusterSnapshot, st: ClusterState, held: Held, th: Thresholds, now: float) -> Iterator[Candidate]:
    """The KRaft quorum: no leader (the voters last known reported leaderless, or none known and DescribeQuorum's
    failure says so), a leader that hears from no majority (`fetching_voters`), both `kraft_no_leader` (one timer:
    neither commits anything, and the leader of a Kafka from 3.7 resigns after 1.5 fetch timeouts without a
    majority, turning the one into the other); lagging voters; elections; a voter set that survives no voter's loss
    (`kraft_quorum_fragile`: 1 or 2 voters; a voter merely down is still in the set) and a change of the set
    (`kraft_voters_changed`, open as long as an election)."""
    voters = [v for v in s.kraft_voters if v.role in ("leader", "voter")]
    since = held.get(("kraft_no_leader", s.cluster), now)
    pending = not (now > since and now - since >= KRAFT_NO_LEADER_GRACE_S)
    if not voters:
        if s.mode == "kraft" and s.quorum_no_leader is not None:  # a monitor started while there is no leader
            yield Candidate("kraft_no_leader", CRITICAL, s.cluster,
                            f"the KRaft quorum has had no leader for {now - since:.0f}s: DescribeQuorum did not "
                            f"answer with one (voters not known yet): {s.quorum_no_leader}", pending=pending)
        return
    leaderless = voters[0].leader_id < 0
    if leaderless:
        why = s.quorum_no_leader or next((e for e in s.errors if e.startswith("DescribeQuorum")), None)
        yield Candidate("kraft_no_leader", CRITICAL, s.cluster,
                        f"the KRaft quorum has had no leader for {now - since:.0f}s (voters "
                        f"{', '.join(str(v.node_id) for v in voters)}; last leader epoch {voters[0].leader_epoch})"
                        + (f": {why}" if why else ""), pending=pending)
    else:
        fetching, behind = fetching_voters(s, voters)
        if 2 * fetching <= len(voters):
            ages = [f"{v.node_id} {'last fetched ' if k == 0 else ''}{age:.0f}s" for k, (v, age) in enumerate(behind)]
            yield Candidate("kraft_no_leader", CRITICAL, s.cluster,
                            f"the KRaft leader {voters[0].leader_id} (epoch {voters[0].leader_epoch}) has heard from "
                            f"no majority of the voters for {now - since:.0f}s: only {fetching} of {len(voters)} "
                            f"fetching ({', '.join(ages)} before the freshest replica); nothing commits (high "
                            f"watermark {voters[0].high_watermark})", float(fetching), pending=pending)
    ids = ", ".join(str(i) for i in sorted(v.node_id for v in voters))
    if len(voters) <= 2:  # a majority of 2 is 2, of 1 is 1: no voter can be lost
        yield Candidate("kraft_quorum_fragile", WARNING, s.cluster,
                        f"the KRaft quorum has {plural(len(voters), 'voter')} ({ids}): losing "
                        f"{'it' if len(voters) == 1 else 'either'} stops it (a majority of {len(voters)} is "
                        f"{len(voters)}); 3 voters survive the loss of one", float(len(voters)))
    if st.kraft_voters_changed_at is not None and now - st.kraft_voters_changed_at < ELECTION_ALERT_S \
            and st.kraft_voters_change is not None:
        added, removed, before = st.kraft_voters_change
        words = [f"{count_of(len(xs), 'voter')} {', '.join(map(str, xs))} {what}"
                 for xs, what in ((removed, "removed"), (added, "added")) if xs]
        ago = now - st.kraft_voters_changed_at
        # found after a gap (the monitor down, the quorum unanswered): it happened somewhere in it, not just now
        when = (f"between {now - before:.0f}s and {ago:.0f}s ago (no voter set was read in between)"
                if before is not None and st.kraft_voters_changed_at - before > VOTER_SET_GAP_S else f"{ago:.0f}s ago")
        yield Candidate("kraft_voters_changed", INFO, s.cluster,
                        f"KRaft voter set changed {when}: {'; '.join(words)} (voters now {ids})", float(len(voters)))
    leader = next((v for v in voters if v.role == "leader" and v.log_end_offset is not None), None)
    behind_what = (f"the leader's log end offset {leader.log_end_offset}" if leader is not None
                   else f"the high watermark {voters[0].high_watermark}")
    for v in [] if leaderless else voters:  # lag is behind the leader's log: without a leader, none
        if v.lag is None or v.lag > th.kraft_voter_lag_records:
            yield Candidate("kraft_voter_lagging", WARNING, voter_subject(v.node_id),
                            f"KRaft voter {v.node_id} is {v.lag if v.lag is not None else 'an unknown number of'} "
                            f"records behind {behind_what}", float(v.lag) if v.lag is not None else None)
    if not leaderless:
        yield from _observers(s, held, th, now, behind_what)
    if st.kraft_election_at is not None and now - st.kraft_election_at < ELECTION_ALERT_S:
        leader_id, epoch = (voters[0].leader_id, voters[0].leader_epoch) if not leaderless or st.kraft_leader is None \
            else st.kraft_leader
        yield Candidate("kraft_leader_election", INFO, s.cluster,
                        f"KRaft leader changed to {leader_id} (epoch {epoch}) {now - st.kraft_election_at:.0f}s ago")


def fetching_voters(s: ClusterSnapshot, voters: list[KRaftVoterRecord]) -> tuple[int, list[tuple[KRaftVoterRecord,
                                                                                                    float]]]:
    """How many of the `voters` fetch from the leader, and those that do not with how far their last fetch is behind
    the freshest. Every last fetch time DescribeQuorum gives is the leader's clock, so they are judged against each
    other (the freshest of the voters' and observers': the leader's own, or a broker's that fetches all the time),
    never against the monitor's clock. A voter whose last fetch is more than `KRAFT_NOT_FETCHING_S` behind is not
    fetching; the leader always is, and so is a voter whose time the leader does not know (-1: a new leader's, or an
    old Kafka's), unknown being no evidence."""
    freshest = leader_clock(s.kraft_voters)
    if freshest is None:
        return len(voters), []
    behind = [(v, freshest - v.last_fetch_time) for v in voters
              if v.role != "leader" and v.last_fetch_time is not None
              and freshest - v.last_fetch_time > KRAFT_NOT_FETCHING_S]
    return len(voters) - len(behind), behind


def _observers(s: ClusterSnapshot, held: Held, th: Thresholds, now: float, behind_what: str) -> Iterator[Candidate]:
    """`kraft_observer_lagging`: brokers up and answering whose metadata log last caught up with the leader's more
    than `kraft_observer_lag_s` before the leader's latest time (`leader_clock`: its clock on both sides). A
    broker down stays among the leader's observers for minutes, with the times of its last fetch: it is
    `broker_down`'s or `broker_unreachable`'s. Times unknown (-1: Kafka before 3.3, a new leader) are no evidence.

    The leader drops an observer 5 minutes after its last fetch, and a new leader lists only the brokers that
    fetched from it: a broker seen lagging (its timer running) that is no longer listed has not caught up since,
    and stays lagging. One never seen lagging and not listed is not judged: during a ZooKeeper migration the
    brokers not yet moved to KRaft fetch nothing, and are no observers."""
    clock = leader_clock(s.kraft_voters)
    up = {b.broker_id for b in s.brokers if b.up}
    listed = {v.node_id for v in s.kraft_voters}
    for v in [] if clock is None else s.kraft_voters:
        if v.role != "observer" or v.node_id not in up or v.last_caught_up_time is None:
            continue
        age = clock - v.last_caught_up_time
        if age > th.kraft_observer_lag_s:
            lag = f", {v.lag} records behind {behind_what}" if v.lag is not None else ""
            yield Candidate("kraft_observer_lagging", WARNING, broker_subject(v.node_id),
                            f"broker {v.node_id}'s metadata (a KRaft observer) last caught up with the leader's log "
                            f"{age:.0f}s before the leader's latest time{lag}: it answers clients with metadata "
                            "that old", age)
    for node in sorted(up - listed):
        subj = broker_subject(node)
        since = held.get(("kraft_observer_lagging", subj))
        if since is not None:
            yield Candidate("kraft_observer_lagging", WARNING, subj,
                            f"broker {node}'s metadata (a KRaft observer) was seen behind the leader's log "
                            f"{now - since:.0f}s ago and the leader no longer lists it (it drops an observer 5 "
                            "minutes after its last fetch; a new leader lists those that fetched from it): it has "
                            "not caught up since, and answers clients with metadata at least that old")


def losses(s: ClusterSnapshot, st: ClusterState, held: Held, th: Thresholds, now: float) -> Iterator[Candidate]:
    """Loss the poller proved (`collectors.model.loss`): open for `loss_alert_hold_s` after the last one seen on
    the subject; a partition truncated twice in that time says how many messages in all, a group whose unread
    messages retention deleted on several polls or partitions how many in all.

    Retention is judged from the ledger, not from a commit found below the log start: a monitor started on a group
    retention passed long ago, or on one it passed while nobody ran it, records nothing (`group_evidence`) and
    pages nobody; the log start seen moving past more unread messages of a running group does."""
    latest: dict[tuple[str, str], LossRecord] = {}
    lost: dict[str, int] = {}
    read_gone: dict[str, list[LossRecord]] = {}
    skipped: dict[str, list[LossRecord]] = {}
    for x in st.recent_losses:
        if x.cluster != s.cluster or now - x.time >= th.loss_alert_hold_s:
            continue
        if x.kind == BEYOND_LOG_END and x.group_id is not None:
            read_gone.setdefault(x.group_id, []).append(x)
            continue
        if x.kind == RETENTION_SKIPPED and x.group_id is not None:
            skipped.setdefault(x.group_id, []).append(x)
            continue
        rule = LOSS_RULES.get(x.kind)
        if rule is None:
            continue
        latest[(rule, x.subject)] = x
        if rule == "data_truncated":
            lost[x.subject] = lost.get(x.subject, 0) + (x.messages or 0)
    for (rule, subject), x in sorted(latest.items()):
        when = f"{now - x.time:.0f}s ago"
        unclean = " (unclean election enabled)" if x.unclean_enabled else ""
        if rule == "data_truncated":
            yield Candidate("data_truncated", CRITICAL, subject, f"{subject}: at least "
                            f"{plural(lost[subject], 'committed message')} lost {when}{unclean}: {x.evidence}",
                            float(lost[subject]), topic=x.topic)
        elif rule == "zk_zxid_regressed":
            yield Candidate("zk_zxid_regressed", CRITICAL, subject, f"{when}: {x.evidence}",
                            float(x.messages) if x.messages is not None else None)
        else:
            yield Candidate("unclean_election", CRITICAL, subject, f"{subject}: unclean election {when}{unclean}: "
                            f"{x.evidence}", float(x.epoch_after) if x.epoch_after is not None else None,
                            topic=x.topic)


    for gid, xs in sorted(read_gone.items()):
        n = sum(x.messages or 0 for x in xs)
        where = sorted({x.subject for x in xs})
        yield Candidate("offset_beyond_log_end", CRITICAL, gid,
                        f"group {gid} read {plural(n, 'message')} that a truncation removed ({_first(where)}): its "
                        "offsets are beyond where the log now ends, so unless it is reset it skips as many new "
                        "messages", float(n))
    for gid, xs in sorted(skipped.items()):
        n = sum(x.messages or 0 for x in xs)
        where = [partition_subject(t, p) for t, p in sorted({(x.topic or "", x.partition or 0) for x in xs})]
        yield Candidate("retention_data_loss", CRITICAL, gid,
                        f"group {gid}: retention deleted {plural(n, 'unread message')} on {_first(where)}, the last "
                        f"{now - max(x.time for x in xs):.0f}s ago",
                        float(n))


LOSS_RULES = {TRUNCATION: "data_truncated", UNCLEAN_ELECTION: "unclean_election",
              ZXID_REGRESSED: "zk_zxid_regressed"}
"""The alert rule of each `LossRecord.kind` that raises one."""

FAMILY_RULES: Mapping[str, Rule] = {
    "cluster": cluster_health, "partitions": partitions, "topics": topics, "brokers": brokers, "groups": groups,
    "transactions": transactions, "zookeeper": zookeeper, "kraft": kraft, "loss": losses}
"""Each evaluator by the catalogue family of the rules it raises (`monitor` rules are raised by the runtime)."""
UNREACHABLE_FAMILIES = ("cluster", "zookeeper", "loss")
"""What can still be judged when no broker answered: the cluster's unreachability, its ZooKeeper ensemble, and
the loss already proven (memory, not this poll's data)."""


def families_evaluated(s: ClusterSnapshot) -> tuple[str, ...]:
    return tuple(FAMILY_RULES) if s.reachable else UNREACHABLE_FAMILIES


def evaluate(s: ClusterSnapshot, st: ClusterState, held: Held, th: Thresholds, now: float) -> list[Candidate]:
    """Every candidate of this poll, pending ones included (filter them with `firing`)."""
    out: list[Candidate] = []
    for family in families_evaluated(s):
        out.extend(FAMILY_RULES[family](s, st, held, th, now))
    return apply_policy(out, s)


def apply_policy(candidates: list[Candidate], s: ClusterSnapshot) -> list[Candidate]:
    """Each candidate with the owner team and the severity cap of what it is about (`collectors.model.policy`):
    a group's rule for group alerts, a topic's rule for partition, topic and loss alerts about its partitions.

    A group alert's subject is the group id (the loss alerts `retention_data_loss` and `offset_beyond_log_end`
    too: a rule whose catalogue subject is a group); a partition, topic or loss alert
    carries its topic (`Candidate.topic`), never guessed from a ``topic-N`` subject: partition 1 of
    ``orders`` is not the topic ``orders-1``. Broker, consensus and transaction alerts, and cluster-wide ones
    (``preferred_leader_imbalance``, ``zk_zxid_regressed``), have no owner team: they are the platform's.
    """
    groups = {g.group_id: (g.team, g.max_severity) for g in s.groups if g.team or g.max_severity}
    topics = {t.topic: (t.team, t.max_severity) for t in s.topics if t.team or t.max_severity}
    if not groups and not topics:
        return candidates
    out = []
    for c in candidates:
        family = RULES[c.rule].family if c.rule in RULES else ""
        hit = None
        if c.rule in RULES and RULES[c.rule].subject == "group":
            hit = groups.get(c.subject)
        elif family in ("partitions", "topics", "loss") and c.topic is not None:
            hit = topics.get(c.topic)
        if hit is None:
            out.append(c)
            continue
        team, cap = hit
        severity = c.severity
        if cap is not None and SEVERITY_RANK[severity] < SEVERITY_RANK[cap]:
            severity = cap
        out.append(replace(c, team=team, severity=severity))
    return out


assert set(FAMILY_RULES) | {"monitor"} == {r.family for r in RULES.values()}
