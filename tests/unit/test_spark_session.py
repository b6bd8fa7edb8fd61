"""The local session's sizing: one shuffle partition per local worker thread (docs/performance-log.md, "Step 5"), a
small job's JVM options, left to whoever else chose them ("Step 7"), hash aggregates with one map ("Step 9"). The
driver JVM's class archive ("Step 10") is tested in test_class_archive.py: its JVMs are all its own, so it runs
beside the suite's Spark unit, not in it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from spark_analytics.session import (
    CODEGEN_CACHE,
    JAVA_ENV,
    LOG_CONFIG,
    SHUFFLE_PARTITIONS,
    SMALL_JOB_JAVA_OPTIONS,
    SMALL_JOB_SHUFFLE_PARTITIONS,
    TWO_LEVEL_HASH_MAP,
    describe_failure,
    is_local_master,
    local_cores,
    log_config_option,
    shuffle_partitions,
    small_job_java_options,
)
from tests.support.spark_history import spark_session

REPO = Path(__file__).resolve().parents[2]
JVM_REPORT = """
from spark_analytics.session import build_session
spark = build_session("local[1]", app_name="kmon-test-jvm", small_job=True)
jvm = spark._jvm.java.lang.management.ManagementFactory
print("ARGS", *jvm.getRuntimeMXBean().getInputArguments())
print("GC", "|".join(b.getName() for b in jvm.getGarbageCollectorMXBeans()))
hotspot = jvm.getPlatformMXBean(spark._jvm.java.lang.Class.forName("com.sun.management.HotSpotDiagnosticMXBean"))
print("CODECACHE", hotspot.getVMOption("ReservedCodeCacheSize").getValue())
print("HEAP", *(hotspot.getVMOption(o).getValue() for o in ("InitialHeapSize", "MaxHeapSize", "MetaspaceSize")))
spark.stop()
"""


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


@pytest.mark.parametrize(("master", "small", "chosen", "partitions"), [
    # a local master the job picks: one partition per worker thread, small job or not, whatever was launched
    ("local[2]", False, {}, 2), ("local[2]", True, {}, 2), ("local[3]", True, {SHUFFLE_PARTITIONS: "50"}, 3),
    # a master the job was given, not local: a small job gets a few, a big one keeps Spark's default
    ("spark://h:7077", True, {}, SMALL_JOB_SHUFFLE_PARTITIONS), ("yarn", False, {}, None),
    # under spark-submit (no master of the job's own): the launcher's choice stays
    (None, True, {"spark.master": "spark://h:7077"}, SMALL_JOB_SHUFFLE_PARTITIONS),
    (None, True, {"spark.master": "yarn", SHUFFLE_PARTITIONS: "300"}, None),
    (None, False, {"spark.master": "k8s://h:443"}, None),
    (None, True, {"spark.master": "local[3]"}, 3), (None, True, {"spark.master": "local[1]"}, 1),
    (None, False, {"spark.master": "local[3]"}, None), (None, True, {}, SMALL_JOB_SHUFFLE_PARTITIONS),
])
def test_shuffle_partitions_by_master_job_size_and_launcher(master: str | None, small: bool,
                                                            chosen: dict[str, str], partitions: int | None) -> None:
    assert shuffle_partitions(master, small, chosen) == partitions


def test_a_small_job_runs_the_throughput_collector_and_the_client_compiler_unless_chosen_elsewhere(
        tmp_path: Path) -> None:
    gc = "-XX:+UseParallelGC"
    jit = "-XX:TieredStopAtLevel=1 -XX:ReservedCodeCacheSize=240m"  # the client compiler, and room for its code
    heap = "-XX:InitialRAMPercentage=100 -XX:MetaspaceSize=256m"  # the whole heap from the start
    every = f"{gc} {jit} {heap}"
    assert " ".join(SMALL_JOB_JAVA_OPTIONS.values()) == every
    assert small_job_java_options({}, {}) == every
    assert small_job_java_options({}, {"JAVA_TOOL_OPTIONS": "-Xss4m -Xmx2g", "_JAVA_OPTIONS": ""}) == every
    # the caller's own Java options win, whatever they hold: Spark would replace ours with them, or theirs with ours
    assert small_job_java_options({"spark.driver.extraJavaOptions": "-Dx=1"}, {}) is None
    assert small_job_java_options({"spark.driver.defaultJavaOptions": "-Dx=1"}, {}) is None
    # a collector, a compiler or a heap sizing chosen in the environment is kept (two collectors would stop the JVM
    # from starting; an initial heap of ours above a maximum of theirs too)
    for var in ("JAVA_TOOL_OPTIONS", "JDK_JAVA_OPTIONS", "_JAVA_OPTIONS"):
        assert small_job_java_options({}, {var: "-Xmx2g -XX:+UseG1GC"}) == f"{jit} {heap}"
        assert small_job_java_options({}, {var: "-XX:+UseZGC -Xss1m"}) == f"{jit} {heap}"
        assert small_job_java_options({}, {var: "-XX:TieredStopAtLevel=4"}) == f"{gc} {heap}"
        assert small_job_java_options({}, {var: "-XX:-TieredCompilation"}) == f"{gc} {heap}"
        assert small_job_java_options({}, {var: "-XX:ReservedCodeCacheSize=64m"}) == f"{gc} {heap}"
        for sized in ("-Xms512m", "-XX:InitialHeapSize=1g", "-XX:InitialRAMPercentage=5", "-XX:MinHeapSize=64m",
                      "-XX:MetaspaceSize=64m"):
            assert small_job_java_options({}, {var: sized}) == f"{gc} {jit}"
        assert small_job_java_options({}, {var: "-XX:+UseSerialGC -XX:TieredStopAtLevel=3 -Xms1g"}) is None


@pytest.mark.parametrize("line", ["spark.driver.extraJavaOptions -Djava.security.krb5.conf=/etc/krb5.conf",
                                  "  spark.driver.defaultJavaOptions=-Dx=1", "spark.driver.extraJavaOptions: -Dx"])
def test_java_options_in_spark_defaults_are_not_replaced(tmp_path: Path, line: str) -> None:
    conf = tmp_path / "spark-defaults.conf"
    conf.write_text(f"# an administrator's settings\nspark.master local[2]\n{line}\n")
    assert small_job_java_options({}, {"SPARK_CONF_DIR": str(tmp_path)}) is None
    (tmp_path / "home" / "conf").mkdir(parents=True)
    conf.rename(tmp_path / "home" / "conf" / "spark-defaults.conf")
    assert small_job_java_options({}, {"SPARK_HOME": str(tmp_path / "home")}) is None
    # commented out, or another key: ours apply
    (tmp_path / "home" / "conf" / "spark-defaults.conf").write_text(f"# {line}\n!{line}\nspark.driver.memory 2g\n")
    assert small_job_java_options({}, {"SPARK_HOME": str(tmp_path / "home")}) is not None
    assert small_job_java_options({}, {"SPARK_CONF_DIR": str(tmp_path / "missing")}) is not None


def test_the_driver_logs_by_our_configuration_unless_one_is_chosen_elsewhere(tmp_path: Path,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """Spark's default profile printed four lines into every cron mail; an administrator's logging wins over ours."""
    ours = f"-Dlog4j2.configurationFile={LOG_CONFIG.as_uri()}"
    assert log_config_option({}, {}) == ours and LOG_CONFIG.is_file()
    props = dict(line.split(" = ", 1) for line in LOG_CONFIG.read_text().splitlines() if " = " in line)
    assert props["rootLogger.level"] == "warn" and props["appender.console.target"] == "SYSTEM_ERR"
    assert props["logger.nativecode.name"] == "org.apache.hadoop.util.NativeCodeLoader"
    # chosen elsewhere: the driver's Java options, the property in the JVM's environment, a file in the conf dir
    assert log_config_option({"spark.driver.extraJavaOptions": "-Dx=1"}, {}) is None
    for var in JAVA_ENV:
        assert log_config_option({}, {var: "-Xss4m -Dlog4j2.configurationFile=/etc/l.xml"}) is None
        assert log_config_option({}, {var: "-Dlog4j.configurationFile=/etc/l.properties"}) is None
        assert log_config_option({}, {var: "-Xss4m"}) == ours
    for name in ("log4j2.properties", "log4j2.xml"):
        (tmp_path / "conf").mkdir(exist_ok=True)
        (tmp_path / "conf" / name).write_text("rootLogger.level = info\n")
        assert log_config_option({}, {"SPARK_CONF_DIR": str(tmp_path / "conf")}) is None
        assert log_config_option({}, {"SPARK_HOME": str(tmp_path)}) is None
        (tmp_path / "conf" / name).unlink()
    (tmp_path / "conf" / "log4j2.properties.template").write_text("")  # Spark's template is not a configuration
    assert log_config_option({}, {"SPARK_CONF_DIR": str(tmp_path / "conf")}) == ours
    # a path with a space stays one option once Spark splits extraJavaOptions on whitespace
    spaced = tmp_path / "a venv" / "log4j2.properties"
    spaced.parent.mkdir()
    spaced.write_text("")
    monkeypatch.setattr("spark_analytics.session.LOG_CONFIG", spaced)
    assert " " not in log_config_option({}, {}) and "a%20venv" in log_config_option({}, {})


def test_a_small_jobs_jvm_starts_with_its_options_and_a_default_session_without() -> None:
    """The options must reach the JVM PySpark launches, not only the session's configuration: its collectors are
    the throughput collector's. (A JVM of its own: PySpark starts one per process.)"""
    env = {k: v for k, v in os.environ.items() if k not in (*JAVA_ENV, "SPARK_CONF_DIR", "PYSPARK_GATEWAY_PORT")}
    r = subprocess.run([sys.executable, "-c", JVM_REPORT], capture_output=True, text=True, timeout=180, cwd=REPO,
                       env=dict(env, PYTHONPATH=str(REPO)), check=False)
    assert r.returncode == 0, r.stderr[-2000:]
    lines = {line.split(" ", 1)[0]: line.split()[1:] for line in r.stdout.splitlines()
             if line.split(" ", 1)[0] in ("ARGS", "GC", "CODECACHE", "HEAP")}
    # the driver logs by our configuration: none of the lines Spark's default profile prints at every start
    assert f"-Dlog4j2.configurationFile={LOG_CONFIG.as_uri()}" in lines["ARGS"]
    for noise in ("Using Spark's default log4j profile", "Setting default log level", "NativeCodeLoader"):
        assert noise not in r.stderr, r.stderr[-2000:]
    assert {"-XX:+UseParallelGC", "-XX:TieredStopAtLevel=1", "-XX:ReservedCodeCacheSize=240m",
            "-XX:InitialRAMPercentage=100", "-XX:MetaspaceSize=256m"} <= set(lines["ARGS"])
    assert set(" ".join(lines["GC"]).split("|")) == {"PS Scavenge", "PS MarkSweep"}
    # as the JVM took it: without the size, the client compiler alone gets 48 MB (50331648), which a report from a
    # month of roll-ups filled (docs/performance-log.md, "Step 11")
    assert lines["CODECACHE"] == [str(240 * 2**20)]
    # the heap starts at the maximum Spark gave the driver (1 GB by default; the JVM caps the initial size there,
    # so no -Xms of ours can exceed it), and class metadata first triggers a collection at 256 MB ("Step 14")
    initial, maximum, metaspace = map(int, lines["HEAP"])
    assert initial == maximum == 2**30 and metaspace == 256 * 2**20
    # the test session (built without small_job, long-lived) keeps the JVM's defaults (G1 on a machine of 2 cores
    # and 2 GB or more, else the serial collector), both compilers
    jvm = spark_session()._jvm.java.lang.management.ManagementFactory  # type: ignore[attr-defined]
    assert not {"-XX:+UseParallelGC", "-XX:TieredStopAtLevel=1"} & set(jvm.getRuntimeMXBean().getInputArguments())
    assert not any(b.getName().startswith("PS ") for b in jvm.getGarbageCollectorMXBeans())


