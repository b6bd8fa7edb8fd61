"""The weekly job on a real Spark cluster, as docs/weekly-report.md, "On a Spark cluster" tells it.

Every other Spark test runs a local master: the driver and its tasks share one JVM, so nothing there shows that
the job works where the tasks run in another process. Here a standalone master and one worker (PySpark's own
``spark-class``, bound to 127.0.0.1) run the wheel submitted with ``spark-submit --master spark://… --py-files``
from a fresh install of it, against a small synthetic history on a path both processes see (a shared mount in
the documented set-up). One ``--update-rollups`` run rolls up the days and reports the week, so it covers what
a cluster changes: the executor's tasks write each day's roll-up files into the shared directory and the driver
publishes them, then the report reads them. Its figures must equal the DuckDB reference (`bench.check_report`).
About a minute: the history has one day, so one day to roll up.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psutil
import pytest

from bench import check_report
from bench.synthetic_history import Shape, generate
from spark_analytics.session import SMALL_JOB_SHUFFLE_PARTITIONS
from tests.support.packaging import Installed, install
from tests.support.processes import stop

pytestmark = pytest.mark.integration

SPARK_HOME = Path(__import__("pyspark").__file__).parent
WEEK = "2026-W40"
KEPT_DAYS = ("2026-09-29",)  # of the week's seven: one day to roll up is enough to show where the files go


@dataclass
class Standalone:
    url: str
    work: Path  # the worker's directory: one sub-directory an application, the executors' logs in it
    pids: tuple[int, int]


def _loopback(addr: str) -> bool:
    return addr in ("127.0.0.1", "::1", "::ffff:127.0.0.1")


def _wait_for(log: Path, pattern: str, proc: subprocess.Popen[bytes], timeout: float = 90.0) -> re.Match[str]:
    deadline = time.monotonic() + timeout
    while True:
        m = re.search(pattern, log.read_text(errors="replace")) if log.exists() else None
        if m:
            return m
        if proc.poll() is not None or time.monotonic() > deadline:
            raise AssertionError(f"no {pattern!r} in {log.name} (exit {proc.poll()}):\n"
                                 f"{log.read_text(errors='replace')[-3000:]}")
        time.sleep(0.2)


@pytest.fixture(scope="module")
def standalone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Standalone]:
    """A standalone master and a worker of one core and 1 GB on 127.0.0.1, every port chosen by the system and
    the master's REST server off (it would take the fixed port 6066)."""
    if not shutil.which("java") and not os.environ.get("JAVA_HOME"):
        pytest.fail("no Java: .ci/run installs it (the Spark tests need it)")
    base = tmp_path_factory.mktemp("standalone")
    env = {**os.environ, "SPARK_HOME": str(SPARK_HOME), "SPARK_LOCAL_IP": "127.0.0.1",
           "SPARK_MASTER_OPTS": "-Dspark.master.rest.enabled=false"}
    spark_class = str(SPARK_HOME / "bin" / "spark-class")
    started: list[subprocess.Popen[bytes]] = []

    def start(name: str, *args: str) -> tuple[subprocess.Popen[bytes], Path]:
        log = base / f"{name}.log"
        with open(log, "wb") as out:
            proc = subprocess.Popen([spark_class, *args], cwd=base, env=env, stdout=out, stderr=subprocess.STDOUT,
                                    start_new_session=True)
        started.append(proc)
        return proc, log

    try:
        master, mlog = start("master", "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                             "--port", "0", "--webui-port", "0")
        url = _wait_for(mlog, r"Starting Spark master at (spark://127\.0\.0\.1:\d+)", master).group(1)
        _wait_for(mlog, r"elected leader", master)
        work = base / "work"
        worker, wlog = start("worker", "org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1",
                             "--cores", "1", "--memory", "1g", "--webui-port", "0", "--work-dir", str(work), url)
        _wait_for(wlog, r"Successfully registered with master", worker)
        yield Standalone(url, work, (master.pid, worker.pid))
    finally:
        for proc in reversed(started):
            stop(proc, timeout=20, group=True)


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    return install(tmp_path_factory.mktemp("wheel"))


@pytest.mark.timeout(900)  # the wheel, two cluster JVMs and the job, all inside the one test: 300 s is a loaded
# machine's 3x of its ~80 s, and pytest-timeout would cut spark-submit's own 280 s bound short
def test_weekly_job_on_a_standalone_cluster_equals_duckdb(standalone: Standalone, installed: Installed,
                                                          tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    history, rollups, out = tmp_path / "history", tmp_path / "rollups", tmp_path / "reports"
    generate(history, WEEK, Shape(partitions_per_topic=5, interval_s=3600.0))  # 1,000 partitions polled hourly
    for day_dir in history.glob("*/date=*"):
        if day_dir.name.removeprefix("date=") not in KEPT_DAYS:
            shutil.rmtree(day_dir)
    rollups.mkdir()
    events = tmp_path / "events"
    events.mkdir()

    # the command of docs/weekly-report.md, "On a Spark cluster" (the script of the installed package)
    env = {"PYSPARK_DRIVER_PYTHON": str(installed.python), "PYSPARK_PYTHON": str(installed.python),
           "SPARK_LOCAL_IP": "127.0.0.1", "SPARK_HOME": str(SPARK_HOME)}
    p = installed.run(SPARK_HOME / "bin" / "spark-submit", "--master", standalone.url, "--deploy-mode", "client",
                      "--conf", "spark.ui.enabled=false", "--conf", "spark.eventLog.enabled=true",
                      "--conf", f"spark.eventLog.dir={events.as_uri()}", "--conf", "spark.eventLog.compress=false",
                      "--conf", "spark.eventLog.rolling.enabled=false",
                      "--driver-memory", "1g", "--executor-memory", "1g", "--py-files", installed.wheel,
                      installed.site_packages / "spark_analytics" / "weekly_report.py",
                      "--history", history, "--rollups", rollups, "--update-rollups", "--week", WEEK,
                      "--out", out, timeout=280, **env)
    said = p.stdout + p.stderr
    assert p.returncode == 0, said[-4000:]
    assert re.search(rf"rolled up 1 day \({KEPT_DAYS[0]}\.\.{KEPT_DAYS[0]}\)", said), said[-3000:]
    assert re.search(rf"{WEEK}: 1 of 1 day with rows read from the roll-ups", said), said[-3000:]
    for day in KEPT_DAYS:
        assert (rollups / "_days" / f"{day}.json").exists()
        assert (rollups / "group_lag_hist" / f"date={day}" / "rollup.parquet").stat().st_size > 0

    # a small job on a cluster: a few shuffle partitions, not Spark's 200 (session.SMALL_JOB_SHUFFLE_PARTITIONS)
    (log,) = (f for f in events.iterdir() if not f.name.startswith("."))  # not the checksum
    env_update = next(e for e in map(json.loads, log.read_text().splitlines())
                      if e["Event"] == "SparkListenerEnvironmentUpdate")
    assert dict(env_update["Spark Properties"])["spark.sql.shuffle.partitions"] == str(SMALL_JOB_SHUFFLE_PARTITIONS)

    # the tasks ran in the worker's executor, another JVM than the driver's
    (app,) = standalone.work.glob("app-*")
    executor_log = "".join(f.read_text(errors="replace") for f in app.glob("*/stderr"))
    assert re.search(r"Running task \d+\.\d+ in stage", executor_log), executor_log[-2000:]

    # every figure as DuckDB computes it from the same files
    assert check_report.main(["--history", str(history), "--report", str(out), "--week", WEEK]) == 0
    checked = capsys.readouterr().out
    assert "every figure equal" in checked and "DIFFERS" not in checked, checked

    # the master and the worker listened on the loopback address only
    listening = [c.laddr for pid in standalone.pids for proc in [psutil.Process(pid), *psutil.Process(pid).children(
        recursive=True)] for c in proc.net_connections(kind="inet") if c.status == psutil.CONN_LISTEN]
    assert listening and all(_loopback(a.ip) for a in listening), listening
