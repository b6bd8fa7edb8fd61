"""Reading what Kafka answers: error names as its tools print them, and the answers about the whole cluster.

The cluster-wide answers of a poll are the KRaft quorum (DescribeQuorum) and the finalized features (ApiVersions
v3+, KIP-584); each is one request to a broker that answered the poll (`KafkaAdapter`), read here into the
poll's `KafkaObservation`. Apart from the adapter so the reading, which decides what an error means, can be read
(and tested) on its own.
"""

from __future__ import annotations

from typing import Any

import kafka.errors as kafka_errors

from collectors.model.observations import KafkaObservation, QuorumReplica

ERROR_NAMES = {
    3: "UNKNOWN_TOPIC_OR_PARTITION", 5: "LEADER_NOT_AVAILABLE", 6: "NOT_LEADER_OR_FOLLOWER",
    7: "REQUEST_TIMED_OUT", 14: "COORDINATOR_LOAD_IN_PROGRESS", 15: "COORDINATOR_NOT_AVAILABLE",
    16: "NOT_COORDINATOR", 35: "UNSUPPORTED_VERSION", 69: "GROUP_ID_NOT_FOUND",
}


def error_name(code: int) -> str:
    """Kafka's name for an error code (``GROUP_AUTHORIZATION_FAILED``), as its tools print it; ``error N`` for a
    code the client library does not know either."""
    if code in ERROR_NAMES:
        return ERROR_NAMES[code]
    name = getattr(kafka_errors.for_code(code), "message", None)
    return name if isinstance(name, str) and name != "UNKNOWN" else f"error {code}"


QUORUM_NO_LEADER_ERRORS = frozenset({6, 7})  # NOT_LEADER_OR_FOLLOWER, REQUEST_TIMED_OUT (the broker's forwarding)
QUORUM_TIMEOUTS = (kafka_errors.KafkaTimeoutError, kafka_errors.RequestTimedOutError)
"""How a request left unanswered fails in kafka-python: the connection's request timeout, or our wait's."""


def parse_quorum(out: Any, obs: KafkaObservation) -> None:
    """DescribeQuorum's answer. Only the Raft leader answers it (brokers forward it to the controller): a
    NOT_LEADER_OR_FOLLOWER, or no answer in time from a broker that answered the rest of the poll
    (`KafkaAdapter._healthy_broker`), is evidence that the quorum has no leader
    (`KafkaObservation.quorum_no_leader`)."""
    if not out.ok:
        # UnsupportedVersion from a ZooKeeper-mode cluster means "no KRaft quorum to watch".
        name = type(out.error).__name__
        if "Unsupported" in name or "IncompatibleBroker" in name:
            obs.kraft = False
        else:
            obs.fail("quorum", f"DescribeQuorum failed: {name}")
            if isinstance(out.error, QUORUM_TIMEOUTS) and out.node_id is not None:
                obs.quorum_no_leader = f"DescribeQuorum to broker {out.node_id} got no answer in time ({name})"
        return
    r = out.response
    if r.error_code:
        # REQUEST_TIMED_OUT: the broker's own forwarding to the controller timed out
        obs.kraft = True if r.error_code in QUORUM_NO_LEADER_ERRORS else r.error_code != 35 and None
        if r.error_code != 35:
            obs.fail("quorum", f"DescribeQuorum: {error_name(r.error_code)}")
        if r.error_code in QUORUM_NO_LEADER_ERRORS:
            obs.quorum_no_leader = f"DescribeQuorum: {error_name(r.error_code)}"
        return
    part = r.topics[0].partitions[0]
    if part.error_code:  # a controller no longer the Raft leader: NOT_LEADER_OR_FOLLOWER, with zeroed fields
        obs.kraft = True
        obs.fail("quorum", f"DescribeQuorum: {error_name(part.error_code)}")
        if part.error_code in QUORUM_NO_LEADER_ERRORS:
            obs.quorum_no_leader = f"DescribeQuorum: {error_name(part.error_code)}"
        return

    def replicas(items: Any) -> list[QuorumReplica]:
        return [{"replica_id": v.replica_id, "log_end_offset": v.log_end_offset,
                 "last_fetch_timestamp": getattr(v, "last_fetch_timestamp", -1),
                 "last_caught_up_timestamp": getattr(v, "last_caught_up_timestamp", -1)} for v in items]

    obs.kraft = True
    obs.quorum = {"leader_id": part.leader_id, "leader_epoch": part.leader_epoch,
                  "high_watermark": part.high_watermark, "voters": replicas(part.current_voters),
                  "observers": replicas(part.observers)}


TRANSACTION_VERSION_FEATURE = "transaction.version"


def parse_features(out: Any, obs: KafkaObservation) -> None:
    """The finalized ``transaction.version`` from an ApiVersions v3+ answer (KIP-584: features ride on it).

    A broker that speaks no ApiVersions v3 (before Kafka 2.4) has no features: level 0. An answer whose finalized
    features epoch is -1 (a broker that has not read them: ZooKeeper mode without a feature znode, a KRaft broker
    still catching up) or any failure leaves it unknown for the poll (the last read stands); it is no section of
    its own, so nothing goes stale."""
    if not out.ok:
        if isinstance(out.error, kafka_errors.IncompatibleBrokerVersion):
            obs.transaction_version = 0
        else:
            obs.errors.append(f"ApiVersions (features) to broker {out.node_id} failed: {type(out.error).__name__}")
        return
    if out.response.error_code:
        obs.errors.append(f"ApiVersions (features): {error_name(out.response.error_code)}")
        return
    epoch = getattr(out.response, "finalized_features_epoch", None)
    if epoch is None or epoch < 0:
        return  # "valid only if FinalizedFeaturesEpoch >= 0" (the schema): a broker that has not read them yet
    levels = {f.name: f.max_version_level for f in (getattr(out.response, "finalized_features", None) or [])}
    obs.transaction_version = int(levels.get(TRANSACTION_VERSION_FEATURE, 0))
