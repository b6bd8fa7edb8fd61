"""broker_down means "a broker that holds replicas is not registered" (docs/alerts.md). A broker retired the
usual way (its replicas reassigned, then shut down) leaves the cluster and every replica list: it is forgotten,
not paged for ever. A crashed broker stays in its partitions' replica lists, so it is still down."""

from __future__ import annotations

from collectors.alerting.evaluation import judge
from collectors.config import Thresholds
from collectors.model.observations import KafkaObservation, PartitionMeta
from collectors.model.snapshot import build_snapshot
from collectors.model.state import ClusterState

T = 1_800_000_000.0
TH = Thresholds()


def obs(now: float, alive: list[int], replicas: list[int], holders: set[int] | None) -> KafkaObservation:
    o = KafkaObservation(time=now, cluster_id="x", controller_id=1)
    o.brokers = [(b, f"h{b}", 9092, None) for b in alive]
    o.partitions = [PartitionMeta("t", i, replicas[i % len(replicas)], 0, replicas, replicas, []) for i in range(3)]
    o.topic_configs = {"t": {"min.insync.replicas": "2"}}
    o.high_watermark = {("t", i): 10 for i in range(3)}
    o.log_start = {("t", i): 0 for i in range(3)}
    o.replica_brokers = holders
    return o


def down(st: ClusterState, o: KafkaObservation) -> list[str]:
    snap = build_snapshot("c", o, None, st, TH, o.time)
    assert [b.broker_id for b in snap.brokers if not b.alive] == sorted(
        int(c.subject.split("-")[1]) for c in judge(snap, st, TH, o.time) if c.rule == "broker_down")
    return [c.subject for c in judge(snap, st, TH, o.time) if c.rule == "broker_down"]


def test_a_decommissioned_broker_is_forgotten_and_a_crashed_one_is_down() -> None:
    st = ClusterState()
    assert down(st, obs(T, [1, 2, 3, 4], [1, 2, 3], {1, 2, 3, 4})) == []
    # broker 4 crashed: still in a replica list (of a topic the filters leave out, say) -> down
    assert down(st, obs(T + 30, [1, 2, 3], [1, 2, 3], {1, 2, 3, 4})) == ["broker-4"]
    # its replicas reassigned away, it is in no replica list any more: decommissioned, forgotten
    assert down(st, obs(T + 60, [1, 2, 3], [1, 2, 3], {1, 2, 3})) == []
    assert 4 not in st.known_brokers
    assert down(st, obs(T + 90, [1, 2, 3], [1, 2, 3], None)) == []  # and stays forgotten


def test_without_a_complete_metadata_answer_every_broker_seen_before_is_still_expected() -> None:
    st = ClusterState()
    down(st, obs(T, [1, 2, 3, 4], [1, 2, 3], {1, 2, 3, 4}))
    assert down(st, obs(T + 30, [1, 2, 3], [1, 2, 3], None)) == ["broker-4"]  # a topic's metadata failed
    assert 4 in st.known_brokers
