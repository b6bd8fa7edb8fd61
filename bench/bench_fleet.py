"""Fleet policy at scale: what filters save, what 1,000 policy rules cost. Median of several polls per mode.

    .venv/bin/python -m bench.bench_fleet [--groups 10000] [--denied 9000] [--rules 1000] [--runs 5]

The sandbox runs as its own process (``python -m sandbox``, KRaft mode, no incidents), so the CPU measured here
(getrusage of this process: every poller thread) is the monitor's alone. The cluster: 100 topics of 10
partitions; `--groups` consumer groups of which `--denied` are left-behind console consumers
(``console-consumer-N``, no members) and the rest running applications (``app-N``, one member, committing).

Modes, each with a poller of its own (one warm-up poll, then `--runs` polls):

* ``all groups``: no filter, no policy: every group found, described and its offsets fetched;
* ``deny console``: ``filters.groups.deny: ['^console-consumer-']``;
* ``all + N rules``: no filter, `--rules` policy rules (all but the last match nothing; the last gives every
  ``app-`` group a team and an SLO): what resolving policy costs per poll at this many groups. Rules are
  resolved once per name and remembered, so the first poll pays the resolution and later polls do not; both
  are printed.
"""

from __future__ import annotations

import argparse
import json
import logging
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from collectors.config import MonitorConfig
from collectors.runtime.poller import ClusterPoller

ROOT = Path(__file__).resolve().parents[1]


def scenario(groups: int, denied: int) -> dict[str, Any]:
    topics = [{"name": f"topic-{t:03d}", "partitions": 10, "replication_factor": 3, "produce_rate": 10}
              for t in range(100)]
    apps = [{"group_id": f"app-{g:05d}", "topics": [topics[g % 100]["name"]], "members": 1, "commit_interval_s": 5}
            for g in range(groups - denied)]
    return {"cluster": {"brokers": 3, "mode": "kraft", "topics": topics, "groups": apps,
                        "generated_groups": {"count": denied, "prefix": "console-consumer-", "members": 0}}}


def cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def run_mode(bootstrap: str, name: str, filters: dict[str, Any], policies: list[dict[str, Any]], runs: int
             ) -> dict[str, Any]:
    cfg = MonitorConfig.model_validate({"clusters": [{"name": "fleet", "bootstrap_servers": bootstrap,
                                                      "filters": filters}],
                                        "request_timeout_s": 30, "policies": policies})
    poller = ClusterPoller(cfg.clusters[0], cfg)
    try:
        c0, w0 = cpu_s(), time.monotonic()
        first = poller.poll()
        first_cpu, first_wall = cpu_s() - c0, time.monotonic() - w0
        cpus, walls, reqs = [], [], []
        for _ in range(runs):
            c0, w0 = cpu_s(), time.monotonic()
            r = poller.poll()
            cpus.append(cpu_s() - c0)
            walls.append(time.monotonic() - w0)
            reqs.append(r.snapshot.requests)
        s = r.snapshot
        return {"mode": name, "groups": len(s.groups), "filtered": s.filtered_groups,
                "requests": statistics.median(reqs), "cpu": statistics.median(cpus),
                "wall": statistics.median(walls), "first_cpu": first_cpu,
                "first_wall": first_wall, "errors": s.errors[:2] + first.snapshot.errors[:1],
                "teams": sum(1 for g in s.groups if g.team)}
    finally:
        poller.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--groups", type=int, default=10_000)
    ap.add_argument("--denied", type=int, default=9_000)
    ap.add_argument("--rules", type=int, default=1_000)
    ap.add_argument("--runs", type=int, default=5)
    a = ap.parse_args()
    logging.basicConfig(level=logging.ERROR)
    with tempfile.TemporaryDirectory(prefix="kmon-bench-fleet-") as tmp:
        sc, info = Path(tmp) / "scenario.json", Path(tmp) / "info.json"
        sc.write_text(json.dumps(scenario(a.groups, a.denied)))
        proc = subprocess.Popen([sys.executable, "-m", "sandbox", "--scenario", str(sc), "--info-file", str(info),
                                 "--no-incidents", "--no-zookeeper"], cwd=ROOT, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 180
            while not info.exists() and time.monotonic() < deadline:
                time.sleep(0.5)
            if not info.exists():
                raise SystemExit("the sandbox did not start")
            time.sleep(1.0)
            bootstrap = json.loads(info.read_text())["bootstrap_servers"]
            rules = [{"group": f"^team-{i:04d}-", "team": f"t{i}"} for i in range(a.rules - 1)]
            rules.append({"group": "^app-", "team": "apps", "lag_seconds_slo": 60})
            results = [
                run_mode(bootstrap, "all groups", {}, [], a.runs),
                run_mode(bootstrap, "deny console", {"groups": {"deny": ["^console-consumer-"]}}, [], a.runs),
                run_mode(bootstrap, f"all + {a.rules} rules", {}, rules, a.runs),
            ]
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    print(f"cluster: 100 topics x 10 partitions, {a.groups:,} groups ({a.denied:,} console-consumer-*, no "
          f"members; {a.groups - a.denied:,} app-*); median of {a.runs} polls after a warm-up\n")
    print(f"{'mode':<22}{'groups':>8}{'left out':>10}{'requests':>10}{'poll CPU':>10}{'wall':>8}"
          f"{'1st poll CPU':>14}{'with team':>11}")
    for r in results:
        print(f"{r['mode']:<22}{r['groups']:>8,}{r['filtered']:>10,}{r['requests']:>10.0f}{r['cpu']:>9.3f}s"
              f"{r['wall']:>7.2f}s{r['first_cpu']:>13.3f}s{r['teams']:>11,}")
    base, deny, pol = results
    print(f"\nfilters: requests x{deny['requests'] / base['requests']:.2f}, poll CPU x{deny['cpu'] / base['cpu']:.2f}")
    print(f"{a.rules} policy rules: poll CPU {100 * (pol['cpu'] / base['cpu'] - 1):+.1f}% (steady state), first poll "
          f"{100 * (pol['first_cpu'] / base['first_cpu'] - 1):+.1f}% (every name resolved once)")
    for r in results:
        if r["errors"]:
            print(f"errors in {r['mode']}: {r['errors']}")


if __name__ == "__main__":
    main()
