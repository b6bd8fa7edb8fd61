"""The rule catalogue: every alert rule the collector can raise, declared once (in ``rules.yaml`` beside
this module: prose is easier to keep right as data than as Python strings).

One entry per rule says what the rule means, how bad it can get, what on-call does first, which
Prometheus alerts in ``deploy/prometheus/alerts.yml`` mirror it, which dashboard page shows its subject,
whether its open alerts survive a poll that could not refresh their evidence, and whether it needs to
know how long its condition has held. The rules (`collectors.alerting.rules`), the poller, the dashboard,
the docs (`docs/alerts.md`'s collector-rule table is generated from here, see `rules_markdown`) and the
tests that hold ``alerts.yml`` and the docs against the code all read it, so adding a rule in one place
and forgetting another fails a test instead of shipping silently.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import TypeAlias

import yaml

from collectors.model.records import ClusterSnapshot
from collectors.model.stale_subjects import Subjects, stale_subjects, subject_kinds
from collectors.model.vocabulary import SEVERITIES, STALE_SECTIONS, STALE_SUBJECT_KINDS

RUNBOOK = "docs/alerts.md"

FAMILIES = ("cluster", "partitions", "topics", "brokers", "groups", "transactions", "zookeeper", "kraft", "loss",
            "monitor")
"""Which evaluator raises a rule (`monitor`: raised by the runtime about itself, on every cluster)."""
SUBJECTS = ("cluster", "partition", "topic", "broker", "group", "transactional_id", "zk_server", "kraft_voter",
            "monitor")
"""What an alert's ``subject`` names: ``orders-3``, ``orders``, ``broker-2``, a group id, a transactional id,
``host:port`` of a ZooKeeper server, ``voter-1``, the cluster's own name, or a part of the monitor itself
(``history``, ``state``)."""
PAGES = ("overview", "replication", "consumers", "transactions", "consensus", "history")
"""Dashboard pages (their URL slugs)."""


@dataclass(frozen=True, slots=True)
class RuleSpec:
    name: str
    severity: str
    """The highest severity the rule raises."""
    family: str
    subject: str
    page: str
    meaning: str
    first_step: str
    prometheus: tuple[str, ...]
    """The alerts in deploy/prometheus/alerts.yml that cover the same condition."""
    keep_when_stale: frozenset[str] = frozenset()
    """While one of these sections is stale, open alerts of this rule are kept rather than resolved on
    missing evidence."""
    timed: bool = False
    """The rule asks how long its condition has held (a grace period, or "on two polls"); the poller keeps
    a timer per (rule, subject) for it."""
    severity_note: str | None = None
    """How the severity varies, where it does."""
    risk: bool = False
    """A standing risk (configuration, leader placement), not something that happened: listed apart from the
    incidents, never a cause of one."""

    @property
    def anchor(self) -> str:
        """The runbook section of this rule: ``docs/alerts.md#rule-<name>``."""
        return f"{RUNBOOK}#rule-{self.name.replace('_', '-')}"


CATALOGUE_FILE = Path(__file__).with_name("rules.yaml")


class CatalogueError(ValueError):
    """rules.yaml is malformed: a developer's mistake, reported at import with the rule and field."""


