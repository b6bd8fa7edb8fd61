"""DescribeGroups and DescribeQuorum answers that are not what they seem (`kafka_adapter`): a group deleted
between ListGroups and DescribeGroups is gone, a KIP-848 group is alive, a quorum error is no quorum."""

from __future__ import annotations

from types import SimpleNamespace

from collectors.model.observations import KafkaObservation
from collectors.sources.kafka_adapter import _answered_groups
from collectors.sources.kafka_answers import parse_quorum


def test_a_group_not_found_is_dead_and_no_section_goes_stale() -> None:
    obs = KafkaObservation(time=0.0)
    obs.groups = {g: {"state": "Empty", "members": 0} for g in ("console-consumer-1", "billing", "locked")}
    answer = [SimpleNamespace(group_id="console-consumer-1", error_code=69),  # GROUP_ID_NOT_FOUND (v6+)
              SimpleNamespace(group_id="billing", error_code=0)]
    assert [g.group_id for g in _answered_groups(answer, "DescribeGroups", obs)] == ["billing"]
    assert obs.groups["console-consumer-1"]["state"] == "Dead" and not obs.stale_sections and not obs.errors
    # any other error is still no answer: the groups section is stale, as before
    assert list(_answered_groups([SimpleNamespace(group_id="locked", error_code=30)], "DescribeGroups", obs)) == []
    assert obs.stale_sections == {"groups"} and obs.errors == ["DescribeGroups locked: GROUP_AUTHORIZATION_FAILED"]


def test_a_kip848_group_describegroups_cannot_describe_keeps_its_listed_state() -> None:
    """Kafka 4 answers DescribeGroups with GROUP_ID_NOT_FOUND ("not a classic group") for a consumer-protocol
    (KIP-848) or streams group: alive, not deleted. Its ListGroups state stands; running, it counts as having a
    member (the count is unknown), so a stuck one still pages instead of reading as a deleted group."""
    obs = KafkaObservation(time=0.0)
    obs.groups = {"orders-app": {"state": "Stable", "members": 0, "group_type": "consumer"},
                  "idle-app": {"state": "Empty", "members": 0, "group_type": "streams"},
                  "old-app": {"state": "Empty", "members": 0, "group_type": "classic"}}
    answer = [SimpleNamespace(group_id=g, error_code=69) for g in obs.groups]
    assert list(_answered_groups(answer, "DescribeGroups", obs)) == []
    assert {g: (i["state"], i["members"]) for g, i in obs.groups.items()} == {
        "orders-app": ("Stable", 1), "idle-app": ("Empty", 0), "old-app": ("Dead", 0)}
    assert not obs.stale_sections


def test_a_describe_quorum_partition_error_is_a_stale_quorum_not_a_quorum_of_zeros() -> None:
    """A controller that just lost Raft leadership answers NOT_LEADER_OR_FOLLOWER in the partition, its other fields
    zero: taken as the quorum, it resolved a voter-lag alert on missing evidence and then "saw" an election."""
    from collectors.sources.kafka_transport import Outcome

    part = SimpleNamespace(partition_index=0, error_code=6, leader_id=0, leader_epoch=0, high_watermark=0,
                           current_voters=[], observers=[])
    resp = SimpleNamespace(error_code=0, topics=[SimpleNamespace(topic_name="__cluster_metadata", partitions=[part])])
    obs = KafkaObservation(time=0.0)
    parse_quorum(Outcome(None, None, resp, None), obs)
    assert obs.quorum is None and obs.kraft is True and obs.stale_sections == {"quorum"}
    assert obs.errors == ["DescribeQuorum: NOT_LEADER_OR_FOLLOWER"]


def test_an_epoch_the_leader_knows_nothing_of_settles_the_question_and_an_error_does_not() -> None:
    """OffsetForLeaderEpoch answers (-1, -1) without an error when the epoch asked is older than the leader's cache
    (or the topic has no epoch cache, the old message format): an answer that proves nothing, not one to wait for.
    Left out, the question was asked at every poll for good and the partition's group marks stayed held."""
    from collectors.model.loss import EpochQuestion
    from collectors.sources.kafka_adapter import KafkaAdapter
    from collectors.sources.kafka_transport import Outcome

    def part(p: int, error: int, epoch: int, end: int) -> SimpleNamespace:
        return SimpleNamespace(partition=p, error_code=error, leader_epoch=epoch, end_offset=end)

    answer = SimpleNamespace(topics=[SimpleNamespace(topic="orders", partitions=[
        part(0, 0, -1, -1), part(1, 74, -1, -1), part(2, 0, 5, 48_800)])])  # 74: FENCED_LEADER_EPOCH
    kp = SimpleNamespace(send_many=lambda reqs: [Outcome(node, req, answer, None) for node, req in reqs])
    obs = KafkaObservation(time=0.0)
    questions = [EpochQuestion("orders", p, 2, 5, 7) for p in range(3)]
    KafkaAdapter._epoch_end_offsets(None, kp, obs, questions)
    assert obs.epoch_end_offsets == {("orders", 0): (-1, -1), ("orders", 2): (5, 48_800)}


def test_the_finalized_transaction_version_is_read_and_a_failure_leaves_it_unknown() -> None:
    """ApiVersions v3+ carries the finalized features (KIP-584). `transaction.version` 2 is Transaction V2, where
    every transaction end bumps the producer epoch; no such feature finalized is level 0, and a broker before
    Kafka 2.4 (no ApiVersions v3: kafka-python refuses to send it) has none either. Any other failure says
    nothing: unknown for the poll (the last level read stands), and no section goes stale."""
    from kafka.errors import IncompatibleBrokerVersion, KafkaTimeoutError

    from collectors.sources.kafka_answers import parse_features
    from collectors.sources.kafka_transport import Outcome

    def level(response: object = None, error: BaseException | None = None) -> KafkaObservation:
        obs = KafkaObservation(time=0.0)
        parse_features(Outcome(3, None, response, error), obs)
        return obs

    def features(*levels: tuple[str, int], epoch: int = 3) -> SimpleNamespace:
        return SimpleNamespace(error_code=0, finalized_features_epoch=epoch, finalized_features=[
            SimpleNamespace(name=n, min_version_level=v, max_version_level=v) for n, v in levels])

    assert level(features(("metadata.version", 25), ("transaction.version", 2))).transaction_version == 2
    assert level(features(("metadata.version", 21))).transaction_version == 0
    assert level(features(("transaction.version", 2), epoch=0)).transaction_version == 2  # epoch 0 is an epoch
    # "valid only if FinalizedFeaturesEpoch >= 0": a broker that has not read them (yet) says nothing of the level
    unread = level(features(epoch=-1))
    assert unread.transaction_version is None and not unread.errors and not unread.stale_sections
    assert level(error=IncompatibleBrokerVersion("no ApiVersions v3")).transaction_version == 0
    timed_out = level(error=KafkaTimeoutError())
    assert timed_out.transaction_version is None and not timed_out.stale_sections
    assert timed_out.errors == ["ApiVersions (features) to broker 3 failed: KafkaTimeoutError"]
    refused = level(SimpleNamespace(error_code=35, finalized_features_epoch=3, finalized_features=[]))
    assert refused.transaction_version is None and refused.errors == ["ApiVersions (features): UNSUPPORTED_VERSION"]
