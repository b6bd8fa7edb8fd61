"""From raw observations to snapshot records (no I/O; the poller's state is the only memory).

Interpretation lives here so the adapters stay thin: effective topic configs,
lag in messages and seconds, Burrow-style status with our idle-partition fix,
retention risk, durability posture, the ZooKeeper view of ISR beside the
metadata view, transaction ages, and which open transactions no coordinator
knows (hanging).
"""

from __future__ import annotations

from collections import defaultdict, deque
from collections.abc import Callable

from collectors.model.activity import classify
from collectors.model.durability import topic_posture
from collectors.model.lag import (
    LagSettings,
    group_status,
    judge_partition,
    lag_messages,
    lag_seconds,
    seconds_to_retention,
    worst_partition_status,
)
from collectors.model.loss import (
    awaiting_answers,
    group_evidence,
    settle,
    transaction_evidence,
    truncated_readers,
    zxid_regressions,
)
from collectors.model.observations import KafkaObservation, QuorumReplica, ZkObservation
from collectors.model.policy import Policies, in_idle_window
from collectors.model.records import (
    BrokerRecord,
    ClusterSnapshot,
    GroupPartitionRecord,
    GroupRecord,
    KRaftVoterRecord,
    PartitionChangeRecord,
    PartitionRecord,
    ProducerRecord,
    TopicRecord,
    TransactionRecord,
)
from collectors.model.state import ClusterState
from collectors.model.txn_clients import counted_rise_time, rise_counts
from collectors.model.vocabulary import (
    ABANDONED,
    ACTIVE_GROUP,
    CLOSED_TXN_STATES,
    INACTIVE,
    INACTIVE_GROUP,
    OK,
    OPEN_TXN_STATES,
    STALL,
    STOP,
    epochs_bump_at_every_end,
    partition_of,
    partition_subject,
)

NO_POLICIES = Policies()


def _int(value: str | None, default: int) -> int:
    try:
        return int(value) if value is not None else default
    except ValueError:
        return default


def _bool(value: str | None) -> bool:
    return (value or "").strip().lower() == "true"


def build_snapshot(name: str, obs: KafkaObservation, zk: ZkObservation | None, state: ClusterState,
                   thresholds: LagSettings, now: float, policies: Policies | None = None,
                   kraft: bool | None = None) -> ClusterSnapshot:
    """`policies`: the ``policies:`` of the configuration (None: none, the thresholds decide everything). `kraft`:
    the cluster's configured ``kraft`` (`ClusterConfig.kraft`): True makes it KRaft from the first poll, whatever
    this poll's DescribeQuorum could say; None or False: the mode is what the cluster shows."""
    policies = policies if policies is not None else NO_POLICIES
    snap = ClusterSnapshot(cluster=name, time=now, reachable=obs.reachable, cluster_id=obs.cluster_id,
                           controller_id=obs.controller_id, errors=list(obs.errors), requests=obs.requests,
                           filtered_topics=obs.filtered_topics, filtered_groups=obs.filtered_groups)
    # A cluster configured KRaft, or whose quorum named a leader before, is KRaft when this poll's DescribeQuorum
    # went unanswered: a monitor started while the quorum has no leader must not fall back to Metadata's controller
    # (a random broker, KIP-590). A DescribeQuorum the cluster does not support (`obs.kraft` False) is its word.
    is_kraft = zk is None and (obs.kraft is True or (obs.kraft is None and (
        kraft is True or state.kraft_leader is not None)))
    if zk is not None:
        snap.mode = "zookeeper"
    elif is_kraft:
        snap.mode = "kraft"
        if obs.quorum is None:
            snap.quorum_no_leader = obs.quorum_no_leader
    snap.stale_sections = sorted(obs.stale_sections | (set(zk.stale_sections) if zk is not None else set()))
    snap.stale_subjects = {section: sorted(subjects) for section, subjects in sorted(obs.stale_subjects.items())
                           if subjects and section in obs.stale_sections}
    if zk is not None:
        snap.errors.extend(e for e in zk.errors if e not in snap.errors)
        snap.zookeeper = list(zk.servers)
        state.zk_controller = zk.controller_id
        _zookeeper_elections(snap, state, now)
        snap.losses += zxid_regressions(snap.cluster, snap.zookeeper, state.zk_zxids, now)
    if obs.transaction_version is not None:
        state.transaction_version = obs.transaction_version  # a poll that could not tell keeps the last read
    snap.transaction_version = state.transaction_version
    if not obs.reachable:
        snap.stale = True
        _remember_losses(snap, state, now)
        return snap
    snap.controller_id = _controller_id(obs, state, is_kraft)
    _brokers(snap, obs, zk, state, now)
    _carry_configs(obs, state)
    _partitions_and_topics(snap, obs, zk, state, now, policies)
    _metadata_lag(snap, obs, state, now)
    _groups(snap, obs, state, thresholds, now, policies)
    _transactions(snap, obs, state, now)
    _kraft(snap, obs, state, now)
    _losses(snap, obs, state, now)
    snap.stale = bool(snap.stale_sections)
    # What could not be read this poll is not gone: its memory (commit windows, epoch watches, ledger marks)
    # is kept until a complete poll says it no longer exists. A section stale for some subjects only (one topic's
    # Metadata in error) keeps theirs, and the rest is pruned.
    unread = snap.stale_subjects
    whole = set(snap.stale_sections) - set(unread)
    state.prune(None if "partitions" in whole else {(p.topic, p.partition) for p in snap.partitions},
                None if whole & {"groups", "offsets"} else
                {(g.group_id, g.topic, g.partition) for g in snap.group_partitions},
                None if "groups" in whole else {g.group_id for g in snap.groups},
                unread_topics=unread.get("partitions", ()), unread_groups=unread.get("groups", ()),
                unread_partitions=[p for p in map(partition_of, unread.get("offsets", ())) if p is not None])
    state.polls += 1
    state.last_good = now
    return snap


