"""The sandbox models Transaction V2 (KIP-890 part 2): `ClusterSpec.transaction_version` (`sandbox.transactions`).

Under Kafka 4.0's ``transaction.version`` 2 the coordinator bumps the producer epoch at every transaction end (the
producer's commit and its own abort; its own timeout abort and a restart's fence keep their single bump). Before,
the epoch moves only when the coordinator fences. The level is answered in ApiVersions v3+ as Kafka does (KIP-584).
"""

from __future__ import annotations

from typing import Any

import pytest
from kafka import KafkaAdminClient
from kafka.protocol.admin.transactions import DescribeProducersRequest, DescribeTransactionsRequest
from kafka.protocol.metadata import ApiVersionsResponse
from pydantic import ValidationError

from sandbox.handlers import Handlers
from sandbox.model import Cluster
from sandbox.protocol import Request, encode_response
from sandbox.spec import ClusterSpec
from tests.support.sandbox import running_sandbox, scenario
from tests.unit.test_sandbox_model import make, run

TV2 = {"mode": "kraft", "transaction_version": 2}


def api_versions(c: Cluster, version: int) -> Any:
    """The ApiVersions answer at `version` as a client decodes it off the wire."""
    fields = Handlers(c).api_versions(1, Request(18, version, 7, "t", None))
    frame = encode_response(18, version, 7, fields)[4:]  # without the length prefix
    return ApiVersionsResponse.decode(frame, version=version, header=True)


def finalized(answer: Any) -> dict[str, tuple[int, int]]:
    return {f.name: (f.min_version_level, f.max_version_level) for f in answer.finalized_features or []}


def supported(answer: Any) -> dict[str, tuple[int, int]]:
    return {f.name: (f.min_version, f.max_version) for f in answer.supported_features or []}


def described_epoch(c: Cluster, tid: str = "tx") -> int:
    node = c.coordinator_for(tid, 1)
    req = Request(65, 0, 1, "t", DescribeTransactionsRequest(transactional_ids=[tid], version=0))
    (state,) = Handlers(c).describe_transactions(node, req)["transaction_states"]
    assert state["error_code"] == 0
    return state["producer_epoch"]


def producer_epochs(c: Cluster, topic: str, producer_id: int) -> dict[int, int]:
    """partition → the producer's epoch in DescribeProducers, asked of each partition's leader."""
    out = {}
    for p in c.topics[topic].partitions:
        if not p.online:
            continue
        body = DescribeProducersRequest(topics=[DescribeProducersRequest.TopicRequest(
            name=topic, partition_indexes=[p.index])], version=0)
        (part,) = Handlers(c).describe_producers(p.leader, Request(61, 0, 1, "t", body))["topics"][0]["partitions"]
        for e in part["active_producers"]:
            if e["producer_id"] == producer_id:
                out[p.index] = e["producer_epoch"]
    return out


def test_default_cluster_finalizes_no_transaction_version_and_commits_keep_the_epoch() -> None:
    c = make()  # ZooKeeper mode, transaction_version 0
    v3, v4 = api_versions(c, 3), api_versions(c, 4)
    assert finalized(v3) == finalized(v4) == {} and v3.finalized_features_epoch == -1
    assert "transaction.version" not in supported(v3)  # a zero minimum is left out below v4 (KAFKA-17011)
    assert supported(v4)["transaction.version"] == (0, 2)
    k = make(mode="kraft")  # KRaft always finalizes metadata.version, never transaction.version 0
    assert finalized(api_versions(k, 3)) == {"metadata.version": (21, 21)}
    assert api_versions(k, 3).finalized_features_epoch >= 0

    tp = c.txn_producers["tx"]
    epoch = tp.epoch
    run(c, 30)
    assert tp.commits >= 5
    assert tp.epoch == described_epoch(c) == epoch
    assert set(producer_epochs(c, "orders", tp.producer_id).values()) == {epoch}
    assert (tp.aborts, tp.own_aborts, tp.timeout_aborts, tp.fenced_aborts) == (0, 0, 0, 0)


def test_transaction_v2_is_finalized_in_api_versions() -> None:
    c = make(**TV2)
    for version in (3, 4):
        answer = api_versions(c, version)
        assert finalized(answer) == {"metadata.version": (25, 25), "transaction.version": (2, 2)}
        assert answer.finalized_features_epoch >= 0
    assert supported(api_versions(c, 4))["transaction.version"] == (0, 2)


def test_transaction_v2_bumps_the_epoch_once_per_commit_everywhere_it_shows() -> None:
    c = make(**TV2)
    tp = c.txn_producers["tx"]
    epoch = tp.epoch
    run(c, 32)  # 1 s steps: a transaction every 4 s (begin, 2 s open, prepare, pause)
    assert tp.state == "CompleteCommit" and tp.commits == 8 and tp.aborts == 0
    assert tp.epoch == described_epoch(c) == epoch + 8
    # the markers carry the new epoch to every partition the transaction wrote
    assert set(producer_epochs(c, "orders", tp.producer_id).values()) == {epoch + 8}
    run(c, 3)  # the next transaction goes to PrepareCommit: the coordinator bumps as it writes that state
    assert tp.state == "PrepareCommit" and tp.epoch == described_epoch(c) == epoch + 9
    assert set(producer_epochs(c, "orders", tp.producer_id).values()) == {epoch + 8}  # no marker yet
    run(c, 1)
    assert tp.commits == 9 and set(producer_epochs(c, "orders", tp.producer_id).values()) == {epoch + 9}


