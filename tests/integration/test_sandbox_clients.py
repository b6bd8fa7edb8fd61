"""The sandbox as real clients see it: confluent-kafka and kafka-python over TCP."""

from __future__ import annotations

import socket
import struct
from collections.abc import Iterator

import pytest
from confluent_kafka import ConsumerGroupTopicPartitions, IsolationLevel, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec
from kafka import TopicPartition as KTopicPartition
from kafka.admin import KafkaAdminClient
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse

from sandbox.protocol import APIS
from sandbox.runner import Sandbox
from tests.support.sandbox import frozen

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def ck(sb: Sandbox) -> AdminClient:
    return AdminClient({"bootstrap.servers": sb.bootstrap_servers, "socket.timeout.ms": 5000})


@pytest.fixture(scope="module")
def kp(sb: Sandbox) -> Iterator[KafkaAdminClient]:
    k = KafkaAdminClient(bootstrap_servers=sb.bootstrap_servers, request_timeout_ms=5000)
    yield k
    k.close()


def model_metadata(sb: Sandbox) -> dict[tuple[str, int], tuple[int, list[int], list[int]]]:
    return sb.call(lambda c: {(p.topic, p.index): (p.leader, list(p.replicas), list(p.isr))
                              for p in c.all_partitions()})


def ck_metadata(ck: AdminClient) -> dict[tuple[str, int], tuple[int, list[int], list[int]]]:
    md = ck.list_topics(timeout=10)
    return {(t.topic, p.id): (p.leader, list(p.replicas), list(p.isrs))
            for t in md.topics.values() for p in t.partitions.values()}


def kp_metadata(kp: KafkaAdminClient) -> dict[tuple[str, int], tuple[int, list[int], list[int]]]:
    out = {}
    for t in kp.describe_topics():
        for p in t["partitions"]:
            out[(t["name"], p["partition_index"])] = (p["leader_id"], p["replica_nodes"], p["isr_nodes"])
    return out


def test_metadata_matches_model_for_both_clients(sb: Sandbox, ck: AdminClient, kp: KafkaAdminClient) -> None:
    with frozen(sb):
        want = model_metadata(sb)
        assert ck_metadata(ck) == want
        assert kp_metadata(kp) == want
    md = ck.list_topics(timeout=10)
    assert md.cluster_id == "sandbox-cluster-0001"
    assert md.controller_id == 1
    assert sorted(md.brokers) == [1, 2, 3]
    cluster = kp.describe_cluster()
    assert cluster["controller_id"] == 1 and len(cluster["brokers"]) == 3


def test_lag_from_client_answers_equals_model_lag(sb: Sandbox, ck: AdminClient, kp: KafkaAdminClient) -> None:
    with frozen(sb):
        model_lag = sb.call(lambda c: {
            key: c.partition(*key).hwm - off for key, off in c.groups["billing"].committed.items()})
        latest = ck.list_offsets({TopicPartition("orders", i): OffsetSpec.latest() for i in range(3)})
        hwm = {("orders", tp.partition): f.result(10).offset for tp, f in latest.items()}
        committed = kp.list_group_offsets({"billing": None})["billing"]
        client_lag = {(tp.topic, tp.partition): hwm[(tp.topic, tp.partition)] - om.offset
                      for tp, om in committed.items()}
        ck_committed = ck.list_consumer_group_offsets([ConsumerGroupTopicPartitions("billing")])["billing"]
        ck_offsets = {(tp.topic, tp.partition): tp.offset for tp in ck_committed.result(10).topic_partitions}
    assert client_lag == model_lag
    assert all(v >= 0 for v in client_lag.values())
    assert ck_offsets == {(tp.topic, tp.partition): om.offset for tp, om in committed.items()}


