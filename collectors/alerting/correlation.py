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
  A KRaft node that is both a broker and a controller voter (combined mode) is one node: node ids are unique in a
  KRaft cluster, so a lagging voter whose id is a down broker's is that broker's node, and its alert goes into the
  broker incident ("controller voter 1 lost"), not into a consensus incident paging for the same crash. So does the
  leader election while such a voter is there (`_lost_with_nodes`: the election alert names the new leader only,
  so the old one is inferred from the voter alerts, not known). Dedicated controllers have ids no broker has.
* **Consensus.** ZooKeeper and KRaft alerts, the controller ones, and ZooKeeper's ISR disagreeing with the
  metadata are one incident: the consensus layer is one thing to fix — save the KRaft alerts of a node down as a
  broker (above); a quorum without a leader (a majority lost) or a voter whose broker is up stays here. Stale
  data of the consensus layer only (ZooKeeper not answering during an election) is that incident's symptom, not a
  cluster incident.
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
* **Partitions not read** (stale ``cluster`` or ``partitions``: the snapshot has no partitions): what places
  partition, group and transaction alerts and measures a blast radius is unknown this poll. Their causes are
  built as above but marked unmeasured (`Cause.measured`): the incident tracker keeps their alerts in the
  incidents they were in and their incidents' last known blast radius (`collectors.alerting.incidents`), so an
  unreachable cluster during a broker outage is the broker incident plus the cluster one, not a page per topic.

Placement here is this poll's alone; the tracker keeps an alert in the incident it was in where this poll's
placement is not news (see `collectors.alerting.incidents`) and uses `Cause.joined`, `Cause.without` and
`aftermath` for it.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

from collectors.alerting.catalogue import (
    BROKER_CAUSES,
    CLUSTER_RULES,
    CONSENSUS_RULES,
    METADATA_LAG_RULES,
    MONITOR_RULES,
    PARTITION_SYMPTOMS,
    RISK_RULES,
    RULES,
)
from collectors.model.records import AlertRecord, ClusterSnapshot, IncidentRecord, PartitionRecord
from collectors.model.vocabulary import (
    AT_MIN_ISR,
    INCIDENT_KINDS,
    OFFLINE,
    SEVERITY_RANK,
    UNDER_MIN_ISR,
    broker_of,
    partition_subject,
    topic_of,
    voter_of,
)
from collectors.model.wording import count_of, plural

BROKER, CONSENSUS, TOPIC, GROUP, TRANSACTION, CLUSTER, MONITOR = INCIDENT_KINDS

SAMPLE_SIZE = 20
TXN_PARTITION_RULES = frozenset({"hanging_transaction", "lso_gap"})
CONSENSUS_SECTIONS = frozenset({"zookeeper", "znodes", "quorum"})  # stale sections read from the consensus layer
PARTITION_SECTIONS = frozenset({"cluster", "partitions"})  # either stale: the snapshot has no partitions
STALE_PREFIX = "stale: "  # the consequence naming the sections a down broker could not answer
RADIUS_FIELDS = ("partitions", "topics", "offline", "under_min_isr", "at_min_isr", "unclean_topics")
NEW_LEADER = re.compile(r"changed to (\d+)")  # kraft_leader_election's summary: "KRaft leader changed to 2 (epoch 8) …"


