"""What keeps a big poll's CPU down: the cyclic collector out of the poll's way, assignments decoded once,
ListOffsets requests built once while leadership holds (bench.bench_poll_cpu measures the whole)."""

from __future__ import annotations

import gc
from types import SimpleNamespace
from unittest import mock

from kafka.protocol.consumer.metadata import ConsumerProtocolAssignment

from collectors.model.observations import KafkaObservation, PartitionMeta
from collectors.runtime.loop import PollGc
from collectors.sources import kafka_adapter
from collectors.sources.kafka_adapter import KafkaAdapter, group_owners


def test_no_collection_during_a_poll_one_after_and_the_survivors_frozen() -> None:
    pg = PollGc(unfreeze_every=3)
    assert gc.isenabled()
    try:
        with pg.poll():
            assert not gc.isenabled()
            cycle: list[object] = []
            cycle.append(cycle)  # garbage only the cyclic collector can free
            del cycle
        assert gc.isenabled() and gc.get_freeze_count() > 0
        with mock.patch.object(gc, "unfreeze", wraps=gc.unfreeze) as unfreeze:
            with pg.poll():
                pass
            assert unfreeze.call_count == 0
            with pg.poll():  # the third poll: everything unfrozen and collected once
                pass
            assert unfreeze.call_count == 1
        with pg.poll():
            assert not gc.isenabled()
        assert gc.isenabled()
    finally:
        gc.unfreeze()


def test_the_collector_comes_back_even_when_the_poll_raises() -> None:
    try:
        with PollGc().poll():
            raise RuntimeError("poll failed")
    except RuntimeError:
        pass
    finally:
        gc.unfreeze()
    assert gc.isenabled()


def member(member_id: str, held: dict[str, list[int]]) -> SimpleNamespace:
    raw = ConsumerProtocolAssignment(assigned_partitions=[
        ConsumerProtocolAssignment.TopicPartition(topic=t, partitions=ps) for t, ps in held.items()],
        user_data=b"", version=0).encode()
    return SimpleNamespace(member_id=member_id, client_id=f"c-{member_id}", client_host="/10.0.0.1",
                           member_assignment=raw)


def test_owners_decode_each_assignment_once_and_ignore_what_they_cannot_read() -> None:
    members = [member("m1", {"orders": [0, 1]}), member("m2", {"orders": [2]}),
               SimpleNamespace(member_id="m3", client_id="c", client_host="h", member_assignment=b"\x00\x07junk"),
               SimpleNamespace(member_id="m4", client_id="c", client_host="h", member_assignment=b"")]
    learned: dict[bytes, list[tuple[str, int]]] = {}
    first = group_owners(members, None, learned)
    assert {k: o.member_id for k, o in first.items()} == {("orders", 0): "m1", ("orders", 1): "m1",
                                                           ("orders", 2): "m2"}
    with mock.patch.object(ConsumerProtocolAssignment, "decode", side_effect=AssertionError("decoded again")):
        again = group_owners(members[:2], learned, {})
    assert again == first


def test_list_offsets_requests_are_built_again_only_when_leadership_moves() -> None:
    adapter = KafkaAdapter("c", {}, {}, 5.0)
    sent: list[list[object]] = []

    class Transport:
        def send_many(self, requests: list[tuple[int, object]]) -> list[SimpleNamespace]:
            sent.append([r for _, r in requests])
            return [SimpleNamespace(ok=True, response=SimpleNamespace(topics=[], transaction_states=[], groups=[],
                                                                      error_code=0)) for _ in requests]

    def observe(leaders: list[int]) -> None:
        obs = KafkaObservation(time=0.0)
        obs.partitions = [PartitionMeta("t", p, leader, 1, [1, 2], [1, 2], []) for p, leader in enumerate(leaders)]
        adapter._offsets_and_listings(Transport(), obs)

    with mock.patch.object(kafka_adapter, "_list_offsets", wraps=kafka_adapter._list_offsets) as build:
        observe([1, 2, 1])
        assert build.call_count == 6  # earliest, latest, lso for each of two leaders
        observe([1, 2, 1])
        assert build.call_count == 6 and sent[1] == sent[0]  # the same objects, sent again
        observe([1, 1, 1])  # partition 1 moved to broker 1: broker 1's requests are new, broker 2 leads nothing
        assert build.call_count == 9 and len(sent[2]) == 3