def test_groups_are_listed_and_described(ck: AdminClient, kp: KafkaAdminClient) -> None:
    listed = {g.group_id: g.state.name for g in ck.list_consumer_groups().result(10).valid}
    assert listed == {"billing": "STABLE", "reporting": "STABLE"}
    d = ck.describe_consumer_groups(["billing"])["billing"].result(10)
    assert len(d.members) == 2 and d.coordinator.id in (1, 2, 3)
    assert {g["group_id"] for g in kp.list_groups()} == {"billing", "reporting"}


def test_topic_configs_report_effective_values_and_sources(ck: AdminClient) -> None:
    from confluent_kafka.admin import ConfigResource, ConfigSource

    res = ck.describe_configs([ConfigResource("TOPIC", "orders")])
    cfg = next(iter(res.values())).result(10)
    assert cfg["min.insync.replicas"].value == "2"
    assert cfg["min.insync.replicas"].source == ConfigSource.STATIC_BROKER_CONFIG.value
    assert cfg["retention.ms"].value == "604800000"
    assert cfg["retention.ms"].source == ConfigSource.DEFAULT_CONFIG.value
    assert cfg["unclean.leader.election.enable"].value == "false"


def test_unsupported_requests_get_an_answer_not_a_dropped_connection(sb: Sandbox) -> None:
    port = sb.listeners[1].port

    def roundtrip(payload: bytes) -> bytes:
        with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
            s.sendall(payload)
            size = struct.unpack(">i", s.recv(4))[0]
            data = b""
            while len(data) < size:
                data += s.recv(size - len(data))
            return data

    # ApiVersions at a version the schema does not know: v0 error answer listing what we support.
    req = ApiVersionsRequest(version=3, client_software_name="t", client_software_version="1")
    req.with_header(correlation_id=7, client_id="test")
    frame = bytearray(req.encode(header=True, framed=True))
    frame[6:8] = struct.pack(">h", 99)
    resp = ApiVersionsResponse.decode(roundtrip(bytes(frame)), version=0, header=True)
    assert resp.header.correlation_id == 7
    assert resp.error_code == 35
    assert {k.api_key for k in resp.api_keys} >= {3, 9, 15, 16, 32, 60, 61, 65, 66}

    # InitProducerId (a write API the sandbox does not serve): UNSUPPORTED_VERSION in the answer.
    pair = APIS[22]
    req2 = pair.request(version=1, transactional_id=None, transaction_timeout_ms=1000)
    req2.with_header(correlation_id=8, client_id="test")
    resp2 = pair.response.decode(roundtrip(bytes(req2.encode(header=True, framed=True))), version=1, header=True)
    assert resp2.header.correlation_id == 8 and resp2.error_code == 35


def test_broker_crash_shrinks_isr_moves_leaders_and_takes_single_replica_offline(
        sb: Sandbox, ck: AdminClient, kp: KafkaAdminClient) -> None:
    sb.call(lambda c: c.crash_broker(2))
    assert sb.wait_for(lambda c: not c.brokers[2].registered, timeout=15)
    sb.advance_to(sb.clock.now())
    md = ck_metadata(ck)
    assert 2 not in ck.list_topics(timeout=10).brokers
    leader, replicas, isr = md[("orders", 1)]
    assert replicas == [2, 3, 1] and leader == 3 and 2 not in isr
    assert all(2 not in isr for (t, _), (_, _, isr) in md.items() if t == "orders")
    assert md[("single", 1)][0] == -1  # its only replica died: offline
    kmd = kp_metadata(kp)
    assert kmd[("single", 1)][0] == -1 and kmd[("orders", 1)][0] == 3
    offline = next(p for t in kp.describe_topics(["single"]) for p in t["partitions"] if p["partition_index"] == 1)
    assert offline["offline_replicas"] == [2]

    sb.call(lambda c: c.restart_broker(2))
    assert sb.wait_for(lambda c: all(2 in p.isr for p in c.all_partitions() if 2 in p.replicas), timeout=15)
    md = ck_metadata(ck)
    assert 2 in md[("orders", 0)][2] and md[("single", 1)][0] == 2


