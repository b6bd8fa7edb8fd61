"""A full poll against the sandbox at scale: wall time and request count, median of 5.

    .venv/bin/python -m bench.bench_poll [--partitions 5000] [--groups 500] [--runs 5]

The sandbox runs in-process on its own thread (it shares the 2 cores with the
poller, so figures are pessimistic). Requests are counted on the server side,
per API, so the count is what the cluster would see.
"""

from __future__ import annotations

import logging
import statistics

from bench.common import median_of, size_parser, timed
from sandbox.runner import Sandbox
from sandbox.spec import Scenario
from tests.support.monitor import make_poller


def scenario(partitions: int, groups: int, brokers: int) -> Scenario:
    per_topic = 50
    topics = [{"name": f"topic-{t:04d}", "partitions": per_topic, "replication_factor": 3, "produce_rate": 20}
              for t in range(max(1, partitions // per_topic))]
    grp = [{"group_id": f"group-{g:04d}", "topics": [topics[g % len(topics)]["name"]], "members": 2,
            "commit_interval_s": 5} for g in range(groups)]
    txn = [{"transactional_id": f"txn-{i}", "topics": [topics[i]["name"]], "rate": 5} for i in range(5)]
    return Scenario.model_validate({"cluster": {"brokers": brokers, "broker_config": {"min.insync.replicas": "2"},
                                                "topics": topics, "groups": grp, "transactional_producers": txn}})


def main() -> None:
    ap = size_parser(__doc__, partitions=5000, groups=500, per_group=None)
    ap.add_argument("--brokers", type=int, default=3)
    a = ap.parse_args()
    logging.basicConfig(level=logging.ERROR)
    sb = Sandbox(scenario(a.partitions, a.groups, a.brokers), speed=1.0, zookeeper=False, tick_s=0.5)
    sb.start()
    try:
        poller = make_poller(sb)
        first = poller.poll(sb.clock.now())  # connections, ApiVersions
        walls: list[float] = []
        counts: list[int] = []
        for _ in range(a.runs):
            sb.reset_request_counts()
            with timed(walls):
                r = poller.poll(sb.clock.now())
            per_api: dict[str, int] = {}
            for c in sb.request_counts().values():
                for k, v in c.items():
                    per_api[k] = per_api.get(k, 0) + v
            counts.append(sum(per_api.values()))
        s = r.snapshot
        print(f"cluster: {len(s.partitions)} partitions, {len(s.groups)} groups, "
              f"{len(s.group_partitions)} group-partitions, {a.brokers} brokers (first poll "
              f"{first.snapshot.poll_duration_s:.2f}s)")
        print(f"poll wall median {median_of(walls)}")
        print(f"requests per poll median {statistics.median(counts):.0f}: {dict(sorted(per_api.items()))}")
        print(f"errors: {s.errors[:3]}")
        poller.close()
    finally:
        sb.stop()


if __name__ == "__main__":
    main()
