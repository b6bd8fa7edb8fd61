"""The poll: observe every cluster (Kafka and ZooKeeper side by side), build the snapshot, run the rules.

Clusters are polled concurrently and independently: one unreachable cluster
or ZooKeeper server delays nothing else beyond its own request timeout. What
could not be refreshed is marked stale, and alerts that depend on it are kept
open rather than resolved on missing evidence.
"""

from __future__ import annotations

import concurrent.futures
import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from collectors.alerting.lifecycle import AlertTracker
from collectors.alerting.rules import Candidate, evaluate
from collectors.model.observations import KafkaObservation
from collectors.model.records import AlertRecord, ClusterSnapshot
from collectors.model.snapshot import build_snapshot
from collectors.model.state import ClusterState
from collectors.sources.kafka_adapter import KafkaAdapter

log = logging.getLogger(__name__)

# Stale section → rules whose open alerts are kept (not resolved) while it is stale.
KEEP_WHEN_STALE: dict[str, frozenset[str]] = {
    "cluster": frozenset({
        "offline_partition", "under_min_isr", "at_min_isr", "under_replicated", "isr_flapping",
        "preferred_leader_imbalance", "unsafe_durability", "broker_down", "broker_unreachable", "no_controller",
        "consumer_lag_status", "consumer_lag_seconds", "retention_data_loss", "retention_risk",
        "stuck_transaction", "hanging_transaction", "lso_gap", "producer_epoch_bumps", "zk_isr_mismatch",
        "controller_mismatch", "kraft_no_leader", "kraft_voter_lagging", "kraft_leader_election"}),
    "partitions": frozenset({"offline_partition", "under_min_isr", "at_min_isr", "under_replicated"}),
    "offsets": frozenset({"consumer_lag_status", "consumer_lag_seconds", "retention_data_loss", "retention_risk",
                          "lso_gap"}),
    "groups": frozenset({"consumer_lag_status", "consumer_lag_seconds", "retention_data_loss", "retention_risk"}),
    "transactions": frozenset({"stuck_transaction", "hanging_transaction", "producer_epoch_bumps"}),
    "producers": frozenset({"hanging_transaction"}),
    "configs": frozenset({"unsafe_durability"}),
    "znodes": frozenset({"zk_isr_mismatch", "controller_mismatch"}),
    "zookeeper": frozenset({"zk_follower_behind", "zk_leader_election"}),
    "quorum": frozenset({"kraft_no_leader", "kraft_voter_lagging", "kraft_leader_election"}),
}


@dataclass
class PollResult:
    snapshot: ClusterSnapshot
    opened: list[AlertRecord] = field(default_factory=list)
    resolved: list[AlertRecord] = field(default_factory=list)

    @property
    def node_unreachable(self) -> bool:
        """Exit-code 1 material: we could not talk to the cluster, a broker or a ZooKeeper server."""
        s = self.snapshot
        return (not s.reachable or any(b.alive and b.reachable is False for b in s.brokers)
                or any(not z.serving for z in s.zookeeper))