def test_a_broker_listens_before_a_call_that_restarts_it_returns(sb: Sandbox) -> None:
    """A real broker listens before it registers. Here a restart registered it at once and opened its listener at
    the next tick, so a client told by Metadata that broker 3 was back could be refused by it."""
    port = sb.listeners[3].port
    sb.call(lambda c: c.crash_broker(3))
    try:
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", port), timeout=5).close()  # a crashed process listens no more
    finally:
        sb.call(lambda c: c.restart_broker(3))
    socket.create_connection(("127.0.0.1", port), timeout=5).close()


def test_producer_crash_in_transaction_holds_lso_until_timeout_abort(
        sb: Sandbox, ck: AdminClient, kp: KafkaAdminClient) -> None:
    assert sb.wait_for(lambda c: c.txn_producers["tx"].state == "Ongoing", timeout=10)
    sb.call(lambda c: c.crash_producer("tx"))
    epoch = sb.call(lambda c: c.txn_producers["tx"].epoch)
    sb.advance_to(sb.clock.now() + 5)

    def offsets(isolation: IsolationLevel) -> dict[int, int]:
        r = ck.list_offsets({TopicPartition("orders", i): OffsetSpec.latest() for i in range(3)},
                            isolation_level=isolation)
        return {tp.partition: f.result(10).offset for tp, f in r.items()}

    with frozen(sb):
        desc = kp.describe_transactions(["tx"])["tx"]
        assert desc.state.value == "Ongoing"
        assert desc.transaction_timeout_ms == 20_000
        hwm, lso = offsets(IsolationLevel.READ_UNCOMMITTED), offsets(IsolationLevel.READ_COMMITTED)
        assert any(lso[i] < hwm[i] for i in range(3))
        open_on = [tp for tp in desc.topic_partitions]
        producers = kp.describe_producers([KTopicPartition(tp.topic, tp.partition) for tp in open_on])
        starts = [ps.current_transaction_start_offset for st in producers.values() for ps in st.active_producers]
        assert any(s >= 0 for s in starts)
    listed = [t for ts in kp.list_transactions().values() for t in ts]
    assert [t.transactional_id for t in listed] == ["tx"]

    assert sb.wait_for(lambda c: c.txn_producers["tx"].state == "CompleteAbort", timeout=20)
    with frozen(sb):
        desc = kp.describe_transactions(["tx"])["tx"]
        assert desc.state.value == "CompleteAbort" and desc.producer_epoch == epoch + 1
        assert offsets(IsolationLevel.READ_COMMITTED) == offsets(IsolationLevel.READ_UNCOMMITTED)
    sb.call(lambda c: c.restart_producer("tx"))


def test_retention_overtakes_a_stopped_group(sb: Sandbox, ck: AdminClient, kp: KafkaAdminClient) -> None:
    sb.call(lambda c: c.set_group_mode("reporting", "stopped"))
    sb.call(lambda c: c.set_topic_config("orders", "retention.ms", "20000"))
    assert sb.wait_for(lambda c: all(
        c.partition(t, i).log_start > off for (t, i), off in c.groups["reporting"].committed.items()), timeout=30)
    committed = kp.list_group_offsets({"reporting": None})["reporting"]
    earliest = ck.list_offsets({TopicPartition("orders", i): OffsetSpec.earliest() for i in range(3)})
    start = {tp.partition: f.result(10).offset for tp, f in earliest.items()}
    for tp, om in committed.items():
        assert om.offset < start[tp.partition], "committed offset should be below log start"
    groups = {g.group_id: g.state.name for g in ck.list_consumer_groups().result(10).valid}
    assert groups["reporting"] == "EMPTY"
    sb.call(lambda c: c.set_topic_config("orders", "retention.ms", None))


def test_request_counts_are_recorded_per_broker(sb: Sandbox, ck: AdminClient) -> None:
    sb.reset_request_counts()
    ck.list_topics(timeout=10)
    counts = sb.request_counts()
    assert sum(c.get("Metadata", 0) for c in counts.values()) >= 1
