"""The sandbox at storm size: start, tick, and one full collector poll with a broker down.

Incident correlation is tested on one broker of six dying under 20,000 partitions; this prints what that
costs on this machine, for 20,000 and 100,000 partitions by default (RF 3, min ISR 2, idle topics placed as
Kafka places them, one busy topic, a few groups): the sandbox's start time, its tick time while the cluster
is healthy and while the broker is down, and one full poll's wall time, CPU time and request count during
the outage, median of `--runs` polls after a first one that opens the connections.

The sandbox runs in-process on its own thread and shares the two cores (and the GIL) with the poller, as in
the tests, so CPU is shown split between the sandbox's thread and the rest (the collector). Its six brokers
answer on that one thread, one request at a time, so the poller gets a request timeout long enough for a
big cluster's answers to wait their turn (`--request-timeout`).

    .venv/bin/python -m bench.bench_sandbox_big [--sizes 20000,100000] [--runs 3] [--brokers 6] [--groups 20]
"""

from __future__ import annotations

import argparse
import logging
import statistics
import threading
import time
from collections import Counter

import psutil

from bench.common import median_of, rss_mb
from collectors.runtime.poller import ClusterPoller
from sandbox.runner import Sandbox
from sandbox.spec import Scenario
from tests.support.monitor import monitor_config

PER_TOPIC = 10
BUSY = {"name": "orders", "partitions": PER_TOPIC, "replication_factor": 3, "produce_rate": 50}
SPEED, TICK_S = 10.0, 0.1  # as the tests run the sandbox: one simulated second per tick


def big_scenario(partitions: int, brokers: int, groups: int) -> Scenario:
    """`partitions` user partitions in topics of ten: one busy topic two groups read, the rest idle."""
    return Scenario.model_validate({"cluster": {
        "brokers": brokers, "broker_config": {"min.insync.replicas": "2"},
        "topics": [BUSY],
        "generated_topics": {"count": partitions // PER_TOPIC - 1, "partitions": PER_TOPIC,
                             "replication_factor": 3, "min_insync_replicas": 2},
        "groups": [{"group_id": "billing", "topics": ["orders"]}, {"group_id": "audit", "topics": ["orders"]}],
        "generated_groups": {"count": groups, "topics_per_group": 5},
    }})


class TickClock:
    """Wall time of each sandbox tick (model step, incidents, listener state), recorded on the sandbox loop with
    whether the broker that is made to die was still registered after it (the tick that fences it is the one
    where that flips)."""

    def __init__(self, sb: Sandbox, watched: int) -> None:
        self.ticks: list[tuple[float, bool]] = []
        tick = sb._tick

        async def timed() -> None:
            started = time.perf_counter()
            await tick()
            self.ticks.append((time.perf_counter() - started, sb.cluster.brokers[watched].registered))

        sb._tick = timed  # type: ignore[method-assign]

    def wait(self, n: int) -> None:
        target = len(self.ticks) + n
        while len(self.ticks) < target:
            time.sleep(0.02)


def sandbox_cpu(proc: psutil.Process) -> float:
    """CPU seconds of the sandbox's event-loop thread so far."""
    loop = next(t.native_id for t in threading.enumerate() if t.name == "sandbox-loop")
    return next((t.user_time + t.system_time for t in proc.threads() if t.id == loop), 0.0)


def ms(values: list[float]) -> str:
    return (f"{statistics.median(values) * 1000:.1f} ms (max {max(values) * 1000:.1f}, {len(values)} ticks)"
            if values else "-")


