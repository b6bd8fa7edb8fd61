"""Dashboard page run times in AppTest on a large cluster with a day of history: cold run and median of 5.

    .venv/bin/python -m bench.bench_dashboard [--partitions 20000] [--groups 2000] [--hours 24] [--interval 300]
                                              [--runs 5] [--dir DIR] [--keep]

Data: a day of polls at a 5-minute interval (288) written with the real `HistoryWriter` (topic_health,
group_lag, transactions, lso_gap, brokers, cluster, alert_events; partition detail off, as by default) and
the latest snapshot written with `write_latest`. Every hour the snapshot goes through the real pipeline
(`bench.synthetic.observation` with a new seed, so different partitions are in trouble, `build_snapshot`,
the rules and the alert tracker, which yields real open/resolve events); the polls in between reuse it with
moved times and scaled lag, which keeps generation around a minute. A synthetic 3-node ZooKeeper ensemble
with three elections over the day feeds the Consensus page.

Each page is run by `streamlit.testing.v1.AppTest` through the app's navigation: one cold run (first read of
the history and the latest state, as after a restart), then `--runs` warm runs (what a viewer's rerun costs;
reads served from the cache unless files changed).
"""

from __future__ import annotations

import dataclasses
import math
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import TypeVar

from bench.common import CLUSTER, SyntheticPoller, size_parser
from bench.synthetic import observation
from collectors.model.records import ClusterSnapshot, ZkServerRecord, snapshot_to_dict
from collectors.outputs.history import HistoryWriter
from collectors.outputs.latest_state import write_latest

N = TypeVar("N", int, float)  # a lag figure keeps its type when scaled
ROOT = Path(__file__).resolve().parents[1]
PAGES = ["overview", "replication", "consumers", "transactions", "consensus", "history"]


def generate(root: Path, partitions: int, groups: int, hours: float, interval: float) -> dict[str, float]:
    poller = SyntheticPoller()
    writer = HistoryWriter(root / "history", flush_interval_s=0, retention_days=None)
    polls = int(hours * 3600 / interval)
    end = time.time()
    start = end - polls * interval
    real_every = max(1, int(3600 / interval))
    snap = None
    t0 = time.perf_counter()
    real = 0
    for i in range(polls):
        now = start + (i + 1) * interval
        if snap is None or i % real_every == 0:
            obs = observation(partitions, groups, 10, now=now, seed=7 + i // real_every, step=i)
            snap = poller.snapshot(obs, now)
            current, opened, resolved = poller.track(snap, now)
            snap.alerts = current
            real += 1
            base = snap
        else:
            opened, resolved = [], []
            snap = _vary(base, now, 1.0 + 0.5 * math.sin(i / 12.0))
        snap.zookeeper = _zookeeper(i, polls)
        writer.add_snapshot(snap, opened, resolved)
        if (i + 1) % 24 == 0:
            writer.flush()
    writer.close()
    write_latest(root / "state", snapshot_to_dict(snap))
    gen_s = time.perf_counter() - t0
    size = sum(f.stat().st_size for f in (root / "history").rglob("*.parquet"))
    return {"polls": polls, "real_polls": real, "seconds": gen_s, "history_mb": size / 1e6,
            "state_mb": sum(f.stat().st_size for f in (root / "state").glob("*.json")) / 1e6,
            "rows": writer.rows_written, "alerts": len(snap.alerts)}


def _zookeeper(i: int, polls: int) -> list[ZkServerRecord]:
    """A 3-node ensemble whose leader is re-elected three times over the run (zxid epoch 1 -> 4)."""
    epoch = 1 + (4 * i) // max(1, polls + 1)
    leader = epoch % 3
    counter = 1000 + i * 40
    return [ZkServerRecord(CLUSTER, f"zk-{n}.example:2181", True, "leader" if n == leader else "follower",
                           (epoch << 32) | counter, epoch, counter, None if n == leader else n, 0.4, 12.0, 0, 40,
                           180_000, 2 if n == leader else None, 2 if n == leader else None) for n in range(3)]


def _vary(snap: ClusterSnapshot, now: float, factor: float) -> ClusterSnapshot:
    """The same cluster a few minutes later: new time, lag scaled by `factor` (cheap stand-in for a poll)."""
    def scale(v: N | None) -> N | None:
        return None if v is None else type(v)(v * factor)

    gps = [dataclasses.replace(gp, lag=scale(gp.lag), lag_seconds=scale(gp.lag_seconds))
           for gp in snap.group_partitions]
    groups = [dataclasses.replace(g, lag_sum=scale(g.lag_sum), lag_max=scale(g.lag_max),
                                  lag_seconds_max=scale(g.lag_seconds_max)) for g in snap.groups]
    return dataclasses.replace(snap, time=now, groups=groups, group_partitions=gps, partition_changes=[])


def time_pages(root: Path, runs: int) -> list[tuple[str, float, list[float]]]:
    from streamlit.testing.v1 import AppTest

    os.environ.update(KMON_STATE_DIR=str(root / "state"), KMON_HISTORY=str(root / "history"),
                      KMON_REPORTS=str(root / "reports"), KMON_REFRESH="0", KMON_POLL_INTERVAL="300")
    app = str(ROOT / "dashboard" / "app.py")
    out = []
    for page in PAGES:
        at = AppTest.from_file(app, default_timeout=600)
        times = []
        for i in range(runs + 1):
            if i == 0 and page != "overview":
                at.run()  # navigation only; the page itself is timed below
                at.switch_page(f"app_pages/{page}.py")
            t0 = time.perf_counter()
            at.run()
            times.append(time.perf_counter() - t0)
            if at.exception:
                raise RuntimeError(f"{page}: {[e.value for e in at.exception]}")
        out.append((page, times[0], times[1:]))
    return out


def main() -> None:
    ap = size_parser(__doc__, partitions=20_000, groups=2_000, per_group=None)
    ap.add_argument("--hours", type=float, default=24.0)
    ap.add_argument("--interval", type=float, default=300.0)
    ap.add_argument("--dir", help="data dir (default: a temp dir); reused when it already holds data")
    ap.add_argument("--keep", action="store_true", help="keep the generated temp dir")
    a = ap.parse_args()
    root = Path(a.dir) if a.dir else Path(tempfile.mkdtemp(prefix="kmon-bench-dashboard-"))
    try:
        if not (root / "state").exists():
            g = generate(root, a.partitions, a.groups, a.hours, a.interval)
            print(f"generated {g['polls']} polls ({g['real_polls']} through the full pipeline) of {a.partitions:,} "
                  f"partitions / {a.groups:,} groups in {g['seconds']:.1f}s: {g['rows']:,} history rows, "
                  f"{g['history_mb']:.1f} MB Parquet, latest state {g['state_mb']:.1f} MB, {g['alerts']} open alerts")
        print(f"\n{'page':<14}{'cold run (s)':>14}{'median of ' + str(a.runs) + ' (s)':>18}{'max (s)':>10}")
        print("-" * 56)
        for page, cold, warm in time_pages(root, a.runs):
            print(f"{page:<14}{cold:>14.2f}{statistics.median(warm):>18.2f}{max(warm):>10.2f}")
        print("\ncold = first run in a fresh process (reads Parquet + state JSON); warm = reruns (cached reads).")
    finally:
        if not a.dir and not a.keep:
            shutil.rmtree(root, ignore_errors=True)
        elif a.keep:
            print(f"data kept in {root}")


if __name__ == "__main__":
    main()
