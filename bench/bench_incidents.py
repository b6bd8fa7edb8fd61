"""Correlation at scale: one broker down on a big cluster, from open alerts to incidents (CPU per poll).

The poller correlates after every poll, so its cost is paid every poll interval: this prints the CPU
seconds of `correlate` and of the incident tracker on a synthetic cluster (default 100,000 partitions of
RF 3 over 30 brokers, 10,000 groups) with one broker down, median of several runs, next to the number of
open alerts they fold and the incidents that come out.

    .venv/bin/python -m bench.bench_incidents [--partitions 100000] [--groups 10000] [--runs 5]
"""

from __future__ import annotations

import time

from bench.common import evaluate_rules, median_of, size_of, size_parser, thresholds
from bench.synthetic import observation
from collectors.alerting.correlation import correlate
from collectors.alerting.incidents import IncidentTracker
from collectors.alerting.lifecycle import AlertTracker
from collectors.model.observations import KafkaObservation
from collectors.model.snapshot import build_snapshot
from collectors.model.state import ClusterState

T0 = 1_800_000_000.0
DOWN = 3


def without_broker(obs: KafkaObservation, broker: int) -> KafkaObservation:
    """The same poll after `broker` died: unregistered, out of every ISR, its leaderships moved on."""
    obs.brokers = [b for b in obs.brokers if b[0] != broker]
    for p in obs.partitions:
        p.isr = [b for b in p.isr if b != broker]
        if p.leader == broker:
            p.leader = p.isr[0] if p.isr else -1
    return obs


def main() -> None:
    args = size_parser(__doc__ or "", partitions=100_000, groups=10_000).parse_args()
    size = size_of(args)
    th = thresholds()
    state, tracker = ClusterState(window_size=th.lag_window_points), AlertTracker()
    for k, down in ((0, False), (1, False), (2, True)):
        obs = observation(size.partitions, size.groups, size.per_group, now=T0 + 30 * k, step=k)
        if down:
            obs = without_broker(obs, DOWN)
        snap = build_snapshot("bench", obs, None, state, th, T0 + 30 * k)
        alerts, _, _ = tracker.update("bench", evaluate_rules(snap, state, th, T0 + 30 * k), T0 + 30 * k)
    cpu_correlate: list[float] = []
    cpu_tracker: list[float] = []
    incidents = []
    for run in range(args.runs):
        c0 = time.process_time()
        causes = correlate(snap, alerts)
        c1 = time.process_time()
        incidents, _ = IncidentTracker().update("bench", causes, T0 + 90 + run)
        c2 = time.process_time()
        cpu_correlate.append(c1 - c0)
        cpu_tracker.append(c2 - c1)
    broker = next(i for i in incidents if i.kind == "broker")
    print(f"{size.partitions:,} partitions, {size.groups:,} groups, broker {DOWN} down: {len(alerts):,} open alerts "
          f"-> {len(incidents)} incidents ({', '.join(sorted({i.kind for i in incidents}))})")
    print(f"broker incident: {broker.alerts:,} member alerts, {broker.partitions:,} partitions on "
          f"{broker.topics:,} topics, {broker.at_min_isr:,} at min ISR, {broker.under_min_isr:,} under min ISR, "
          f"{broker.offline:,} offline")
    print(f"correlate CPU median {median_of(cpu_correlate, 3)}")
    print(f"incident tracker CPU median {median_of(cpu_tracker, 3)}")


if __name__ == "__main__":
    main()
