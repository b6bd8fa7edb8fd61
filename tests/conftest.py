"""How the suite is shared between pytest-xdist's workers (``./run.sh test`` runs two: ``-n 2 --dist loadfile``).

As with xdist's ``loadfile``, every module is one unit of work, so a module's fixtures (a sandbox, a ZooKeeper
ensemble) start once. In addition the modules that run on the suite's shared SparkSession
(`tests.support.spark_history.spark_session`) are one unit together: one driver JVM, warmed once, instead of one
per worker fighting the other for the two cores. That unit is about half the suite's time and CPU-bound, so it is
collected first and goes to the first worker; the other worker meanwhile runs the rest, which mostly waits on
sandboxes, ZooKeeper, Prometheus and browsers (README, "Development"). Without xdist (``-n 0``) only the order
changes: the Spark modules still run first.

The unit is chosen by the module's path, from its source (`imports_the_shared_spark_session`): xdist's scheduler
sees node ids only, and its ``xdist_group`` marks do not work with pytest 9 (xdist 3.8 renames ``item._nodeid``,
which pytest 9 no longer reads).
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path
from typing import Any

import pytest

SPARK_GROUP = "spark-session"
ROOT = Path(__file__).resolve().parents[1]


def imports_the_shared_spark_session(source: str) -> bool:
    """Whether a module's source imports ``spark_session`` from ``tests.support.spark_history`` (how every Spark
    test module gets the suite's session)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return False  # pytest reports it; it is no Spark module
    return any(isinstance(node, ast.ImportFrom) and node.module == "tests.support.spark_history"
               and any(a.name == "spark_session" for a in node.names) for node in ast.walk(tree))


@functools.cache
def _spark_module(path: str) -> bool:
    try:
        return imports_the_shared_spark_session((ROOT / path).read_text(encoding="utf-8"))
    except OSError:
        return False


def work_unit(nodeid: str) -> str:
    """The unit of work of a test: its module's path (relative to the repository, as in its node id), or
    `SPARK_GROUP`."""
    path = nodeid.split("::", 1)[0]
    return SPARK_GROUP if _spark_module(path) else path


@pytest.hookimpl(tryfirst=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """``--dist loadfile``, with the Spark modules as one file; any other ``--dist`` is xdist's own."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class ByModuleSparkTogether(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return work_unit(nodeid)

    return ByModuleSparkTogether(config, log)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The Spark modules first, each in its order (xdist hands units out in the order the workers collected them,
    given ``--no-loadscope-reorder``)."""
    items.sort(key=lambda item: work_unit(item.nodeid) != SPARK_GROUP)
