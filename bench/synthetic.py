"""Synthetic observations of a large cluster, for benchmarks (no sockets involved).

Shapes follow what big clusters look like: many topics of a few dozen
partitions, RF 3, a few percent of partitions in trouble, groups reading a
handful of partitions each, some open transactions.
"""

from __future__ import annotations

import random

from collectors.model.observations import KafkaObservation, PartitionMeta


def observation(partitions: int = 100_000, groups: int = 10_000, partitions_per_group: int = 10,
                brokers: int = 30, now: float = 1_800_000_000.0, seed: int = 7, step: int = 0,
                per_topic: int = 50) -> KafkaObservation:
    """One poll's worth of raw data; `step` advances offsets as if polls were 30 s apart."""
    rnd = random.Random(seed)
    obs = KafkaObservation(time=now, cluster_id="bench", controller_id=1)
    obs.brokers = [(i, f"broker-{i}.example", 9092, f"rack-{i % 3}") for i in range(1, brokers + 1)]
    n_topics = max(1, partitions // per_topic)
    keys = []
    for t in range(n_topics):
        name = f"topic-{t:05d}"
        tid = f"00000000-0000-4000-8000-{t:012d}"  # Metadata v10's topic id, one per topic
        obs.topic_configs[name] = {"min.insync.replicas": "2", "retention.ms": "604800000",
                                   "unclean.leader.election.enable": "false", "cleanup.policy": "delete"}
        for p in range(per_topic):
            replicas = [((t * per_topic + p + k) % brokers) + 1 for k in range(3)]
            isr = replicas if rnd.random() > 0.02 else replicas[:2]
            leader = replicas[0] if rnd.random() > 0.001 else -1
            obs.partitions.append(PartitionMeta(name, p, leader, 5, replicas, list(isr), [], tid))
            hw = 1_000_000 + step * 3000 + rnd.randrange(1000)
            obs.high_watermark[(name, p)] = hw
            obs.log_start[(name, p)] = hw - 900_000
            obs.last_stable[(name, p)] = hw if rnd.random() > 0.01 else hw - 50
            keys.append((name, p))
    obs.broker_configs = {"min.insync.replicas": "2"}
    for g in range(groups):
        gid = f"group-{g:05d}"
        obs.groups[gid] = {"state": "Stable", "members": 3, "coordinator": (g % brokers) + 1,
                           "protocol_type": "consumer"}
        start = rnd.randrange(len(keys))
        commits = {}
        for i in range(partitions_per_group):
            key = keys[(start + i) % len(keys)]
            commits[key] = obs.high_watermark[key] - rnd.randrange(5000)
        obs.commits[gid] = commits
    for i in range(200):
        obs.transactions.append({"transactional_id": f"txn-{i}", "coordinator": (i % brokers) + 1,
                                 "transaction_state": "Ongoing" if i % 4 == 0 else "CompleteCommit",
                                 "producer_id": 5000 + i, "producer_epoch": 3, "transaction_timeout_ms": 60_000,
                                 "transaction_start_time_ms": int((now - 5) * 1000),
                                 "partitions": [keys[i]]})
        obs.listed_transactions[f"txn-{i}"] = 5000 + i
    return obs
