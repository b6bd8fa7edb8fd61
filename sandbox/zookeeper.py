"""A real, local ZooKeeper ensemble for tests, demos and failure rehearsals.

The monitor's ZooKeeper checks are only worth something if they are judged
against the real server: election timing, what ``srvr`` says while LOOKING,
how a SIGSTOPped node looks from outside.  A mock would encode our assumptions
instead of ZooKeeper's behaviour.  So this module runs Debian's ZooKeeper jars
as separate JVMs on loopback, with timeouts shrunk so a quorum forms in about
two seconds and an election takes well under one.

Leaking JVMs is the main hazard of such a harness (each holds ~100 MB and
ports), so cleanup is layered: ``stop()``/context manager for the normal path,
an ``atexit`` hook for exceptions that escape, and ``PR_SET_PDEATHSIG`` so the
kernel kills the JVMs even when the Python parent is SIGKILLed.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Self

from collectors.model.wording import count_of
from collectors.sources.zk_fourletter import FourLetterError, SrvrStats, parse_mntr, parse_srvr, send_four_letter

__all__ = [
    "DEBIAN_JAVA_DIR",
    "ZooKeeperEnsemble",
    "ZooKeeperError",
    "ZooKeeperNode",
    "ZooKeeperNotInstalled",
    "ZooKeeperStartError",
    "zookeeper_classpath",
]

log = logging.getLogger(__name__)

LOOPBACK = "127.0.0.1"
MAIN_CLASS = "org.apache.zookeeper.server.quorum.QuorumPeerMain"
DEBIAN_JAVA_DIR = Path("/usr/share/java")

# Jars the server cannot start without, with the Debian package shipping each.
# Debian's zookeeper.jar also carries a manifest Class-Path (commons-cli, jackson,
# jetty, metrics, snappy, ...) that the JVM follows on its own; listing the core
# jars explicitly keeps a broken or stripped manifest from turning into a
# NoClassDefFoundError deep inside a node log.
_REQUIRED_JARS: dict[str, str] = {
    "zookeeper.jar": "libzookeeper-java",
    "zookeeper-jute.jar": "libzookeeper-java",
    "slf4j-api.jar": "libslf4j-java",
    # Without a binding SLF4J is silent and a failed node leaves an empty log.
    "slf4j-simple.jar": "libslf4j-java",
    "netty-buffer.jar": "libnetty-java",
    "netty-codec.jar": "libnetty-java",
    "netty-common.jar": "libnetty-java",
    "netty-handler.jar": "libnetty-java",
    "netty-resolver.jar": "libnetty-java",
    "netty-transport.jar": "libnetty-java",
}
# Used only by optional features (epoll transport, CLI, metrics, snapshot
# compression); added when present so enabling such a feature just works.
_OPTIONAL_JARS = (
    "netty-transport-native-epoll.jar",
    "netty-transport-native-unix-common.jar",
    "commons-cli.jar",
    "metrics-core.jar",
    "snappy-java.jar",
)

_PR_SET_PDEATHSIG = 1
_POLL_INTERVAL = 0.1
_BIND_FAILURE_MARKERS = ("Address already in use", "BindException")


class ZooKeeperError(RuntimeError):
    """Base class so callers can catch every sandbox failure at once."""


class ZooKeeperNotInstalled(ZooKeeperError):
    """Java or the ZooKeeper jars are missing; the message says what to install."""


class ZooKeeperStartError(ZooKeeperError):
    """The ensemble (or a node) did not reach the expected state in time."""


def zookeeper_classpath(java_dir: Path = DEBIAN_JAVA_DIR) -> str:
    """Return the ``-cp`` value for Debian's ZooKeeper, or say what to install.

    Checked before any JVM is spawned: a missing jar otherwise surfaces as three
    JVMs exiting with a stack trace in files nobody reads, and a start timeout.
    """
    missing = {jar: pkg for jar, pkg in _REQUIRED_JARS.items() if not (java_dir / jar).is_file()}
    if missing:
        packages = sorted({"zookeeper", *missing.values()})
        raise ZooKeeperNotInstalled(
            f"ZooKeeper jars missing from {java_dir}: {', '.join(sorted(missing))}. "
            f"Install them with: apt-get install {' '.join(packages)}"
        )
    jars = [java_dir / jar for jar in _REQUIRED_JARS]
    jars += [java_dir / jar for jar in _OPTIONAL_JARS if (java_dir / jar).is_file()]
    return os.pathsep.join(str(j) for j in jars)


def _resolve_java(java: str) -> str:
    found = shutil.which(java)
    if found is None:
        raise ZooKeeperNotInstalled(
            f"Java executable {java!r} not found. Install a JRE with: "
            "apt-get install openjdk-17-jre-headless (or pass java=/path/to/java)"
        )
    return found


@dataclass
class ZooKeeperNode:
    """One server of the ensemble; ``pid`` keeps the last PID after the process is gone."""

    sid: int
    client_port: int
    quorum_port: int
    election_port: int
    node_dir: Path
    data_dir: Path
    config_path: Path
    log_path: Path
    pid: int | None = None
    paused: bool = False
    # True between start and an intentional kill: an exited process that is
    # still wanted is a crash, which waits report instead of waiting it out.
    wanted: bool = False
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False, compare=False)

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    @property
    def address(self) -> tuple[str, int]:
        return (LOOPBACK, self.client_port)


_STOPPED = frozenset("tT")
"""The states of a stopped thread in ``/proc/PID/task/TID/stat`` (``t``: stopped while traced)."""


def thread_states(pid: int | None) -> dict[str, int]:
    """How many of the process's threads are in each scheduler state (``R``, ``S``, ``D``, ``T``...), from
    ``/proc``; empty where there is no such process or no ``/proc`` (then nothing can be waited for)."""
    counts: dict[str, int] = {}
    if pid is None:
        return counts
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
    except OSError:
        return counts
    for task in tasks:
        try:
            # "tid (comm) S ...": the command may hold spaces and parentheses, the state follows the last ")"
            state = (task / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue  # the thread ended meanwhile
        counts[state] = counts.get(state, 0) + 1
    return counts


def _free_ports(count: int) -> list[int]:
    # All sockets stay bound until every port is picked so the kernel cannot hand
    # out the same port twice; another process can still grab one before the JVM
    # binds it, which start() detects and retries.
    sockets: list[socket.socket] = []
    try:
        for _ in range(count):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sockets.append(s)
            s.bind((LOOPBACK, 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


_libc: ctypes.CDLL | None = None
if sys.platform.startswith("linux"):
    # Loaded in the parent: dlopen() between fork() and exec() is not async-signal-safe.
    with contextlib.suppress(OSError):
        _libc = ctypes.CDLL(None, use_errno=True)


def _die_with_parent_hook(parent_pid: int) -> Callable[[], None]:
    libc = _libc
    if libc is None:
        raise ZooKeeperError("PR_SET_PDEATHSIG needs Linux (pass die_with_parent=False elsewhere)")

    def hook() -> None:
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent_pid:  # the parent died before prctl took effect
            os._exit(1)

    return hook


_live_ensembles: set[ZooKeeperEnsemble] = set()
_live_lock = threading.Lock()


@atexit.register
def _stop_all_at_exit() -> None:
    with _live_lock:
        ensembles = list(_live_ensembles)
    for ensemble in ensembles:
        with contextlib.suppress(Exception):
            ensemble.stop()


class ZooKeeperEnsemble:
    """N ZooKeeper JVMs on loopback, with helpers to break them on purpose.

    Timing: a tick of 200 ms with initLimit=15 (3 s) and syncLimit=10 (2 s).
    Elections after a SIGKILL are driven by closed sockets, not by these limits,
    and take a few hundred ms; the limits only bound how long a *stalled* peer
    is tolerated, and are kept a little generous so a GC or scheduling hiccup
    on a 2-core CI box does not cause spurious elections.

    ``die_with_parent`` uses PR_SET_PDEATHSIG, which fires when the *thread*
    that spawned the JVM exits.  It is therefore only applied when spawning
    from the main thread; ensembles started from worker threads rely on
    ``stop()`` and the ``atexit`` hook.
    """

    def __init__(
        self,
        size: int = 3,
        base_dir: Path | None = None,
        *,
        tick_time_ms: int = 200,
        init_limit: int = 15,
        sync_limit: int = 10,
        java: str = "java",
        java_dir: Path = DEBIAN_JAVA_DIR,
        heap_mb: int = 128,
        whitelist: str | Iterable[str] = "*",
        extra_config: Mapping[str, str] | None = None,
        start_attempts: int = 3,
        die_with_parent: bool = True,
    ) -> None:
        if size < 1:
            raise ValueError(f"size must be >= 1, got {size}")
        if start_attempts < 1:
            raise ValueError(f"start_attempts must be >= 1, got {start_attempts}")
        self.java = _resolve_java(java)
        self.classpath = zookeeper_classpath(java_dir)
        self.size = size
        self.tick_time_ms = tick_time_ms
        self.init_limit = init_limit
        self.sync_limit = sync_limit
        self.heap_mb = heap_mb
        self.whitelist = whitelist if isinstance(whitelist, str) else ",".join(whitelist)
        allowed = {c.strip() for c in self.whitelist.split(",")}
        if "*" not in allowed and "srvr" not in allowed:
            # start() and every wait_* helper observe the ensemble through srvr.
            raise ValueError(f"the 4lw whitelist must include 'srvr' (or '*'), got {self.whitelist!r}")
        self.extra_config = dict(extra_config or {})
        self.start_attempts = start_attempts
        self.die_with_parent = die_with_parent

        self._owns_dir = base_dir is None
        self.base_dir = Path(tempfile.mkdtemp(prefix="zk-ensemble-")) if base_dir is None else Path(base_dir)
        self.base_dir.mkdir(parents=True, exist_ok=True)
        self._lock = threading.RLock()
        self._started = False
        self._stopped = False
        self._nodes: list[ZooKeeperNode] = []
        for sid in range(1, size + 1):
            node_dir = self.base_dir / f"node-{sid}"
            self._nodes.append(
                ZooKeeperNode(
                    sid=sid,
                    client_port=0,
                    quorum_port=0,
                    election_port=0,
                    node_dir=node_dir,
                    data_dir=node_dir / "data",
                    config_path=node_dir / "zoo.cfg",
                    log_path=node_dir / "zookeeper.log",
                )
            )
        # Registered from birth so the atexit hook also removes the temp dir of
        # an ensemble that was created but never started or stopped.
        with _live_lock:
            _live_ensembles.add(self)

    # ------------------------------------------------------------------ views

    @property
    def nodes(self) -> list[ZooKeeperNode]:
        return list(self._nodes)

    def node(self, sid: int) -> ZooKeeperNode:
        for n in self._nodes:
            if n.sid == sid:
                return n
        raise KeyError(f"no node with sid {sid} (ensemble has {[n.sid for n in self._nodes]})")

    @property
    def connect_string(self) -> str:
        self._require_ports()
        return ",".join(f"{LOOPBACK}:{n.client_port}" for n in self._nodes)

    def __repr__(self) -> str:
        state = ", ".join(
            f"{n.sid}:{n.client_port}:{'paused' if n.paused else 'up' if n.alive else 'down'}"
            for n in self._nodes
        )
        return f"<ZooKeeperEnsemble {self.base_dir} [{state}]>"

    # ------------------------------------------------------------- lifecycle

    def start(self, timeout: float = 30.0) -> None:
        """Start every node and wait for one leader plus followers.

        ``timeout`` covers all attempts: a port stolen between picking and
        binding makes a JVM fail fast, so retries are cheap.
        """
        with self._lock:
            if self._started:
                raise ZooKeeperError("ensemble already started")
            if self._stopped:
                raise ZooKeeperError("a stopped ensemble cannot be restarted; create a new one")
            self._started = True
        deadline = time.monotonic() + timeout
        try:
            for attempt in range(1, self.start_attempts + 1):
                self._assign_ports()
                self._write_configs()
                for n in self._nodes:
                    self._spawn(n)
                try:
                    self.wait_for_quorum(max(deadline - time.monotonic(), 0.0))
                    log.info("ZooKeeper ensemble up: %s (attempt %d)", self.connect_string, attempt)
                    return
                except ZooKeeperStartError as exc:
                    collided = [n.sid for n in self._nodes if self._log_mentions_bind_failure(n)]
                    self._terminate_all()
                    if not collided or attempt == self.start_attempts or time.monotonic() >= deadline:
                        # The logs may live in a temp dir that stop() is about to delete.
                        tails = "; ".join(f"node {n.sid}: {self._log_tail(n)}" for n in self._nodes)
                        raise ZooKeeperStartError(f"{exc} -- last log lines: {tails}") from exc
                    log.warning("port collision on %s %s, retrying with new ports: %s", count_of(len(collided), "node"),
                                collided, exc)
                    for n in self._nodes:
                        if n.log_path.exists():
                            n.log_path.rename(n.log_path.with_suffix(f".attempt-{attempt}.log"))
        except BaseException:
            self.stop()
            raise

    def stop(self, grace: float = 3.0) -> None:
        """Stop every JVM by PID, then delete the temp dir if we created it.

        Paused nodes get SIGCONT first: a stopped process does not act on
        SIGTERM, so it would burn the whole grace period before SIGKILL.
        """
        with self._lock:
            self._terminate_all(grace)
            self._stopped = True
            with _live_lock:
                _live_ensembles.discard(self)
            if self._owns_dir:
                shutil.rmtree(self.base_dir, ignore_errors=True)

    def __enter__(self) -> Self:
        if not self._started:
            self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    # ------------------------------------------------------- fault injection

    def kill(self, sid: int) -> None:
        """SIGKILL one node: the crash case, no shutdown hooks, sockets reset by the kernel."""
        with self._lock:
            n = self.node(sid)
            n.wanted = False
            if n.process is not None and n.process.poll() is None:
                n.process.kill()
                n.process.wait(timeout=10)
            n.paused = False

    def start_node(self, sid: int) -> None:
        """Restart a killed node with its previous ports and data (as a real restart would)."""
        with self._lock:
            if not self._started or self._stopped:
                raise ZooKeeperError("start_node() needs a started, not yet stopped ensemble")
            n = self.node(sid)
            if n.alive:
                raise ZooKeeperError(f"node {sid} is still running (pid {n.pid})")
            self._spawn(n)

    def kill_leader(self, timeout: float = 10.0) -> int:
        """Kill the current leader and return its sid."""
        sid = self.leader_sid(timeout)
        self.kill(sid)
        return sid

    def pause(self, sid: int, timeout: float = 5.0) -> None:
        """SIGSTOP: the process keeps its sockets (connects still succeed) but never answers.

        Returns once every thread of the JVM is stopped (``kill`` returns before they are: each stops when it
        next leaves the kernel, and one blocked in a disk write only after it), so a probe sent right after
        cannot be answered; logs the threads' states if they are not all stopped within `timeout`.
        """
        with self._lock:
            n = self._running_node(sid)
            n.process.send_signal(signal.SIGSTOP)  # type: ignore[union-attr]
            n.paused = True
            pid = n.pid
        deadline = time.monotonic() + timeout
        while (states := thread_states(pid)) and set(states) - _STOPPED:
            if time.monotonic() >= deadline:
                log.warning("node %d (pid %d) paused but not every thread stopped after %gs: %s",
                            sid, pid, timeout, states)
                return
            time.sleep(0.01)

    def resume(self, sid: int) -> None:
        with self._lock:
            n = self._running_node(sid)
            n.process.send_signal(signal.SIGCONT)  # type: ignore[union-attr]
            n.paused = False

    # ----------------------------------------------------------------- probes

    def four_letter(self, sid: int, command: str, timeout: float = 2.0) -> str:
        n = self.node(sid)
        return send_four_letter(LOOPBACK, n.client_port, command, timeout)

    def srvr(self, sid: int, timeout: float = 2.0) -> SrvrStats:
        return parse_srvr(self.four_letter(sid, "srvr", timeout))

    def mntr(self, sid: int, timeout: float = 2.0) -> dict[str, int | float | str]:
        return parse_mntr(self.four_letter(sid, "mntr", timeout))

    def leader_sid(self, timeout: float = 10.0) -> int:
        """Wait until some reachable node reports ``Mode: leader`` and return its sid."""
        deadline = time.monotonic() + timeout
        while True:
            self._check_crashes()
            for n in self._probeable():
                stats = self._try_srvr(n, deadline)
                if stats is not None and stats["mode"] in ("leader", "standalone"):
                    return n.sid
            if time.monotonic() >= deadline:
                raise ZooKeeperStartError(f"no leader within {timeout:g}s: {self._describe()}")
            time.sleep(_POLL_INTERVAL)

    def wait_serving(self, sid: int, timeout: float = 30.0) -> SrvrStats:
        """Wait until ``sid`` answers ``srvr`` normally, i.e. has joined a quorum."""
        n = self.node(sid)
        deadline = time.monotonic() + timeout
        while True:
            self._check_crashes()
            if n.paused:
                raise ZooKeeperError(f"node {sid} is paused; resume() it before waiting for it")
            stats = self._try_srvr(n, deadline)
            if stats is not None:
                return stats
            if time.monotonic() >= deadline:
                raise ZooKeeperStartError(f"node {sid} not serving within {timeout:g}s: {self._describe()}")
            time.sleep(_POLL_INTERVAL)

    def wait_for_quorum(self, timeout: float = 30.0) -> dict[int, SrvrStats]:
        """Wait until every running, unpaused node serves: one leader, the rest followers."""
        deadline = time.monotonic() + timeout
        while True:
            self._check_crashes()
            nodes = self._probeable()
            stats = {n.sid: s for n in nodes if (s := self._try_srvr(n, deadline)) is not None}
            if len(stats) == len(nodes) and len(nodes) * 2 > self.size:
                modes = sorted(s["mode"] for s in stats.values())
                if self.size == 1 and modes == ["standalone"]:
                    return stats
                if modes.count("leader") == 1 and modes.count("follower") == len(modes) - 1:
                    return stats
            if time.monotonic() >= deadline:
                raise ZooKeeperStartError(f"no quorum within {timeout:g}s: {self._describe()}")
            time.sleep(_POLL_INTERVAL)

    # -------------------------------------------------------------- internals

    def _require_ports(self) -> None:
        if any(n.client_port == 0 for n in self._nodes):
            raise ZooKeeperError("ports are assigned by start()")

    def _running_node(self, sid: int) -> ZooKeeperNode:
        n = self.node(sid)
        if not n.alive:
            raise ZooKeeperError(f"node {sid} is not running")
        return n

    def _probeable(self) -> list[ZooKeeperNode]:
        return [n for n in self._nodes if n.alive and not n.paused]

    def _try_srvr(self, n: ZooKeeperNode, deadline: float) -> SrvrStats | None:
        budget = min(1.0, deadline - time.monotonic())
        if budget <= 0:
            return None
        try:
            return parse_srvr(send_four_letter(LOOPBACK, n.client_port, "srvr", budget))
        except (FourLetterError, ValueError):
            return None

    def _check_crashes(self) -> None:
        crashed = [
            (n, code)
            for n in self._nodes
            if n.wanted and n.process is not None and (code := n.process.poll()) is not None
        ]
        if crashed:
            details = "; ".join(
                f"node {n.sid} (pid {n.pid}) exited with {code}: {self._log_tail(n)}" for n, code in crashed
            )
            raise ZooKeeperStartError(f"ZooKeeper {count_of(len(crashed), 'node')} died unexpectedly: {details}")

    def _describe(self) -> str:
        parts = []
        for n in self._nodes:
            if n.paused:
                state = "paused"
            elif not n.alive:
                state = "down"
            else:
                try:
                    state = parse_srvr(send_four_letter(LOOPBACK, n.client_port, "srvr", 0.5))["mode"]
                except (FourLetterError, ValueError) as exc:
                    state = getattr(exc, "kind", "unparseable")
            parts.append(f"{n.sid}@{n.client_port}={state}")
        return ", ".join(parts) + f" (logs under {self.base_dir})"

    @staticmethod
    def _log_tail(n: ZooKeeperNode, lines: int = 5) -> str:
        try:
            tail = n.log_path.read_text(errors="replace").splitlines()[-lines:]
        except OSError:
            return "<no log>"
        return " | ".join(tail)

    @staticmethod
    def _log_mentions_bind_failure(n: ZooKeeperNode) -> bool:
        try:
            text = n.log_path.read_text(errors="replace")
        except OSError:
            return False
        return any(marker in text for marker in _BIND_FAILURE_MARKERS)

    def _assign_ports(self) -> None:
        ports = _free_ports(3 * self.size)
        for i, n in enumerate(self._nodes):
            n.client_port, n.quorum_port, n.election_port = ports[3 * i : 3 * i + 3]

    def _write_configs(self) -> None:
        servers = [f"server.{n.sid}={LOOPBACK}:{n.quorum_port}:{n.election_port}" for n in self._nodes]
        for n in self._nodes:
            n.data_dir.mkdir(parents=True, exist_ok=True)
            (n.data_dir / "myid").write_text(f"{n.sid}\n")
            settings: dict[str, str] = {
                "tickTime": str(self.tick_time_ms),
                "initLimit": str(self.init_limit),
                "syncLimit": str(self.sync_limit),
                "dataDir": str(n.data_dir.resolve()),
                "clientPort": str(n.client_port),
                "clientPortAddress": LOOPBACK,
                "admin.enableServer": "false",
                "4lw.commands.whitelist": self.whitelist,
                # The default cap (20 ticks = 4 s) would silently shorten client
                # sessions; tests of session handling want what they asked for.
                "maxSessionTimeout": "60000",
                # Durability is irrelevant in a sandbox; fsync stalls on a busy
                # disk are a source of spurious follower timeouts.
                "forceSync": "no",
                "preAllocSize": "4096",
            }
            settings.update(self.extra_config)
            body = "\n".join(f"{k}={v}" for k, v in settings.items())
            n.config_path.write_text(
                f"# generated by sandbox.zookeeper\n{body}\n" + "\n".join(servers) + "\n"
            )

    def _command(self, n: ZooKeeperNode) -> list[str]:
        return [
            self.java,
            f"-Xmx{self.heap_mb}m",
            # Startup cost dominates on a 2-core box running 3 JVMs: a serial
            # GC and C1-only JIT cut CPU use and thread count considerably.
            "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",
            "-XX:-UsePerfData",
            "-Djava.net.preferIPv4Stack=true",
            # Cap FLE's exponential notification backoff (default 60 s) so a
            # node that started before its peers does not sleep through them.
            "-Dzookeeper.fastleader.maxNotificationInterval=1000",
            "-Dorg.slf4j.simpleLogger.showDateTime=true",
            "-Dorg.slf4j.simpleLogger.dateTimeFormat=HH:mm:ss.SSS",
            "-cp",
            self.classpath,
            MAIN_CLASS,
            str(n.config_path.resolve()),
        ]

    def _spawn(self, n: ZooKeeperNode) -> None:
        use_pdeathsig = self.die_with_parent and threading.current_thread() is threading.main_thread()
        preexec = _die_with_parent_hook(os.getpid()) if use_pdeathsig else None
        with open(n.log_path, "ab") as logfile:
            logfile.write(f"=== {time.strftime('%H:%M:%S')} starting node {n.sid} ===\n".encode())
            logfile.flush()
            n.process = subprocess.Popen(
                self._command(n),
                cwd=n.node_dir,
                stdin=subprocess.DEVNULL,
                stdout=logfile,
                stderr=subprocess.STDOUT,
                # Own process group: a Ctrl-C aimed at the test runner must not
                # kill the JVMs behind stop()'s back (stop() would then misreport).
                start_new_session=True,
                preexec_fn=preexec,  # only async-signal-safe prctl/getppid calls
                close_fds=True,
            )
        n.pid = n.process.pid
        n.paused = False
        n.wanted = True
        log.debug("started ZooKeeper node %d pid %d client port %d", n.sid, n.pid, n.client_port)

    def _terminate_all(self, grace: float = 3.0) -> None:
        running = [n for n in self._nodes if n.process is not None and n.process.poll() is None]
        for n in self._nodes:
            n.wanted = False
        for n in running:
            with contextlib.suppress(ProcessLookupError):
                if n.paused:
                    n.process.send_signal(signal.SIGCONT)  # type: ignore[union-attr]
                n.process.terminate()  # type: ignore[union-attr]
            n.paused = False
        deadline = time.monotonic() + grace
        for n in running:
            proc = n.process
            assert proc is not None
            try:
                proc.wait(timeout=max(deadline - time.monotonic(), 0.01))
            except subprocess.TimeoutExpired:
                log.warning("ZooKeeper node %d (pid %d) ignored SIGTERM; sending SIGKILL", n.sid, proc.pid)
                proc.kill()
                proc.wait()
