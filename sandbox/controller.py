"""The active controller and, in KRaft mode, the metadata quorum it leads.

Kept apart from replication because a controller change is its own incident
(controller_failover) and, in KRaft, its own log: the quorum keeps a metadata
log whose high watermark grows with the no-op records a real controller writes
every 500 ms, and voters on dead brokers stop fetching. Replication builds on
this part: fencing the controller's own broker elects a new one (ZooKeeper mode).

In KRaft the active controller is the Raft leader of the metadata quorum
(KIP-595, KIP-631), elected on Raft's own timers rather than broker sessions,
and only by a majority of the voters: with fewer than a majority up the quorum
has no leader, nobody fences a broker or moves a partition leader, and the
metadata every broker serves stands still until a majority is back. Clients do
not learn the active controller from Metadata there (KIP-590): a KRaft broker
answers a random unfenced broker as its controller id and forwards what is
meant for the controller (`random_alive_broker`).

The voters are the first three brokers (fewer if there are fewer); only the
kraft_remove_voter and kraft_add_voter incidents change the set (KIP-853
RemoveRaftVoter / AddRaftVoter: `remove_voter`, `add_voter`).
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from sandbox.topology import Topology

KRAFT_NOOP_INTERVAL_S = 0.5  # metadata.max.idle.interval.ms
KRAFT_FETCH_TIMEOUT_S = 2.0
"""controller.quorum.fetch.timeout.ms: voters that hear nothing from their leader this long elect another."""
KRAFT_OBSERVER_SESSION_S = 300.0
"""The quorum leader stops listing an observer this long after its last fetch (LeaderState's observer session)."""
KRAFT_CHECK_QUORUM_S = 3.0
"""A leader that hears from no majority of the voters for 1.5 x the fetch timeout resigns (KAFKA-15489, Kafka 3.7);
from then the quorum has no leader until a majority is up again."""


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
    _majority_lost_at: float | None  # KRaft: since when fewer than a majority of the voters are up
    _client_rng: random.Random  # the random broker a KRaft broker names as controller (`random_alive_broker`)

    def _init_controller(self, now: float) -> None:
        """Broker 1 starts as controller; in KRaft the first three brokers (fewer if there are fewer) vote."""
        self.controller_id = 1
        self.controller_epoch = 1
        self.voters = {}
        self.quorum_leader = self.controller_id
        self.quorum_epoch = 1
        self.metadata_hwm = 0.0
        self._majority_lost_at = None
        self._client_rng = random.Random(f"controller-id/{self.cluster_id}")  # the same sequence every run
        if self.mode == "kraft":
            for i in sorted(self.brokers)[:3] if len(self.brokers) >= 3 else sorted(self.brokers):
                self.voters[i] = Voter(i, 0.0, now, now)

    def voters_up(self) -> list[int]:
        """KRaft: the voters whose process runs, lowest id first."""
        return [i for i in sorted(self.voters) if self.brokers[i].process_up]

    def has_quorum(self) -> bool:
        """KRaft: a majority of the voters is up, without which Raft elects no leader and commits nothing."""
        return len(self.voters_up()) >= len(self.voters) // 2 + 1

    def controller_active(self) -> bool:
        """A controller is there to act: fence brokers, move partition leaders. In KRaft nothing else does it:
        without a quorum leader the metadata stands still (a dead broker stays registered, its partitions keep
        their leader) until one is elected."""
        return self.controller_id in self.brokers and self.brokers[self.controller_id].process_up

    def random_alive_broker(self) -> int:
        """What a KRaft broker answers as the controller id of Metadata and DescribeCluster: a random unfenced broker
        (KRaftMetadataCache.getRandomAliveBroker, KIP-590), a different one from call to call, never the quorum
        leader as such; -1 when none is registered."""
        alive = self.alive_brokers()
        return self._client_rng.choice(alive) if alive else -1

    def _controller_candidates(self, exclude: int | None = None) -> list[int]:
        """Who may take over, lowest id first: registered brokers; in KRaft the voters that are up, and none
        unless a majority of the voters is (a Raft leader is elected by a majority of the voters, KIP-595)."""
        if self.mode == "kraft":
            if not self.voters or not self.has_quorum():
                return []
            return [i for i in self.voters_up() if i != exclude]
        return [i for i in sorted(self.brokers) if self.brokers[i].registered and i != exclude]

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
        if not alive and self.controller_id < 0:
            return  # still nobody to elect
        old = self._hand_over(alive[0] if alive else -1)
        self.log(f"controller {old} -> {self.controller_id} (epoch {self.controller_epoch})")

    def controller_failover(self) -> None:
        """The controller resigns while its broker stays up (the controller_failover incident)."""
        alive = self._controller_candidates(exclude=self.controller_id)
        if not alive:
            return
        old = self._hand_over(alive[0])
        self.log(f"controller failover {old} -> {self.controller_id}")

    def remove_voter(self, node: int) -> bool:
        """KIP-853 RemoveRaftVoter: `node` leaves the voter set (its broker stays, an observer from now on); the
        majority and the high watermark are the remaining voters'. A leader removed resigns once the new set is
        committed, and the remaining voters elect another. Refused, as the leader refuses it, without a leader, for a
        node not a voter, and for the last voter. Logs what happened; True if it was removed."""
        why = self._voter_change_refused(node, adding=False)
        if why is not None:
            self.log(f"voter {node} not removed from the KRaft quorum: {why}")
            return False
        del self.voters[node]
        self.log(f"voter {node} removed from the KRaft quorum: voters {self._voter_ids()}")
        if node == self.quorum_leader:
            self.log(f"KRaft leader {node} resigned: no longer a voter")
            self._elect_controller()
        return True

    def add_voter(self, node: int) -> bool:
        """KIP-853 AddRaftVoter: broker `node` joins the voter set. Kafka adds only an observer that has caught up
        with the leader; the sandbox's running brokers always have (their metadata log is the leader's), so the new
        voter starts caught up. Refused without a leader, for a node that is already a voter, not a broker, or not
        running. Logs what happened; True if it was added."""
        why = self._voter_change_refused(node, adding=True)
        if why is not None:
            self.log(f"voter {node} not added to the KRaft quorum: {why}")
            return False
        leader = self.voters[self.quorum_leader]
        self.voters[node] = Voter(node, leader.leo, self.now, self.now)
        self.voters = dict(sorted(self.voters.items()))
        self.log(f"voter {node} added to the KRaft quorum: voters {self._voter_ids()}")
        return True

    def _voter_ids(self) -> str:
        return ", ".join(map(str, sorted(self.voters)))

    def _voter_change_refused(self, node: int, adding: bool) -> str | None:
        """Why the leader refuses to add or remove `node` (None: it does not)."""
        if self.mode != "kraft":
            return "not a KRaft cluster"
        if self.quorum_leader not in self.voters or not self.brokers[self.quorum_leader].process_up:
            return "the quorum has no leader to commit the change"
        if adding:
            if node in self.voters:
                return "already a voter"
            if node not in self.brokers or not self.brokers[node].process_up:
                return "no running node with that id to catch up"
            return None
        if node not in self.voters:
            return "not a voter"
        if len(self.voters) == 1:
            return "the last voter"
        return None

    def _check_quorum(self) -> None:
        """KRaft elections on Raft's timers. With a majority of the voters up: a leader whose process died is
        replaced once the voters' fetch timeout passes, and a quorum without a leader elects one at once. Without
        one: the leader resigns after `KRAFT_CHECK_QUORUM_S` and nobody takes over."""
        if self.has_quorum():
            self._majority_lost_at = None
            leader = self.brokers.get(self.quorum_leader)
            if leader is None or (not leader.process_up and leader.crashed_at is not None
                                  and self.now - leader.crashed_at >= KRAFT_FETCH_TIMEOUT_S):
                self._elect_controller()
            return
        if self._majority_lost_at is None:
            self._majority_lost_at = self.now
        if self.quorum_leader >= 0 and self.now - self._majority_lost_at >= KRAFT_CHECK_QUORUM_S:
            old = self.quorum_leader
            self.controller_id = self.quorum_leader = -1
            self.changes.controller = True
            self.log(f"KRaft quorum leader {old} gone: {len(self.voters_up())} of {len(self.voters)} voters up, "
                     f"no leader until a majority is")

    def _run_quorum(self, dt: float) -> None:
        if self.mode != "kraft" or not self.voters:
            return
        self._check_quorum()
        leader = self.voters.get(self.quorum_leader)
        if leader is None or not self.brokers[leader.node_id].process_up:
            return
        leader.leo += dt / KRAFT_NOOP_INTERVAL_S
        leader.last_fetch = leader.last_caught_up = self.now
        for v in self.voters.values():
            if v is leader or not self.brokers[v.node_id].process_up or self.brokers[v.node_id].metadata_stopped:
                continue  # down, or its metadata fetch stopped (`lag_metadata`): it falls behind
            v.leo = leader.leo
            v.last_fetch = v.last_caught_up = self.now
        up = sorted((v.leo for v in self.voters.values()), reverse=True)
        majority = len(self.voters) // 2 + 1
        self.metadata_hwm = max(self.metadata_hwm, up[majority - 1])
