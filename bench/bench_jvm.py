"""Where a weekly run's CPU goes inside the JVM, and what the JVM's options change, on the report from roll-ups.

    .venv/bin/python -m bench.bench_jvm [--dir DIR] [--rollups DIR] [--week 2026-W40] [--runs 4] [--rounds 1]
                                        [--config NAME=JAVA_OPTIONS ...]

A weekly run's steady state (last week's report present, this week from its daily roll-ups) keeps both cores of the
bench machine busy, yet reads only a few MB: Spark's tasks are not the only thing running. For each configuration
of the driver JVM's options, a new process starts a session with them (`local[2]`, 1 GB heap), writes last week's
report (untimed), then runs ``compute`` for the week ``--runs`` times with that report present. Per run it prints
the wall time and the JVM's CPU by kind of thread, read from ``/proc/<jvm>/task``:

- ``jit``: the JIT compilers' threads (C1, C2, the code sweeper);
- ``tasks``: Spark's task threads (``Executor task launch worker``);
- ``gc``: the garbage collector's threads and the VM thread (its safepoint operations);
- ``driver``: every other live thread (planning over Py4J, the scheduler, listeners);
- ``gone``: CPU of threads that ended during the run (Spark's short-lived pools), which ``/proc`` no longer shows.

Then, per configuration, the medians of the runs after the first. With ``--rounds`` above 1 the configurations
alternate, a process each, so that the machine's drift falls on all of them. The default configurations: the JVM's
own defaults (what a big job runs with), without tiered compilation (C2 only), and the small job's options the CLI
starts a report from roll-ups with (`session.SMALL_JOB_JAVA_OPTIONS`).

The history (two weeks, `bench.synthetic_history`, 5,000 partitions) and its roll-ups are generated when ``--dir``
or ``--rollups`` do not exist yet. Linux only (``/proc``). Timings are printed, never asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

KINDS = ("jit", "tasks", "gc", "driver", "gone")

_KIND_OF = (
    ("jit", re.compile(r"^C\d CompilerThre|^Sweeper thread")),
    ("tasks", re.compile(r"^Executor task")),
    ("gc", re.compile(r"^GC Thread|^G1 |^VM Thread|^VM Periodic")),
)


def thread_kind(name: str) -> str:
    """The kind (`KINDS`) of a JVM thread from its Linux name (``/proc/<pid>/task/<tid>/comm``: 15 characters)."""
    for kind, pattern in _KIND_OF:
        if pattern.search(name):
            return kind
    return "driver"


def cpu_by_kind(before: Mapping[int, tuple[str, float]], after: Mapping[int, tuple[str, float]],
                total: float) -> dict[str, float]:
    """CPU seconds per kind between two samples of a process's threads (tid -> (name, CPU seconds)), with `total`
    the process's own CPU over the same span: what live threads do not account for (threads that ended) is
    ``gone``. A thread first seen in `after` counts from zero."""
    out = dict.fromkeys(KINDS, 0.0)
    for tid, (name, cpu) in after.items():
        out[thread_kind(name)] += cpu - (before[tid][1] if tid in before else 0.0)
    out["gone"] = max(0.0, total - sum(out.values()))
    return out


def summarise(runs: Sequence[Mapping[str, float]]) -> dict[str, float]:
    """Medians of the runs after the first (a process's first run still loads and compiles), each key alike."""
    warm = runs[1:] or runs
    return {key: statistics.median(r[key] for r in warm) for key in warm[0]}


def parse_configs(values: Iterable[str]) -> dict[str, str]:
    """``NAME=JAVA_OPTIONS`` pairs (options may be empty: the JVM's defaults); a name given twice is an error."""
    out: dict[str, str] = {}
    for v in values:
        name, sep, opts = v.partition("=")
        if not sep or not name.strip():
            raise ValueError(f"--config {v!r}: expected NAME=JAVA_OPTIONS")
        if name.strip() in out:
            raise ValueError(f"--config {v!r}: {name.strip()!r} given twice")
        out[name.strip()] = opts.strip()
    return out


def _cpu_seconds(stat: Path) -> float:
    """User + system CPU of a process or thread from its ``stat`` file (after the command name, which may hold
    spaces and parentheses: fields 14 and 15 of proc(5))."""
    fields = stat.read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _threads(pid: int) -> dict[int, tuple[str, float]]:
    out: dict[int, tuple[str, float]] = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            out[int(task.name)] = ((task / "comm").read_text().strip(), _cpu_seconds(task / "stat"))
        except OSError:  # ended between the listing and the read
            continue
    return out


def _process_cpu(pid: int) -> float:
    return _cpu_seconds(Path(f"/proc/{pid}/stat"))


def child(a: argparse.Namespace) -> None:
    """One configuration in this process: print one JSON line per timed run."""
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from spark_analytics import aggregations as A
    from spark_analytics import io
    from spark_analytics.session import build_session
    from spark_analytics.weekly_report import compute, write_cluster

    conf = {"spark.driver.memory": "1g"}
    if a.java_options:
        conf["spark.driver.extraJavaOptions"] = a.java_options
    spark = build_session("local[2]", app_name="kmon-bench-jvm", conf=conf)
    period = A.Period.iso_week(a.week)
    opts = A.Options(rollups=str(a.rollups))
    jvm = spark.sparkContext._jvm  # type: ignore[attr-defined]
    pid = int(jvm.ProcessHandle.current().pid())
    with tempfile.TemporaryDirectory(prefix="kmon-bench-jvm-") as reports:
        last = compute(spark, str(a.dir), period.previous(), opts)  # last week's run, untimed
        for cluster in last.headline["cluster"].to_pylist():
            write_cluster(cluster, last, Path(reports), opts, io.table_notes(last.data, period.previous().days()))
        heads = set()
        for _ in range(a.runs):
            threads, cpu, started = _threads(pid), _process_cpu(pid), time.perf_counter()
            c = compute(spark, str(a.dir), period, opts, reports=Path(reports))
            wall = time.perf_counter() - started
            by_kind = cpu_by_kind(threads, _threads(pid), _process_cpu(pid) - cpu)
            if not c.previous_from_report:
                raise SystemExit("last week's report was not read: not a weekly run's steady state")
            heads.add(json.dumps(c.headline.to_pylist(), sort_keys=True, default=str))
            print(json.dumps({"wall": wall, "jvm_cpu": sum(by_kind.values()), **by_kind}), flush=True)
        if len(heads) != 1:
            raise SystemExit("the runs gave different headlines")
        print(json.dumps({"headline": heads.pop()}), flush=True)
    spark.stop()


def prepare(a: argparse.Namespace) -> None:
    """The bench's two weeks of history and their roll-ups, where they do not exist yet."""
    from spark_analytics import aggregations as A

    period = A.Period.iso_week(a.week)
    if not (a.dir / "group_lag").is_dir():
        from bench.synthetic_history import Shape, generate
        for week in (period.previous().label, a.week):
            print(f"generating a synthetic week ({week}) of 5,000 partitions into {a.dir} ...", flush=True)
            generate(a.dir, week, Shape.scaled(5000))
    elif not any((a.dir / "cluster").glob(f"date={period.previous().days()[0]}")):
        raise SystemExit(f"{a.dir} has no history for {period.previous().label}, the week before {a.week}: a "
                         "weekly run's steady state needs both (give a new --dir, generated with both)")
    if not a.rollups.is_dir():
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        from spark_analytics import rollup
        from spark_analytics.session import build_session
        print(f"rolling up both weeks into {a.rollups} ...", flush=True)
        spark = build_session("local[2]", app_name="kmon-bench-jvm-rollup", conf={"spark.driver.memory": "1g"})
        rollup.rollup(spark, str(a.dir), rollup.Store(a.rollups), [*period.previous().days(), *period.days()])
        spark.stop()


def default_configs() -> dict[str, str]:
    from spark_analytics.session import SMALL_JOB_JAVA_OPTIONS
    return {"JVM defaults": "", "no tiered compilation (C2 only)": "-XX:-TieredCompilation",
            "the small job's options": " ".join(SMALL_JOB_JAVA_OPTIONS.values())}


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dir", type=Path, default=Path("data/bench-2weeks"))
    ap.add_argument("--rollups", type=Path, help="the roll-up store (default: DIR-rollups)")
    ap.add_argument("--week", default="2026-W40")
    ap.add_argument("--runs", type=int, default=4, help="timed runs per process (the first is left out)")
    ap.add_argument("--rounds", type=int, default=1, help="processes per configuration, alternating")
    ap.add_argument("--config", action="append", default=[], metavar="NAME=JAVA_OPTIONS",
                    help="a configuration of the driver JVM's options (repeatable; default: three, see above)")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--java-options", default="", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    a.rollups = a.rollups or a.dir.with_name(a.dir.name + "-rollups")
    if a.runs < 2:
        ap.error("--runs: at least 2 (the first run of a process is left out)")
    if a.child:
        child(a)
        return 0
    try:
        configs = parse_configs(a.config) or default_configs()
    except ValueError as e:
        ap.error(str(e))
    prepare(a)
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in configs}
    headlines: Counter[str] = Counter()
    for r in range(a.rounds):
        for name, java in configs.items():
            cmd = [sys.executable, "-m", "bench.bench_jvm", "--child", "--dir", str(a.dir), "--rollups",
                   str(a.rollups), "--week", a.week, "--runs", str(a.runs), f"--java-options={java}"]
            out = subprocess.run(cmd, capture_output=True, text=True)
            if out.returncode != 0:
                print(out.stderr[-3000:], file=sys.stderr)
                print(f"{name}: the process failed (exit {out.returncode})", file=sys.stderr)
                return 1
            got = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
            headlines[next(g["headline"] for g in got if "headline" in g)] += 1
            timed = [g for g in got if "wall" in g]
            runs[name].append(summarise(timed))
            print(f"round {r + 1}, {name}: " + ", ".join(
                f"{t['wall']:.1f}s (JVM CPU {t['jvm_cpu']:.1f}s, jit {t['jit']:.1f}s)" for t in timed), flush=True)
    print(f"\nweek {a.week} from {a.rollups}, last week's report present; medians of runs 2..{a.runs} "
          f"of each process, then the median over {a.rounds} process(es); CPU in seconds:\n")
    print("| configuration | wall | JVM CPU | " + " | ".join(KINDS) + " |")
    print("| --- " * (3 + len(KINDS)) + "|")
    for name, per_process in runs.items():
        m = {k: statistics.median(p[k] for p in per_process) for k in per_process[0]}
        print(f"| {name} | {m['wall']:.1f} s | {m['jvm_cpu']:.1f} | "
              + " | ".join(f"{m[k]:.1f}" for k in KINDS) + " |")
    if len(headlines) != 1:
        print("the configurations gave different headlines", file=sys.stderr)
        return 1
    print(f"\nevery run of every configuration gave the same headline ({sum(headlines.values())} processes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
