"""Where a cluster's weekly report lives: ``<out>/<safe_name(cluster)>/<week>/``, for the job and the dashboard.

The job writes there (`weekly_report.write_cluster`) and the dashboard looks there (`dashboard.data.find_reports`),
both through this module, with the collector's one cluster-name encoding (`collectors.outputs.paths.safe_name`).
The job used to have its own encoding (runs of anything but ``A-Z a-z 0-9 . _ -`` became ``_``): the reports of
``prod eu`` went to ``prod_eu/`` while the dashboard looked in ``prod%20eu/``, and ``a b`` and ``a_b`` overwrote
each other. `legacy_cluster_dir` keeps that old name so the reports written then are still found; it is never
written to, and since it is not collision-free a reader must check whose report it found there.

Plain Python (no Spark), so the dashboard can import it.
"""

from __future__ import annotations

import re
from pathlib import Path

from collectors.outputs.paths import safe_name

PAGE_FILE = "report.html"
SUMMARY_FILE = "summary.json"
TABLES_DIR = "tables"
INPUTS_FILE = "inputs.json"
"""What the report's figures were made from (`weekly_report.inputs_of`): next week's report reuses this week's
headline when they still hold. Written last: a report without it is never reused."""


def cluster_dir(out: Path, cluster: str) -> Path:
    """The directory holding one cluster's weeks."""
    return out / safe_name(cluster)


def report_dir(out: Path, cluster: str, week: str) -> Path:
    """The directory of one cluster's report for one week (``week`` is a `Period` label like 2026-W47)."""
    return cluster_dir(out, cluster) / week


def legacy_cluster_dir(out: Path, cluster: str) -> Path:
    """Where the job wrote a cluster's reports before it used `safe_name`; other clusters may share it."""
    return out / (re.sub(r"[^A-Za-z0-9._-]+", "_", cluster).strip("._") or "cluster")
