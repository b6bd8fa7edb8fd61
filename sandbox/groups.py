"""Consumer groups: positions, commits, rebalances.

Groups consume up to the high watermark (read_uncommitted) or the last stable
offset (read_committed), commit every commit interval, and reset to the log
start when retention overtakes their position (auto.offset.reset=earliest).
A membership change sends the group through PreparingRebalance and
CompletingRebalance for `REBALANCE_S`. On demand, a group can also consume and
never commit, an odd but legal state for the monitor to be tried on.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from sandbox.spec import GroupSpec
from sandbox.topology import Partition, Topology

REBALANCE_S = 3.0  # time a group spends in PreparingRebalance + CompletingRebalance


@dataclass
class Group:
    spec: GroupSpec
    state: str = "Stable"
    members: int = 2
    generation: int = 1
    mode: str = "running"  # running | stalled | stopped
    position: dict[tuple[str, int], float] = field(default_factory=dict)
    committed: dict[tuple[str, int], int] = field(default_factory=dict)
    last_commit: float = 0.0
    rebalance_until: float = 0.0
    deleted: bool = False
    committing: bool = True  # False: members consume but never commit (enable.auto.commit=false, no commitSync)

    @property
    def group_id(self) -> str:
        return self.spec.group_id


class ConsumerGroups(Topology):
    """The groups of a cluster and how they read its partitions."""

    groups: dict[str, Group]

    def _init_groups(self, specs: Iterable[GroupSpec]) -> None:
        self.groups = {}
        for g in specs:
            self.groups[g.group_id] = self._new_group(g)

    def _new_group(self, g: GroupSpec) -> Group:
        grp = Group(g, members=g.members, state="Stable" if g.members else "Empty")
        if not g.members:
            grp.mode = "stopped"
        for t in g.topics:
            for p in self.topics[t].partitions:
                grp.position[(t, p.index)] = 0.0
                grp.committed[(t, p.index)] = 0
        grp.last_commit = self.now
        return grp

    # ----------------------------------------------------------------- time
    def _readable(self, p: Partition, isolation: str) -> int:
        return p.lso if isolation == "read_committed" else p.hwm

    def _consume(self, dt: float) -> None:
        for g in self.groups.values():
            if g.deleted:
                continue
            if g.state in ("PreparingRebalance", "CompletingRebalance"):
                if self.now >= g.rebalance_until:
                    g.state = "Stable" if g.members else "Empty"
                elif self.now >= g.rebalance_until - REBALANCE_S / 2:
                    g.state = "CompletingRebalance"
                continue
            if g.mode != "running":
                if g.mode == "stalled" and self.now - g.last_commit >= g.spec.commit_interval_s:
                    g.last_commit = self.now  # commits keep coming, offsets do not move
                continue
            for (topic, idx), pos in g.position.items():
                p = self.topics[topic].partitions[idx]
                if not self._leader_up(p):
                    continue  # nothing can be fetched from a partition without a live leader
                t = self.topics[topic]
                rate = g.spec.consume_rate
                if rate is None:
                    rate = 3.0 * t.produce_rate / max(len(t.partitions), 1) + 1.0
                limit = self._readable(p, g.spec.isolation_level)
                if pos < p.log_start:
                    pos = float(p.log_start)  # auto.offset.reset=earliest after retention overtook us
                g.position[(topic, idx)] = min(float(limit), pos + rate * dt) if limit > pos else pos
            if g.committing and self.now - g.last_commit >= g.spec.commit_interval_s:
                for key, pos in g.position.items():
                    g.committed[key] = int(pos)
                g.last_commit = self.now

    # ----------------------------------------------------------------- incidents
    def set_group_mode(self, group_id: str, mode: str) -> None:
        g = self.groups[group_id]
        if g.mode == mode:
            return
        old_members = g.members
        g.mode = mode
        if mode == "stopped":
            g.members = 0
        elif old_members == 0:
            g.members = g.spec.members
        if g.members != old_members:
            g.generation += 1
            g.state = "PreparingRebalance"
            g.rebalance_until = self.now + (REBALANCE_S if g.members else 0.5)
        self.log(f"group {group_id} {mode}")

    def rewind_group(self, group_id: str, messages: int) -> None:
        g = self.groups[group_id]
        for key in g.position:
            topic, idx = key
            p = self.topics[topic].partitions[idx]
            g.position[key] = max(float(p.log_start), g.position[key] - messages)
            g.committed[key] = int(g.position[key])
        g.last_commit = self.now
        self.log(f"group {group_id} rewound by {messages}")

    def delete_group(self, group_id: str) -> None:
        self.groups[group_id].deleted = True

    def set_group_committing(self, group_id: str, committing: bool) -> None:
        """Stop a group committing and forget its offsets (it never committed), or let it commit again."""
        g = self.groups[group_id]
        g.committing = committing
        if not committing:
            g.committed.clear()
