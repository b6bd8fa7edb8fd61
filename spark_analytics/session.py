"""The SparkSession the jobs (`weekly_report`, `rollup`) run in: local and loopback-bound unless spark-submit chose.
"""

from __future__ import annotations

import os
import re
from typing import Any

OBJECT_HASH_AGG_KEYS = 4096
"""Keys (group-topics) per task the percentile aggregates keep in hash maps before sorting the rest."""


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


def build_session(master: str | None = None, app_name: str = "kmon-weekly-report", verbose: bool = False,
                  conf: dict[str, str] | None = None) -> Any:
    """A SparkSession. Without `master`: local[*], unless spark-submit already chose one.

    Local sessions bind the driver to 127.0.0.1, run without the UI and with one shuffle partition per worker
    thread: every task shares those threads, so more partitions only add per-task cost to the report's many small
    jobs (and AQE merges partitions, never splits them); measured in docs/weekly-report.md, "Step 5".
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
    b = (b.config("spark.sql.session.timeZone", "UTC").config("spark.ui.showConsoleProgress", "false")
         .config("spark.sql.execution.arrow.pyspark.enabled", "true")
         # the percentile aggregates keep one hash map per key; past 128 keys per task (Spark's default) they
         # fall back to sorting every input row by key (docs/weekly-report.md, "Where the time goes")
         .config("spark.sql.objectHashAggregate.sortBased.fallbackThreshold", str(OBJECT_HASH_AGG_KEYS)))
    for k, v in (conf or {}).items():
        b = b.config(k, v)
    spark = b.getOrCreate()
    spark.sparkContext.setLogLevel("WARN" if verbose else "ERROR")
    return spark