@dataclass(slots=True)
class Cause:
    """One cause present in this poll: the alerts it explains and what its incident says now (kind, subject,
    severity, summary, blast radius, consequences); the tracker gives the incident its id and times. Reads
    as its incident (``cause.subject`` is ``cause.incident.subject``)."""

    key: str  # identity within the cluster and kind (the same cause keeps the same key across polls)
    alerts: list[AlertRecord]
    incident: IncidentRecord
    measured: bool = True
    """False when this poll could not read the partitions: where its alerts belong and its blast radius (counts,
    summary, consequences) are not known, and the tracker keeps what its incident last said (`measure_from`)."""
    remake: Callable[[list[AlertRecord]], Cause] | None = field(default=None, repr=False, compare=False)
    """Builds the cause again from fewer alerts (its summary and counts are of its alerts); None where they are
    not (a broker's blast radius is read from the snapshot)."""

    def __getattr__(self, name: str) -> Any:
        return getattr(self.incident, name)

    def without(self, gone: set[int]) -> Cause:
        """This cause without the alerts whose ``id()`` is in `gone` (the tracker keeps them in another incident)."""
        left = [a for a in self.alerts if id(a) not in gone]
        if not left or self.remake is None:
            dropped = {_note(self.kind, a) for a in self.alerts} - {_note(self.kind, a) for a in left}
            self.alerts = left
            self.incident.consequences = [c for c in self.incident.consequences if c not in dropped]
            return self.finish()
        again = self.remake(left)
        again.measured, again.remake = self.measured, self.remake
        return again.finish()

    def joined(self, more: list[AlertRecord]) -> Cause:
        """This cause holding alerts this poll placed elsewhere too (the tracker keeps them in this cause's incident,
        where they were): built again with them where its summary and counts are of its alerts; else a group or a
        transaction a broker incident holds is listed among its consequences, as `correlate` does."""
        if self.remake is not None:
            again = self.remake(self.alerts + more)
            again.measured, again.remake = self.measured, self.remake
            return again.finish()
        self.alerts.extend(more)
        for a in more:
            note = _note(self.kind, a)
            if note is not None and note not in self.incident.consequences:
                self.incident.consequences.append(note)
        return self.finish()

    def measure_from(self, before: IncidentRecord) -> None:
        """Partitions not read this poll (not `measured`): keep `before`'s blast radius, its summary (while the
        subject is the same) and its consequences (the sections stale now replace the ones stale then)."""
        inc = self.incident
        for name in RADIUS_FIELDS:
            setattr(inc, name, getattr(before, name))
        if before.subject == inc.subject:
            inc.summary = before.summary
        kept = [c for c in before.consequences if not c.startswith(STALE_PREFIX)]
        inc.consequences = kept + [c for c in inc.consequences if c not in kept]

    def sample(self, size: int = SAMPLE_SIZE) -> list[str]:
        worst = sorted(self.alerts, key=lambda a: (SEVERITY_RANK.get(a.severity, 9), a.rule, a.subject))
        return [f"{a.rule} {a.subject}" for a in worst[:size]]

    def finish(self) -> Cause:
        """Fill the severity (the worst alert's), member counts and sample once the alerts are all in."""
        inc = self.incident
        inc.severity = _worst(a.severity for a in self.alerts)
        inc.alerts, inc.members, inc.sample = len(self.alerts), dict(sorted(Counter(
            a.rule for a in self.alerts).items())), self.sample()
        teams = {a.team for a in self.alerts}
        inc.team = teams.pop() if len(teams) == 1 else None  # one owner team, or nobody's in particular
        return self


def _note(kind: str, alert: AlertRecord) -> str | None:
    """How a broker incident lists an alert among its consequences: a group, a transaction, the controller voter of a
    node down and the KRaft leader election it caused (else None)."""
    spec = RULES.get(alert.rule)
    if kind != BROKER or spec is None:
        return None
    if alert.rule == "kraft_voter_lagging":
        return f"controller voter {voter_of(alert.subject)} lost"
    if alert.rule == "kraft_leader_election":
        leader = NEW_LEADER.search(alert.summary)
        return f"KRaft leader moved to {leader.group(1)}" if leader else "KRaft leader moved"
    return f"group {alert.subject}" if spec.subject == "group" else \
        f"transaction on {alert.subject}" if spec.family == "transactions" else None


def _cause(snap: ClusterSnapshot, kind: str, key: str, subject: str, severity: str, summary: str,
           alerts: list[AlertRecord], **radius: Any) -> Cause:
    return Cause(key, alerts, IncidentRecord(cluster=snap.cluster, id="", kind=kind, subject=subject,
                                             severity=severity, summary=summary, opened=snap.time,
                                             last_seen=snap.time, **radius))


def _lost_with_nodes(consensus: list[AlertRecord], down: set[int]) -> list[AlertRecord]:
    """The KRaft alerts the brokers `down` explain: a lagging voter whose node id is a down broker's (the same node,
    in combined mode), and then the leader election too. The election alert names the new leader, not the old one,
    so the old leader is not known here: an election while a voter of a node down is lost is taken as that node's.
    Nothing while the quorum has no leader (``kraft_no_leader``: a majority lost is the consensus layer's outage)."""
    if not down or any(a.rule == "kraft_no_leader" for a in consensus):
        return []
    lost = [a for a in consensus if a.rule == "kraft_voter_lagging" and voter_of(a.subject) in down]
    return lost + [a for a in consensus if a.rule == "kraft_leader_election"] if lost else []


def _worst(severities: Iterable[str]) -> str:
    return min(severities, key=lambda s: SEVERITY_RANK.get(s, 9), default="info")