class ClusterPoller:
    def __init__(self, cluster: Any, config: Any) -> None:
        from collectors import config as cfgmod

        self.name: str = cluster.name
        self.config = config
        self.thresholds = config.thresholds
        self.kafka = KafkaAdapter(cluster.name, cfgmod.confluent_settings(cluster, config.request_timeout_s),
                                  cfgmod.kafka_python_settings(cluster, config.request_timeout_s),
                                  config.request_timeout_s, kraft=cluster.kraft)
        self.zk: Any = None
        if cluster.zookeeper is not None:
            from collectors.sources.zk_adapter import ZkAdapter

            zk = cluster.zookeeper
            self.zk = ZkAdapter(cluster.name, zk.connect, cfgmod.kazoo_settings(zk),
                                four_letter_words=zk.four_letter_words, timeout_s=config.request_timeout_s)
        self.state = ClusterState(window_size=self.thresholds.lag_window_points)
        self.alerts = AlertTracker()
        self.cluster_id: str | None = None  # as last reported by the cluster
        self._resumed_cluster_id: str | None = None  # from a checkpoint, until the cluster confirms it
        self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=2, thread_name_prefix=f"poll-{self.name}")

    def close(self) -> None:
        self.kafka.close()
        if self.zk is not None:
            self.zk.close()
        self._pool.shutdown(wait=False, cancel_futures=True)

    def poll(self, now: float | None = None, extra: list[Candidate] | None = None) -> PollResult:
        """One poll; `extra` are monitor-level conditions (e.g. history not writable) shown on every cluster."""
        started = time.monotonic()
        now = time.time() if now is None else now
        kafka_f = self._pool.submit(self._observe_kafka, now)
        zk_f = self._pool.submit(self.zk.observe) if self.zk is not None else None
        obs = kafka_f.result()
        zk_obs = zk_f.result() if zk_f is not None else None
        if obs.cluster_id:
            self._check_resumed_identity(obs.cluster_id)
            self.cluster_id = obs.cluster_id
        snap = build_snapshot(self.name, obs, zk_obs, self.state, self.thresholds, now)
        candidates = evaluate(snap, self.state, self.thresholds, now) + list(extra or [])
        keep: set[str] = set()
        for section in snap.stale_sections:
            keep |= KEEP_WHEN_STALE.get(section, frozenset())
        current, opened, resolved = self.alerts.update(self.name, candidates, now, frozenset(keep))
        snap.alerts = current
        snap.poll_duration_s = time.monotonic() - started
        return PollResult(snap, opened, resolved)

    def checkpoint(self, now: float) -> Any:
        """What a restart should resume from (call between polls: the state must not change meanwhile)."""
        from collectors.outputs.checkpoint import Checkpoint

        return Checkpoint(cluster=self.name, cluster_id=self.cluster_id or self._resumed_cluster_id, saved_at=now,
                          state=self.state, alerts=self.alerts.open_for(self.name))

    def resume(self, cp: Any) -> None:
        """Take over a checkpoint's memory; undone at the first poll if the cluster turns out to be another one."""
        self.state = cp.state
        self.alerts.forget(self.name)
        for a in cp.alerts:
            self.alerts.open[a.key] = a
        self._resumed_cluster_id = cp.cluster_id

    def _check_resumed_identity(self, cluster_id: str) -> None:
        expected, self._resumed_cluster_id = self._resumed_cluster_id, None
        if expected is not None and expected != cluster_id:
            log.warning("cluster %s: cluster id is %s, the checkpoint was of %s; its memory is dropped",
                        self.name, cluster_id, expected)
            self.state = ClusterState(window_size=self.thresholds.lag_window_points)
            self.alerts.forget(self.name)

    def _observe_kafka(self, now: float) -> KafkaObservation:
        try:
            return self.kafka.observe(now)
        except Exception as e:  # an adapter bug must not take the monitor down
            log.exception("cluster %s: Kafka observation failed", self.name)
            obs = KafkaObservation(time=now, reachable=False)
            obs.fail("cluster", f"observation failed: {type(e).__name__}: {e}")
            return obs


class Monitor:
    """All configured clusters; `poll_once` polls them concurrently."""

    def __init__(self, config: Any) -> None:
        self.config = config
        self.pollers = [ClusterPoller(c, config) for c in config.clusters]
        # conditions of the monitor itself, raised as alerts on every cluster while they hold
        self.conditions: dict[str, Candidate] = {}
        self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=max(1, len(self.pollers)),
                                                           thread_name_prefix="monitor")

    def poll_once(self, now: float | None = None) -> list[PollResult]:
        extra = list(self.conditions.values())
        futures = [self._pool.submit(p.poll, now, extra) for p in self.pollers]
        return [f.result() for f in futures]

    def resume(self, state_dir: Path, now: float | None = None) -> list[str]:
        """Resume every cluster from its checkpoint if one is usable; returns one log line per cluster.

        A missing, damaged, foreign or too old checkpoint never stops the monitor: that cluster starts fresh.
        """
        from collectors.outputs.checkpoint import CheckpointError, describe, load_checkpoint

        now = time.time() if now is None else now
        lines = []
        for p in self.pollers:
            try:
                cp = load_checkpoint(state_dir, p.name, lag_points=p.state.lag_points,
                                     window_size=p.thresholds.lag_window_points, now=now,
                                     max_age_s=self.config.checkpoint_max_age_s)
            except CheckpointError as e:
                lines.append(f"{p.name}: starting fresh, checkpoint not used: {e}")
                continue
            if cp is None:
                lines.append(f"{p.name}: starting fresh (no checkpoint)")
                continue
            p.resume(cp)
            lines.append(f"{p.name}: resumed from checkpoint {describe(cp, now)}")
        return lines

    def save_checkpoints(self, state_dir: Path, now: float | None = None) -> int:
        """Save every cluster's checkpoint; returns bytes written. Raises OSError (the caller alerts)."""
        from collectors.outputs.checkpoint import save_checkpoint

        now = time.time() if now is None else now
        return sum(save_checkpoint(state_dir, p.checkpoint(now))[1] for p in self.pollers)

    def close(self) -> None:
        for p in self.pollers:
            p.close()
        self._pool.shutdown(wait=False, cancel_futures=True)
