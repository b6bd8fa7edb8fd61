"""Correlation: from one poll's open alerts and snapshot to causes — one cause, one incident.

Pure: no clock, no memory. `correlate` says which causes are present now and which alerts each explains;
`collectors.alerting.incidents` gives them identity across polls.

How alerts become causes (why, in each case):

* **Brokers down.** A broker that is down or unreachable explains every partition-level alert (offline,
  under/at min ISR, under-replicated, ISR flapping) of every partition with that broker among its replicas.
  All the brokers down in a cluster form one incident: on-call restores brokers, and two down at once is
  one worse situation, not two (Cruise Control keeps one broker-failure anomaly for all of them too). Its
  blast radius is read from the snapshot, not from the alerts, so it is exact even for symptoms below an
  alert's threshold: partitions and topics touched, and of those how many are offline, under min ISR
  (acks=all writes failing), at min ISR (one more failure stops them), and how many topics allow unclean
  election (acknowledged data can be lost).
* **Consensus.** ZooKeeper and KRaft alerts, the controller ones, and ZooKeeper's ISR disagreeing with the
  metadata are one incident: the consensus layer is one thing to fix. Stale data of the consensus layer only
  (ZooKeeper not answering during an election) is that incident's symptom, not a cluster incident.
* **Topics.** Partition alerts no down broker explains (a slow follower, a failed log directory) are
  grouped per topic.
* **Groups and transactions** stay one incident each — unless every partition a group is stuck on, or the
  partition a hanging transaction holds, has no leader or a down leader: then it is listed as a consequence
  of the broker incident and does not page as a second cause.
* **The cluster and the monitor.** An unreachable cluster or stale Kafka sections (while no broker is down:
  with one down, what it could not answer is the broker incident's symptom), and the monitor's own write
  failures, are incidents of their own.
* **Risks** (configuration, leader placement: `risk: true` in the catalogue) are never causes; they are
  listed apart by whoever shows incidents.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from collectors.alerting.catalogue import (
    BROKER_CAUSES,
    CLUSTER_RULES,
    CONSENSUS_RULES,
    MONITOR_RULES,
    PARTITION_SYMPTOMS,
    RISK_RULES,
    RULES,
)
from collectors.model.records import AlertRecord, ClusterSnapshot, IncidentRecord, PartitionRecord
from collectors.model.vocabulary import AT_MIN_ISR, INCIDENT_KINDS, OFFLINE, SEVERITY_RANK, UNDER_MIN_ISR
from collectors.model.wording import count_of, plural

BROKER, CONSENSUS, TOPIC, GROUP, TRANSACTION, CLUSTER, MONITOR = INCIDENT_KINDS

SAMPLE_SIZE = 20
TXN_PARTITION_RULES = frozenset({"hanging_transaction", "lso_gap"})
CONSENSUS_SECTIONS = frozenset({"zookeeper", "znodes", "quorum"})  # stale sections read from the consensus layer


@dataclass(slots=True)
class Cause:
    """One cause present in this poll: the alerts it explains and what its incident says now (kind, subject,
    severity, summary, blast radius, consequences); the tracker gives the incident its id and times. Reads
    as its incident (``cause.subject`` is ``cause.incident.subject``)."""

    key: str  # identity within the cluster and kind (the same cause keeps the same key across polls)
    alerts: list[AlertRecord]
    incident: IncidentRecord

    def __getattr__(self, name: str) -> Any:
        return getattr(self.incident, name)

    def sample(self, size: int = SAMPLE_SIZE) -> list[str]:
        worst = sorted(self.alerts, key=lambda a: (SEVERITY_RANK.get(a.severity, 9), a.rule, a.subject))
        return [f"{a.rule} {a.subject}" for a in worst[:size]]

    def finish(self) -> Cause:
        """Fill the member counts and sample once the alerts are all in."""
        inc = self.incident
        inc.alerts, inc.members, inc.sample = len(self.alerts), dict(sorted(Counter(
            a.rule for a in self.alerts).items())), self.sample()
        teams = {a.team for a in self.alerts}
        inc.team = teams.pop() if len(teams) == 1 else None  # one owner team, or nobody's in particular
        return self


def _cause(snap: ClusterSnapshot, kind: str, key: str, subject: str, severity: str, summary: str,
           alerts: list[AlertRecord], **radius: Any) -> Cause:
    return Cause(key, alerts, IncidentRecord(cluster=snap.cluster, id="", kind=kind, subject=subject,
                                             severity=severity, summary=summary, opened=snap.time,
                                             last_seen=snap.time, **radius))


def _worst(severities: Iterable[str]) -> str:
    return min(severities, key=lambda s: SEVERITY_RANK.get(s, 9), default="info")


def correlate(snap: ClusterSnapshot, alerts: Sequence[AlertRecord]) -> list[Cause]:
    """The causes behind this poll's open alerts, worst first. Risks are left out (see `RISK_RULES`)."""
    by_rule: dict[str, list[AlertRecord]] = defaultdict(list)
    for a in alerts:
        if a.rule not in RISK_RULES:
            by_rule[a.rule].append(a)
    parts = {f"{p.topic}-{p.partition}": p for p in snap.partitions} if (
        any(r in by_rule for r in PARTITION_SYMPTOMS | TXN_PARTITION_RULES) or by_rule.keys() & BROKER_CAUSES) else {}
    causes: list[Cause] = []
    down: set[int] = set()
    for rule in BROKER_CAUSES:
        for a in by_rule.get(rule, ()):
            broker = a.subject.removeprefix("broker-")
            if broker.isdigit():
                down.add(int(broker))
    broker_cause = _broker_cause(snap, down, by_rule, parts) if down else None
    if broker_cause is not None:
        causes.append(broker_cause)

    def affected(p: PartitionRecord | None) -> bool:
        """A partition the broker outage explains: a down broker among its replicas."""
        return p is not None and bool(down) and not down.isdisjoint(p.replicas)

    def unavailable(p: PartitionRecord | None) -> bool:
        """Nobody can read or commit there because of the outage: no leader, or a leader that is down."""
        return p is not None and (p.offline or p.leader in down)

    by_topic: dict[str, list[AlertRecord]] = defaultdict(list)
    for rule in sorted(PARTITION_SYMPTOMS):
        for a in by_rule.get(rule, ()):
            p = parts.get(a.subject)
            if broker_cause is not None and affected(p):
                broker_cause.alerts.append(a)
            else:
                by_topic[p.topic if p is not None else a.subject.rpartition("-")[0] or a.subject].append(a)
    if by_topic:
        sizes = Counter(p.topic for p in snap.partitions)
        unclean = {t.topic for t in snap.topics if t.unclean_leader_election}
        for topic, members in sorted(by_topic.items()):
            causes.append(_topic_cause(snap, topic, members, parts, sizes[topic], topic in unclean))

    consensus = [a for r in sorted(CONSENSUS_RULES) for a in by_rule.get(r, ())]
    # Only the consensus layer could not be read (a ZooKeeper election, a quorum that does not answer): that
    # staleness is the consensus incident's first symptom, not a second cause.
    consensus_stale = bool(snap.stale_sections) and set(snap.stale_sections) <= CONSENSUS_SECTIONS
    if consensus_stale:
        consensus += by_rule.get("data_stale", [])
    if consensus:
        layer = snap.mode or ("zookeeper" if snap.zookeeper or "zookeeper" in snap.stale_sections
                              else "kraft" if snap.kraft_voters or "quorum" in snap.stale_sections else "controller")
        worst = min(consensus, key=lambda a: (SEVERITY_RANK.get(a.severity, 9), a.rule))
        causes.append(_cause(snap, CONSENSUS, "consensus", layer, _worst(a.severity for a in consensus),
                            f"{layer}: {worst.summary}" + (f" (+{len(consensus) - 1} more)" if len(consensus) > 1
                                                           else ""), consensus))

    bad_parts: dict[str, list[PartitionRecord | None]] = defaultdict(list)
    if broker_cause is not None:  # only a broker outage can explain a group away
        for gp in snap.group_partitions:
            if gp.status != "OK":
                bad_parts[gp.group_id].append(parts.get(f"{gp.topic}-{gp.partition}"))
    by_group: dict[str, list[AlertRecord]] = defaultdict(list)
    for rule, items in by_rule.items():
        if RULES.get(rule) is not None and RULES[rule].subject == "group":
            for a in items:
                by_group[a.subject].append(a)
    for gid, members in sorted(by_group.items()):
        stuck_on = bad_parts.get(gid, [])
        if broker_cause is not None and stuck_on and all(unavailable(p) for p in stuck_on):
            broker_cause.alerts.extend(members)
            broker_cause.incident.consequences.append(f"group {gid}")
            continue
        causes.append(_single(snap, GROUP, gid, gid, members))

    by_txn: dict[str, list[AlertRecord]] = defaultdict(list)
    for rule, items in by_rule.items():
        spec = RULES.get(rule)
        if spec is not None and spec.family == "transactions":
            for a in items:
                by_txn[a.subject].append(a)
    for subject, members in sorted(by_txn.items()):
        on = parts.get(subject)
        if broker_cause is not None and on is not None and unavailable(on):
            broker_cause.alerts.extend(members)
            broker_cause.incident.consequences.append(f"transaction on {subject}")
            continue
        causes.append(_single(snap, TRANSACTION, subject, subject, members))

    # With a broker down, requests it had to answer fail (its coordinators, its leaders' offsets and producers):
    # sections stale because of that are the broker incident's symptom. Nothing answering at all
    # ("cluster" stale) stays a cluster incident.
    stale = set(snap.stale_sections)
    broker_stale = broker_cause is not None and not consensus_stale and bool(stale) and "cluster" not in stale
    if broker_cause is not None and broker_stale and by_rule.get("data_stale"):
        broker_cause.alerts.extend(by_rule["data_stale"])
        broker_cause.incident.consequences.append("stale: " + ", ".join(sorted(stale)))
    explained_stale = consensus_stale or broker_stale
    for kind, rules in ((CLUSTER, CLUSTER_RULES),
                        (MONITOR, MONITOR_RULES)):
        members = [a for r in rules for a in by_rule.get(r, ()) if not (explained_stale and r == "data_stale")]
        if members:
            causes.append(_single(snap, kind, kind, snap.cluster if kind == CLUSTER else "monitor", members))

    if broker_cause is not None:
        broker_cause.incident.severity = _worst(a.severity for a in broker_cause.alerts)
    order = {k: i for i, k in enumerate(INCIDENT_KINDS)}
    causes.sort(key=lambda c: (SEVERITY_RANK.get(c.severity, 9), order[c.kind], c.key))
    return [c.finish() for c in causes]


