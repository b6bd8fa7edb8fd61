"""The SparkSession the jobs (`weekly_report`, `rollup`) run in: local and loopback-bound unless spark-submit chose.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

OBJECT_HASH_AGG_KEYS = 4096
"""Keys (group-topics) per task the percentile aggregates keep in hash maps before sorting the rest."""

TWO_LEVEL_HASH_MAP = "spark.sql.codegen.aggregate.map.twolevel.enabled"
"""Spark's generated hash aggregates first probe a small map (2^16 entries) for aggregates with buffers, then the
main one. Turned off: where a task has more keys than that (the consumer cells of one pass over the polls, ~150 k
on the bench week, 750 k at 25,000 partitions), every row paid for both probes — ~2 s of that ~10 s pass; where it
has few, the main map alone is as fast."""


def is_local_master(master: str | None) -> bool:
    return master is None or master.startswith("local")


def local_cores(master: str) -> int:
    """The worker threads of a local master: ``local`` 1, ``local[N]`` / ``local[N,F]`` N, ``local[*]`` every core,
    ``local-cluster[W,C,M]`` W x C."""
    m = re.fullmatch(r"local(?:\[(\*|\d+)(?:,\s*\d+)?\])?", master.strip())
    if m is not None:
        if m.group(1) is None:
            return 1
        return (os.cpu_count() or 1) if m.group(1) == "*" else max(1, int(m.group(1)))
    m = re.fullmatch(r"local-cluster\[\s*(\d+)\s*,\s*(\d+)\s*,\s*\d+\s*\]", master.strip())
    return max(1, int(m.group(1)) * int(m.group(2))) if m else os.cpu_count() or 1


SMALL_JOB_JAVA_OPTIONS: dict[str, str] = {
    "gc": "-XX:+UseParallelGC",
    "jit": "-XX:TieredStopAtLevel=1",
}
"""The driver JVM of a local session whose job reads little to aggregate (a report from a small fleet's daily
roll-ups or of a small history, a day's roll-up of it: `rollup.SMALL_JOB_BYTES`): the throughput collector and the
client compiler only. Such a job runs ~35 small queries once, in a fresh process, and is over before G1's
concurrent threads and the optimising compiler pay back on 2 cores. The CLI as a weekly job runs it, 2 cores
(docs/weekly-report.md, "Step 7"): from the bench week's roll-ups 24.1 -> 18.9 s
(median of 3), the demo's history 16.9 -> 12.7 s; from the bench week's raw rows the two are even. On many raw rows
each option costs: the collector made the 25,000-partition report from the history ~19 % slower, the client
compiler the warm big aggregates ~15 % ("Step 6"); such jobs keep the JVM's defaults. Keyed by what each option
chooses, so that one chosen elsewhere is left alone."""
_CHOSEN_IN_ENV: dict[str, str] = {"gc": r"-XX:[+-]Use\w*GC\b",
                                  "jit": r"-XX:(?:TieredStopAtLevel=|[+-]TieredCompilation\b)"}
JAVA_ENV = ("JAVA_TOOL_OPTIONS", "JDK_JAVA_OPTIONS", "_JAVA_OPTIONS")
"""Where else a JVM takes options from: what is chosen there wins (and two collectors stop the JVM)."""
JAVA_OPTION_KEYS = ("spark.driver.extraJavaOptions", "spark.driver.defaultJavaOptions")


def small_job_java_options(conf: Mapping[str, str], env: Mapping[str, str] = os.environ) -> str | None:
    """The driver's extra Java options for a local small job: `SMALL_JOB_JAVA_OPTIONS`, without what the environment
    already chooses (`JAVA_ENV`); none at all when the caller's `conf` or ``spark-defaults.conf`` (in
    ``SPARK_CONF_DIR`` or ``SPARK_HOME/conf``) sets the driver's Java options: ours would replace theirs (an
    administrator's Kerberos or trust-store options must not be lost for a faster start)."""
    if any(k in conf for k in JAVA_OPTION_KEYS) or _defaults_set_java_options(env):
        return None
    chosen = " ".join(env.get(k, "") for k in JAVA_ENV)
    keep = [opt for what, opt in SMALL_JOB_JAVA_OPTIONS.items() if not re.search(_CHOSEN_IN_ENV[what], chosen)]
    return " ".join(keep) or None


def _defaults_set_java_options(env: Mapping[str, str]) -> bool:
    dirs = [env.get("SPARK_CONF_DIR")] + ([str(Path(env["SPARK_HOME"]) / "conf")] if env.get("SPARK_HOME") else [])
    for d in filter(None, dirs):
        try:
            lines = (Path(d) / "spark-defaults.conf").read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError:
            continue
        # a Java properties file: "key value", "key=value" or "key: value"; "#" and "!" start comments
        keys = {m.group(1) for line in lines if (m := re.match(r"\s*([^\s=:#!][^\s=:]*)", line))}
        if keys & set(JAVA_OPTION_KEYS):
            return True
    return False


def build_session(master: str | None = None, app_name: str = "kmon-weekly-report", verbose: bool = False,
                  conf: dict[str, str] | None = None, small_job: bool = False) -> Any:
    """A SparkSession. Without `master`: local[*], unless spark-submit already chose one.

    Local sessions bind the driver to 127.0.0.1, run without the UI and with one shuffle partition per worker
    thread: every task shares those threads, so more partitions only add per-task cost to the report's many small
    jobs (and AQE merges partitions, never splits them); measured in docs/weekly-report.md, "Step 5". A local
    `small_job` (little to aggregate) starts its JVM with `SMALL_JOB_JAVA_OPTIONS` (`small_job_java_options`);
    under spark-submit the cluster's settings rule.
    """
    from pyspark.sql import SparkSession

    submitted = "PYSPARK_GATEWAY_PORT" in os.environ  # launched by spark-submit: its --master/--conf rule
    b = SparkSession.builder.appName(app_name)
    if master is None and not submitted:
        master = "local[*]"
    if master is not None:
        b = b.master(master)
    if master is not None and master.startswith("local"):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        b = (b.config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
             .config("spark.ui.enabled", "false")
             .config("spark.sql.shuffle.partitions", str(local_cores(master))))
        if small_job and not submitted and (java := small_job_java_options(conf or {})) is not None:
            b = b.config("spark.driver.extraJavaOptions", java)
    b = (b.config("spark.sql.session.timeZone", "UTC").config("spark.ui.showConsoleProgress", "false")
         .config("spark.sql.execution.arrow.pyspark.enabled", "true")
         # the percentile aggregates keep one hash map per key; past 128 keys per task (Spark's default) they
         # fall back to sorting every input row by key (docs/weekly-report.md, "Where the time goes")
         .config("spark.sql.objectHashAggregate.sortBased.fallbackThreshold", str(OBJECT_HASH_AGG_KEYS))
         # one hash map per aggregate, not two: the consumer cells (~150 k keys a task on the bench week) overflow
         # the small first-level map, and every poll then probes both (docs/weekly-report.md, "Step 9")
         .config(TWO_LEVEL_HASH_MAP, "false"))
    for k, v in (conf or {}).items():
        b = b.config(k, v)
    spark = b.getOrCreate()
    spark.sparkContext.setLogLevel("WARN" if verbose else "ERROR")
    return spark