LOSS_MEMORY_S = 86_400.0  # losses kept in memory for the alerts (the ledger itself is the history table)
LOSS_MEMORY_MAX = 10_000


def _losses(snap: ClusterSnapshot, obs: KafkaObservation, state: ClusterState, now: float) -> None:
    """This poll's evidence of loss (`collectors.model.loss`), remembered for the alerts."""
    unclean = {t.topic for t in snap.topics if t.unclean_leader_election}
    cut = settle(snap.cluster, obs.partitions, obs.high_watermark, obs.epoch_end_offsets, state.epoch_watch,
                 unclean, now, obs.high_watermark_epoch)
    snap.losses += cut
    snap.losses += truncated_readers(cut, state.group_marks)  # from the commits seen before the change
    # what retention deletes under a group nobody runs (inactive, abandoned) is not news: no ledger rows, then or
    # when it comes back; a partition whose new leader has not answered keeps the commits from before the change
    running = {g.group_id for g in snap.groups if g.activity == ACTIVE_GROUP}
    snap.losses += group_evidence(snap.cluster, snap.group_partitions, state.group_marks, now, recording=running,
                                  held=awaiting_answers(obs.partitions, state.epoch_watch))
    if "transactions" not in snap.stale_sections:
        snap.losses += transaction_evidence(snap.cluster, snap.transactions, state.txn_watch, now, obs.answered_by,
                                            every_end_bumps=epochs_bump_at_every_end(state.transaction_version),
                                            v1_epochs=state.txn_epochs)
        listed = {t.transactional_id for t in snap.transactions}
        for tid in [tid for tid in state.txn_watch if tid not in listed]:
            del state.txn_watch[tid]
    _remember_losses(snap, state, now)


def _remember_losses(snap: ClusterSnapshot, state: ClusterState, now: float) -> None:
    if snap.losses or state.recent_losses:
        kept = [x for x in state.recent_losses if now - x.time <= LOSS_MEMORY_S] + snap.losses
        state.recent_losses = kept[-LOSS_MEMORY_MAX:]


CONFIG_KEYS = ("min.insync.replicas", "retention.ms", "unclean.leader.election.enable", "cleanup.policy")
"""The topic and broker settings snapshots use (kept between polls; a full config set is ~30 keys per topic)."""


def _carry_configs(obs: KafkaObservation, state: ClusterState) -> None:
    """Fill configs DescribeConfigs could not return this poll with the last ones read.

    Otherwise a slow controller turns every topic into Kafka's defaults for a poll: min.insync.replicas=1
    flips under-min-ISR partitions to "at min ISR" and resolves their alerts on missing evidence. Settings
    change rarely; the last value read is far better evidence than the default. The section stays marked
    stale, so the carried values are known to be carried.
    """
    if obs.broker_configs:
        state.broker_configs = {k: obs.broker_configs.get(k) for k in CONFIG_KEYS}
    elif state.broker_configs:
        obs.broker_configs = dict(state.broker_configs)
    current = {p.topic for p in obs.partitions}
    for topic in current:
        cfg = obs.topic_configs.get(topic)
        if cfg is not None:
            state.topic_configs[topic] = {k: cfg.get(k) for k in CONFIG_KEYS}
        elif topic in state.topic_configs:
            obs.topic_configs[topic] = dict(state.topic_configs[topic])
    if len(state.topic_configs) > len(current):
        for topic in [t for t in state.topic_configs if t not in current]:
            del state.topic_configs[topic]


