"""`bench.memory`: what the Spark bench prints as the JVM's RSS and as every process under it."""

from __future__ import annotations

import pytest

from bench.memory import Sampler, jvm_forks, kind_of


@pytest.mark.parametrize(("cmdline", "name", "kind"), [
    (["/usr/lib/jvm/java-17/bin/java", "-cp", "/x/*", "-Xmx1g", "org.apache.spark.deploy.SparkSubmit", "--conf",
      "a=b", "pyspark-shell"], "java", "java SparkSubmit"),
    (["/work/.venv/bin/python3.11", "-m", "pyspark.daemon"], "python3.11", "python -m pyspark.daemon"),
    (["/usr/bin/python3", "-u", "-m", "spark_analytics.weekly_report", "--week", "2026-W40"], "python3",
     "python -m spark_analytics.weekly_report"),
    (["python", "-c", "print(1)"], "python", "python -c"),
    (["python", "script.py"], "python", "python"),
    (["java", "-version"], "java", "java"),
    ([], "bash", "bash"),  # a zombie or another user's process: no command line
    (["/bin/bash", "/x/spark-submit"], "bash", "bash"),
])
def test_kind_of_a_process_from_its_command_line(cmdline: list[str], name: str, kind: str) -> None:
    assert kind_of(cmdline, name) == kind


def test_the_sampler_keeps_the_largest_child_apart_from_all_of_them() -> None:
    """The bench's "JVM RSS" is the largest process under it; the sum of them all is printed apart. A process of
    this test's own (so that no other child of the test's worker counts) holds two children, ~60 MB and ~160 MB
    resident: the largest is the bigger one, the sum both, made of two processes of one kind."""
    import subprocess
    import sys

    import psutil

    hold = ("import sys, time; b = bytearray(int(sys.argv[1]) * 2**20); b[::4096] = b'x' * len(b[::4096]); "
            "print('ready', flush=True); time.sleep(60)")
    parent = ("import subprocess, sys, time\n"
              f"kids = [subprocess.Popen([sys.executable, '-c', {hold!r}, mb], stdout=subprocess.PIPE, text=True)\n"
              "        for mb in ('60', '160')]\n"
              "assert all(k.stdout.readline().strip() == 'ready' for k in kids)\n"
              "print('ready', flush=True)\n"
              "time.sleep(60)\n")
    holder = subprocess.Popen([sys.executable, "-c", parent], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "ready"
        sampler = Sampler()
        sampler.me = psutil.Process(holder.pid)
        sampler.reset()
        sampler.sample()
        assert 160 * 2**20 < sampler.peak_child < 220 * 2**20
        assert sampler.peak_children >= sampler.peak_child + 60 * 2**20
        # what made the sum: two processes of one kind, all of it
        assert list(sampler.peak_parts) == ["python -c"]
        assert sampler.peak_parts["python -c"][0] == 2 and sampler.peak_parts["python -c"][1] == sampler.peak_children
        assert sampler.parts().startswith("python -c x2 ")
    finally:
        for p in psutil.Process(holder.pid).children(recursive=True):
            p.kill()
        holder.kill()
        holder.wait()


def test_a_jvms_fork_in_flight_is_told_apart_from_processes_of_its_own() -> None:
    """Seen in a roll-up (docs/performance-log.md, "Step 21"): the JVM (pid 10, under the bench's Python) forks
    itself to run ``chmod``; for a moment pid 30 is a second ``java SparkSubmit`` under it, with the same pages."""
    procs = [(10, 1, "java SparkSubmit"), (11, 10, "bash"), (12, 11, "python -m pyspark.daemon"),
             (13, 12, "python -m pyspark.daemon"),  # a worker the daemon forked: a process of its own, counted
             (20, 10, "jspawnhelper"), (21, 10, "chmod"), (30, 10, "java SparkSubmit"),
             (40, 1, "python -m spark_analytics.weekly_report"), (41, 40, "java SparkSubmit"),  # a CLI's own JVM
             (50, 41, "java Main")]  # another JVM the JVM started (Spark's launcher): not a fork of it
    assert jvm_forks(procs) == {30}
    assert jvm_forks([]) == set() and jvm_forks([(30, 10, "java SparkSubmit")]) == set()  # its parent unseen
