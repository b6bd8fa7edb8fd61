"""Which Metadata answer to believe (`collectors.sources.metadata_epochs`): a leader epoch never goes back.

The answers are built with kafka-python's own Metadata v12 response class, as the adapter receives them."""

from __future__ import annotations

import uuid
from typing import Any

from kafka.protocol.metadata import MetadataResponse

from collectors.sources.metadata_epochs import behind, newest

ORDERS = uuid.UUID(int=7)
REBORN = uuid.UUID(int=8)
NIL = uuid.UUID(int=0)


def answer(parts: dict[int, tuple[int, int, list[int]]], tid: uuid.UUID | None = ORDERS,
           topic_error: int = 0, brokers: int = 0) -> Any:
    """A Metadata answer for topic ``orders``: partition -> (leader, leader epoch, isr)."""
    cls = MetadataResponse[12]
    topic = cls.MetadataResponseTopic(
        error_code=topic_error, name="orders", topic_id=tid if tid is not None else NIL, is_internal=False,
        partitions=[cls.MetadataResponseTopic.MetadataResponsePartition(
            error_code=0, partition_index=i, leader_id=leader, leader_epoch=epoch, replica_nodes=[1, 2, 3],
            isr_nodes=isr, offline_replicas=[]) for i, (leader, epoch, isr) in parts.items()])
    nodes = [cls.MetadataResponseBroker(node_id=i, host=f"b{i}", port=9092, rack=None) for i in range(1, brokers + 1)]
    return cls(throttle_time_ms=0, brokers=nodes, cluster_id="c", controller_id=1, topics=[topic])


KNOWN = {("orders", 0): (6, str(ORDERS)), ("orders", 1): (3, str(ORDERS))}


def test_an_older_epoch_of_the_same_topic_is_behind() -> None:
    md = answer({0: (1, 5, [1, 2, 3]), 1: (2, 3, [2, 3])})
    assert behind(md, KNOWN) == {("orders", 0)}


def test_the_same_or_a_newer_epoch_is_not_behind() -> None:
    assert behind(answer({0: (2, 6, [2, 3]), 1: (3, 4, [3])}), KNOWN) == set()


def test_nothing_known_nothing_behind() -> None:
    assert behind(answer({0: (1, 0, [1])}), {}) == set()


def test_a_partition_not_known_before_is_not_behind() -> None:
    assert behind(answer({2: (1, 0, [1, 2, 3])}), KNOWN) == set()


def test_a_recreated_topic_starts_its_epochs_over() -> None:
    assert behind(answer({0: (1, 0, [1, 2, 3])}, tid=REBORN), KNOWN) == set()


def test_without_topic_ids_on_either_side_the_epoch_decides() -> None:
    # brokers before 2.8 give the all-zero id: an older epoch is behind (a re-created topic there is settled by
    # every broker agreeing, in `newest`)
    assert behind(answer({0: (1, 5, [1])}, tid=None), KNOWN) == {("orders", 0)}
    assert behind(answer({0: (1, 5, [1])}), {("orders", 0): (6, None)}) == {("orders", 0)}


def test_no_epoch_in_the_answer_is_not_behind() -> None:
    assert behind(answer({0: (1, -1, [1])}), KNOWN) == set()


def test_a_topic_in_error_is_skipped() -> None:
    assert behind(answer({0: (1, 5, [1])}, topic_error=3), KNOWN) == set()


def test_newest_believes_the_answer_that_is_not_behind() -> None:
    lagging = answer({0: (1, 5, [1, 2, 3]), 1: (2, 3, [2, 3])})
    current = answer({0: (2, 6, [2, 3]), 1: (2, 3, [2, 3])})
    best, patches = newest([(lagging, behind(lagging, KNOWN)), (current, behind(current, KNOWN))])
    assert best is current and patches == {}


def test_newest_patches_partitions_behind_from_other_answers() -> None:
    # no answer is current everywhere: the fewest-behind one, with each partition behind taken from the answer of
    # the highest epoch for it
    known = {("orders", 0): (6, str(ORDERS)), ("orders", 1): (4, str(ORDERS))}
    a = answer({0: (1, 5, [1, 2, 3]), 1: (3, 4, [3])})  # 0 behind
    b = answer({0: (2, 6, [2, 3]), 1: (2, 3, [2, 3])})  # 1 behind
    c = answer({0: (1, 5, [1]), 1: (2, 3, [2])})  # both behind
    best, patches = newest([(c, behind(c, known)), (a, behind(a, known)), (b, behind(b, known))])
    assert best is a
    assert set(patches) == {("orders", 0)}
    assert (patches[("orders", 0)].leader_id, patches[("orders", 0)].leader_epoch) == (2, 6)


def test_when_every_broker_agrees_the_older_epoch_is_believed() -> None:
    # all answers show partition 0 at epoch 0: the topic was re-created on brokers that give no ids
    known = {("orders", 0): (6, None)}
    x = answer({0: (1, 0, [1, 2, 3])}, tid=None)
    y = answer({0: (2, 0, [1, 2, 3])}, tid=None)
    best, patches = newest([(x, behind(x, known)), (y, behind(y, known))])
    assert best is x and patches == {}  # equal epochs: nothing better to patch with


def test_a_patch_is_never_older_than_what_the_chosen_answer_has() -> None:
    known = {("orders", 0): (9, str(ORDERS))}
    a = answer({0: (1, 7, [1])})
    b = answer({0: (2, 6, [2])})
    best, patches = newest([(a, behind(a, known)), (b, behind(b, known))])
    assert best is a and patches == {}


def test_the_adapter_asks_a_few_other_brokers_then_believes_the_newest() -> None:
    """Every broker of ten answers partition 0 at an older epoch than the last poll saw (the cluster restored from a
    backup, say): the adapter asks `METADATA_ASKS` others, not all nine, believes what they agree on, and the next
    poll compares with that, asking nobody more."""
    from collectors.sources.kafka_adapter import METADATA_ASKS, KafkaAdapter
    from collectors.sources.kafka_transport import Outcome

    old = answer({0: (1, 2, [1, 2, 3])}, brokers=10)
    asked: list[int | None] = []

    def send_one(node: int | None, req: Any) -> Outcome:
        asked.append(node)
        return Outcome(node, req, old, None)

    adapter = KafkaAdapter("c", {}, {}, 5.0)
    adapter._epochs = {("orders", 0): (6, str(ORDERS))}
    kp = type("Kp", (), {"send_one": staticmethod(send_one)})()
    best, patches = adapter._newest_metadata(kp, old, None)
    assert len(asked) == METADATA_ASKS and best is old and patches == {}
    adapter._epochs = {("orders", 0): (2, str(ORDERS))}  # what `_metadata` keeps of the answer believed
    asked.clear()
    assert adapter._newest_metadata(kp, old, None) == (old, {}) and asked == []