def _controller_id(obs: KafkaObservation, state: ClusterState, kraft: bool) -> int | None:
    """The active controller. ZooKeeper mode (or a mode not known yet): Metadata's controller id. KRaft: the quorum
    leader, as DescribeQuorum names it (a controller's node id, not a broker's in isolated mode), because a KRaft
    broker answers Metadata with a random broker (KIP-590). Where this poll's DescribeQuorum named no leader, the
    last one it named: a poll that could not read the quorum is no evidence that the controller moved, and a quorum
    without a leader is `kraft_no_leader`'s to say; None only before any was named."""
    if not kraft:
        return obs.controller_id
    q = obs.quorum
    if q and int(q["leader_id"]) >= 0:
        return int(q["leader_id"])
    return state.kraft_leader[0] if state.kraft_leader is not None else None


def _brokers(snap: ClusterSnapshot, obs: KafkaObservation, zk: ZkObservation | None, state: ClusterState,
             now: float) -> None:
    alive = {b[0] for b in obs.brokers}
    zk_ids = zk.broker_ids if zk is not None else None
    for node_id, host, port, rack in obs.brokers:
        state.known_brokers[node_id] = now
        snap.brokers.append(BrokerRecord(
            cluster=snap.cluster, broker_id=node_id, host=host, port=port, rack=rack, alive=True,
            in_zookeeper=(node_id in zk_ids) if zk_ids is not None else None,
            is_controller=node_id == snap.controller_id, reachable=node_id not in obs.unreachable_brokers))
    # Brokers that hold replicas but are not registered: down. One that left the cluster and every replica list
    # was decommissioned (its replicas reassigned first): forgotten, not down for ever. Without a complete
    # Metadata answer (or from an adapter that does not say) every broker seen before is still expected.
    expected = {r for p in obs.partitions for r in p.replicas}
    if obs.replica_brokers is None:
        expected.update(state.known_brokers)
    else:
        expected.update(obs.replica_brokers)
        for node_id in [b for b in state.known_brokers if b not in alive and b not in obs.replica_brokers]:
            del state.known_brokers[node_id]
    for node_id in sorted(expected - alive):
        snap.brokers.append(BrokerRecord(
            cluster=snap.cluster, broker_id=node_id, host="", port=0, alive=False,
            in_zookeeper=(node_id in zk_ids) if zk_ids is not None else None, reachable=False))


def _metadata_lag(snap: ClusterSnapshot, obs: KafkaObservation, state: ClusterState, now: float) -> None:
    """Each broker asked about a few topics: how far its metadata cache lags, at least (`metadata_lag`). Not in
    KRaft, where DescribeQuorum says it (`kraft_observer_lagging`). The epochs are witnessed by when every answer
    was in (`answered_by`), and the lag bounded at the poll's start, so neither end overstates it: a poll that does
    not know when its answers came (a `now` from another clock) learns and judges nothing."""
    memory = state.metadata_lag
    if snap.mode == "kraft":
        memory.clear()
        return
    if obs.answered_by is None:
        return
    witnessed = memory.witness(obs.partitions, obs.metadata_probes, obs.answered_by)
    memory.up = {b.broker_id for b in snap.brokers if b.up}
    if "partitions" not in obs.stale_sections or "partitions" in obs.stale_subjects:  # not stale as a whole
        memory.sizes = {t.topic: t.partitions for t in snap.topics}
        memory.prune(witnessed, lambda: {(p.topic, p.partition) for p in obs.partitions},
                     {b.broker_id for b in snap.brokers}, obs.stale_subjects.get("partitions", ()))
    lagging = memory.lagging(obs.metadata_probes, now)
    for b in snap.brokers:
        found = lagging.get(b.broker_id)
        if found is not None:  # None: its answer did not settle it (`EpochMemory.lagging`)
            b.metadata_behind_s, b.metadata_behind_partitions = found.at_least_s, found.partitions