def test_transaction_v2_own_abort_bumps_the_epoch_once() -> None:
    c = make(**TV2, transactional_producers=[
        {"transactional_id": "tx", "topics": ["single"], "timeout_ms": 120_000, "transaction_duration_s": 60}])
    run(c, 2)
    tp = c.txn_producers["tx"]
    assert tp.state == "Ongoing" and tp.epoch == 0
    c.crash_broker(2)
    run(c, 15)  # past broker.session.timeout.ms: the partition of `single` on broker 2 goes offline
    assert tp.state == "PrepareAbort" and tp.epoch == described_epoch(c) == 1
    c.restart_broker(2)
    run(c, 1)
    assert (tp.aborts, tp.own_aborts, tp.timeout_aborts, tp.commits) == (1, 1, 0, 0)
    assert tp.epoch == 1
    assert set(producer_epochs(c, "single", tp.producer_id).values()) == {1}


@pytest.mark.parametrize("transaction_version", [0, 2])
def test_coordinator_timeout_abort_bumps_the_epoch_exactly_once(transaction_version: int) -> None:
    c = make(mode="kraft", transaction_version=transaction_version)
    tp = c.txn_producers["tx"]
    run(c, 2)
    assert tp.state == "Ongoing" and tp.partitions  # it has written: an open transaction on `orders`
    epoch = tp.epoch
    c.crash_producer("tx")
    run(c, 25)  # past transaction.timeout.ms = 20 s
    assert tp.state == "CompleteAbort"
    assert (tp.aborts, tp.timeout_aborts, tp.own_aborts) == (1, 1, 0)
    assert tp.epoch == described_epoch(c) == epoch + 1
    assert set(producer_epochs(c, "orders", tp.producer_id).values()) == {epoch + 1}


def test_transaction_v2_restart_fences_with_one_bump() -> None:
    c = make(**TV2)
    tp = c.txn_producers["tx"]
    run(c, 1)
    assert tp.state == "Ongoing"
    epoch = tp.epoch
    c.restart_producer("tx")
    assert tp.state == "PrepareEpochFence" and tp.epoch == epoch + 1
    run(c, 0.5)
    assert tp.state == "CompleteAbort" and tp.epoch == epoch + 1
    assert (tp.aborts, tp.fenced_aborts, tp.own_aborts, tp.timeout_aborts) == (1, 1, 0, 0)


def test_transaction_v2_moves_to_a_new_producer_id_when_the_epoch_is_exhausted() -> None:
    c = make(**TV2)
    tp = c.txn_producers["tx"]
    old_pid = tp.producer_id
    tp.epoch = 32_765
    run(c, 4)  # the first commit (1 s steps: begin, 2 s open, prepare): 32766, the last epoch not exhausted
    assert tp.commits == 1 and tp.epoch == 32_766 and tp.producer_id == old_pid
    run(c, 4)  # the second: its markers at 32767, then a new producer id at epoch 0
    assert tp.commits == 2 and tp.producer_id != old_pid and tp.epoch == 0
    assert set(producer_epochs(c, "orders", old_pid).values()) == {32_767}
    run(c, 2)  # the next transaction writes under the new id
    assert set(producer_epochs(c, "orders", tp.producer_id).values()) == {0}


def test_transaction_version_above_zero_needs_kraft() -> None:
    with pytest.raises(ValidationError, match="transaction_version 2 needs mode kraft"):
        ClusterSpec.model_validate({"mode": "zookeeper", "transaction_version": 2})
    with pytest.raises(ValidationError, match="transaction_version"):
        ClusterSpec.model_validate({"mode": "kraft", "transaction_version": 3})
    assert ClusterSpec.model_validate(TV2).transaction_version == 2
    assert ClusterSpec().transaction_version == 0


@pytest.mark.parametrize("level", [2, 0])
def test_kafka_python_describe_features_reads_the_level_over_tcp(level: int) -> None:
    with running_sandbox(scenario(mode="kraft", transaction_version=level), zookeeper=False) as sb:
        admin = KafkaAdminClient(bootstrap_servers=sb.bootstrap_servers, request_timeout_ms=5000)
        try:
            features = admin.describe_features()
        finally:
            admin.close()
    tv = features["transaction.version"]
    assert tv["supported"] == (0, 2)
    if level:
        assert tv["finalized"] == (2, 2) and tv["finalized_epoch"] is not None
    else:
        assert "finalized" not in tv
        assert features["metadata.version"]["finalized"] == (21, 21)
