"""The driver JVM's class archive (docs/performance-log.md, "Step 10"): trained by a small job's first run, mapped by
the next, trained again for another JVM or Spark, never half-written.

Every JVM here is a new process of its own (the archive is written when a JVM exits and mapped when one starts), so
this module does not use the suite's shared session: it runs on the other worker, beside the Spark unit
(tests/conftest.py), instead of adding its minute of JVM starts to that unit's one worker."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from spark_analytics.session import (
    CLASS_ARCHIVE_ENV,
    JAVA_ENV,
    ClassArchive,
    class_archive_arg,
    class_archive_option,
)

REPO = Path(__file__).resolve().parents[2]
ARCHIVE_RUN = """
import json, sys
from pathlib import Path
from pyspark import SparkContext
from spark_analytics.session import build_session, stop
archive = Path(sys.argv[1])
spark = build_session("local[1]", app_name="kmon-test-archive", class_archive=archive, small_job=sys.argv[3] == "small")
df = spark.range(100)
assert df.groupBy((df.id % 3).alias("k")).count().count() == 3
maps = Path(f"/proc/{SparkContext._gateway.proc.pid}/maps").read_text()  # the driver JVM's mapped files
args = spark._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments()
training = any(a.startswith("-XX:ArchiveClassesAtExit=") for a in args)
stop(spark, succeeded=sys.argv[2] == "ok")
print("RESULT", json.dumps({"mapped": str(archive) in maps, "training": training}))
"""


def _archive_run(archive: Path, outcome: str = "ok", job: str = "small") -> dict[str, object]:
    env = {k: v for k, v in os.environ.items()
           if k not in (*JAVA_ENV, "SPARK_CONF_DIR", "PYSPARK_GATEWAY_PORT", CLASS_ARCHIVE_ENV)}
    r = subprocess.run([sys.executable, "-c", ARCHIVE_RUN, str(archive), outcome, job], capture_output=True, text=True,
                       timeout=300, cwd=REPO, env=dict(env, PYTHONPATH=str(REPO)), check=False)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "[warning][cds" not in r.stdout + r.stderr  # thousands of them, unless silenced
    return json.loads(next(line for line in r.stdout.splitlines() if line.startswith("RESULT "))[7:])


@pytest.mark.timeout(900)  # four driver JVMs, each with its own 300 s bound
def test_the_first_run_writes_the_class_archive_and_the_next_maps_it(tmp_path: Path) -> None:
    """A real driver JVM each run (PySpark starts one per process). The first run trains the archive (written by
    the JVM at its exit, under a temporary name, put in place once the run succeeded); the next one maps it (read
    from the JVM's /proc maps, not inferred); a run whose stamp no longer matches trains again, and a failed one
    keeps what was there and leaves no temporary file. A big job never trains one (its JVM would pass 2 GB writing
    it) but maps one a small job made."""
    archive = tmp_path / "cache" / "classes.jsa"
    assert _archive_run(archive, job="big") == {"mapped": False, "training": False}
    assert not archive.exists() and not list(archive.parent.glob(".tmp-*"))
    assert _archive_run(archive) == {"mapped": False, "training": True}
    assert archive.is_file() and archive.stat().st_size > 10 * 2**20
    stamp = json.loads(ClassArchive(archive).stamp_path.read_text())
    assert stamp["size"] == archive.stat().st_size and stamp["java"] and stamp["jars"]
    assert _archive_run(archive, job="big") == {"mapped": True, "training": False}
    # another Spark (its jars) here now: the archive is trained again, but a failed run keeps the old one
    ClassArchive(archive).stamp_path.write_text(json.dumps({**stamp, "jars": "another spark"}))
    before = archive.stat().st_mtime_ns
    assert _archive_run(archive, "failed") == {"mapped": False, "training": True}
    assert archive.stat().st_mtime_ns == before and not list(archive.parent.glob(".tmp-*"))
    assert json.loads(ClassArchive(archive).stamp_path.read_text())["jars"] == "another spark"


def test_a_class_archive_is_used_only_whole_and_made_for_this_jvm_and_spark(tmp_path: Path) -> None:
    """`ClassArchive.usable`: a JVM crashes (SIGBUS) mapping a truncated archive, so a size other than the one
    recorded when it was put in place, a missing or unreadable stamp, or another JVM or Spark means train again."""
    a = ClassArchive(tmp_path / "classes.jsa")
    stamp = a.stamp()
    assert not a.usable(stamp)  # nothing there
    a.path.write_bytes(b"x" * 1000)
    assert not a.usable(stamp)  # no stamp: a run killed between the two renames
    a.stamp_path.write_text(json.dumps({**stamp, "size": 1000}))
    assert a.usable(stamp)
    assert not a.usable({**stamp, "java": "/opt/another/bin/java"})
    a.path.write_bytes(b"x" * 999)  # truncated
    assert not a.usable(stamp)
    a.stamp_path.write_text("{not json")
    assert not a.usable(stamp)
    option, training = class_archive_option(a)
    assert option.startswith(f"-XX:ArchiveClassesAtExit={tmp_path}/.tmp-classes.jsa-") and training is not None
    a.stamp_path.write_text(json.dumps({**stamp, "size": 999}))
    option, training = class_archive_option(a)
    assert option.split()[0] == f"-XX:SharedArchiveFile={a.path}" and training is None
    a.stamp_path.write_text(json.dumps({**stamp, "size": 1000}))  # not usable again: a big job does not train
    assert class_archive_option(a, train=False) == (None, None) and not list(tmp_path.glob(".tmp-*"))
    spaced = ClassArchive(tmp_path / "a dir" / "classes.jsa")
    assert class_archive_option(spaced)[0].startswith('"-XX:ArchiveClassesAtExit=')  # Spark splits on spaces


def test_class_archive_argument_names_what_is_wrong(tmp_path: Path) -> None:
    assert class_archive_arg(None, ValueError) is None and class_archive_arg("", ValueError) is None
    assert class_archive_arg(str(tmp_path / "x.jsa"), ValueError) == tmp_path / "x.jsa"
    assert class_archive_arg(f"file://{tmp_path}/x.jsa", ValueError) == tmp_path / "x.jsa"
    with pytest.raises(ValueError, match=r"--class-archive.*local file"):
        class_archive_arg("s3a://bucket/x.jsa", ValueError)
    with pytest.raises(ValueError, match=r"--class-archive.*is a directory"):
        class_archive_arg(str(tmp_path), ValueError)