def _partitions_and_topics(snap: ClusterSnapshot, obs: KafkaObservation, zk: ZkObservation | None, state: ClusterState,
                           now: float, policies: Policies) -> None:
    broker_min_isr = _int(obs.broker_configs.get("min.insync.replicas"), 1)
    zk_states = zk.partition_states if zk is not None else {}
    by_topic: dict[str, list[PartitionRecord]] = defaultdict(list)
    flap_window = 3600.0
    for p in obs.partitions:
        key = (p.topic, p.partition)
        cfg = obs.topic_configs.get(p.topic, {})
        zk_state = zk_states.get(key)
        rec = PartitionRecord(
            cluster=snap.cluster, topic=p.topic, partition=p.partition, leader=p.leader,
            leader_epoch=p.leader_epoch, replicas=p.replicas, isr=p.isr, offline_replicas=p.offline,
            min_insync_replicas=_int(cfg.get("min.insync.replicas"), broker_min_isr),
            log_start_offset=obs.log_start.get(key), high_watermark=obs.high_watermark.get(key),
            last_stable_offset=obs.last_stable.get(key),
            zk_leader=zk_state.get("leader") if zk_state else None,
            zk_isr=list(zk_state["isr"]) if zk_state and "isr" in zk_state else None)
        snap.partitions.append(rec)
        by_topic[p.topic].append(rec)
        if rec.high_watermark is not None:
            state.history(key).add(rec.high_watermark, now)
        view = (p.leader, tuple(sorted(p.isr)))
        before = state.partition_view.get(key)
        if before is not None and before != view:
            if before[1] != view[1]:
                state.isr_changes.setdefault(key, deque(maxlen=64)).append(now)
            snap.partition_changes.append(PartitionChangeRecord(
                cluster=snap.cluster, time=now, topic=p.topic, partition=p.partition, kind=_change_kind(before, view),
                leader_before=before[0], leader_after=view[0], isr_before=list(before[1]), isr_after=list(view[1])))
        state.partition_view[key] = view
        changes = state.isr_changes.get(key)
        while changes and changes[0] < now - flap_window:
            changes.popleft()
    for topic, parts in sorted(by_topic.items()):
        cfg = obs.topic_configs.get(topic, {})
        retention = _int(cfg.get("retention.ms"), 604_800_000)
        write_stop, data_loss = topic_posture(parts)
        pol = policies.for_topic(snap.cluster, topic)
        snap.topics.append(TopicRecord(
            cluster=snap.cluster, topic=topic, internal=topic in obs.internal_topics, partitions=len(parts),
            replication_factor=max((p.replication_factor for p in parts), default=0),
            min_insync_replicas=parts[0].min_insync_replicas if parts else broker_min_isr,
            unclean_leader_election=_bool(cfg.get("unclean.leader.election.enable")),
            retention_ms=retention if retention >= 0 else None,
            cleanup_policy=cfg.get("cleanup.policy") or "delete",
            under_replicated=sum(p.under_replicated for p in parts),
            under_min_isr=sum(p.under_min_isr and not p.offline for p in parts),
            at_min_isr=sum(p.at_min_isr and not p.offline for p in parts),
            offline=sum(p.offline for p in parts),
            preferred_leader_imbalance=sum(not p.leader_is_preferred and not p.offline for p in parts),
            failures_before_write_stop=write_stop, failures_before_data_loss=data_loss,
            team=pol.team, policy=pol.rule, retention_risk_s=pol.retention_risk_s, max_severity=pol.max_severity))


def _change_kind(before: tuple[int, tuple[int, ...]], after: tuple[int, tuple[int, ...]]) -> str:
    b, a = set(before[1]), set(after[1])
    if a < b:
        return "isr_shrink"
    if a > b:
        return "isr_expand"
    if a != b:
        return "isr_change"
    return "leader_change"


