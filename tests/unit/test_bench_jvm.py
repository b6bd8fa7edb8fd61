"""bench/bench_jvm.py splits a Spark JVM's CPU by kind of thread from ``/proc``; its figures mean something only if
the kinds match the threads a real driver JVM runs. Checked on the test suite's own session: the JIT's compiler
threads are ``jit``, a job's task threads are ``tasks`` and carry CPU after a job, the collector's are ``gc``; and
the pure parts (the split between two samples, the medians, the ``--config`` parsing) on their edge cases."""

from __future__ import annotations

import pytest

from bench import bench_jvm
from tests.support.spark_history import spark_session


def test_the_kinds_match_a_real_driver_jvm() -> None:
    spark = spark_session()
    pid = int(spark.sparkContext._jvm.ProcessHandle.current().pid())
    before = bench_jvm._threads(pid)
    spark.range(0, 3_000_000, numPartitions=2).selectExpr("sum(id * id % 7)").collect()  # task threads with CPU
    after = bench_jvm._threads(pid)
    kinds = {bench_jvm.thread_kind(name) for name, _ in after.values()}
    assert {"jit", "tasks", "gc", "driver"} <= kinds, sorted(name for name, _ in after.values())
    assert any(name.startswith(("C1 CompilerThre", "C2 CompilerThre")) and bench_jvm.thread_kind(name) == "jit"
               for name, _ in after.values())
    split = bench_jvm.cpu_by_kind(before, after, total=10_000.0)
    assert split["tasks"] > 0  # the job ran on the task threads
    assert split["gone"] == pytest.approx(10_000.0 - sum(v for k, v in split.items() if k != "gone"))


def test_thread_kinds_by_name() -> None:
    assert bench_jvm.thread_kind("C2 CompilerThre") == "jit"
    assert bench_jvm.thread_kind("C1 CompilerThre") == "jit"
    assert bench_jvm.thread_kind("Sweeper thread") == "jit"
    assert bench_jvm.thread_kind("Executor task l") == "tasks"
    assert bench_jvm.thread_kind("GC Thread#1") == "gc"
    assert bench_jvm.thread_kind("G1 Conc#0") == "gc"
    assert bench_jvm.thread_kind("VM Thread") == "gc"
    assert bench_jvm.thread_kind("Thread-3") == "driver"
    assert bench_jvm.thread_kind("dag-scheduler-e") == "driver"


def test_cpu_by_kind_counts_new_threads_from_zero_and_the_rest_as_gone() -> None:
    before = {1: ("C2 CompilerThre", 5.0), 2: ("Executor task l", 1.0), 3: ("Thread-3", 2.0)}
    after = {1: ("C2 CompilerThre", 7.5), 2: ("Executor task l", 4.0), 4: ("Executor task l", 0.5),
             5: ("GC Thread#0", 0.25)}  # thread 3 ended; 4 and 5 started
    split = bench_jvm.cpu_by_kind(before, after, total=10.0)
    assert split == {"jit": 2.5, "tasks": 3.5, "gc": 0.25, "driver": 0.0, "gone": 3.75}
    # a process total below the live threads' sum (sampling skew) never gives negative "gone"
    assert bench_jvm.cpu_by_kind(before, after, total=1.0)["gone"] == 0.0


def test_summarise_leaves_out_the_first_run() -> None:
    runs = [{"wall": 90.0, "jit": 40.0}, {"wall": 20.0, "jit": 10.0}, {"wall": 30.0, "jit": 12.0},
            {"wall": 25.0, "jit": 11.0}]
    assert bench_jvm.summarise(runs) == {"wall": 25.0, "jit": 11.0}
    assert bench_jvm.summarise(runs[:1]) == {"wall": 90.0, "jit": 40.0}


def test_parse_configs() -> None:
    assert bench_jvm.parse_configs(["defaults=", "c2=-XX:-TieredCompilation -Xss4m"]) == {
        "defaults": "", "c2": "-XX:-TieredCompilation -Xss4m"}
    with pytest.raises(ValueError, match="NAME=JAVA_OPTIONS"):
        bench_jvm.parse_configs(["-XX:-TieredCompilation"])
    with pytest.raises(ValueError, match="given twice"):
        bench_jvm.parse_configs(["a=", "a=-Xss4m"])
