"""What one poll of one cluster produced: its snapshot and the alerts that opened and resolved with it.

The unit every output consumes (exporter, history, latest state) and the runtime passes around.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from collectors.model.records import AlertRecord, ClusterSnapshot, IncidentRecord


@dataclass(frozen=True, slots=True)
class IncidentEvent:
    """Something on-call should know happened to an incident: opened, updated (its severity changed),
    resolved, reopened (came back within the hold-down window), lost (left open by a collector before this one, and
    not carried on: `collectors.model.vocabulary.LOST`). History keeps these."""

    time: float
    event: str
    incident: IncidentRecord  # as it was at that moment


@dataclass
class PollResult:
    snapshot: ClusterSnapshot
    opened: list[AlertRecord] = field(default_factory=list)
    resolved: list[AlertRecord] = field(default_factory=list)
    incident_events: list[IncidentEvent] = field(default_factory=list)
    restated: list[AlertRecord] = field(default_factory=list)
    """Open alerts recorded again a day after their last event (`collectors.alerting.lifecycle.RESTATE_S`)."""
    lost: list[AlertRecord] = field(default_factory=list)
    """Alerts a collector before this one left open and nobody carried on (`collectors.model.vocabulary.LOST`),
    recorded as ended at their ``last_seen``: the last poll that saw them open."""

    @property
    def node_unreachable(self) -> bool:
        """Exit-code 1 material: we could not talk to the cluster, a broker or a ZooKeeper server."""
        s = self.snapshot
        return (not s.reachable or any(b.alive and b.reachable is False for b in s.brokers)
                or any(not z.serving for z in s.zookeeper))