def run_size(partitions: int, args: argparse.Namespace) -> None:
    dead = args.brokers  # the last broker dies
    sc = big_scenario(partitions, args.brokers, args.groups)
    started = time.perf_counter()
    sb = Sandbox(sc, speed=SPEED, zookeeper=False, tick_s=TICK_S)
    clock = TickClock(sb, dead)
    sb.start()
    start_s = time.perf_counter() - started
    proc = psutil.Process()
    try:
        clock.wait(12)
        first_tick, healthy = clock.ticks[0][0], [t for t, _ in clock.ticks[2:]]
        mark = len(clock.ticks)
        sb.call(lambda c: c.crash_broker(dead))
        if not sb.wait_for(lambda c: not c.brokers[dead].registered, timeout=120):
            raise SystemExit(f"broker {dead} was never fenced")
        clock.wait(11)
        after = clock.ticks[mark:]
        fencing = next(i for i, (_, registered) in enumerate(after) if not registered)
        crash_window = [t for t, _ in after[:fencing + 1]]  # the crash's first tick to the fencing one
        outage = [t for t, _ in after[fencing + 1:]]
        truth = sb.call(lambda c: c.ground_truth_broker_outage(dead))

        cfg = monitor_config(sb).model_copy(update={"request_timeout_s": args.request_timeout})
        poller = ClusterPoller(cfg.clusters[0], cfg)
        try:
            warm = time.perf_counter()
            poller.poll(sb.clock.now())  # connections, ApiVersions, the clients' own metadata
            warm_s = time.perf_counter() - warm
            walls: list[float] = []
            cpus: list[float] = []
            sandbox_cpus: list[float] = []
            counts: list[int] = []
            per_api: Counter[str] = Counter()
            for _ in range(args.runs):
                sb.reset_request_counts()
                c0, s0, w0 = time.process_time(), sandbox_cpu(proc), time.perf_counter()
                r = poller.poll(sb.clock.now())
                walls.append(time.perf_counter() - w0)
                sandbox_cpus.append(sandbox_cpu(proc) - s0)
                cpus.append(time.process_time() - c0 - sandbox_cpus[-1])
                per_api = Counter()
                for by_api in sb.request_counts().values():
                    per_api.update(by_api)
                counts.append(sum(per_api.values()))
        finally:
            poller.close()
        snap = r.snapshot
        print(f"\n== {partitions:,} partitions ({len(sc.cluster.topic_names()):,} topics, RF 3, min ISR 2), "
              f"{args.brokers} brokers, {len(sc.cluster.all_groups())} groups; speed x{SPEED:g}, tick {TICK_S}s")
        print(f"sandbox start          {start_s:.2f}s   (first tick, which settles every idle partition: "
              f"{first_tick:.2f}s)")
        print(f"tick, healthy          {ms(healthy)}")
        print(f"tick, broker {dead} crashed {ms(crash_window)} until fenced (the first tick after the crash and "
              f"the fencing one wake its partitions)")
        print(f"tick, broker {dead} down    {ms(outage)}")
        print(f"outage                 {len(truth.partitions):,} partitions had a replica on broker {dead}: "
              f"{len(truth.under_replicated):,} under-replicated, {len(truth.at_min_isr):,} at min ISR")
        print(f"first poll             {warm_s:.2f}s (opens connections)")
        print(f"poll wall              median {median_of(walls)}")
        print(f"poll CPU, collector    median {median_of(cpus)}")
        print(f"poll CPU, sandbox      median {median_of(sandbox_cpus)}")
        print(f"requests per poll      median {statistics.median(counts):.0f}: {dict(sorted(per_api.items()))}")
        urp = sum(p.under_replicated for p in snap.partitions)
        print(f"snapshot               {len(snap.partitions):,} partitions, {urp:,} under-replicated, "
              f"stale {snap.stale_sections or '-'}, errors {snap.errors[:2] or '-'}")
    finally:
        sb.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--sizes", default="20000,100000", help="partition counts, comma-separated (multiples of 10)")
    ap.add_argument("--runs", type=int, default=3, help="polls measured per size (after one warm-up poll)")
    ap.add_argument("--brokers", type=int, default=6)
    ap.add_argument("--groups", type=int, default=20, help="generated groups, each reading five idle topics")
    ap.add_argument("--request-timeout", type=float, default=60.0, help="the poller's request_timeout_s")
    args = ap.parse_args()
    logging.basicConfig(level=logging.CRITICAL)
    for size in (int(x) for x in args.sizes.split(",") if x.strip()):
        run_size(size, args)
    print(f"\npeak RSS {rss_mb():.0f} MB")


if __name__ == "__main__":
    main()