SUBMITTED = """
import json
from spark_analytics.session import CODEGEN_CACHE, TWO_LEVEL_HASH_MAP, build_session
spark = build_session(app_name="kmon-submit-test", small_job=True)
keys = ["spark.sql.objectHashAggregate.sortBased.fallbackThreshold", "spark.sql.session.timeZone",
        TWO_LEVEL_HASH_MAP, CODEGEN_CACHE[0], "spark.master", "spark.sql.shuffle.partitions"]
print("CONF " + json.dumps({k: spark.conf.get(k) for k in keys}))
spark.stop()
"""


def test_under_spark_submit_its_conf_keeps_the_tuning_but_not_the_time_zone(tmp_path: Path) -> None:
    """The README says spark-submit's ``--conf`` rules on a cluster; PySpark applies a session builder's options
    last, so the jobs' own tuning used to override it. Run through the real spark-submit PySpark ships."""
    script = tmp_path / "submitted.py"
    script.write_text(SUBMITTED)
    submit = Path(__import__("pyspark").__file__).parent / "bin" / "spark-submit"
    env = {k: v for k, v in os.environ.items() if k not in (*JAVA_ENV, "SPARK_CONF_DIR", "PYSPARK_GATEWAY_PORT")}
    env.update(PYTHONPATH=str(REPO), PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable,
               SPARK_LOCAL_IP="127.0.0.1")
    r = subprocess.run([str(submit), "--master", "local[3]", "--conf", "spark.driver.host=127.0.0.1",
                        "--conf", "spark.driver.bindAddress=127.0.0.1", "--conf", "spark.ui.enabled=false",
                        "--conf", "spark.sql.objectHashAggregate.sortBased.fallbackThreshold=77",
                        "--conf", "spark.sql.session.timeZone=America/New_York", str(script)],
                       capture_output=True, text=True, timeout=180, cwd=REPO, env=env, check=False)
    assert r.returncode == 0, r.stderr[-2000:]
    conf = json.loads(next(line for line in r.stdout.splitlines() if line.startswith("CONF "))[5:])
    assert conf["spark.sql.objectHashAggregate.sortBased.fallbackThreshold"] == "77"  # spark-submit's
    assert conf["spark.master"] == "local[3]"
    assert conf["spark.sql.shuffle.partitions"] == "3"  # a small job: one a thread of spark-submit's local master
    assert conf["spark.sql.session.timeZone"] == "UTC"  # the jobs' figures need it
    assert conf[TWO_LEVEL_HASH_MAP] == "false" and conf[CODEGEN_CACHE[0]] == CODEGEN_CACHE[1]  # not given: ours


