"""tests/conftest.py shares the suite between two xdist workers: each module one unit of work, the modules on the
suite's shared SparkSession one unit together, collected first."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.conftest import SPARK_GROUP, imports_the_shared_spark_session, pytest_xdist_make_scheduler, work_unit

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(("source", "spark"), [
    ("from tests.support.spark_history import frame, spark_session\n", True),
    ("def f():\n    from tests.support.spark_history import spark_session\n", True),
    ("from tests.support.spark_history import build_history\n", False),  # the history only, no session
    ("import tests.support.spark_history\n", False),
    ("from elsewhere import spark_session\n", False),
    ("spark_session = None\n", False),
    ("def broken(:\n", False),
])
def test_a_module_is_a_spark_module_when_it_imports_the_suites_session(source: str, spark: bool) -> None:
    assert imports_the_shared_spark_session(source) is spark


def test_work_units_of_real_modules() -> None:
    assert work_unit("tests/unit/test_histogram.py::test_x") == SPARK_GROUP
    assert work_unit("tests/integration/test_spark_report.py::test_y[a::b]") == SPARK_GROUP
    assert work_unit("tests/unit/test_lag.py::test_z") == "tests/unit/test_lag.py"
    assert work_unit("tests/unit/no_such_module.py::t") == "tests/unit/no_such_module.py"


def test_every_module_that_starts_spark_is_in_the_spark_unit() -> None:
    """From the source: a test module that built a session in its own process some other way would start a second
    driver JVM on the other worker. A module whose JVMs are all subprocesses of their own (the class archive's
    runs: a script in a string) is not one: it runs beside the Spark unit, on the other worker."""
    spark = []
    for path in sorted((ROOT / "tests").rglob("test_*.py")):
        if path.name == Path(__file__).name:
            continue  # its text names both
        if calls_a_session_builder(path.read_text()):
            spark.append(path.name)
            assert work_unit(f"{path.relative_to(ROOT)}::t") == SPARK_GROUP, path
    assert {"test_spark_report.py", "test_rollup.py", "test_spark_session.py", "test_histogram.py"} <= set(spark)
    assert "test_class_archive.py" not in spark
    assert work_unit("tests/unit/test_class_archive.py::t") == "tests/unit/test_class_archive.py"


def calls_a_session_builder(source: str) -> bool:
    """Whether the module's code (not its strings) calls ``spark_session(…)`` or ``build_session(…)``."""
    return any(isinstance(node, ast.Call) and (getattr(node.func, "id", None) or getattr(node.func, "attr", None))
               in ("spark_session", "build_session") for node in ast.walk(ast.parse(source)))


@pytest.mark.parametrize(("source", "calls"), [
    ("spark = spark_session()\n", True),
    ("def f():\n    return session.build_session('local[1]')\n", True),
    ("RUN = \"\"\"\nspark = build_session('local[1]')\n\"\"\"\n", False),  # a subprocess's script
    ("from tests.support.spark_history import spark_session\n", False),
])
def test_a_module_starts_a_session_in_its_process_when_its_code_calls_a_builder(source: str, calls: bool) -> None:
    assert calls_a_session_builder(source) is calls


def test_this_runs_collection_has_the_spark_unit_first(request: pytest.FixtureRequest) -> None:
    units = [work_unit(item.nodeid) for item in request.session.items]
    if SPARK_GROUP in units:  # absent when this module runs alone
        first_other = next(i for i, u in enumerate(units) if u != SPARK_GROUP)
        assert SPARK_GROUP not in units[first_other:], "a Spark test after the others"


def test_the_scheduler_splits_by_unit_under_loadfile_only(request: pytest.FixtureRequest,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(request.config.option, "dist", "load")
    assert pytest_xdist_make_scheduler(request.config, None) is None  # xdist's own
    monkeypatch.setattr(request.config.option, "dist", "loadfile")
    monkeypatch.setattr(request.config.option, "tx", ["popen"] * 2)  # what -n 2 makes of it
    sched = pytest_xdist_make_scheduler(request.config, None)
    assert sched._split_scope("tests/unit/test_rollup.py::test_a") == SPARK_GROUP
    assert sched._split_scope("tests/integration/test_fleet.py::test_b[x]") == "tests/integration/test_fleet.py"
