"""What every benchmark sets up the same way: sizes, thresholds, a warmed poller memory, timing, memory.

Benchmarks measure one step of the poller (building a snapshot, judging it, rendering /metrics, writing
history, restarting) on a state that looks like steady state, i.e. after a few polls. Building that state
the way `collectors.runtime.poller.ClusterPoller` does (snapshot, then rules, then the alert lifecycle) is
done here once, so a change to that pipeline is made in one place and the benchmarks stay comparable:
in particular every benchmark judges a snapshot through `evaluate_rules`, the only call of the rules.
"""

from __future__ import annotations

import argparse
import contextlib
import resource
import statistics
import time
from collections.abc import Iterator
from dataclasses import dataclass

from bench.synthetic import observation
from collectors.alerting.evaluation import judge
from collectors.alerting.lifecycle import AlertTracker
from collectors.alerting.rules import Candidate
from collectors.config import Thresholds
from collectors.model.observations import KafkaObservation
from collectors.model.records import AlertRecord, ClusterSnapshot
from collectors.model.snapshot import build_snapshot
from collectors.model.state import ClusterState

CLUSTER = "bench"
POLL_S = 30.0  # synthetic polls are this far apart (`step` in bench.synthetic.observation assumes it)


# ----------------------------------------------------------------------------- sizes
@dataclass(frozen=True)
class Size:
    """How big the synthetic cluster is: partitions, consumer groups, and partitions each group reads."""

    partitions: int
    groups: int
    per_group: int = 10
    per_topic: int = 50


def size_parser(doc: str, *, partitions: int, groups: int, per_group: int | None = 10,
                runs: int = 5) -> argparse.ArgumentParser:
    """--partitions, --groups, [--per-group] and --runs with the benchmark's defaults; add its own options."""
    ap = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    ap.add_argument("--partitions", type=int, default=partitions)
    ap.add_argument("--groups", type=int, default=groups)
    if per_group is not None:
        ap.add_argument("--per-group", type=int, default=per_group)
    ap.add_argument("--runs", type=int, default=runs)
    return ap


def size_of(args: argparse.Namespace) -> Size:
    return Size(args.partitions, args.groups, getattr(args, "per_group", Size.per_group),
                getattr(args, "per_topic", Size.per_topic))


# ----------------------------------------------------------------------------- the poller's pipeline
def thresholds() -> Thresholds:
    """The collector's default thresholds, as a monitor without a `thresholds:` block runs with."""
    return Thresholds()


def evaluate_rules(snap: ClusterSnapshot, state: ClusterState, th: Thresholds, now: float) -> list[Candidate]:
    """The alerts one poll's snapshot raises, judged as the poller judges them (timers in `state` advance).

    Every benchmark reaches the rules through here and nowhere else: a change to how rules are evaluated is
    one edit for all of them.
    """
    return judge(snap, state, th, now)


def synthetic_polls(size: Size, start: float, count: int, flap_isr: bool = False
                    ) -> list[tuple[float, KafkaObservation]]:
    """`count` consecutive polls of the synthetic cluster, `POLL_S` apart from `start`, with their times.

    With `flap_isr` the random seed alternates between polls, so ISRs (and which partitions are in trouble)
    change from one poll to the next, as on a cluster with some churn.
    """
    out = []
    for k in range(count):
        now = start + POLL_S * k
        seed = 7 + k % 2 if flap_isr else 7
        out.append((now, observation(size.partitions, size.groups, size.per_group, now=now, step=k, seed=seed,
                                     per_topic=size.per_topic)))
    return out


class SyntheticPoller:
    """A poller's memory fed observations without sockets, in the poller's order: snapshot, rules, alerts."""

    def __init__(self, th: Thresholds | None = None) -> None:
        self.th = th if th is not None else thresholds()
        self.state = ClusterState(window_size=self.th.lag_window_points)
        self.tracker = AlertTracker()

    def snapshot(self, obs: KafkaObservation, now: float) -> ClusterSnapshot:
        return build_snapshot(CLUSTER, obs, None, self.state, self.th, now)

    def judge(self, snap: ClusterSnapshot, now: float) -> list[Candidate]:
        return evaluate_rules(snap, self.state, self.th, now)

    def track(self, snap: ClusterSnapshot, now: float
              ) -> tuple[list[AlertRecord], list[AlertRecord], list[AlertRecord]]:
        """Judge the snapshot and update the open alerts: (open, newly opened, newly resolved)."""
        return self.tracker.update(CLUSTER, self.judge(snap, now), now)


def warmed(size: Size, start: float, polls: int = 2, th: Thresholds | None = None, track: bool = False,
           flap_isr: bool = False) -> tuple[SyntheticPoller, ClusterSnapshot, list[AlertRecord]]:
    """A poller after `polls` synthetic polls, the last snapshot, and (with `track`) the alerts then open.

    Two polls are the least that looks like steady state: lag in seconds needs a log-end history and lag
    status a window of commits, both of which a first poll only starts.
    """
    poller = SyntheticPoller(th)
    snap: ClusterSnapshot | None = None
    current: list[AlertRecord] = []
    for now, obs in synthetic_polls(size, start, polls, flap_isr):
        snap = poller.snapshot(obs, now)
        if track:
            current = poller.track(snap, now)[0]
    if snap is None:
        raise ValueError("warmed() needs at least one poll")
    return poller, snap, current


# ----------------------------------------------------------------------------- measuring
@contextlib.contextmanager
def timed(into: list[float]) -> Iterator[None]:
    """Append the wall seconds the block took to `into` (one entry per run)."""
    start = time.perf_counter()
    try:
        yield
    finally:
        into.append(time.perf_counter() - start)


def median_of(runs: list[float], digits: int = 2) -> str:
    """`0.12s (runs 0.11, 0.12, 0.19)`: the median to compare benchmarks by, the runs to see the spread."""
    return f"{statistics.median(runs):.{digits}f}s (runs {', '.join(f'{x:.{digits}f}' for x in runs)})"


def rss_mb() -> float:
    """Peak resident memory of this process so far, in MB (Linux reports ru_maxrss in KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
