"""A poller over hand-made observations: what `collectors.runtime.poller.ClusterPoller.poll` does after the
adapters (snapshot, the keep over stale data, rules and timers, the alert tracker), without a cluster."""

from __future__ import annotations

from collectors.alerting.catalogue import kept_over_stale
from collectors.alerting.evaluation import judge
from collectors.alerting.lifecycle import AlertTracker
from collectors.config import Thresholds
from collectors.model.observations import KafkaObservation
from collectors.model.snapshot import build_snapshot
from collectors.model.state import ClusterState

T0 = 1_800_000_000.0


class ObservedPoller:
    """Polls of cluster "c" 30 s apart from `T0`, each judged as the collector judges one."""

    def __init__(self, thresholds: Thresholds) -> None:
        self.thresholds = thresholds
        self.state, self.tracker, self.now = ClusterState(), AlertTracker(), T0

    def poll(self, obs: KafkaObservation) -> tuple[set[tuple[str, str]], set[tuple[str, str]]]:
        """(open, resolved) (rule, subject) after this poll."""
        obs.time = self.now
        snap = build_snapshot("c", obs, None, self.state, self.thresholds, self.now)
        kept = kept_over_stale(snap)
        current, _, resolved = self.tracker.update("c", judge(snap, self.state, self.thresholds, self.now, kept),
                                                   self.now, kept)
        self.now += 30
        return {(a.rule, a.subject) for a in current}, {(a.rule, a.subject) for a in resolved}
