"""Kafka's documented configuration defaults and the topic → broker synonym table.

DescribeConfigs answers with an effective value and the source it came from;
the collectors read `min.insync.replicas`, `retention.ms` and friends from
those answers, so the sandbox must resolve them the way a broker does: topic
override, else the broker's static setting, else Kafka's default.
"""

from __future__ import annotations

import functools

# ConfigSource enum values of DescribeConfigs v1+.
SOURCE_DYNAMIC_TOPIC = 1
SOURCE_DYNAMIC_BROKER = 2
SOURCE_DYNAMIC_DEFAULT_BROKER = 3
SOURCE_STATIC_BROKER = 4
SOURCE_DEFAULT = 5

# ConfigType enum of DescribeConfigs v3+.
TYPE_BOOLEAN, TYPE_STRING, TYPE_INT, TYPE_SHORT, TYPE_LONG, TYPE_DOUBLE, TYPE_LIST = 1, 2, 3, 4, 5, 6, 7

BROKER_DEFAULTS: dict[str, tuple[str, int]] = {
    "min.insync.replicas": ("1", TYPE_INT),
    "unclean.leader.election.enable": ("false", TYPE_BOOLEAN),
    "log.retention.ms": ("604800000", TYPE_LONG),
    "log.retention.bytes": ("-1", TYPE_LONG),
    "log.cleanup.policy": ("delete", TYPE_LIST),
    "log.segment.bytes": ("1073741824", TYPE_INT),
    "log.roll.ms": ("604800000", TYPE_LONG),
    "message.max.bytes": ("1048588", TYPE_INT),
    "default.replication.factor": ("1", TYPE_INT),
    "num.partitions": ("1", TYPE_INT),
    "replica.lag.time.max.ms": ("30000", TYPE_LONG),
    "transaction.max.timeout.ms": ("900000", TYPE_INT),
    "transactional.id.expiration.ms": ("604800000", TYPE_INT),
    "producer.id.expiration.ms": ("86400000", TYPE_INT),
    "offsets.topic.num.partitions": ("50", TYPE_INT),
    "offsets.topic.replication.factor": ("3", TYPE_SHORT),
    "offsets.retention.minutes": ("10080", TYPE_INT),
    "transaction.state.log.num.partitions": ("50", TYPE_INT),
    "transaction.state.log.replication.factor": ("3", TYPE_SHORT),
    "transaction.state.log.min.isr": ("2", TYPE_INT),
    "auto.leader.rebalance.enable": ("true", TYPE_BOOLEAN),
    "leader.imbalance.check.interval.seconds": ("300", TYPE_LONG),
    "zookeeper.session.timeout.ms": ("18000", TYPE_INT),
    "broker.session.timeout.ms": ("9000", TYPE_INT),
    "sasl.jaas.config": ("", TYPE_STRING),
}

# Topic config → (broker synonym, Kafka default when the broker sets nothing, type).
TOPIC_CONFIGS: dict[str, tuple[str, str, int]] = {
    "min.insync.replicas": ("min.insync.replicas", "1", TYPE_INT),
    "unclean.leader.election.enable": ("unclean.leader.election.enable", "false", TYPE_BOOLEAN),
    "retention.ms": ("log.retention.ms", "604800000", TYPE_LONG),
    "retention.bytes": ("log.retention.bytes", "-1", TYPE_LONG),
    "cleanup.policy": ("log.cleanup.policy", "delete", TYPE_LIST),
    "segment.bytes": ("log.segment.bytes", "1073741824", TYPE_INT),
    "segment.ms": ("log.roll.ms", "604800000", TYPE_LONG),
    "max.message.bytes": ("message.max.bytes", "1048588", TYPE_INT),
}

SENSITIVE_BROKER_CONFIGS = frozenset({"sasl.jaas.config"})


def java_string_hash(s: str) -> int:
    """Java's String.hashCode, which Kafka uses to place groups and transactional ids."""
    h = 0
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + int.from_bytes(data[i:i + 2], "big")) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


@functools.lru_cache(maxsize=1 << 16)
def coordinator_partition(key: str, num_partitions: int) -> int:
    """Kafka's Utils.abs(key.hashCode()) % partitions for __consumer_offsets / __transaction_state.

    Remembered: ListGroups asks it for every group on every broker, and the hash is a Python loop.
    """
    return (java_string_hash(key) & 0x7FFFFFFF) % num_partitions
