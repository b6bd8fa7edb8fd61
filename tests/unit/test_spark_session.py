"""The local session's sizing: one shuffle partition per local worker thread (docs/weekly-report.md, "Step 5"), and
its JVM's collector (the throughput collector unless the caller or the environment chose one: "Step 6")."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from spark_analytics.session import LOCAL_GC, is_local_master, local_cores, local_java_options
from tests.support.spark_history import spark_session


@pytest.mark.parametrize(("master", "cores"), [
    ("local", 1), ("local[1]", 1), ("local[2]", 2), ("local[16]", 16), ("local[4,3]", 4), ("local[4, 3]", 4),
    ("local-cluster[2,3,1024]", 6), ("local-cluster[ 1 , 2 , 512 ]", 2)])
def test_local_cores_reads_the_worker_threads_of_a_local_master(master: str, cores: int) -> None:
    assert is_local_master(master)
    assert local_cores(master) == cores


def test_local_star_and_unknown_local_forms_use_every_core() -> None:
    every = os.cpu_count() or 1
    assert local_cores("local[*]") == every
    assert local_cores("local[*,2]") == every
    assert local_cores("local-cluster[bad]") == every  # Spark would refuse it; never fewer partitions than cores


def test_a_local_session_runs_the_throughput_collector_unless_one_was_chosen_elsewhere() -> None:
    assert local_java_options({}, {}) == LOCAL_GC == "-XX:+UseParallelGC"
    assert local_java_options({}, {"JAVA_TOOL_OPTIONS": "-Xss4m", "_JAVA_OPTIONS": ""}) == LOCAL_GC
    # the caller's own options win, whatever they hold (Spark would replace ours with them anyway)
    assert local_java_options({"spark.driver.extraJavaOptions": "-Dx=1"}, {}) is None
    assert local_java_options({"spark.driver.defaultJavaOptions": "-Dx=1"}, {}) is None
    # a collector picked in the environment: a second one would stop the JVM from starting
    for var in ("JAVA_TOOL_OPTIONS", "JDK_JAVA_OPTIONS", "_JAVA_OPTIONS"):
        assert local_java_options({}, {var: "-Xmx2g -XX:+UseG1GC"}) is None
        assert local_java_options({}, {var: "-XX:+UseZGC -Xss1m"}) is None


@pytest.mark.parametrize("line", ["spark.driver.extraJavaOptions -Djava.security.krb5.conf=/etc/krb5.conf",
                                  "  spark.driver.defaultJavaOptions=-Dx=1", "spark.driver.extraJavaOptions: -Dx"])
def test_java_options_in_spark_defaults_are_not_replaced(tmp_path: Path, line: str) -> None:
    """Spark would let the session's options replace those of spark-defaults.conf: an administrator's Kerberos
    or trust-store settings must not be lost for a faster collector."""
    (tmp_path / "spark-defaults.conf").write_text(f"# defaults\nspark.master local[2]\n{line}\n")
    assert local_java_options({}, {"SPARK_CONF_DIR": str(tmp_path)}) is None
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "spark-defaults.conf").write_text(f"{line}\n")
    assert local_java_options({}, {"SPARK_HOME": str(tmp_path)}) is None
    # commented out, or another key: ours apply
    (tmp_path / "spark-defaults.conf").write_text(f"#{line}\n! {line}\nspark.executor.extraJavaOptions -Dx\n")
    assert local_java_options({}, {"SPARK_CONF_DIR": str(tmp_path)}) == LOCAL_GC
    assert local_java_options({}, {"SPARK_CONF_DIR": str(tmp_path / "missing")}) == LOCAL_GC


def test_the_test_sessions_jvm_runs_the_collector_build_session_asked_for() -> None:
    """The option must reach the JVM PySpark starts (not only the session's configuration)."""
    spark = spark_session()
    jvm = spark.sparkContext._jvm
    collectors = [b.getName() for b in jvm.java.lang.management.ManagementFactory.getGarbageCollectorMXBeans()]
    assert sorted(collectors) == ["PS MarkSweep", "PS Scavenge"], collectors  # G1 would be "G1 Young/Old Generation"
