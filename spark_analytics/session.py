"""The SparkSession the jobs (`weekly_report`, `rollup`) run in: local and loopback-bound unless spark-submit chose.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import re
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from collectors.outputs.atomic import publish

log = logging.getLogger("spark_analytics.session")

OBJECT_HASH_AGG_KEYS = 4096
"""Keys (group-topics) per task the percentile aggregates keep in hash maps before sorting the rest."""

TWO_LEVEL_HASH_MAP = "spark.sql.codegen.aggregate.map.twolevel.enabled"
"""Spark's generated hash aggregates first probe a small map (2^16 entries) for aggregates with buffers, then the
main one. Turned off: where a task has more keys than that (the consumer cells of one pass over the polls, ~150 k
on the bench week, 750 k at 25,000 partitions), every row paid for both probes — ~2 s of that ~10 s pass; where it
has few, the main map alone is as fast."""

CODEGEN_CACHE = ("spark.sql.codegen.cache.maxEntries", "1000")
"""Spark keeps the last 100 classes it generated and compiled (Janino) for a plan's stages and expressions; a report
compiles ~520 distinct ones (~580 with the default, which drops some before they are used again), ~20 ms each in a
cold JVM: 10-13 s of compiling in a cold report from a month of roll-ups that took ~40 s (docs/performance-log.md,
"Step 13"). With room for them all a JVM compiles each once, and a session that runs the report again (the bench, a
notebook, the tests) compiles almost none. A static setting, so set when the session is built; the code cache's
peak stayed at ~54 MB."""


TUNING: dict[str, str] = {
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    # the percentile aggregates keep one hash map per key; past 128 keys per task (Spark's default) they fall back
    # to sorting every input row by key (docs/performance-log.md, "Step 1")
    "spark.sql.objectHashAggregate.sortBased.fallbackThreshold": str(OBJECT_HASH_AGG_KEYS),
    # one hash map per aggregate, not two: the consumer cells (~150 k keys a task on the bench week) overflow the
    # small first-level map, and every poll then probes both (docs/performance-log.md, "Step 9")
    TWO_LEVEL_HASH_MAP: "false",
    CODEGEN_CACHE[0]: CODEGEN_CACHE[1],
}
"""The jobs' Spark settings that only tune speed: under spark-submit, a value its ``--conf`` or
``spark-defaults.conf`` gives for one of them is kept (`build_session`). ``spark.sql.session.timeZone`` is not among
them: the jobs need UTC and always set it."""


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


SHUFFLE_PARTITIONS = "spark.sql.shuffle.partitions"
SMALL_JOB_SHUFFLE_PARTITIONS = 8
"""Shuffle partitions of a small job (`shuffle_partitions`) on a master the job did not pick itself as local: a
cluster, or whatever spark-submit names. With Spark's default of 200 every task before a shuffle splits its rows
200 ways and the next stage fetches 200 blocks a task, however few the rows (adaptive execution merges partitions
only after that): ~0.2 s more for each small aggregate, and a report runs ~100. On a 2-core standalone cluster the
bench week's report from its roll-ups computed in 73-83 s with 200 against 46-51 s with 8 (2 and 16 within that
noise), a day's roll-up took 88-91 s against 28-30 s (docs/performance-log.md, "Step 26"). A small job's shuffles
carry at most a few MiB, so a handful of partitions loses no parallelism."""


def shuffle_partitions(master: str | None, small_job: bool, chosen: Mapping[str, str]) -> int | None:
    """The ``spark.sql.shuffle.partitions`` the job sets (None: Spark's default or the launcher's stays).

    `master`: the job's own ``--master`` (None under spark-submit, or for local[*] picked by default: see
    `build_session`); `chosen`: what spark-submit's ``--conf`` and ``spark-defaults.conf`` set (`launcher_settings`).
    A local master the job picks gets one partition per worker thread, as always. A small job elsewhere gets
    `SMALL_JOB_SHUFFLE_PARTITIONS` (one per thread again when spark-submit's master is local) unless the launcher
    chose a value. A big job elsewhere is left alone: its shuffles may carry raw rows, which the cluster's own
    setting should size (docs/weekly-report.md, "On a Spark cluster")."""
    if master is not None and master.startswith("local"):
        return local_cores(master)
    if not small_job or SHUFFLE_PARTITIONS in chosen:
        return None
    launched = chosen.get("spark.master", "")
    return local_cores(launched) if launched.startswith("local") else SMALL_JOB_SHUFFLE_PARTITIONS


SMALL_JOB_JAVA_OPTIONS: dict[str, str] = {
    "gc": "-XX:+UseParallelGC",
    "jit": "-XX:TieredStopAtLevel=1 -XX:ReservedCodeCacheSize=240m",
    "heap": "-XX:InitialRAMPercentage=100 -XX:MetaspaceSize=256m",
}
"""The driver JVM of a local session whose job reads little to aggregate (a report from a small fleet's daily
roll-ups or of a small history, a day's roll-up of it: `rollup.SMALL_JOB_BYTES`): the throughput collector and the
client compiler only. Such a job runs ~35 small queries once, in a fresh process, and is over before G1's
concurrent threads and the optimising compiler pay back on 2 cores. The CLI as a weekly job runs it, 2 cores
(docs/performance-log.md, "Step 7"): from the bench week's roll-ups 24.1 -> 18.9 s
(median of 3), the demo's history 16.9 -> 12.7 s; from the bench week's raw rows the two are even. On many raw rows
each option costs: the collector made the 25,000-partition report from the history ~19 % slower, the client
compiler the warm big aggregates ~15 % ("Step 6"); such jobs keep the JVM's defaults. Keyed by what each option
chooses, so that one chosen elsewhere is left alone.

The code cache is sized with the compiler: with the client compiler only, the JVM reserves 48 MB for compiled code
instead of the 240 MB it reserves with both, and a report from a month of roll-ups (last week computed too) filled it
in every run — the JVM then stops compiling ("CodeCache is full. Compiler has been disabled") and runs the rest
interpreted, and once in ~20 runs an executor thread died of "Out of space in CodeCache for adapters", which failed
the report (docs/performance-log.md, "Step 11"). 240 MB is what a default JVM reserves (address space; memory is used
only as code is compiled).

The heap starts at its maximum (the initial size a share of the machine's memory, which the JVM caps at the maximum
heap Spark gives it, whatever that is) and class metadata may reach 256 MB before it triggers a collection: a cold
report from a month of roll-ups grew its heap from ~380 MB and paid three full collections for it (~1 s of stopped
threads; one because the classes Spark generates filled the metadata's first 21 MB), and none with these, its
collections' pauses 1.8-2.1 s -> 1.1 s ("Step 14"); the JVM's resident memory ~130 MB more (1.23 GB)."""
_CHOSEN_IN_ENV: dict[str, str] = {
    "gc": r"-XX:[+-]Use\w*GC\b",
    "jit": r"-XX:(?:TieredStopAtLevel=|[+-]TieredCompilation\b|ReservedCodeCacheSize=)",
    "heap": r"-Xms\d|-XX:(?:InitialHeapSize|InitialRAMPercentage|MinHeapSize|MetaspaceSize)=",
}
JAVA_ENV = ("JAVA_TOOL_OPTIONS", "JDK_JAVA_OPTIONS", "_JAVA_OPTIONS")
"""Where else a JVM takes options from: what is chosen there wins (and two collectors stop the JVM)."""
JAVA_OPTION_KEYS = ("spark.driver.extraJavaOptions", "spark.driver.defaultJavaOptions")


def java_options_chosen(conf: Mapping[str, str], env: Mapping[str, str] = os.environ) -> bool:
    """Whether the caller's `conf` or ``spark-defaults.conf`` (in ``SPARK_CONF_DIR`` or ``SPARK_HOME/conf``) sets the
    driver's Java options: then the jobs add none of theirs, which would replace them (an administrator's Kerberos or
    trust-store options must not be lost for a faster start)."""
    return any(k in conf for k in JAVA_OPTION_KEYS) or _defaults_set_java_options(env)


def small_job_java_options(conf: Mapping[str, str], env: Mapping[str, str] = os.environ) -> str | None:
    """The driver's extra Java options for a local small job: `SMALL_JOB_JAVA_OPTIONS`, without what the environment
    already chooses (`JAVA_ENV`); none at all where `java_options_chosen`."""
    if java_options_chosen(conf, env):
        return None
    chosen = " ".join(env.get(k, "") for k in JAVA_ENV)
    keep = [opt for what, opt in SMALL_JOB_JAVA_OPTIONS.items() if not re.search(_CHOSEN_IN_ENV[what], chosen)]
    return " ".join(keep) or None


LOG_CONFIG = Path(__file__).with_name("log4j2.properties")
"""The driver's log configuration for a local session the jobs start (`log_config_option`): Spark's default without
the four lines it prints at every start."""
LOG_CONFIG_FILES = ("log4j2.properties", "log4j2.xml", "log4j2.yaml", "log4j2.yml", "log4j2.json")
"""What log4j2 finds on the class path, where Spark puts its configuration directory."""
_LOG_CONFIG_CHOSEN = r"-Dlog4j2?\.configurationFile="


def log_config_option(conf: Mapping[str, str], env: Mapping[str, str] = os.environ) -> str | None:
    """``-Dlog4j2.configurationFile=<LOG_CONFIG>`` for the driver of a local session, or None where a log
    configuration or the driver's Java options are chosen elsewhere: `java_options_chosen`, a log4j2 file in the
    configuration directory (``SPARK_CONF_DIR``, ``SPARK_HOME/conf``) or the property in `JAVA_ENV`. An
    administrator's logging is never replaced to save a cron mail four lines. A file URI, so a path with spaces
    survives Spark's splitting of the options."""
    if java_options_chosen(conf, env) or re.search(_LOG_CONFIG_CHOSEN, " ".join(env.get(k, "") for k in JAVA_ENV)):
        return None
    if any((Path(d) / name).is_file() for d in _conf_dirs(env) for name in LOG_CONFIG_FILES):
        return None
    return f"-Dlog4j2.configurationFile={LOG_CONFIG.as_uri()}" if LOG_CONFIG.is_file() else None


def _conf_dirs(env: Mapping[str, str]) -> list[str]:
    """The configuration directories a launch may use, ``SPARK_CONF_DIR`` and ``SPARK_HOME/conf``: both are
    looked at, whichever is set (spark-submit reads ``spark-defaults.conf`` there and puts it on the class path)."""
    dirs = [env.get("SPARK_CONF_DIR")] + ([str(Path(env["SPARK_HOME"]) / "conf")] if env.get("SPARK_HOME") else [])
    return [d for d in dirs if d]


def _defaults_set_java_options(env: Mapping[str, str]) -> bool:
    for d in _conf_dirs(env):
        try:
            lines = (Path(d) / "spark-defaults.conf").read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError:
            continue
        # a Java properties file: "key value", "key=value" or "key: value"; "#" and "!" start comments
        keys = {m.group(1) for line in lines if (m := re.match(r"\s*([^\s=:#!][^\s=:]*)", line))}
        if keys & set(JAVA_OPTION_KEYS):
            return True
    return False


CLASS_ARCHIVE_ENV = "KMON_CLASS_ARCHIVE"
"""Where the jobs keep the driver JVM's class-data sharing archive, when set (``--class-archive`` overrides it)."""
QUIET_CDS = "-Xlog:cds=off,cds+dynamic=off"
"""The JVM warns of every class it cannot archive (thousands: Janino's signed jar, generated accessors) and of an
archive it cannot use (another JVM or classpath): neither is the user's business, since it then runs without."""


@dataclass(frozen=True)
class ClassArchive:
    """A class-data sharing archive of the driver JVM (``-XX:SharedArchiveFile``) that the jobs make themselves.

    A cold run spends seconds loading and verifying ~27,000 of Spark's classes from its jars; mapped from an archive
    they load in a fraction of that: session start 3.3 -> 1.8 s and ~0.5-1 s of the first queries on this machine
    (docs/performance-log.md, "Step 10"). The archive (~190 MB) is tied to one JVM build and one classpath, so the
    first run of a small job with a `path` not made for the JVM and Spark here (`stamp`) trains it: the JVM writes
    it at exit (``-XX:ArchiveClassesAtExit``, ~10 s and up to ~0.65 GB of memory more that once) to a temporary
    name, and `stop` puts it in place only after a successful run, once the JVM has exited: a JVM crashes (SIGBUS)
    on a truncated archive, so a half-written one must never have the real name. Another JVM or Spark later makes
    its stamp differ: the next small job trains again. A big job only maps one (`class_archive_option`)."""

    path: Path

    @property
    def stamp_path(self) -> Path:
        return self.path.with_name(self.path.name + ".json")

    def stamp(self, env: Mapping[str, str] = os.environ) -> dict[str, Any]:
        """What the archive is tied to: the java the driver runs (as ``spark-class`` picks it: ``JAVA_HOME``, else
        the PATH's), and Spark's jars."""
        home = env.get("JAVA_HOME")
        found = str(Path(home) / "bin" / "java") if home else shutil.which("java", path=env.get("PATH"))
        java = Path(found).resolve() if found else None
        jars = _spark_home(env) / "jars"
        listing = sorted(f"{p.name}:{p.stat().st_size}" for p in jars.glob("*.jar")) if jars.is_dir() else []
        return {"java": str(java), "java_size": java.stat().st_size if java and java.is_file() else None,
                "jars": hashlib.sha256("\n".join(listing).encode()).hexdigest()}

    def usable(self, stamp: dict[str, Any]) -> bool:
        """Whether the archive there was made by a finished run of this JVM and Spark (and is whole: its size)."""
        try:
            kept = json.loads(self.stamp_path.read_text())
            return kept == {**stamp, "size": self.path.stat().st_size}
        except (OSError, ValueError):
            return False


@dataclass(frozen=True)
class _Training:
    archive: ClassArchive
    tmp: Path
    stamp: dict[str, Any]


_training: _Training | None = None


def class_archive_arg(value: str | None, error: type[Exception]) -> Path | None:
    """``--class-archive`` as a path (a local file: the JVM maps it), or `error` naming the argument."""
    if not value:
        return None
    if re.match(r"^[a-z][a-z0-9+.-]*://", value) and not value.startswith("file://"):
        raise error(f"argument --class-archive: {value!r}: the driver JVM maps a local file")
    path = Path(value.removeprefix("file://")).expanduser()
    if path.is_dir():
        raise error(f"argument --class-archive: {value!r} is a directory (name the archive file in it)")
    return path


def launcher_settings() -> dict[str, str]:
    """The ``spark.*`` settings the process was launched with (spark-submit's ``--conf`` and
    ``spark-defaults.conf``: system properties of the driver JVM it started); empty outside spark-submit. The
    session builder's own settings would override them (PySpark applies a builder's options last)."""
    from pyspark import SparkConf, SparkContext

    if "PYSPARK_GATEWAY_PORT" not in os.environ:
        return {}
    SparkContext._ensure_initialized()  # connects to spark-submit's JVM (no context is created)
    return dict(SparkConf(loadDefaults=True, _jvm=SparkContext._jvm).getAll())


def _no_jvm_yet() -> bool:
    """Whether the next session starts a JVM (PySpark starts one a process: a later session reuses it, and the Java
    options it was started with)."""
    from pyspark import SparkContext

    return SparkContext._gateway is None


def _spark_home(env: Mapping[str, str]) -> Path:
    if env.get("SPARK_HOME"):
        return Path(env["SPARK_HOME"])
    from pyspark.find_spark_home import _find_spark_home

    return Path(_find_spark_home())


def _java_arg(option: str, path: Path) -> str:
    """``option=path``, quoted when the path holds a space (Spark splits the options as a shell would)."""
    arg = f"{option}={path}"
    return f'"{arg}"' if re.search(r"\s", arg) else arg


def class_archive_option(archive: ClassArchive, env: Mapping[str, str] = os.environ,
                         train: bool = True) -> tuple[str | None, _Training | None]:
    """The driver's Java option for `archive`: use it where `usable`, else train it where `train` (and what `stop`
    must finish), else none.

    Only a small job's JVM trains (`build_session`): writing the archive at exit takes up to ~0.65 GB more, which a
    big job's JVM, its 1 GB heap filled, cannot spare under 2 GB (2,174 MiB measured on the 25,000-partition week's
    report), while the archive saves it ~1 s of a 30 s run (docs/performance-log.md, "Step 12"). A big job maps an
    archive a small one made."""
    stamp = archive.stamp(env)
    if archive.usable(stamp):
        return f"{_java_arg('-XX:SharedArchiveFile', archive.path)} {QUIET_CDS}", None
    if not train:
        return None, None
    tmp = archive.path.with_name(f".tmp-{archive.path.name}-{os.getpid()}")
    return f"{_java_arg('-XX:ArchiveClassesAtExit', tmp)} {QUIET_CDS}", _Training(archive, tmp, stamp)


def end_jvm(timeout_s: float = 30.0, kill: bool = False) -> int | None:
    """End the Py4J gateway's JVM (``spark.stop()`` keeps it) and reap it; its exit code (None if there was none).
    A JVM writes its class archive as it exits, so this is what lets a run know it was written; `kill` ends it
    without letting it write one."""
    from pyspark import SparkContext

    gw = SparkContext._gateway
    proc = getattr(gw, "proc", None)
    if gw is None or proc is None:
        return None
    if kill:
        proc.kill()
    with contextlib.suppress(Exception):
        gw.shutdown()
    with contextlib.suppress(Exception):
        proc.stdin.close()
    try:
        code = proc.wait(timeout=timeout_s)
    except Exception:
        proc.terminate()
        code = proc.wait(timeout=10)
    SparkContext._gateway = None
    SparkContext._jvm = None
    return code


ARCHIVE_WRITE_S = 300.0
"""How long `stop` waits for a training JVM to write its archive (~10 s for ~190 MB here)."""


def stop(spark: Any, succeeded: bool = True) -> None:
    """Stop a session `build_session` made. When its JVM trains a class archive (`ClassArchive`), end the JVM, which
    writes the archive as it exits, and put it in place if the run `succeeded` and the JVM exited cleanly; after a
    failed run (whose classes are not worth keeping) the JVM is killed instead, before it writes anything."""
    global _training
    spark.stop()
    training, _training = _training, None
    if training is None:
        return
    code = end_jvm(ARCHIVE_WRITE_S, kill=not succeeded)  # else the JVM would write it when Python exits
    try:
        if succeeded and code == 0 and training.tmp.is_file() and training.tmp.stat().st_size > 0:
            with open(training.tmp, "rb") as f:  # on disk before it has the real name (the JVM does not fsync)
                os.fsync(f.fileno())
            os.replace(training.tmp, training.archive.path)
            stamp = json.dumps({**training.stamp, "size": training.archive.path.stat().st_size}).encode()
            publish(training.archive.stamp_path, lambda f: f.write(stamp),
                    training.tmp.with_name(training.tmp.name + ".json"))
            log.warning("wrote the JVM class archive %s: later runs start faster", training.archive.path)
        elif succeeded:
            log.warning("no JVM class archive written to %s (JVM exit code %s)", training.archive.path, code)
    finally:
        training.tmp.unlink(missing_ok=True)


_ERROR_CLASS = re.compile(r"\[[A-Z][A-Z_]*(\.[A-Z_]+)*\]")
"""A Spark error class in a message, e.g. ``[FAILED_READ_FILE.NO_HINT]``."""


def describe_failure(e: BaseException, limit: int = 500) -> str:
    """One line for a job's ``failed:`` message: the exception's type and first line; for a Java exception through
    Py4J (whose first line is only "An error occurred while calling o120.unpersist."), the Java exception's own
    line after it, and when that line carries no Spark error class (``Exception thrown in awaitResult:``, what a
    table collected as Arrow fails with) the first cause that does (``[FAILED_READ_FILE.NO_HINT] Encountered error
    while reading file …``: which file); and, where `e` was raised while handling another exception (a clean-up in
    a ``finally`` block), that one too, which would otherwise be hidden without ``--verbose``."""
    def one(x: BaseException) -> str:
        lines = [ln.strip() for ln in str(x).strip().splitlines() if ln.strip()]
        text = lines[0] if lines else ""
        java = next((ln[2:].strip() for ln in lines[1:] if ln.startswith(": ")), None)
        if java:
            text = f"{text} {java}"
            cause = next((ln for ln in lines if ln.startswith("Caused by:") and _ERROR_CLASS.search(ln)), None)
            if cause and not _ERROR_CLASS.search(java):
                text = f"{text} (caused by {cause.removeprefix('Caused by:').strip()})"
        return f"{type(x).__name__}: {text[:limit]}"

    out = one(e)
    hidden = e.__context__
    if hidden is not None and not e.__suppress_context__:
        out += f" (raised while handling {one(hidden)})"
    return out


def build_session(master: str | None = None, app_name: str = "kmon-weekly-report", verbose: bool = False,
                  conf: dict[str, str] | None = None, small_job: bool = False,
                  class_archive: Path | None = None) -> Any:
    """A SparkSession. Without `master`: local[*], unless spark-submit already chose one.

    Local sessions bind the driver to 127.0.0.1, run without the UI and with one shuffle partition per worker
    thread: every task shares those threads, so more partitions only add per-task cost to the report's many small
    jobs (and AQE merges partitions, never splits them); measured in docs/performance-log.md, "Step 5". A small job
    on any other master gets a few (`shuffle_partitions`) unless spark-submit's settings choose them. A local
    `small_job` (little to aggregate) starts its JVM with `SMALL_JOB_JAVA_OPTIONS` (`small_job_java_options`), and
    one with a `class_archive` maps Spark's classes from it (`ClassArchive`; only a small job trains a missing one;
    end such a session with `stop`); under spark-submit the cluster's settings rule (its ``--conf`` for a `TUNING`
    key is kept; the time zone is UTC whatever it says), and where the driver's Java options are chosen already
    (`java_options_chosen`) none are added. A local session the job starts logs by `LOG_CONFIG` unless a log
    configuration is chosen elsewhere (`log_config_option`).
    """
    global _training
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
             .config("spark.ui.enabled", "false"))
        java = [small_job_java_options(conf or {}) if small_job else None, log_config_option(conf or {})]
        training = None
        if class_archive is not None and not submitted and _no_jvm_yet():
            if java_options_chosen(conf or {}):
                log.warning("class archive %s not used: the driver's Java options are set elsewhere", class_archive)
            else:
                try:
                    class_archive.parent.mkdir(parents=True, exist_ok=True)
                    option, training = class_archive_option(ClassArchive(class_archive), train=small_job)
                    java.append(option)
                    if option is None:
                        log.info("class archive %s not trained by a big job; a small job will", class_archive)
                except OSError as e:  # a faster start is not worth a failed job
                    log.warning("class archive %s not used: %s", class_archive, e)
        if not submitted and (java := [o for o in java if o]):
            b = b.config("spark.driver.extraJavaOptions", " ".join(java))
            _training = training
    b = b.config("spark.sql.session.timeZone", "UTC")
    chosen = launcher_settings() if submitted else {}
    if (partitions := shuffle_partitions(master, small_job, chosen)) is not None:
        b = b.config(SHUFFLE_PARTITIONS, str(partitions))
    for k, v in TUNING.items():
        if k not in chosen:
            b = b.config(k, v)
    for k, v in (conf or {}).items():
        b = b.config(k, v)
    spark = b.getOrCreate()
    spark.sparkContext.setLogLevel("WARN" if verbose else "ERROR")
    return spark