def _groups(snap: ClusterSnapshot, obs: KafkaObservation, state: ClusterState, th: LagSettings, now: float,
            policies: Policies) -> None:
    topics = {t.topic: t for t in snap.topics}
    offline = {(p.topic, p.partition) for p in snap.partitions if p.offline}
    owners_of = obs.group_owners
    for gid in sorted(obs.groups):
        info = obs.groups[gid]
        commits = obs.commits.get(gid, {})
        if info.get("state") == "Dead" and not commits:
            continue  # a deleted group: nothing to report
        members = int(info.get("members") or 0)
        pol = policies.for_group(snap.cluster, gid)
        allowed = pol.lag_allowed_messages if pol.lag_allowed_messages is not None else th.lag_allowed_messages
        min_points = pol.lag_min_points if pol.lag_min_points is not None else th.lag_min_points
        stop_after = pol.consumer_stop_after_s if pol.consumer_stop_after_s is not None else th.consumer_stop_after_s
        if pol.idle_max_s is not None:
            stop_after = max(stop_after, pol.idle_max_s)  # a batch job's commit stands still between runs
        idle = bool(pol.idle_windows) and in_idle_window(pol.idle_windows, now)
        owners = owners_of.get(gid, {})
        moved = False
        parts: list[GroupPartitionRecord] = []
        for (topic, partition), committed in sorted(commits.items()):
            key = (topic, partition)
            hw, start = obs.high_watermark.get(key), obs.log_start.get(key)
            lso = obs.last_stable.get(key)
            lag = lag_messages(hw, committed)
            history = state.hw_history.get(key)
            secs = None
            # Without a high watermark this poll (partition offline, leader unreachable) the age of the oldest
            # unread message is still known if that message is in the history; if the group had caught up
            # with the history, what was written since is unknown: unknown, not 0.
            if history is not None and (hw is not None or committed < (history.newest_offset or 0)):
                secs = lag_seconds(history, committed, now)
            window = state.window((gid, topic, partition))
            latest = window.latest
            moved = moved or (latest is not None and latest[0] != committed)
            if key in offline:
                # Nobody can consume from a partition without a leader: its commit standing still is the
                # partition's outage (offline_partition says so), not a stalled group. Judge nothing and restart
                # the commit clock, so the outage is not counted as the group's once the partition is back.
                window.clear()
            elif lag is not None:
                window.observe(committed, now, lag, hw)
            elif hw is None and committed >= 0 and window.last_high_watermark is not None:
                # No high watermark this poll (its leader did not answer ListOffsets) but the commit is known:
                # record it against the last high watermark seen (so its lag is a lower bound). Skipping it
                # would freeze the commit clock and call a group that keeps committing STALL/STOP.
                last_hw = window.last_high_watermark
                window.observe(committed, now, max(0, last_hw - committed), last_hw)
            status, reason = judge_partition(window, now, has_members=members > 0, allowed_lag=allowed,
                                             min_points=min_points, stop_after_s=stop_after)
            if key in offline:
                reason = "partition offline: nothing to consume, nothing judged"
            elif idle and status in (STALL, STOP):
                status, reason = OK, f"idle by schedule ({pol.rule}): {reason}"
            t = topics.get(topic)
            retention = t.retention_ms if t is not None and "delete" in t.cleanup_policy else None
            below = start is not None and committed < start
            to_retention = (seconds_to_retention(history, committed, start, retention, now)
                            if history is not None else (0.0 if below else None))
            owner = owners.get(key)
            parts.append(GroupPartitionRecord(
                cluster=snap.cluster, group_id=gid, topic=topic, partition=partition, committed_offset=committed,
                log_start_offset=start, high_watermark=hw, last_stable_offset=lso, lag=lag, lag_seconds=secs,
                status=status, last_commit_time=window.last_change_time, below_log_start=below,
                seconds_to_retention=to_retention, status_reason=reason,
                owner_member_id=owner.member_id if owner is not None else None,
                owner_client_id=owner.client_id if owner is not None else None,
                owner_host=owner.host if owner is not None else None))
        # a batch job may stand still `idle_max_s` between runs: it is abandoned only that much later, so a missed
        # run is a STOP that pages first (a weekly job with idle_max_s 8 days would otherwise be abandoned at 7)
        abandoned_after = th.group_abandoned_after_s + (pol.idle_max_s or 0.0)
        life, activity = classify(state.group_life.get(gid), members, moved, now, abandoned_after)
        state.group_life[gid] = life
        idle_status = INACTIVE if activity == INACTIVE_GROUP else ABANDONED
        if activity != ACTIVE_GROUP:
            # nobody runs it: what it lags is not news (collectors.model.activity)
            status = idle_status
            since = life.last_active if life.last_active is not None else life.first_seen
            why = (f"no members and no moving commit since first seen {now - life.first_seen:.0f}s ago"
                   if activity == INACTIVE_GROUP else
                   f"no members and no moving commit for {now - since:.0f}s (>= {abandoned_after:.0f}s)")
            for gp in parts:
                gp.status, gp.status_reason = status, why
        statuses = [gp.status for gp in parts]
        lags = [gp.lag for gp in parts if gp.lag is not None]
        lag_secs = [gp.lag_seconds for gp in parts if gp.lag_seconds is not None]
        last_commits = [gp.last_commit_time for gp in parts if gp.last_commit_time is not None]
        snap.group_partitions.extend(parts)
        running = activity == ACTIVE_GROUP
        snap.groups.append(GroupRecord(
            cluster=snap.cluster, group_id=gid, state=str(info.get("state") or "Unknown"), members=members,
            coordinator=info.get("coordinator"), protocol_type=str(info.get("protocol_type") or ""),
            status=group_status(statuses) if running else idle_status,
            worst_partition_status=worst_partition_status(statuses) if running else idle_status,
            lag_sum=sum(lags) if lags else None, lag_max=max(lags) if lags else None,
            lag_seconds_max=max(lag_secs) if lag_secs else None, partitions=len(commits),
            topics=sorted({t for t, _ in commits}), last_commit_time=max(last_commits) if last_commits else None,
            activity=activity, team=pol.team, policy=pol.rule,
            lag_seconds_slo=pol.lag_seconds_slo if pol.lag_seconds_slo is not None else th.lag_seconds_slo,
            retention_risk_s=pol.retention_risk_s, max_severity=pol.max_severity, idle=idle))


