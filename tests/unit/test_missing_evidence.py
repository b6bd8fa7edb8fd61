"""No alert is opened on evidence a poll failed to collect (both found by the soak, bench/soak.py, on broker_slow).

A broker answering later than the request timeout makes ListOffsets (high watermarks of the partitions it
leads) and, when it is the controller, DescribeConfigs fail for that poll. Neither may turn into an alert:
a group that keeps committing is not stalled, and a topic whose settings were not read is not unsafe.
"""

from __future__ import annotations

from collectors.alerting.evaluation import judge
from collectors.config import Thresholds
from collectors.model.observations import KafkaObservation, PartitionMeta
from collectors.model.records import ClusterSnapshot, TopicRecord
from collectors.model.snapshot import build_snapshot
from collectors.model.state import ClusterState

T0 = 1_800_000_000.0
TH = Thresholds(consumer_stop_after_s=60)


def observation(now: float, committed: int, hw: int | None) -> KafkaObservation:
    obs = KafkaObservation(time=now, cluster_id="c", controller_id=1,
                           brokers=[(i, "h", 9092, None) for i in (1, 2, 3)],
                           partitions=[PartitionMeta("t", 0, 2, 1, [2, 3, 1], [2, 3, 1], [])],
                           topic_configs={"t": {"min.insync.replicas": "2"}},
                           groups={"g": {"state": "Stable", "members": 1, "coordinator": 1,
                                         "protocol_type": "consumer"}},
                           commits={"g": {("t", 0): committed}})
    if hw is None:
        obs.unreachable_brokers.add(2)
        obs.fail("offsets", "ListOffsets to broker 2 failed: KafkaTimeoutError")
    else:
        obs.high_watermark[("t", 0)] = hw
        obs.log_start[("t", 0)] = 0
    return obs


def status_after(commits: list[int]) -> str:
    """Three polls with a high watermark (30 s apart), then polls without one, committing `commits`."""
    st = ClusterState()
    t = T0
    for i in range(3):
        build_snapshot("c", observation(t, 100 * i, 100 * i + 20), None, st, TH, t)
        t += 30
    s = None
    for c in commits:
        s = build_snapshot("c", observation(t, c, None), None, st, TH, t)
        t += 30
    assert s is not None
    return s.group_partitions[0].status


def test_a_group_that_keeps_committing_is_not_stalled_while_the_high_watermark_is_unknown() -> None:
    assert status_after([300, 400, 500, 600]) == "OK"  # 120 s without a high watermark, commits moving


def test_a_stall_is_still_seen_while_the_high_watermark_is_unknown() -> None:
    assert status_after([200, 200, 200, 200]) == "STALL"  # the last known high watermark bounds the lag


def test_durability_is_not_judged_on_settings_that_were_not_read() -> None:
    # what the snapshot holds when DescribeConfigs failed: Kafka's default min.insync.replicas=1
    defaults = TopicRecord("c", "t", False, 1, 3, 1, False, 604_800_000, "delete")
    s = ClusterSnapshot(cluster="c", time=T0, controller_id=1, topics=[defaults])
    assert {c.rule for c in judge(s, ClusterState(), TH, T0)} == {"unsafe_durability"}
    s.stale_sections = ["configs"]
    assert "unsafe_durability" not in {c.rule for c in judge(s, ClusterState(), TH, T0)}


def test_settings_that_fail_to_load_are_the_last_ones_read_not_kafkas_defaults() -> None:
    """An under-min-ISR partition stays under min ISR (and its alert open) through a failed DescribeConfigs."""
    st = ClusterState()

    def poll(t: float, configs_read: bool) -> ClusterSnapshot:
        obs = observation(t, 100, 120)
        obs.partitions = [PartitionMeta("t", 0, 2, 1, [2, 3, 1], [2], [])]  # ISR 1 of 3, min ISR 2
        if configs_read:
            obs.broker_configs = {"min.insync.replicas": "1"}
        else:
            obs.topic_configs = {}
            obs.fail("configs", "DescribeConfigs failed: KafkaTimeoutError")
        return build_snapshot("c", obs, None, st, TH, t)

    first = poll(T0, configs_read=True)
    assert first.partitions[0].under_min_isr and first.topics[0].min_insync_replicas == 2
    carried = poll(T0 + 30, configs_read=False)
    assert carried.stale_sections == ["configs"]
    assert carried.partitions[0].min_insync_replicas == 2 and carried.partitions[0].under_min_isr
    assert "under_min_isr" in {c.rule for c in judge(carried, st, TH, T0 + 30)}
    # a topic never read before has nothing to carry: the default stands (and the section says stale)
    fresh = ClusterState()
    obs = observation(T0, 100, 120)
    obs.topic_configs = {}
    obs.fail("configs", "DescribeConfigs failed")
    assert build_snapshot("c", obs, None, fresh, TH, T0).partitions[0].min_insync_replicas == 1