def correlate(snap: ClusterSnapshot, alerts: Sequence[AlertRecord]) -> list[Cause]:
    """The causes behind this poll's open alerts, worst first. Risks are left out (see `RISK_RULES`)."""
    by_rule: dict[str, list[AlertRecord]] = defaultdict(list)
    for a in alerts:
        if a.rule not in RISK_RULES:
            by_rule[a.rule].append(a)
    parts = {partition_subject(p.topic, p.partition): p for p in snap.partitions} if (
        any(r in by_rule for r in PARTITION_SYMPTOMS | TXN_PARTITION_RULES) or by_rule.keys() & BROKER_CAUSES) else {}
    measured, unread = _measured(snap)
    causes: list[Cause] = []
    down: set[int] = set()
    for rule in BROKER_CAUSES:
        for a in by_rule.get(rule, ()):
            broker = broker_of(a.subject)
            if broker is not None:
                down.add(broker)
    broker_cause = _broker_cause(snap, down, by_rule, parts, measured) if down else None
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
                by_topic[p.topic if p is not None else topic_of(a.subject)].append(a)
    if by_topic:
        sizes = Counter(p.topic for p in snap.partitions)
        unclean = {t.topic for t in snap.topics if t.unclean_leader_election}
        for topic, members in sorted(by_topic.items()):
            def remake(m: list[AlertRecord], topic: str = topic) -> Cause:
                return _topic_cause(snap, topic, m, parts, sizes[topic], topic in unclean)
            causes.append(_made(remake, members, measured and topic not in unread))

    consensus = [a for r in sorted(CONSENSUS_RULES) for a in by_rule.get(r, ())]
    if broker_cause is not None:  # a node down as a broker and as a controller voter (combined mode) is one cause
        lost = _lost_with_nodes(consensus, down)
        # a broker down is not also lagging: a lagging alert kept over a stale section is the outage's
        lost += [a for a in consensus if a.rule in METADATA_LAG_RULES and broker_of(a.subject) in down]
        consensus = [a for a in consensus if not any(a is b for b in lost)]
        broker_cause.alerts.extend(lost)
        broker_cause.incident.consequences.extend(n for a in lost if (n := _note(BROKER, a)) is not None)
    # Only the consensus layer could not be read (a ZooKeeper election, a quorum that does not answer): that
    # staleness is the consensus incident's first symptom, not a second cause.
    consensus_stale = bool(snap.stale_sections) and set(snap.stale_sections) <= CONSENSUS_SECTIONS
    if consensus_stale:
        consensus += by_rule.get("data_stale", [])
    if consensus:
        layer = snap.mode or ("zookeeper" if snap.zookeeper or "zookeeper" in snap.stale_sections
                              else "kraft" if snap.kraft_voters or "quorum" in snap.stale_sections else "controller")

        def remake_consensus(m: list[AlertRecord]) -> Cause:
            worst = min(m, key=lambda a: (SEVERITY_RANK.get(a.severity, 9), a.rule))
            return _cause(snap, CONSENSUS, "consensus", layer, worst.severity,
                          f"{layer}: {worst.summary}" + (f" (+{len(m) - 1} more)" if len(m) > 1 else ""), list(m))
        causes.append(_made(remake_consensus, consensus))

    bad_parts: dict[str, list[PartitionRecord | None]] = defaultdict(list)
    if broker_cause is not None:  # only a broker outage can explain a group away
        for gp in snap.group_partitions:
            if gp.status != "OK":
                bad_parts[gp.group_id].append(parts.get(partition_subject(gp.topic, gp.partition)))
    by_group: dict[str, list[AlertRecord]] = defaultdict(list)
    for rule, items in by_rule.items():
        if RULES.get(rule) is not None and RULES[rule].subject == "group":
            for a in items:
                by_group[a.subject].append(a)
    for gid, members in sorted(by_group.items()):
        stuck_on = bad_parts.get(gid, [])
        if broker_cause is not None and stuck_on and all(unavailable(p) for p in stuck_on):
            broker_cause.alerts.extend(members)
            broker_cause.incident.consequences.append(f"group {gid}")  # `_note`
            continue
        causes.append(_made(_single_of(snap, GROUP, gid, gid), members, measured))

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
        causes.append(_made(_single_of(snap, TRANSACTION, subject, subject), members, measured))

    # With a broker down, requests it had to answer fail (its coordinators, its leaders' offsets and producers):
    # sections stale because of that are the broker incident's symptom. Nothing answering at all
    # ("cluster" stale) stays a cluster incident.
    stale = set(snap.stale_sections)
    broker_stale = broker_cause is not None and not consensus_stale and bool(stale) and "cluster" not in stale
    if broker_cause is not None and broker_stale and by_rule.get("data_stale"):
        broker_cause.alerts.extend(by_rule["data_stale"])
        broker_cause.incident.consequences.append(STALE_PREFIX + ", ".join(sorted(stale)))
    explained_stale = consensus_stale or broker_stale
    for kind, rules in ((CLUSTER, CLUSTER_RULES),
                        (MONITOR, MONITOR_RULES)):
        members = [a for r in rules for a in by_rule.get(r, ()) if not (explained_stale and r == "data_stale")]
        if members:
            causes.append(_made(_single_of(snap, kind, kind, snap.cluster if kind == CLUSTER else "monitor"), members))

    for c in causes:
        c.finish()  # the severities sort them
    order = {k: i for i, k in enumerate(INCIDENT_KINDS)}
    causes.sort(key=lambda c: (SEVERITY_RANK.get(c.severity, 9), order[c.kind], c.key))
    return causes