def _transactions(snap: ClusterSnapshot, obs: KafkaObservation, state: ClusterState, now: float) -> None:
    coordinator_pids: set[int] = set()  # producers whose coordinator may have a transaction open for them
    pid_to_txn: dict[int, str] = {}
    every_end_bumps = epochs_bump_at_every_end(state.transaction_version)
    for t in obs.transactions:
        tid, txn_state, started_ms = t["transactional_id"], t["transaction_state"], t["transaction_start_time_ms"]
        pid_to_txn[t["producer_id"]] = tid
        start = started_ms / 1000.0 if started_ms > 0 else None
        is_open = txn_state in OPEN_TXN_STATES
        if txn_state not in CLOSED_TXN_STATES:
            coordinator_pids.add(t["producer_id"])
        prev = state.txn_state_since.get(tid)
        known_start = state.txn_started.get(tid, start)
        if prev is None or prev[0] != txn_state or (start is not None and known_start != start):
            # a new state, or the same state of another transaction (its start differs): the clock restarts.
            # Compared by start time, never with our own clock, so broker clock skew cannot restart it.
            state.txn_state_since[tid] = (txn_state, now)
        state.txn_started[tid] = start
        if every_end_bumps:
            # its rises are its transactions' ends, unless it proved it keeps V1's rules (`txn_clients`): only those
            # rises are kept, and an uncounted rise moves the last epoch kept, so a downgrade counts none of them
            begun = start if txn_state == "Ongoing" else None  # Prepare* is at the epoch after the one it began at
            if tid not in state.txn_epochs:  # its first poll read as V2: rises counted under the old rules go
                state.producer_epochs.pop(tid, None)
            if rise_counts(state.txn_epochs, tid, t["producer_id"], t["producer_epoch"], begun):
                epochs = state.producer_epochs.setdefault(tid, deque(maxlen=64))
                if not epochs:  # the rules count every entry but the first
                    epochs.append((now, t["producer_epoch"]))
                epochs.append((now, t["producer_epoch"]))
            elif (epochs := state.producer_epochs.get(tid)) and epochs[-1][1] != t["producer_epoch"]:
                epochs[-1] = (epochs[-1][0], t["producer_epoch"])
        else:
            if state.txn_epochs.pop(tid, None) is not None:  # its first poll read as V1 after V2: as at the switch
                state.producer_epochs.pop(tid, None)  # to V2, the rises counted under the other rules go
            epochs = state.producer_epochs.setdefault(tid, deque(maxlen=64))
            if not epochs or epochs[-1][1] != t["producer_epoch"]:
                epochs.append((now, t["producer_epoch"]))
        snap.transactions.append(TransactionRecord(
            cluster=snap.cluster, transactional_id=tid, coordinator=t.get("coordinator"), state=txn_state,
            producer_id=t["producer_id"], producer_epoch=t["producer_epoch"], timeout_ms=t["transaction_timeout_ms"],
            start_time=start if is_open else None,
            age_seconds=max(0.0, now - start) if (is_open and start is not None) else None,
            partitions=[f"{topic}-{p}" for topic, p in t.get("partitions", [])],
            # the proof a rise out of this epoch is counted by (`rise_counts`), not `proved_v1`'s last proven epoch:
            # an epoch gone back to one proven before is not proven again until two transactions begin at it
            keeps_v1=state.txn_epochs[tid].keeps_v1 if every_end_bumps else None,
            epoch_rise_time=counted_rise_time(state.txn_epochs, tid, state.producer_epochs.get(tid)) if every_end_bumps
            else None))
    # an id not listed is gone, unless a coordinator did not answer (`transactions` stale): no news, its memory kept
    gone = [] if "transactions" in obs.stale_sections else [
        k for k in state.txn_state_since if k not in obs.listed_transactions and k not in pid_to_txn.values()]
    for tid in gone:
        state.txn_state_since.pop(tid, None)
        state.txn_started.pop(tid, None)
        state.producer_epochs.pop(tid, None)
        state.txn_epochs.pop(tid, None)
    # Producers with a transaction open on a partition: hanging when no coordinator knows it as open
    # in two consecutive polls (one poll could race a transaction that is just starting).
    seen_unknown: dict[tuple[str, int, int], int] = {}
    open_now: set[tuple[str, int, int]] = set()
    transactions_complete = "transactions" not in obs.stale_sections
    for (topic, partition), producers in sorted(obs.producers.items()):
        for pr in producers:
            if pr["txn_start_offset"] < 0:
                continue
            pid = pr["producer_id"]
            open_now.add((topic, partition, pid))
            hanging = False
            if transactions_complete and pid not in coordinator_pids:
                key = (topic, partition, pid)
                seen_unknown[key] = state.unknown_open_txns.get(key, 0) + 1
                hanging = seen_unknown[key] >= 2
            ts = pr.get("last_timestamp", -1)
            snap.producers.append(ProducerRecord(
                cluster=snap.cluster, topic=topic, partition=partition, producer_id=pid,
                producer_epoch=pr["producer_epoch"], txn_start_offset=pr["txn_start_offset"],
                last_timestamp=ts / 1000.0 if ts and ts > 0 else None, transactional_id=pid_to_txn.get(pid),
                hanging=hanging))
    # A poll that could not judge a count keeps it as it was (neither lost nor advanced): its transactions stale (any
    # of them: then nothing is judged), or its partition's producers unread. Otherwise the good poll after one
    # stale poll counted 1 again, and resolved an open hanging_transaction alert it re-opened a poll later. A count
    # goes only where this poll shows its coordinator knows the producer, or read the partition without it open.
    unread = _producers_unread(obs)
    for key, count in state.unknown_open_txns.items():
        topic, partition, pid = key
        if key in seen_unknown or pid in coordinator_pids:
            continue
        if key in open_now or unread(topic, partition):
            seen_unknown[key] = count
    state.unknown_open_txns = seen_unknown


