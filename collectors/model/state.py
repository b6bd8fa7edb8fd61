"""What a poller remembers between polls, per cluster, with bounded memory.

Lag in seconds needs a history of log-end offsets, lag status needs a window
of commits, flapping needs ISR change times, elections need the last zxid
epoch. Everything is keyed by things that exist now and pruned when they stop
existing, so deleted topics and groups cost nothing after one poll (Burrow
kept alerting on deleted groups until a restart; we forget them).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Collection
from dataclasses import dataclass, field

from collectors.model.activity import GroupLife
from collectors.model.lag import CommitWindow, OffsetHistory
from collectors.model.loss import EpochWatch, GroupMark, TxnWatch
from collectors.model.metadata_lag import EpochMemory
from collectors.model.records import LossRecord
from collectors.model.txn_clients import EpochSeen


@dataclass
class ClusterState:
    lag_points: int = 60
    window_size: int = 10
    hw_history: dict[tuple[str, int], OffsetHistory] = field(default_factory=dict)
    commit_windows: dict[tuple[str, str, int], CommitWindow] = field(default_factory=dict)
    partition_view: dict[tuple[str, int], tuple[int, tuple[int, ...]]] = field(default_factory=dict)
    isr_changes: dict[tuple[str, int], deque[float]] = field(default_factory=dict)
    # (rule, subject) → since when a timed alert condition has held; read by the rules, advanced by the poller
    condition_since: dict[tuple[str, str], float] = field(default_factory=dict)
    producer_epochs: dict[str, deque[tuple[float, int]]] = field(default_factory=dict)
    # on a Transaction V2 cluster: each producer's epoch and the transactions seen begun at it, the proof that it
    # keeps V1's rules (`collectors.model.txn_clients`); checkpointed, so a restart does not start the proof over
    txn_epochs: dict[str, EpochSeen] = field(default_factory=dict)
    # the finalized transaction.version last read (`KafkaObservation.transaction_version`); None before any read
    transaction_version: int | None = None
    txn_state_since: dict[str, tuple[str, float]] = field(default_factory=dict)
    # transactional id → the start time of the transaction its `txn_state_since` entry is about: a new
    # transaction in the same state (two back-to-back commits each caught in PrepareCommit) restarts the clock.
    # Not checkpointed: after a restart the first sighting is taken as the same transaction, as before.
    txn_started: dict[str, float | None] = field(default_factory=dict)
    unknown_open_txns: dict[tuple[str, int, int], int] = field(default_factory=dict)  # seen-count
    zk_controller: int | None = None  # /controller brokerid at the last poll
    zk_leader_epoch: int | None = None
    zk_election_at: float | None = None
    kraft_leader: tuple[int, int] | None = None  # (leader id, epoch) of the last DescribeQuorum naming a leader
    kraft_election_at: float | None = None
    # (voter ids, high watermark) of the last DescribeQuorum answered: what a poll that finds no leader reports the
    # voters of. Checkpointed, so a collector restarted while the quorum has no leader still says whose it is.
    kraft_quorum: tuple[tuple[int, ...], int] | None = None
    # The last change of the voter set seen (KIP-853 add/remove controller, a quorum rebuilt), for
    # `kraft_voters_changed`: when, and (voters added, voters removed, when the set before was last read; a change
    # found after such a gap, the monitor down or the quorum unanswered, happened somewhere in it, and is said so).
    # Checkpointed with `kraft_quorum`, so a change while the monitor was down is seen at the first poll after a
    # restart, and one seen just before it stays open as long.
    kraft_voters_changed_at: float | None = None
    kraft_voters_change: tuple[tuple[int, ...], tuple[int, ...], float | None] | None = None
    kraft_quorum_seen_at: float | None = None  # when `kraft_quorum` was last read from an answer
    known_brokers: dict[int, float] = field(default_factory=dict)  # broker id → last seen alive
    topic_configs: dict[str, dict[str, str | None]] = field(default_factory=dict)  # last read, for failed reads
    broker_configs: dict[str, str | None] = field(default_factory=dict)
    last_good: float | None = None
    polls: int = 0
    # Loss evidence (collectors.model.loss): per partition the leadership and committed offset last known for
    # sure, and the losses found recently (the alerts stay open `loss_alert_hold_s` after one).
    epoch_watch: dict[tuple[str, int], EpochWatch] = field(default_factory=dict)
    # the leader epochs any answer showed and when, and where a broker answered older ones since when
    # (`collectors.model.metadata_lag`; what brokers are behind on is checkpointed)
    metadata_lag: EpochMemory = field(default_factory=EpochMemory)
    recent_losses: list[LossRecord] = field(default_factory=list)
    # per (group, topic, partition): messages skipped below the log start and past the log end already recorded
    group_marks: dict[tuple[str, str, int], GroupMark] = field(default_factory=dict)
    # server -> (epoch, zxid) highest seen; transactional id -> open transaction / abort seen. Checkpointed (the
    # watches with an abort recorded only): a zxid gone back while the monitor was down is claimed after a restart
    zk_zxids: dict[str, tuple[int, int]] = field(default_factory=dict)
    txn_watch: dict[str, TxnWatch] = field(default_factory=dict)
    # per group: when first seen and last seen active (`collectors.model.activity`); kept in checkpoints
    group_life: dict[str, GroupLife] = field(default_factory=dict)

    def history(self, key: tuple[str, int]) -> OffsetHistory:
        h = self.hw_history.get(key)
        if h is None:
            h = self.hw_history[key] = OffsetHistory(self.lag_points)
        return h

    def window(self, key: tuple[str, str, int]) -> CommitWindow:
        w = self.commit_windows.get(key)
        if w is None:
            w = self.commit_windows[key] = CommitWindow(self.window_size)
        return w

    def prune(self, partitions: set[tuple[str, int]] | None,
              group_partitions: set[tuple[str, str, int]] | None, groups: set[str] | None = None, *,
              unread_topics: Collection[str] = (), unread_groups: Collection[str] = (),
              unread_partitions: Collection[tuple[str, int]] = ()) -> None:
        """Forget what no longer exists (None: that part of the poll was incomplete, forget nothing of it).

        The unread subjects are those this poll could not read although the rest of their section was read (the
        snapshot's ``stale_subjects``: a topic whose Metadata answered an error, a group whose OffsetFetch was
        refused, a partition whose leader's ListOffsets failed): missing from the sets, but not gone, so their memory
        is kept (of a topic, its partitions' and the group partitions on it) while the rest is pruned. Forgetting
        nothing of a section stale in part instead would keep every deleted topic's and group's memory for as long
        as one topic is being deleted or one group is denied."""
        topics, gids, parts = set(unread_topics), set(unread_groups), set(unread_partitions)
        if groups is not None and any(g not in groups and g not in gids for g in self.group_life):
            for g in [g for g in self.group_life if g not in groups and g not in gids]:
                del self.group_life[g]
        for d, keep in ((self.hw_history, partitions), (self.partition_view, partitions),
                        (self.isr_changes, partitions), (self.epoch_watch, partitions)):
            if keep is not None and (len(d) > len(keep) or any(k not in keep for k in d)):
                for k in [k for k in d if k not in keep and k[0] not in topics]:
                    del d[k]
        for gd in (self.commit_windows, self.group_marks):
            if group_partitions is not None and (len(gd) > len(group_partitions)
                                                 or any(k not in group_partitions for k in gd)):
                for k in [k for k in gd if k not in group_partitions and k[0] not in gids
                          and k[1] not in topics and (k[1], k[2]) not in parts]:
                    del gd[k]
