"""What a stale poll section leaves unjudged, for Prometheus: the series the twins' holds join on.

The exporter exports only what a poll read, so over a stale section the series behind a Prometheus twin are absent
and the twin would resolve, while the collector keeps its alert (`RuleSpec.keep_when_stale`). Each twin therefore
holds its firing alerts while its sections are stale (`collectors.alerting.twin_holds`), and needs to know for
which subjects:

* ``kafka_monitor_stale_whole{section}``: the section failed for every subject (or named more than the limit);
* ``kafka_monitor_stale_subject{section, topic, partition, consumergroup, transactional_id}``: one subject it
  failed for, in each subject kind a rule kept over it needs and its failures can name (`StaleKinds`,
  `stale_subjects.subject_kinds`): a partition whose offsets were not read gives the partition, and every group
  reading it. The labels a kind does not use are empty.

An exception, not the world: both are absent while every section is fresh.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from collectors.model.records import ClusterSnapshot
from collectors.model.stale_subjects import stale_subjects, subject_kinds
from collectors.model.vocabulary import partition_of
from collectors.outputs.families import Family

TWIN_KINDS = ("topic", "partition", "group", "transactional_id")
"""The subject kinds Prometheus twins are keyed by, besides the cluster (a broker's, a ZooKeeper server's or a
voter's alerts are kept over a whole stale section only: no section names brokers)."""


StaleKinds = Mapping[str, frozenset[str]]
"""Section -> the subject kinds whose alerts are kept over it (`catalogue.stale_kinds`): the rows exported for it,
and counted against the limit. Rows of other kinds would join no twin's hold."""

SubjectLabels = tuple[str, str, str, str]
"""(topic, partition, consumergroup, transactional_id), "" where the kind has none."""


def _labels(kind: str, names: Iterable[str], topics: Iterable[str]) -> set[SubjectLabels]:
    out: set[SubjectLabels] = set()
    for name in names:
        if kind == "topic":
            out.add((name, "", "", ""))
        elif kind == "partition":
            part = partition_of(name)
            if part is not None:
                out.add((part[0], str(part[1]), "", ""))
        elif kind == "group":
            out.add(("", "", name, ""))
        else:
            out.add(("", "", "", name))
    out.update((topic, "", "", "") for topic in topics)  # every partition of the topic: joined on its topic
    return out


def stale_scope(snap: ClusterSnapshot, limit: int | None, kinds: StaleKinds | None = None
                ) -> tuple[list[str], dict[str, set[SubjectLabels]]]:
    """The sections stale as a whole, and the subjects of the others, by section, in `kinds` (None: every twin
    kind). A section with more subject rows than `limit` (None or 0: no limit, as `exporter.exceptions_limit`
    says) is exported as whole: its twins then keep every alert, never fewer than the collector does."""
    whole: list[str] = []
    named: dict[str, set[SubjectLabels]] = {}
    for section in snap.stale_sections:
        wanted = set(TWIN_KINDS) if kinds is None else set(kinds.get(section, ()))
        used = subject_kinds(section) & wanted
        if not snap.stale_subjects.get(section) or not used:
            whole.append(section)
            continue
        rows: set[SubjectLabels] = set()
        for kind in sorted(used):
            got = stale_subjects(snap, section, kind)
            if got is not None:
                rows |= _labels(kind, got.names, got.partitions_of)
        if limit and len(rows) > limit:
            whole.append(section)
        else:
            named[section] = rows
    return whole, named


def fill_stale(snap: ClusterSnapshot, gauge: Family, limit: int | None,
               kinds: StaleKinds | None = None) -> None:
    """Add the cluster's `kafka_monitor_stale`, `kafka_monitor_stale_whole` and `kafka_monitor_stale_subject`."""
    c = snap.cluster
    for section in snap.stale_sections:
        gauge("kafka_monitor_stale").add_metric((c, section), 1.0)
    whole, named = stale_scope(snap, limit, kinds)
    for section in whole:
        gauge("kafka_monitor_stale_whole").add_metric((c, section), 1.0)
    for section, rows in named.items():
        for row in sorted(rows):
            gauge("kafka_monitor_stale_subject").add_metric((c, section, *row), 1.0)
