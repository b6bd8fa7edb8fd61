"""What judging brokers' metadata lag costs a poll outside KRaft (`collectors.model.metadata_lag`). Median of runs.

    .venv/bin/python -m bench.bench_metadata_lag [--partitions 100000] [--brokers 100] [--runs 7]

Steady state: topics of 10 partitions, every broker asked about the topics `probe_topics` picks (8 topics, 500
partitions at most), one broker behind on one partition. Measured: the memory's whole work of one poll (witness
the believed answer and the brokers' answers, prune, judge each broker, pick the next poll's topics), and how many
partitions the brokers' answers carry in all (what the adapter decodes; the requests are B a poll).
"""

from __future__ import annotations

import time

from bench.common import median_of, size_parser
from collectors.model.metadata_lag import EpochMemory
from collectors.model.observations import PartitionMeta

TID = "6a1f0c4e-0000-4000-8000-000000000001"
PER_TOPIC = 10


def main() -> None:
    ap = size_parser(__doc__, partitions=100_000, groups=0, per_group=None, runs=7)
    ap.add_argument("--brokers", type=int, default=100)
    a = ap.parse_args()
    topics = [f"topic-{t:05d}" for t in range(max(1, a.partitions // PER_TOPIC))]
    believed = [PartitionMeta(t, p, 1, 5, [1, 2, 3], [1, 2, 3], [], TID) for t in topics for p in range(PER_TOPIC)]
    memory = EpochMemory()
    memory.witness(believed, {}, 0.0)
    memory.sizes = dict.fromkeys(topics, PER_TOPIC)
    brokers = set(range(a.brokers))
    runs, answered = [], 0
    for i in range(1, a.runs + 1):
        asked = memory.probe_topics()
        probes = {b: {(t, p): (5, TID) for t in asked for p in range(PER_TOPIC)} for b in brokers}
        probes[0][(asked[0], 0)] = (4, TID)  # broker 0 behind on one partition
        answered = sum(len(v) for v in probes.values())
        t0 = time.perf_counter()
        n = memory.witness(believed, probes, float(i))
        memory.prune(n, lambda: {(p.topic, p.partition) for p in believed}, brokers)
        memory.lagging(probes, float(i))
        memory.probe_topics()
        runs.append(time.perf_counter() - t0)
    print(f"{len(believed):,} partitions, {a.brokers} brokers asked, {answered:,} partitions in their answers a poll: "
          f"{median_of(runs, 3)} a poll")


if __name__ == "__main__":
    main()