def test_the_sessions_hash_aggregates_probe_one_map_not_two() -> None:
    """The generated aggregate code has no first-level "fast" hash map: the consumer cells have more keys a task than
    it holds, and every poll then probed two maps. Read from the code Spark generates, so a setting that no longer
    reaches the planner fails here."""
    from pyspark.sql import functions as F

    spark = spark_session()

    def generated() -> str:
        df = (spark.range(1000).select((F.col("id") % 7).cast("string").alias("k"), "id")
              .groupBy("k").agg(F.count(F.lit(1)), F.max("id")))
        assert len(df.collect()) == 7  # AQE plans the final stages when they run
        return str(spark._jvm.PythonSQLUtils.explainString(df._jdf.queryExecution(), "codegen"))  # type: ignore[attr-defined]

    assert spark.conf.get(TWO_LEVEL_HASH_MAP) == "false"
    before = spark.conf.get("spark.sql.codegen.wholeStage")
    spark.conf.set("spark.sql.codegen.wholeStage", "true")  # the test session turns it off (tiny inputs)
    try:
        ours = generated()
        spark.conf.set(TWO_LEVEL_HASH_MAP, "true")
        sparks = generated()
    finally:
        spark.conf.set(TWO_LEVEL_HASH_MAP, "false")
        spark.conf.set("spark.sql.codegen.wholeStage", before)
    assert "HashAggregate" in ours and "FastHashMap" not in ours
    assert "FastHashMap" in sparks  # Spark's default, so the check above can fail