def _measured(snap: ClusterSnapshot) -> tuple[bool, frozenset[str]]:
    """Whether this poll read the partitions, and the topics it could not (their Metadata answered an error:
    ``stale_subjects["partitions"]``). Some topics unread leave the others measured: only those topics' causes keep
    their last placement and blast radius, where one topic being deleted froze every incident of the cluster. A
    broker outage is measured on the partitions read (those of a topic being deleted are going anyway)."""
    stale = set(snap.stale_sections)
    unread = frozenset(snap.stale_subjects.get("partitions", ())) if "partitions" in stale else frozenset()
    return not (stale & PARTITION_SECTIONS - ({"partitions"} if unread else set())), unread


def _made(remake: Callable[[list[AlertRecord]], Cause], members: list[AlertRecord], measured: bool = True) -> Cause:
    c = remake(members)
    c.remake, c.measured = remake, measured
    return c


def _single_of(snap: ClusterSnapshot, kind: str, key: str, subject: str) -> Callable[[list[AlertRecord]], Cause]:
    return lambda members: _single(snap, kind, key, subject, members)


def aftermath(key: str, inc: IncidentRecord, alerts: list[AlertRecord]) -> Cause:
    """An open incident whose cause is gone this poll but which keeps alerts the tracker holds in it (loss proven
    while it lasted, alerts kept over unread partitions): it stays open for them, saying so, with its subject,
    brokers and last blast radius; its severity is theirs."""
    rec = IncidentRecord(**{f.name: getattr(inc, f.name) for f in fields(IncidentRecord)})
    rec.members, rec.sample, rec.brokers, rec.consequences = {}, [], list(inc.brokers), list(inc.consequences)
    over = f"{inc.subject} {count_of(len(inc.brokers), 'is', 'are')} back" if inc.kind == BROKER else inc.subject
    worst = min(alerts, key=lambda a: (SEVERITY_RANK.get(a.severity, 9), a.rule))
    rec.summary = f"{over}; still open: {worst.summary}" + (f" (+{len(alerts) - 1} more)" if len(alerts) > 1 else "")
    return Cause(key, list(alerts), rec).finish()


def _single(snap: ClusterSnapshot, kind: str, key: str, subject: str, members: list[AlertRecord]) -> Cause:
    worst = min(members, key=lambda a: (SEVERITY_RANK.get(a.severity, 9), a.rule))
    more = f" (+{len(members) - 1} more)" if len(members) > 1 else ""
    return _cause(snap, kind, key, subject, worst.severity, worst.summary + more, list(members))


def _broker_cause(snap: ClusterSnapshot, down: set[int], by_rule: dict[str, list[AlertRecord]],
                  parts: dict[str, PartitionRecord], measured: bool = True) -> Cause:
    members = [a for r in sorted(BROKER_CAUSES) for a in by_rule.get(r, ())
               if broker_of(a.subject) is not None]
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
    if not measured:
        summary = f"{who} {verb} {what}; partitions not read this poll"
    c = _cause(snap, BROKER, "brokers", who, "critical", summary, members, brokers=ids, partitions=len(affected),
               topics=len(topics), offline=classes[OFFLINE], under_min_isr=classes[UNDER_MIN_ISR],
               at_min_isr=classes[AT_MIN_ISR], unclean_topics=unclean)
    c.measured = measured
    return c


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