def load_catalogue(path: Path = CATALOGUE_FILE) -> tuple[RuleSpec, ...]:
    """Read and check the catalogue: every field known and of the right kind, every value from its vocabulary."""
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    if not isinstance(data, dict) or not data:
        raise CatalogueError(f"{path}: expected a mapping of rule name -> fields")
    known = {f.name for f in fields(RuleSpec)} - {"name"}
    out = []
    for name, entry in data.items():
        if not isinstance(entry, dict) or set(entry) - known or not isinstance(name, str):
            raise CatalogueError(f"{path}: {name}: unknown fields {sorted(set(entry or {}) - known)}")
        try:
            spec = RuleSpec(name=name, **{**entry, "prometheus": tuple(entry.get("prometheus") or ()),
                                          "keep_when_stale": frozenset(entry.get("keep_when_stale") or ())})
        except TypeError as e:
            raise CatalogueError(f"{path}: {name}: {e}") from None
        for what, value, allowed in (("severity", spec.severity, SEVERITIES), ("family", spec.family, FAMILIES),
                                     ("subject", spec.subject, SUBJECTS), ("page", spec.page, PAGES)):
            if value not in allowed:
                raise CatalogueError(f"{path}: {name}: {what} {value!r} is not one of {list(allowed)}")
        if not (spec.meaning and spec.first_step and spec.prometheus):
            raise CatalogueError(f"{path}: {name}: meaning, first_step and prometheus are required")
        if not spec.keep_when_stale <= set(STALE_SECTIONS):
            raise CatalogueError(f"{path}: {name}: keep_when_stale names unknown sections")
        out.append(spec)
    return tuple(out)


CATALOGUE: tuple[RuleSpec, ...] = load_catalogue()

RULES: Mapping[str, RuleSpec] = {r.name: r for r in CATALOGUE}

PROMETHEUS_ONLY: Mapping[str, str] = {
    "KafkaMonitorDown": "the exporter cannot report that it is not running",
    "KafkaMonitorDataStale": "a stuck poll loop produces no new alerts at all",
}
"""Prometheus alerts with no collector rule: they watch the monitor itself, which cannot alert on its own death."""

INCIDENT_ALERTS: Mapping[str, str] = {
    "KafkaIncidentCritical": "an open critical incident (kafka_monitor_incident{severity=\"critical\"}): the page",
    "KafkaIncidentWarning": "an open warning incident (kafka_monitor_incident{severity=\"warning\"}) that no replica "
                            "sees as critical",
}
"""Prometheus alerts on the collector's incidents (`collectors.alerting.correlation`), one per open incident
(cluster, kind, subject), rather than on one rule: the paging path of deploy/alertmanager/alertmanager.yml."""

PASS_THROUGH = "KafkaMonitorCollectorCriticalAlert"
"""The Prometheus alert that re-raises critical collector alerts whose rule has no dedicated alert."""


def rules_of(family: str) -> frozenset[str]:
    return frozenset(r.name for r in CATALOGUE if r.family == family)


BROKER_CAUSES = frozenset({"broker_down", "broker_unreachable"})
"""Rules that make a broker incident: the cause the partition symptoms below are grouped under."""
PARTITION_SYMPTOMS = frozenset({"offline_partition", "under_min_isr", "at_min_isr", "under_replicated",
                                "isr_flapping", "data_truncated", "unclean_election"})
"""Partition rules: under a down broker's incident when the partition has a replica on it, else their topic's."""
CONSENSUS_RULES = frozenset({"zk_quorum_lost", "zk_no_leader", "zk_multiple_leaders", "zk_node_not_serving",
                             "zk_follower_behind", "zk_leader_election", "zk_isr_mismatch", "kraft_no_leader",
                             "kraft_voter_lagging", "kraft_observer_lagging", "kraft_leader_election",
                             "kraft_voters_changed", "broker_metadata_lagging",
                             "controller_mismatch", "no_controller", "zk_zxid_regressed"})
"""Rules of the consensus layer (ZooKeeper, KRaft, the controller): one consensus incident per cluster."""
METADATA_LAG_RULES = frozenset({"kraft_observer_lagging", "broker_metadata_lagging"})
"""A broker whose metadata lags, in either mode: a consensus symptom while it is up; of a broker down, its outage's."""
CLUSTER_RULES = ("cluster_unreachable", "data_stale")
"""The cluster as a whole, when no broker or quorum explains it."""


def kept_when_stale(sections: list[str] | set[str] | frozenset[str]) -> frozenset[str]:
    """Rules whose open alerts are kept while these sections are stale (as a whole: `kept_over_stale` says which
    subjects' alerts a poll keeps)."""
    stale = set(sections)
    return frozenset(r.name for r in CATALOGUE if r.keep_when_stale & stale)