def test_the_session_compiles_a_generated_class_once_not_again_after_a_hundred_others() -> None:
    """A report compiles ~520 classes for its plans; Spark keeps the last 100, so a session running it again (and a
    report reusing one) compiled most again. 150 distinct plans, each compiled (the codegen explain compiles what it
    shows), then all again: the second pass compiles nothing. With Spark's default it compiles all 150 again."""
    from pyspark.sql import functions as F

    spark = spark_session()
    jvm = spark._jvm  # type: ignore[attr-defined]
    compiles = jvm.org.apache.spark.metrics.source.CodegenMetrics.METRIC_COMPILATION_TIME()
    plans = [spark.range(3).select((F.col("id") * (i + 7919) - 104729).alias(f"x{i}")) for i in range(150)]

    def compile_all() -> int:
        before = compiles.getCount()
        for df in plans:
            assert "WholeStageCodegen" in str(jvm.PythonSQLUtils.explainString(df._jdf.queryExecution(), "codegen"))
        return compiles.getCount() - before

    assert spark.conf.get(CODEGEN_CACHE[0]) == CODEGEN_CACHE[1]
    before = spark.conf.get("spark.sql.codegen.wholeStage")
    spark.conf.set("spark.sql.codegen.wholeStage", "true")  # the test session turns it off (tiny inputs)
    try:
        first, again = compile_all(), compile_all()
    finally:
        spark.conf.set("spark.sql.codegen.wholeStage", before)
    assert first >= 150 and again == 0