def _producers_unread(obs: KafkaObservation) -> Callable[[str, int], bool]:
    """Whether this poll could not say which producers have a transaction open on a partition: its DescribeProducers
    failed, or it was not asked, since DescribeProducers is asked only where this poll's ListOffsets (of a partition
    its Metadata listed) showed the last stable offset held back. By the stale sections and the subjects they name
    (`STALE_SUBJECT_KINDS`: a partition for `producers` and `offsets`, a topic for `partitions`)."""
    stale = [(section, obs.stale_subjects.get(section)) for section in ("producers", "offsets", "partitions")
             if section in obs.stale_sections]

    def unread(topic: str, partition: int) -> bool:
        subject = partition_subject(topic, partition)
        return any(not named or (topic if section == "partitions" else subject) in named for section, named in stale)

    return unread


def _zookeeper_elections(snap: ClusterSnapshot, state: ClusterState, now: float) -> None:
    """A higher zxid epoch on the leader than last poll means an election happened in between."""
    epochs = [z.zxid_epoch for z in snap.zookeeper if z.serving and z.mode == "leader" and z.zxid_epoch]
    if not epochs:
        return
    epoch = max(epochs)
    if state.zk_leader_epoch is not None and epoch > state.zk_leader_epoch:
        state.zk_election_at = now
    state.zk_leader_epoch = max(epoch, state.zk_leader_epoch or 0)


