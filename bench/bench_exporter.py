"""/metrics at scale: series, bytes, build time per poll and time per scrape, per granularity, median of runs.

    .venv/bin/python -m bench.bench_exporter [--partitions 100000] [--per-topic 10] [--groups 10000] [--per-group 10]
        [--runs 5]

The snapshot is built from a synthetic observation (bench/synthetic.py: RF 3, about 2 % of partitions
under-replicated, 0.1 % offline), then copied as a healthy cluster (every ISR full, every leader present, no
open transaction holding the LSO back), and as that cluster with one broker down (a tenth of the partitions
under-replicated, an alert each). For each granularity it prints the series count, the body size, the
build time once per poll (`MetricsEndpoint.refresh`) and the time of one scrape over HTTP on loopback, plain
and gzip (what Prometheus asks for), through the real server. ``partition`` is the old default (every
per-partition series); before this change a scrape also re-rendered the body whenever it was older than 5 s.
``exceptions, no limit`` is ``exceptions`` before `exporter.exceptions_limit` (`collectors.outputs.exceptions`).
"""

from __future__ import annotations

import copy
import statistics
import time
import urllib.request

from bench.common import median_of, size_of, size_parser, timed, warmed
from collectors.model.records import AlertRecord, ClusterSnapshot
from collectors.model.vocabulary import partition_subject
from collectors.outputs.exceptions import DEFAULT_LIMIT
from collectors.outputs.exporter import GRANULARITIES, MetricsEndpoint, MetricsServer


def healthy(snap: ClusterSnapshot) -> ClusterSnapshot:
    """The same cluster with nothing wrong: what most clusters look like most of the time."""
    out = copy.deepcopy(snap)
    for p in out.partitions:
        p.isr = list(p.replicas)
        if p.leader < 0:
            p.leader = p.replicas[0]
        p.last_stable_offset = p.high_watermark
    for t in out.topics:
        t.under_replicated = t.under_min_isr = t.at_min_isr = t.offline = 0
    out.producers = []
    out.alerts = []
    return out


def broker_down(snap: ClusterSnapshot, broker: int = 1) -> ClusterSnapshot:
    """The healthy cluster with one broker down: out of every ISR, its leaderships moved to the next ISR member,
    and one open under_replicated alert per partition it held, as the monitor has them (one incident pages)."""
    out = healthy(snap)
    hit: dict[str, int] = {}
    for p in out.partitions:
        if broker in p.replicas:
            p.isr = [r for r in p.isr if r != broker]
            if p.leader == broker:
                p.leader = p.isr[0] if p.isr else -1
            hit[p.topic] = hit.get(p.topic, 0) + 1
            out.alerts.append(AlertRecord("under_replicated", "warning", out.cluster,
                                          partition_subject(p.topic, p.partition), "x", out.time, out.time))
    for t in out.topics:
        t.under_replicated = hit.get(t.topic, 0)
    for b in out.brokers:
        b.alive = b.alive and b.broker_id != broker
    return out


def scrape_ms(url: str, gzipped: bool, runs: int) -> float:
    times = []
    headers = {"Accept-Encoding": "gzip"} if gzipped else {}
    for _ in range(runs):
        t0 = time.perf_counter()
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=60) as r:
            r.read()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1000


def main() -> None:
    ap = size_parser(__doc__, partitions=100_000, groups=10_000)
    ap.add_argument("--per-topic", type=int, default=10, help="partitions per topic (default 10: 10,000 topics)")
    a = ap.parse_args()
    _, broken, _ = warmed(size_of(a), time.time())
    ok = healthy(broken)
    print(f"snapshot: {len(broken.partitions):,} partitions in {len(broken.topics):,} topics, "
          f"{len(broken.groups):,} groups, {len(broken.group_partitions):,} group-partitions; "
          f"broken: {sum(p.under_replicated for p in broken.partitions):,} under-replicated, "
          f"{sum(p.offline for p in broken.partitions):,} offline, "
          f"{sum(g.status != 'OK' for g in broken.groups):,} groups not OK")
    print("| cluster | granularity | series | per partition | body MB | gzip MB | build per poll | scrape | "
          "scrape gzip |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    down = broker_down(broken)
    print(f"broker down: {sum(p.under_replicated for p in down.partitions):,} partitions under-replicated, "
          f"{len(down.alerts):,} open alerts; exceptions cut at exporter.exceptions_limit {DEFAULT_LIMIT:,}, "
          "'exceptions, no limit' is the behaviour before the limit")
    modes = [(g, DEFAULT_LIMIT) for g in GRANULARITIES]
    modes.insert(1, ("exceptions, no limit", 0))
    for name, snap in (("healthy", ok), ("broken", broken), ("broker down", down)):
        for granularity, limit in modes:
            ep = MetricsEndpoint(granularity=granularity.split(",")[0], exceptions_limit=limit)
            ep.collector.update([snap])
            builds: list[float] = []
            for _ in range(a.runs):
                with timed(builds):
                    ep.refresh()
            body, _ = ep.render_parts()
            gz, _ = ep.render_parts(gzipped=True)
            series = sum(1 for ln in body.split(b"\n") if ln and not ln.startswith(b"#"))
            srv = MetricsServer(ep, port=0).start()
            try:
                url = f"http://127.0.0.1:{srv.port}/metrics"
                scrape_ms(url, True, 1)  # the first gzip scrape compresses the body once; later ones reuse it
                plain, zipped = scrape_ms(url, False, a.runs), scrape_ms(url, True, a.runs)
            finally:
                srv.close()
            print(f"| {name} | {granularity} | {series:,} | {series / len(snap.partitions):.2f} | "
                  f"{len(body) / 1e6:.1f} | {len(gz) / 1e6:.2f} | {median_of(builds)} | {plain:.0f} ms | "
                  f"{zipped:.0f} ms |")


if __name__ == "__main__":
    main()
