"""Consumer groups: positions, commits, rebalances.

Groups consume up to the high watermark (read_uncommitted) or the last stable
offset (read_committed), commit every commit interval, and reset to the log
start when retention overtakes their position (auto.offset.reset=earliest).
A membership change sends the group through PreparingRebalance and
CompletingRebalance for `REBALANCE_S`. On demand, a group can also consume and
never commit, an odd but legal state for the monitor to be tried on.

A group re-reads a topic only when its readable range moved (`Topology._touch`)
or the group was still behind on it, and commits only the positions that moved:
a thousand groups over idle topics cost next to nothing per step.
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
    reads: list[str] = field(default_factory=list)  # spec.topics without repeats
    behind: set[str] | None = None  # topics with a position short of what it may read; None: look at all
    uncommitted: set[tuple[str, int]] | None = field(default_factory=set)  # moved since the commit; None: all

    @property
    def group_id(self) -> str:
        return self.spec.group_id


def member_id(group: Group, index: int) -> str:
    """The id the coordinator gives member `index` of the group's current generation (a new one per rebalance)."""
    return f"{group.group_id}-consumer-{index}-{group.generation:04d}"


def client_id(group: Group, index: int) -> str:
    return f"{group.group_id}-consumer-{index}"


def client_host(index: int) -> str:
    return f"/127.0.0.{index + 10}"


class ConsumerGroups(Topology):
    """The groups of a cluster and how they read its partitions."""

    groups: dict[str, Group]

    def _init_groups(self, specs: Iterable[GroupSpec]) -> None:
        self.groups = {}
        for g in specs:
            self.groups[g.group_id] = self._new_group(g)

    def _new_group(self, g: GroupSpec) -> Group:
        grp = Group(g, members=g.members, state="Stable" if g.members else "Empty", reads=list(dict.fromkeys(g.topics)))
        if not g.members:
            grp.mode = "stopped"
        for t in g.topics:
            for p in self.topics[t].partitions:
                grp.position[(t, p.index)] = 0.0
                grp.committed[(t, p.index)] = 0
        grp.last_commit = self.now
        return grp

    def assignment(self, group: Group) -> list[dict[str, list[int]]]:
        """Which partitions each member holds (index = member), as Kafka's range assignor hands them out: per
        topic, the partitions in order, split into consecutive runs, the first members taking one extra. The
        ground truth behind the owners DescribeGroups reports; empty when nobody is a member."""
        out: list[dict[str, list[int]]] = [{} for _ in range(group.members)]
        if not group.members:
            return out
        for t in group.reads:
            parts = [p.index for p in self.topics[t].partitions]
            each, extra = divmod(len(parts), group.members)
            start = 0
            for i in range(group.members):
                n = each + (1 if i < extra else 0)
                if n:
                    out[i][t] = parts[start:start + n]
                start += n
        return out

    # ----------------------------------------------------------------- time
    def _readable(self, p: Partition, isolation: str) -> int:
        return p.lso if isolation == "read_committed" else p.hwm

    def _consume(self, dt: float) -> None:
        touched, self._touched_for_groups = self._touched_for_groups, set()
        for g in self.groups.values():
            if g.deleted:
                continue
            every = g.spec.batch_every_s
            if every is not None and g.spec.batch_run_s is not None:
                # a batch job: its members join at every run and leave when it is done
                want = "running" if (self.now - self.start) % every < g.spec.batch_run_s else "stopped"
                if g.mode != want:
                    self.set_group_mode(g.spec.group_id, want)
            if g.state in ("PreparingRebalance", "CompletingRebalance"):
                g.behind = None  # what moved meanwhile is not tracked: look at everything once it runs
                if self.now >= g.rebalance_until:
                    g.state = "Stable" if g.members else "Empty"
                elif self.now >= g.rebalance_until - REBALANCE_S / 2:
                    g.state = "CompletingRebalance"
                continue
            if g.mode != "running":
                g.behind = None
                if g.mode == "stalled" and self.now - g.last_commit >= g.spec.commit_interval_s:
                    g.last_commit = self.now  # commits keep coming, offsets do not move
                continue
            if g.behind is None:
                look = g.reads
            elif touched or g.behind:
                look = [x for x in g.reads if x in touched or x in g.behind]
            else:
                look = []  # nothing moved and the group is not behind: nothing to read
            behind = set() if g.behind is None else g.behind.difference(look)
            for topic in look:
                if self._read_topic(g, topic, dt):
                    behind.add(topic)
            g.behind = behind
            if g.committing and self.now - g.last_commit >= g.spec.commit_interval_s:
                moved = g.position if g.uncommitted is None else g.uncommitted
                for key in moved:
                    g.committed[key] = int(g.position[key])
                g.uncommitted = set()
                g.last_commit = self.now

    def _read_topic(self, g: Group, topic: str, dt: float) -> bool:
        """Move the group's positions on one topic; True if one is still short of what it may read."""
        t = self.topics[topic]
        rate = g.spec.consume_rate
        if rate is None:
            rate = 3.0 * t.produce_rate / max(len(t.partitions), 1) + 1.0
        position = g.position
        short = False
        for p in t.partitions:
            key = (topic, p.index)
            pos = position[key]
            limit = self._readable(p, g.spec.isolation_level)
            if not self._leader_up(p):
                short = short or pos < limit or pos < p.log_start
                continue  # nothing can be fetched from a partition without a live leader
            if pos < p.log_start:
                pos = float(p.log_start)  # auto.offset.reset=earliest after retention overtook us
            new = min(float(limit), pos + rate * dt) if limit > pos else pos
            if new != position[key]:
                position[key] = new
                if g.uncommitted is not None:
                    g.uncommitted.add(key)
            short = short or new < limit or new < p.log_start
        return short

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
        g.behind = None
        self.log(f"group {group_id} rewound by {messages}")

    def delete_group(self, group_id: str) -> None:
        self.groups[group_id].deleted = True

    def set_group_committing(self, group_id: str, committing: bool) -> None:
        """Stop a group committing and forget its offsets (it never committed), or let it commit again."""
        g = self.groups[group_id]
        g.committing = committing
        if not committing:
            g.committed.clear()
            g.uncommitted = None  # the next commit, if it ever comes, writes every position