Kept: TypeAlias = Mapping[str, frozenset[str] | Subjects | None]
"""The open alerts a poll keeps rather than resolves on missing evidence: rule -> the subjects whose alerts are
kept (a frozenset where all are named; `Subjects` where the partitions of some topics are kept too), None for every
subject of the rule. A rule not in it keeps nothing."""


def stale_kinds() -> dict[str, frozenset[str]]:
    """Each section whose failures can name subjects -> the subject kinds of the rules kept over it that those
    names can say (`stale_subjects.subject_kinds`): what the exporter's ``kafka_monitor_stale_subject`` needs."""
    return {section: frozenset(r.subject for r in CATALOGUE if section in r.keep_when_stale) & subject_kinds(section)
            for section in STALE_SUBJECT_KINDS}


def kept_over_stale(snap: ClusterSnapshot) -> Kept:
    """The open alerts this poll's stale sections keep (`RuleSpec.keep_when_stale`), subject by subject.

    A section stale as a whole keeps every alert of the rules that depend on it, as `kept_when_stale` does. A
    section whose failures named the subjects they concern (`ClusterSnapshot.stale_subjects`: one group's
    OffsetFetch refused, one topic's Metadata in error) keeps those subjects' alerts only, and the others resolve as
    usual: otherwise one group denied by an ACL holds every group's alerts open for as long as it lasts, and one
    topic being deleted every partition's. Where the section's subjects are not the rule's (`STALE_SUBJECT_KINDS`),
    the groups reading a partition or a topic stand for it, and a topic's partitions for the topic; any other kind
    cannot say which of the rule's subjects it concerns, and keeps them all."""
    stale = set(snap.stale_sections)
    out: dict[str, frozenset[str] | Subjects | None] = {}
    named: dict[tuple[str, str], Subjects | None] = {}  # (section, subject kind): the same for several rules
    for r in CATALOGUE:
        sections = r.keep_when_stale & stale
        if not sections:
            continue
        names: set[str] = set()
        topics: set[str] = set()
        for section in sections:
            key = (section, r.subject)
            if key not in named:
                named[key] = stale_subjects(snap, section, r.subject)
            got = named[key]
            if got is None:
                out[r.name] = None
                break
            names |= got.names
            topics |= got.partitions_of
        else:
            if topics:
                out[r.name] = Subjects(frozenset(names), frozenset(topics))
            elif names:
                out[r.name] = frozenset(names)
    return out


def is_kept(kept: frozenset[str] | Kept, rule: str, subject: str) -> bool:
    """Whether the open alert of (`rule`, `subject`) is kept: `kept` is a `Kept`, or rule names kept whole."""
    if isinstance(kept, Mapping):
        if rule not in kept:
            return False
        subjects = kept[rule]
        return subjects is None or subject in subjects
    return rule in kept


MONITOR_RULES = tuple(sorted(rules_of("monitor")))
"""About the monitor itself (its history, its checkpoint): one monitor incident per cluster."""
TIMED_RULES: frozenset[str] = frozenset(r.name for r in CATALOGUE if r.timed)
RISK_RULES: frozenset[str] = frozenset(r.name for r in CATALOGUE if r.risk)


def rules_markdown() -> str:
    """The collector-rule table of docs/alerts.md (a test keeps the page equal to this)."""
    out = ["| rule | severity | meaning | Prometheus alert | on-call first step |",
           "| --- | --- | --- | --- | --- |"]
    for r in CATALOGUE:
        alerts = ", ".join(f"`{a}`" for a in r.prometheus)
        if r.prometheus == (PASS_THROUGH,):
            alerts += " (pass-through)"
        out.append(f'| <a id="rule-{r.name.replace("_", "-")}"></a>`{r.name}` | {r.severity_note or r.severity} | '
                   f"{r.meaning} | {alerts} | {r.first_step} |")
    return "\n".join(out) + "\n"
