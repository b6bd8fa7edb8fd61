"""The active controller and, in KRaft mode, the metadata quorum it leads.

Kept apart from replication because a controller change is its own incident
(controller_failover) and, in KRaft, its own log: the quorum keeps a metadata
log whose high watermark grows with the no-op records a real controller writes
every 500 ms, and voters on dead brokers stop fetching. Replication builds on
this part: fencing the controller's own broker elects a new one.
"""

from __future__ import annotations

from dataclasses import dataclass

from sandbox.topology import Topology

KRAFT_NOOP_INTERVAL_S = 0.5  # metadata.max.idle.interval.ms


@dataclass
class Voter:
    node_id: int
    leo: float = 0.0
    last_fetch: float = 0.0
    last_caught_up: float = 0.0


class Controller(Topology):
    """Who controls the cluster, and the KRaft quorum's voters and metadata high watermark."""

    controller_id: int
    controller_epoch: int
    voters: dict[int, Voter]
    quorum_leader: int
    quorum_epoch: int
    metadata_hwm: float

    def _init_controller(self, now: float) -> None:
        """Broker 1 starts as controller; in KRaft the first three brokers (fewer if there are fewer) vote."""
        self.controller_id = 1
        self.controller_epoch = 1
        self.voters = {}
        self.quorum_leader = self.controller_id
        self.quorum_epoch = 1
        self.metadata_hwm = 0.0
        if self.mode == "kraft":
            for i in sorted(self.brokers)[:3] if len(self.brokers) >= 3 else sorted(self.brokers):
                self.voters[i] = Voter(i, 0.0, now, now)

    def _controller_candidates(self, exclude: int | None = None) -> list[int]:
        """Registered brokers that may take over, lowest id first; in KRaft only voters (if any is left)."""
        alive = [i for i in sorted(self.brokers) if self.brokers[i].registered and i != exclude]
        if self.mode == "kraft":
            alive = [i for i in alive if i in self.voters] or alive
        return alive

    def _hand_over(self, to: int) -> int:
        """Make `to` the controller (in KRaft also the quorum leader) in a new epoch; returns the old one."""
        old = self.controller_id
        self.controller_id = to
        self.controller_epoch += 1
        if self.mode == "kraft":
            self.quorum_leader = self.controller_id
            self.quorum_epoch += 1
        self.changes.controller = True
        return old

    def _elect_controller(self) -> None:
        """The controller's broker was fenced (or none was left): the next candidate wins, -1 if there is none."""
        alive = self._controller_candidates()
        old = self._hand_over(alive[0] if alive else -1)
        self.log(f"controller {old} -> {self.controller_id} (epoch {self.controller_epoch})")

    def controller_failover(self) -> None:
        """The controller resigns while its broker stays up (the controller_failover incident)."""
        alive = self._controller_candidates(exclude=self.controller_id)
        if not alive:
            return
        old = self._hand_over(alive[0])
        self.log(f"controller failover {old} -> {self.controller_id}")

    def _run_quorum(self, dt: float) -> None:
        if self.mode != "kraft" or not self.voters:
            return
        leader = self.voters.get(self.quorum_leader)
        if leader is None or not self.brokers[leader.node_id].process_up:
            return
        leader.leo += dt / KRAFT_NOOP_INTERVAL_S
        leader.last_fetch = leader.last_caught_up = self.now
        for v in self.voters.values():
            if v is leader or not self.brokers[v.node_id].process_up:
                continue
            v.leo = leader.leo
            v.last_fetch = v.last_caught_up = self.now
        up = sorted((v.leo for v in self.voters.values()), reverse=True)
        majority = len(self.voters) // 2 + 1
        self.metadata_hwm = max(self.metadata_hwm, up[majority - 1])