def _kraft(snap: ClusterSnapshot, obs: KafkaObservation, state: ClusterState, now: float) -> None:
    q = obs.quorum
    if not q:
        _kraft_without_leader(snap, obs, state)
        return
    hw = int(q["high_watermark"])
    leader = (int(q["leader_id"]), int(q["leader_epoch"]))
    if leader[0] >= 0:  # the last leader named stays known through polls that name none (`_controller_id`)
        if state.kraft_leader is not None and leader[1] > state.kraft_leader[1]:
            state.kraft_election_at = now
        state.kraft_leader = leader
    ids = tuple(int(v["replica_id"]) for v in q["voters"])
    _kraft_voter_set(state, ids, now)
    state.kraft_quorum, state.kraft_quorum_seen_at = (ids, hw), now
    # Lag is behind the leader's log end offset, as `kafka-metadata-quorum describe --replication` shows it: behind
    # the high watermark, a voter that stopped fetching while the leader can commit nothing (no majority: the high
    # watermark stops too; Kafka before 3.7 keeps such a leader, KAFKA-15489) would be "0 behind" for ever.
    # Without the leader's entry (or its log end), the high watermark.
    end = next((int(v["log_end_offset"]) for v in q["voters"]
                if v["replica_id"] == leader[0] and v["log_end_offset"] >= 0), hw)
    for role, items in (("voter", q["voters"]), ("observer", _one_per_node(q["observers"]))):
        for v in items:
            leo = v["log_end_offset"] if v["log_end_offset"] >= 0 else None
            fetch = v.get("last_fetch_timestamp", -1)
            caught = v.get("last_caught_up_timestamp", -1)
            snap.kraft_voters.append(KRaftVoterRecord(
                cluster=snap.cluster, node_id=v["replica_id"],
                role="leader" if v["replica_id"] == leader[0] and role == "voter" else role,
                log_end_offset=leo, lag=max(0, end - leo) if leo is not None else None,
                last_fetch_time=fetch / 1000.0 if fetch and fetch > 0 else None,
                last_caught_up_time=caught / 1000.0 if caught and caught > 0 else None,
                leader_id=leader[0], leader_epoch=leader[1], high_watermark=hw))


def _one_per_node(observers: list[QuorumReplica]) -> list[QuorumReplica]:
    """Kafka keys an observer by node id and metadata log directory: a broker back with a new directory is listed
    twice until the old entry expires (5 minutes without a fetch), and the old one would read as that broker
    lagging. The broker is its freshest entry (by last fetch, then log end offset)."""
    def freshness(o: QuorumReplica) -> tuple[int, int]:
        return o.get("last_fetch_timestamp", -1), o["log_end_offset"]

    best: dict[int, QuorumReplica] = {}
    for o in observers:
        kept = best.get(o["replica_id"])
        if kept is None or freshness(o) > freshness(kept):
            best[o["replica_id"]] = o
    return list(best.values())


def _kraft_voter_set(state: ClusterState, ids: tuple[int, ...], now: float) -> None:
    """A voter set other than the last one DescribeQuorum answered (`ClusterState.kraft_quorum`, checkpointed: also
    across a restart) is a change (KIP-853 AddRaftVoter / RemoveRaftVoter, or a quorum rebuilt): remembered with the
    voters added and removed, for `kraft_voters_changed`. Nothing at the first sight of a cluster (no set seen
    before), nor from an answer naming no voter (no real leader sends one). Sets, not lists: the order of the
    voters in an answer means nothing."""
    if state.kraft_quorum is None or not state.kraft_quorum[0] or not ids:
        return
    before, after = set(state.kraft_quorum[0]), set(ids)
    if before != after:
        state.kraft_voters_changed_at = now
        state.kraft_voters_change = (tuple(sorted(after - before)), tuple(sorted(before - after)),
                                     state.kraft_quorum_seen_at)


def _kraft_without_leader(snap: ClusterSnapshot, obs: KafkaObservation, state: ClusterState) -> None:
    """DescribeQuorum failed in a way that says the quorum has no leader (`KafkaObservation.quorum_no_leader`): the
    voters last known, with leader -1 as Kafka writes "no leader", the last epoch and high watermark known, and
    nothing known of their logs. So the exported leader id, the dashboard and the history say "no leader", and
    `kraft_no_leader` judges it (over its grace: one such poll is normal while the leader moves). No voter is
    reported where they were never known (a monitor started while the quorum has no leader): the snapshot's
    `quorum_no_leader` is then the evidence `kraft_no_leader` judges."""
    if obs.quorum_no_leader is None or state.kraft_quorum is None or snap.mode != "kraft":
        return
    voters, hw = state.kraft_quorum
    epoch = state.kraft_leader[1] if state.kraft_leader is not None else 0
    for node_id in voters:
        snap.kraft_voters.append(KRaftVoterRecord(
            cluster=snap.cluster, node_id=node_id, role="voter", log_end_offset=None, lag=None, last_fetch_time=None,
            last_caught_up_time=None, leader_id=-1, leader_epoch=epoch, high_watermark=hw))
