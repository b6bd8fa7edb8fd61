"""Which subjects a stale section leaves unjudged: one reading for the collector's rules and for the exporter.

A poll section can fail for some subjects only (one topic's Metadata answered an error, one group's OffsetFetch was
refused: the snapshot's ``stale_subjects``, named as `vocabulary.STALE_SUBJECT_KINDS` says). The collector keeps
the open alerts of those subjects (`alerting.catalogue.kept_over_stale`), and the exporter tells Prometheus which
they are, so that the Prometheus twins keep theirs too (`kafka_monitor_stale_subject`). Both ask this module,
so the two paths cannot disagree on which groups a stale partition stands for.
"""

from __future__ import annotations

from dataclasses import dataclass

from collectors.model.records import ClusterSnapshot
from collectors.model.vocabulary import STALE_SUBJECT_KINDS, partition_of, partition_subject


@dataclass(frozen=True, slots=True)
class Subjects:
    """Some subjects of a rule: `names`, and every partition of the topics `partitions_of`. The partitions of a topic
    whose Metadata answered an error are kept so: this poll has none of them, so they cannot be listed (nor their
    number known), and a subject is read back instead (`vocabulary.partition_of`). Answers ``in`` as a frozenset
    does, which is all a `Kept` entry is asked."""

    names: frozenset[str] = frozenset()
    partitions_of: frozenset[str] = frozenset()

    def __contains__(self, subject: object) -> bool:
        if subject in self.names:
            return True
        partition = partition_of(subject) if isinstance(subject, str) and self.partitions_of else None
        return partition is not None and partition[0] in self.partitions_of


def subject_kinds(section: str) -> frozenset[str]:
    """The subject kinds a failure of `section` that names its subjects can say which of are concerned: its own
    (`STALE_SUBJECT_KINDS`), a topic's partitions, the groups reading a partition or a topic. For any other kind,
    or a section whose failures name nothing, every subject is concerned."""
    own = STALE_SUBJECT_KINDS.get(section)
    if own is None:
        return frozenset()
    return frozenset({own} | ({"partition"} if own == "topic" else set())
                     | ({"group"} if own in ("partition", "topic") else set()))


def stale_subjects(snap: ClusterSnapshot, section: str, kind: str) -> Subjects | None:
    """The subjects of `kind` (an alert subject kind: ``partition``, ``topic``, ``group``...) that the failures of
    stale `section` concern: those named, the partitions of named topics, or the groups reading a named partition or
    topic (their lag was not read). None: all of them (the failures named nothing, or `kind` is not one of the
    section's `subject_kinds`)."""
    names = snap.stale_subjects.get(section)
    if not names or kind not in subject_kinds(section):
        return None
    own = STALE_SUBJECT_KINDS[section]
    if own == kind:
        return Subjects(frozenset(names))
    if kind == "partition":  # a topic's partitions
        return Subjects(partitions_of=frozenset(names))
    stale = set(names)  # the groups reading them
    if own == "topic":
        return Subjects(frozenset(gp.group_id for gp in snap.group_partitions if gp.topic in stale))
    return Subjects(frozenset(gp.group_id for gp in snap.group_partitions
                              if partition_subject(gp.topic, gp.partition) in stale))
