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

Then the incident case (skip it with ``--incident-partitions 0``, run only it with ``--only-incident``): one
broker of 3 down on a cluster of `--incident-partitions` partitions (default 100,000, RF 3, so every partition
lost a replica: ~100,000 open partition alerts, one per partition, its worst state), through the real
pipeline (`build_snapshot`, the rules, the alert tracker, `correlate` and the incident tracker, as
`bench.bench_incidents` does) and `write_latest`; the Overview is timed cold and warm (median of `--runs`), the
target being 2 s: it must show the incident, not render 100,000 rows. The per-alert list one click down (the
toggle) is timed too, for information.
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
from collectors.outputs.latest_state import read_latest, write_latest

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


def incident_state(root: Path, partitions: int, groups: int = 1000) -> dict[str, int]:
    """Latest state of a 3-broker cluster with broker 3 down (see the module docstring); returns the counts."""
    from bench.bench_incidents import without_broker
    from collectors.alerting.correlation import correlate
    from collectors.alerting.incidents import IncidentTracker

    poller = SyntheticPoller()
    now = time.time() - 90
    snap, alerts = None, []
    for k, down in ((0, False), (1, False), (2, True)):
        t = now + 30 * k
        obs = observation(partitions, groups, 10, brokers=3, now=t, step=k)
        if down:
            obs = without_broker(obs, 3)
        snap = poller.snapshot(obs, t)
        alerts = poller.track(snap, t)[0]
    assert snap is not None
    snap.alerts = alerts
    snap.incidents, _ = IncidentTracker().update(CLUSTER, correlate(snap, alerts), snap.time)
    write_latest(root / "state", snapshot_to_dict(snap))
    part_rules = {"offline_partition", "under_min_isr", "at_min_isr", "under_replicated", "isr_flapping"}
    return {"alerts": len(alerts), "partition_alerts": sum(a.rule in part_rules for a in alerts),
            "incidents": len(snap.incidents), "broker_members": next(
                (i.alerts for i in snap.incidents if i.kind == "broker"), 0),
            "state_mb": int(sum(f.stat().st_size for f in (root / "state").glob("*.json")) / 1e6)}


def time_incident_overview(root: Path, runs: int) -> dict[str, object]:
    """Cold and warm runs of the Overview on the incident state, then the per-alert list switched on."""
    from streamlit.testing.v1 import AppTest

    os.environ.update(KMON_STATE_DIR=str(root / "state"), KMON_HISTORY=str(root / "history"),
                      KMON_REPORTS=str(root / "reports"), KMON_REFRESH="0", KMON_POLL_INTERVAL="30")
    at = AppTest.from_file(str(ROOT / "dashboard" / "app.py"), default_timeout=600)
    times = []
    for _ in range(runs + 1):
        t0 = time.perf_counter()
        at.run()
        times.append(time.perf_counter() - t0)
        if at.exception:
            raise RuntimeError(f"overview: {[e.value for e in at.exception]}")
    rows = max((len(df.value) for df in at.dataframe), default=0)
    state = root / "state"
    from dashboard.data import without_cyclic_gc

    t0 = time.perf_counter()
    with without_cyclic_gc():  # as the dashboard reads it
        docs = read_latest(state)
    parse = time.perf_counter() - t0
    fresh = []
    for _ in range(runs):  # what each poll costs a viewer: a new file (new written_at), read and correlated again
        for doc in docs.values():
            write_latest(state, doc)
        t0 = time.perf_counter()
        at.run()
        fresh.append(time.perf_counter() - t0)
    incidents = next((df.value for df in at.dataframe if "blast radius" in df.value.columns), None)
    t0 = time.perf_counter()
    at.toggle(key="ov_all_alerts").set_value(True).run()
    all_alerts = time.perf_counter() - t0
    return {"cold": times[0], "warm": times[1:], "new_snapshot": fresh, "parse": parse, "max_rows": rows,
            "all_alerts": all_alerts,
            "first": None if incidents is None or incidents.empty else str(incidents["summary"].iloc[0])}


def incident_case(root: Path, partitions: int, runs: int) -> None:
    t0 = time.perf_counter()
    c = incident_state(root, partitions)
    print(f"\nincident case: {partitions:,} partitions on 3 brokers, broker 3 down: {c['alerts']:,} open alerts "
          f"({c['partition_alerts']:,} partition alerts) -> {c['incidents']} incidents, the broker one with "
          f"{c['broker_members']:,} member alerts; latest state {c['state_mb']} MB (built in "
          f"{time.perf_counter() - t0:.0f}s)")
    r = time_incident_overview(root, runs)
    warm, fresh = r["warm"], r["new_snapshot"]
    assert isinstance(warm, list) and isinstance(fresh, list)
    print(f"overview      cold {r['cold']:.2f}s   rerun: median of {runs} {statistics.median(warm):.2f}s (max "
          f"{max(warm):.2f}s)   new snapshot: median of {runs} {statistics.median(fresh):.2f}s   (target <= 2 s; "
          f"largest table {r['max_rows']:,} rows)")
    print(f"  of which parsing the {c['state_mb']} MB latest-state JSON (orjson in "
          f"collectors.outputs.latest_state.read_latest, cyclic GC off as in dashboard.data): {r['parse']:.2f}s")
    print(f"first incident: {r['first']}")
    print(f"per-alert list switched on (one click down, first {1000:,} rows): {r['all_alerts']:.2f}s")


def main() -> None:
    ap = size_parser(__doc__, partitions=20_000, groups=2_000, per_group=None)
    ap.add_argument("--hours", type=float, default=24.0)
    ap.add_argument("--interval", type=float, default=300.0)
    ap.add_argument("--dir", help="data dir (default: a temp dir); reused when it already holds data")
    ap.add_argument("--keep", action="store_true", help="keep the generated temp dir")
    ap.add_argument("--incident-partitions", type=int, default=100_000,
                    help="partitions of the broker-down case (0 = skip it)")
    ap.add_argument("--only-incident", action="store_true", help="run only the broker-down Overview case")
    a = ap.parse_args()
    root = Path(a.dir) if a.dir else Path(tempfile.mkdtemp(prefix="kmon-bench-dashboard-"))
    try:
        if a.only_incident:
            incident_case(root / "incident", a.incident_partitions, a.runs)
            return
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
        if a.incident_partitions:
            incident_case(root / "incident", a.incident_partitions, a.runs)
    finally:
        if not a.dir and not a.keep:
            shutil.rmtree(root, ignore_errors=True)
        elif a.keep:
            print(f"data kept in {root}")


if __name__ == "__main__":
    main()