def _single(snap: ClusterSnapshot, kind: str, key: str, subject: str, members: list[AlertRecord]) -> Cause:
    worst = min(members, key=lambda a: (SEVERITY_RANK.get(a.severity, 9), a.rule))
    more = f" (+{len(members) - 1} more)" if len(members) > 1 else ""
    return _cause(snap, kind, key, subject, worst.severity, worst.summary + more, list(members))


def _broker_cause(snap: ClusterSnapshot, down: set[int], by_rule: dict[str, list[AlertRecord]],
                  parts: dict[str, PartitionRecord]) -> Cause:
    members = [a for r in sorted(BROKER_CAUSES) for a in by_rule.get(r, ())
               if a.subject.removeprefix("broker-").isdigit()]
    affected = [p for p in parts.values() if not down.isdisjoint(p.replicas)]
    classes = Counter(p.partition_class for p in affected)
    topics = {p.topic for p in affected}
    unclean = sum(1 for t in snap.topics if t.topic in topics and t.unclean_leader_election)
    ids = sorted(down)
    who = f"{count_of(len(ids), 'broker')} " + ", ".join(map(str, ids))
    verb = count_of(len(ids), "is", "are")
    states = {a.rule for a in members}
    what = "down" if states == {"broker_down"} else "unreachable" if states == {"broker_unreachable"} else \
        "down or unreachable"
    consequences = []
    if classes[OFFLINE]:
        consequences.append(f"{plural(classes[OFFLINE], 'partition')} offline (unavailable)")
    if classes[UNDER_MIN_ISR]:
        consequences.append(f"{plural(classes[UNDER_MIN_ISR], 'partition')} under min ISR (acks=all writes fail)")
    if classes[AT_MIN_ISR]:
        consequences.append(f"{plural(classes[AT_MIN_ISR], 'partition')} at min ISR (one more broker failure "
                            "stops acks=all writes)")
    if unclean:
        consequences.append(f"unclean election enabled on {plural(unclean, 'affected topic')} "
                            "(acknowledged data can be lost)")
    summary = f"{who} {verb} {what}; {plural(len(affected), 'partition')} on {plural(len(topics), 'topic')} " \
              "lost a replica" + (": " + "; ".join(consequences) if consequences else "")
    return _cause(snap, BROKER, "brokers", who, "critical", summary, members, brokers=ids, partitions=len(affected),
                 topics=len(topics), offline=classes[OFFLINE], under_min_isr=classes[UNDER_MIN_ISR],
                 at_min_isr=classes[AT_MIN_ISR], unclean_topics=unclean)


def _topic_cause(snap: ClusterSnapshot, topic: str, members: list[AlertRecord], parts: dict[str, PartitionRecord],
                 size: int, unclean: bool) -> Cause:
    """Partition alerts of one topic that no broker outage explains: "orders: 12 of 24 partitions …"."""
    hit = {a.subject for a in members}
    classes = Counter(parts[s].partition_class for s in hit if s in parts)
    worst = min(members, key=lambda a: (SEVERITY_RANK.get(a.severity, 9), a.rule))
    what = worst.rule.replace("_", " ").replace("partition", "").strip()
    summary = f"{topic}: {len(hit)} of {size} partitions {what}" if size else f"{topic}: {worst.summary}"
    return _cause(snap, TOPIC, topic, topic, worst.severity, summary, list(members), partitions=len(hit), topics=1,
                 offline=classes[OFFLINE], under_min_isr=classes[UNDER_MIN_ISR], at_min_isr=classes[AT_MIN_ISR],
                 unclean_topics=int(unclean))
