"""Transaction V2 (KIP-890 part 2): with ``transaction.version`` 2 finalized, every transaction end bumps the
producer's epoch, so epoch rises say nothing of restarts or fencing.

A Kafka 4 cluster finalizes it by default. Before, the collector counted each of a busy producer's commits as a
bump: `producer_epoch_bumps` (three in an hour) paged a crash loop for every transactional producer within
seconds, and its Prometheus twin with it (deploy/prometheus/tests/transactions.yml holds the twin). Here: the level
read is kept over a poll that could not read it, shown in the snapshot and on /metrics, and stops the counting.
"""

from __future__ import annotations

from collections import deque
from pathlib import Path
from typing import Any

from collectors.alerting.evaluation import judge
from collectors.config import Thresholds
from collectors.model.observations import KafkaObservation, PartitionMeta
from collectors.model.snapshot import build_snapshot
from collectors.model.state import ClusterState
from collectors.outputs.checkpoint import Checkpoint, checkpoint_path, load_checkpoint, save_checkpoint
from collectors.outputs.exporter import MetricsEndpoint
from tests.unit.test_checkpoint import edit_meta
from tests.unit.test_exporter import samples

TH = Thresholds(producer_epoch_bumps=3)
T = 1_800_000_000.0


def observation(now: float, epoch: int, transaction_version: int | None) -> KafkaObservation:
    """A producer that has just committed (CompleteCommit) at `epoch`; the feature level as ApiVersions read it."""
    o = KafkaObservation(time=now, cluster_id="c", controller_id=1, brokers=[(1, "h", 9092, None)],
                         partitions=[PartitionMeta("t", 0, 1, 1, [1], [1], [])],
                         topic_configs={"t": {"min.insync.replicas": "1"}}, transaction_version=transaction_version)
    o.high_watermark[("t", 0)], o.log_start[("t", 0)], o.last_stable[("t", 0)] = 500, 0, 500
    o.listed_transactions["tx"] = 7
    o.transactions.append({"transactional_id": "tx", "coordinator": 1, "transaction_state": "CompleteCommit",
                           "producer_id": 7, "producer_epoch": epoch, "transaction_timeout_ms": 60_000,
                           "transaction_start_time_ms": int((now - 2) * 1000), "partitions": []})
    return o


def paged(levels: list[int | None], state: ClusterState | None = None) -> tuple[list[bool], ClusterState]:
    """One poll a minute, the epoch one higher at each (a commit a minute under V2, a restart a minute before it):
    whether `producer_epoch_bumps` fired at each poll."""
    st = state if state is not None else ClusterState()
    fired = []
    for i, level in enumerate(levels):
        now = T + 60 * i
        snap = build_snapshot("c", observation(now, 10 + i, level), None, st, TH, now)
        fired.append(any(c.rule == "producer_epoch_bumps" for c in judge(snap, st, TH, now)))
    return fired, st


def test_without_transaction_v2_three_rises_in_an_hour_page() -> None:
    assert paged([0, 0, 0, 0])[0] == [False, False, False, True]
    assert paged([None, None, None, None])[0] == [False, False, False, True]  # never read: judged as before


def test_with_transaction_v2_rises_are_transaction_ends_and_page_nothing() -> None:
    fired, st = paged([2] * 6)
    assert fired == [False] * 6 and st.producer_epochs == {} and st.transaction_version == 2


def test_a_poll_that_cannot_read_the_level_keeps_the_last_one_read() -> None:
    fired, st = paged([2, None, None, None, None])
    assert fired == [False] * 5
    snap = build_snapshot("c", KafkaObservation(time=T + 600, reachable=False), None, st, TH, T + 600)
    assert snap.transaction_version == 2  # an unreachable poll too: the gauge (and the twin's `unless`) stays


def test_rises_kept_from_before_stop_counting_once_transaction_v2_is_read() -> None:
    """A checkpoint (or a cluster upgraded to V2 while watched) holds rises counted under the old rules; the first
    poll that reads level 2 drops them instead of paging on them."""
    st = ClusterState()
    st.producer_epochs["tx"] = deque([(T - 300, 5), (T - 200, 6), (T - 100, 7), (T - 50, 8)], maxlen=64)
    fired, st = paged([2], st)
    assert fired == [False] and "tx" not in st.producer_epochs


def test_the_level_is_on_metrics_once_read() -> None:
    st = ClusterState()
    unread = build_snapshot("c", observation(T, 1, None), None, st, TH, T)
    read = build_snapshot("c", observation(T + 60, 2, 2), None, st, TH, T + 60)
    ep = MetricsEndpoint()
    ep.update([unread])
    assert "kafka_cluster_transaction_version" not in samples(ep.render())
    ep.update([read])
    assert samples(ep.render())["kafka_cluster_transaction_version"] == [({"cluster": "c"}, 2.0)]


def test_the_level_survives_a_restart_whose_first_reads_fail(tmp_path: Path) -> None:
    """Checkpointed: a collector restarted on a V2 cluster whose first ApiVersions reads fail still knows that the
    epoch rises are transaction ends (before, it judged them by the old rules and paged after three polls). A
    checkpoint from before the field loads with the level unknown."""
    _, st = paged([2, 2, 2])
    save_checkpoint(tmp_path, Checkpoint("c", "c", T + 120, st))
    cp = load_checkpoint(tmp_path, "c", lag_points=st.lag_points, window_size=st.window_size, now=T + 150,
                         max_age_s=3600)
    assert cp is not None and cp.state.transaction_version == 2
    fired, resumed = paged([None] * 4, cp.state)
    assert fired == [False] * 4 and resumed.transaction_version == 2

    def without_level(meta: dict[str, Any]) -> None:
        del meta["transaction_version"]

    edit_meta(checkpoint_path(tmp_path, "c"), without_level)
    old = load_checkpoint(tmp_path, "c", lag_points=st.lag_points, window_size=st.window_size, now=T + 150,
                          max_age_s=3600)
    assert old is not None and old.state.transaction_version is None