def test_a_failed_read_names_the_file_even_where_spark_only_says_await_result(tmp_path: Path) -> None:
    """A table collected as Arrow that meets a damaged Parquet file fails with "Exception thrown in awaitResult:";
    the file is named only in a cause deep in the Java trace, which the ``failed:`` line now carries."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    from py4j.protocol import Py4JJavaError

    from tests.support.damage import damage_pages

    path = tmp_path / "damaged.parquet"
    pq.write_table(pa.table({"a": list(range(1000)), "s": [f"x{i % 7}" for i in range(1000)]}), path)
    damage_pages(path)  # the first column's pages; the footer intact
    spark = spark_session()
    with pytest.raises(Py4JJavaError) as got:
        spark.read.parquet(str(path)).toArrow()
    line = describe_failure(got.value)
    assert "Exception thrown in awaitResult:" in line, line
    assert line.endswith(f"(caused by org.apache.spark.SparkException: [FAILED_READ_FILE.NO_HINT] Encountered error "
                         f"while reading file file://{path}.  SQLSTATE: KD001)"), line
    with pytest.raises(Py4JJavaError) as direct:  # where the Java line names the file itself, no cause is added
        spark.read.parquet(str(path)).collect()
    assert "caused by" not in describe_failure(direct.value) and str(path) in describe_failure(direct.value)


def test_a_failure_names_the_java_exception_and_the_error_a_clean_up_hid() -> None:
    """A job's ``failed:`` line (`describe_failure`): from a real Java exception through Py4J, whose own first line
    names only the Py4J call, the Java exception's line too; from an error raised in a ``finally`` while another
    was on its way, both (without ``--verbose`` the first was lost: docs/performance-log.md, *Step 11*)."""
    from py4j.protocol import Py4JJavaError

    spark = spark_session()
    with pytest.raises(Py4JJavaError) as got:
        spark._jvm.java.util.ArrayList().get(5)  # type: ignore[attr-defined]  # not one PySpark converts
    line = describe_failure(got.value)
    assert line.startswith("Py4JJavaError: An error occurred while calling ")
    assert line.endswith(". java.lang.IndexOutOfBoundsException: Index 5 out of bounds for length 0")

    def report() -> None:
        try:
            raise ValueError("the week has no polls\nsecond line")
        finally:
            raise RuntimeError("could not unpersist")

    with pytest.raises(RuntimeError) as chained:
        report()
    assert describe_failure(chained.value) == (
        "RuntimeError: could not unpersist (raised while handling ValueError: the week has no polls)")
    try:
        raise KeyError("a") from None
    except KeyError as e:
        assert describe_failure(e) == "KeyError: 'a'"
    assert len(describe_failure(RuntimeError("x" * 2000), limit=50)) == len("RuntimeError: ") + 50
