"""The adapter says whom a failure concerns (`KafkaObservation.fail`'s ``subjects``): one group's refused
OffsetFetch, one coordinator's timeout, one leader's ListOffsets keep those subjects' alerts only; a failed
ListGroups still leaves the whole groups section stale."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from kafka.errors import KafkaTimeoutError

from collectors.model.observations import KafkaObservation, PartitionMeta
from collectors.sources.kafka_adapter import KafkaAdapter
from collectors.sources.kafka_transport import Outcome

AUTH = 30  # GROUP_AUTHORIZATION_FAILED


def adapter() -> KafkaAdapter:
    return KafkaAdapter("c", {}, {}, 1.0, kraft=False)  # no client is made until a request is sent


def transport(answer: Any) -> SimpleNamespace:
    """A transport answering each (node, request) with `answer(node, request)`: a response, or an exception."""
    def send_many(requests: list[tuple[int | None, Any]]) -> list[Outcome]:
        out = []
        for node, req in requests:
            got = answer(node, req)
            failed = isinstance(got, BaseException)
            out.append(Outcome(node, req, None if failed else got, got if failed else None))
        return out
    return SimpleNamespace(send_many=send_many)


def test_groups_a_coordinator_or_an_acl_fails_are_named_and_a_failed_listing_is_the_whole_section() -> None:
    obs = KafkaObservation(time=0.0, brokers=[(1, "h", 9092, None), (2, "h", 9092, None)])
    obs.groups = {g: {"state": "Stable", "members": 1} for g in ("a", "b", "c", "d")}
    coordinators = {"a": 1, "b": 1, "c": 2}  # d: COORDINATOR_NOT_AVAILABLE

    def answer(node: int | None, req: Any) -> Any:
        kind = type(req).__name__
        if kind.startswith("FindCoordinator"):
            return SimpleNamespace(coordinators=[
                SimpleNamespace(key=k, node_id=coordinators.get(k, -1), error_code=0 if k in coordinators else 15)
                for k in req.coordinator_keys])
        if kind.startswith("ApiVersions"):
            return SimpleNamespace(error_code=0, finalized_features=[])
        if node == 2:
            return KafkaTimeoutError()
        if kind.startswith("DescribeGroups"):
            return SimpleNamespace(groups=[SimpleNamespace(group_id=g, error_code=AUTH if g == "b" else 0,
                                                           group_state="Stable", members=[], protocol_type="consumer")
                                           for g in req.groups])
        return SimpleNamespace(groups=[SimpleNamespace(group_id=g.group_id, error_code=AUTH if g.group_id == "b" else 0,
                                                       topics=[]) for g in req.groups])

    adapter()._groups_and_transactions(transport(answer), obs)
    assert obs.stale_sections == {"groups"} and obs.stale_subjects == {"groups": {"b", "c", "d"}}
    obs.fail("groups", "ListGroups to broker 2 failed: KafkaTimeoutError")
    assert obs.stale_subjects == {}


def test_a_leader_whose_offsets_fail_names_the_partitions_it_leads() -> None:
    obs = KafkaObservation(time=0.0, brokers=[(1, "h", 9092, None), (2, "h", 9092, None)],
                           partitions=[PartitionMeta("t", p, leader, 1, [1, 2], [1, 2], []) for p, leader in
                                       ((0, 1), (1, 2), (2, 2))])

    def answer(node: int | None, req: Any) -> Any:
        kind = type(req).__name__
        if kind.startswith("ListOffsets"):
            if node == 2:
                return KafkaTimeoutError()
            return SimpleNamespace(topics=[SimpleNamespace(name="t", partitions=[
                SimpleNamespace(partition_index=0, error_code=0, offset=5, leader_epoch=1)])])
        if kind.startswith("ListTransactions"):
            return SimpleNamespace(error_code=0, transaction_states=[])
        return SimpleNamespace(error_code=0, groups=[])

    adapter()._offsets_and_listings(transport(answer), obs)
    assert obs.stale_sections == {"offsets"} and obs.stale_subjects == {"offsets": {"t-1", "t-2"}}
    assert obs.high_watermark == {("t", 0): 5} and obs.unreachable_brokers == {2}
