"""One poll of a ZooKeeper ensemble: server health over 4lw, Kafka's znodes over kazoo.

Two independent views, because they fail independently:

* **Four-letter words** (``srvr`` + ``mntr``) go to *every* server of the
  connect string, concurrently, each bounded by ``timeout_s``.  They need no
  session and no quorum, so they still describe a sick ensemble: who leads,
  who is LOOKING, who is paused (a SIGSTOPped JVM accepts TCP connections and
  never answers, hence the hard deadline).
* **kazoo** reads what Kafka publishes (``/brokers/ids``, ``/controller``,
  ``/controller_epoch``, every ``/brokers/topics/<t>/partitions/<p>/state``)
  through one session kept open across polls, so a healthy poll costs no
  handshake.  Reads are pipelined with kazoo's async API in a bounded window
  instead of one blocking round trip per znode.  Measured on a 2-core box
  against a local 3-JVM ensemble: 20,000 partition states take ~2.5-3 s
  pipelined against ~8 s one by one.  kazoo's connection thread is then the
  limit (~7,000 reads/s; it builds a selector per socket operation), so
  100,000 partitions need ``timeout_s`` of about 8 s; with less, the poll
  returns the states it got plus a stale "znodes" section instead of hanging.

``observe()`` never raises for ZooKeeper trouble and returns within about
``2 × timeout_s``: the 4lw probes run in a thread pool while the calling
thread reads the znodes against one overall deadline.  Whatever could not be
refreshed is named in ``errors`` and in ``stale_sections`` ("zookeeper" for
the 4lw view, "znodes" for the kazoo view) so the rules keep alerts open on
missing evidence instead of resolving them.

Decisions, written down so nobody has to rediscover them:

* ``four_letter_words=False`` yields **no server records** (``servers == []``)
  rather than records with ``serving=False``: without 4lw we know nothing about
  the servers, and ``serving=False`` would raise false "quorum lost" criticals
  and a non-zero exit code.  The section is not marked stale either, because
  nothing failed — the operator chose not to look.
* ``srvr`` is the verdict on a server; ``mntr`` only adds learner counts (it is
  not in ZooKeeper's default whitelist, which is ``srvr`` alone).  A server
  whose ``mntr`` is refused is still serving, with the refusal noted in
  ``error``.  When ``srvr`` itself is refused or unparseable, a good ``mntr``
  answer stands in for it (mode, latencies, counts — but no zxid).
* "zookeeper" is stale when some server gave no usable answer (timeout,
  refused, I/O error, both words refused).  A definite "not serving" answer is
  evidence, not missing data, so it does not make the section stale.
* ``lag_behind_leader`` is set on followers and observers only (None on the
  leader and on standalone servers), and only when exactly one server claims
  leadership and both zxids are in the same epoch.  A follower reporting
  ``Zxid: 0x0`` (ZooKeeper does this right after an election until the first
  write of the new epoch) or a zxid of an older epoch is unknown, not
  "billions behind".  Concurrent probes can catch a follower a few
  transactions *ahead* of the leader's answer; that clamps to 0.
* The kazoo session is dropped (closed in a background thread, recreated on the
  next poll) when it cannot be established in time, when a read fails for a
  session reason, or when the deadline passes with no read answered.  A
  deadline passed while answers were still flowing (a huge cluster on a slow
  link) keeps the session: recreating it would only make the next poll slower.
  kazoo's ``stop()`` can block for seconds while it is mid-way through a
  connection attempt, which is why closing never happens on the poll's thread.
* A missing ``/brokers/ids`` almost always means a wrong chroot; it gives
  ``broker_ids=None``, an error line saying so, and a stale "znodes" section.
  A missing ``/controller`` or ``/controller_epoch`` is a normal transient
  state (no controller elected right now) and gives None silently.
* Malformed or missing znodes are skipped with an error line (at most
  ``MAX_ZNODE_ERRORS`` lines plus a count, so 100,000 broken znodes do not
  become 100,000 log lines).  Partition state znodes must carry all four of
  leader, leader_epoch, isr and controller_epoch, as Kafka's own decoder
  requires.
* When ``kazoo_settings`` gives its own ``hosts`` string without a chroot, the
  connect string's chroot is appended, so the chroot cannot be lost by the
  configuration layer.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import dataclasses
import json
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, TypeVar

from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError, NoNodeError
from kazoo.interfaces import IAsyncResult

from collectors.model.observations import ZkObservation
from collectors.model.records import ZkServerRecord
from collectors.sources.zk_fourletter import (
    FourLetterError,
    FourLetterNotServing,
    FourLetterNotWhitelisted,
    FourLetterTimeout,
    FourLetterUnreachable,
    SrvrStats,
    parse_mntr,
    parse_srvr,
    send_four_letter,
    split_zxid,
)

__all__ = [
    "DEFAULT_ZK_PORT",
    "MAX_ZNODE_ERRORS",
    "PIPELINE_WINDOW",
    "ZkAdapter",
    "describe_failure",
    "finalize_servers",
    "follower_lags",
    "format_server",
    "join_connect_string",
    "parse_broker_ids",
    "parse_controller",
    "parse_controller_epoch",
    "parse_partition_state",
    "server_answered",
    "server_record",
    "split_connect_string",
]

log = logging.getLogger(__name__)

DEFAULT_ZK_PORT = 2181
# In-flight async reads per session.  ZooKeeper's default globalOutstandingLimit
# is 1000: beyond it the server stops reading from clients, so a larger window
# buys nothing.  The window also bounds kazoo's wake-up socketpair (one byte per
# queued request), whose send() would block without timeout if it filled up.
PIPELINE_WINDOW = 1000
MAX_ZNODE_ERRORS = 20
# Slack for thread scheduling on top of the 4lw timeout (each probe already
# bounds itself by timeout_s; this only guards against a starved pool).
_PROBE_GRACE_S = 0.5
# kazoo's default connection retry backs off up to an hour; a monitor's session
# must come back as soon as a server does.
_CONNECTION_RETRY = {"max_tries": -1, "delay": 0.1, "backoff": 2, "max_delay": 1.0}

NOT_SERVING = "not serving"
TIMEOUT = "timeout"
REFUSED = "refused"
UNREACHABLE = "unreachable"
IO_ERROR = "i/o error"

STALE_ZOOKEEPER = "zookeeper"
STALE_ZNODES = "znodes"

K = TypeVar("K")


# --------------------------------------------------------------------------- connect strings


def split_connect_string(connect: str) -> tuple[list[tuple[str, int]], str | None]:
    """Split a ZooKeeper connect string into ``[(host, port)]`` and a chroot.

    Accepts what ZooKeeper's and Kafka's ``zookeeper.connect`` accept:
    ``host``, ``host:port``, ``[ipv6]:port``, comma separated, then an optional
    chroot (``/kafka``) after the last host.  The chroot is normalised (a bare
    ``/`` is no chroot, a trailing slash is dropped) because kazoo prefixes it
    verbatim and ``/kafka/`` + ``/brokers`` is an invalid path.  Unbracketed
    IPv6 literals are rejected: ``::1:2181`` is ambiguous.  Duplicates are
    dropped so one server is not probed (and counted) twice.
    """
    text = connect.strip()
    hosts_part, slash, chroot_part = text.partition("/")
    chroot: str | None = None
    if slash:
        chroot = "/" + chroot_part.strip().rstrip("/")
        if chroot == "/":
            chroot = None
        elif "//" in chroot:
            raise ValueError(f"bad chroot in ZooKeeper connect string {connect!r}")
    servers: list[tuple[str, int]] = []
    for raw in hosts_part.split(","):
        entry = raw.strip()
        if not entry:
            continue
        host, port = _split_host_port(entry, connect)
        if (host, port) not in servers:
            servers.append((host, port))
    if not servers:
        raise ValueError(f"no ZooKeeper servers in connect string {connect!r}")
    return servers, chroot


def _split_host_port(entry: str, connect: str) -> tuple[str, int]:
    if entry.startswith("["):
        close = entry.find("]")
        if close < 0:
            raise ValueError(f"unterminated IPv6 address {entry!r} in connect string {connect!r}")
        host, rest = entry[1:close], entry[close + 1 :]
        if rest and not rest.startswith(":"):
            raise ValueError(f"bad server {entry!r} in connect string {connect!r}")
        port_text = rest[1:] if rest else ""
    else:
        if entry.count(":") > 1:
            raise ValueError(f"IPv6 address {entry!r} needs brackets ([addr]:port) in connect string {connect!r}")
        host, _, port_text = entry.partition(":")
    host = host.strip()
    if not host:
        raise ValueError(f"empty host in connect string {connect!r}")
    if not port_text:
        return host, DEFAULT_ZK_PORT
    if not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise ValueError(f"bad port {port_text!r} in connect string {connect!r}")
    return host, int(port_text)


def format_server(host: str, port: int) -> str:
    """``host:port``, bracketing IPv6 literals so the result parses back unambiguously."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def join_connect_string(servers: Sequence[tuple[str, int]], chroot: str | None) -> str:
    """The inverse of split_connect_string (normalised), e.g. for kazoo's ``hosts``."""
    return ",".join(format_server(h, p) for h, p in servers) + (chroot or "")


# --------------------------------------------------------------------------- znode parsers


def _is_int(value: object) -> bool:
    # JSON true/false decode to bool, which is an int subclass: a broker id of True is not 1.
    return isinstance(value, int) and not isinstance(value, bool)


def _json(data: bytes | None) -> Any:
    if data is None:
        return None
    try:
        return json.loads(data)
    except (TypeError, ValueError):  # UnicodeDecodeError is a ValueError
        return None


def parse_partition_state(data: bytes | None) -> dict[str, Any] | None:
    """Decode ``/brokers/topics/<t>/partitions/<p>/state``; None when malformed.

    Kafka's PartitionStateZNode decoder requires leader, leader_epoch, isr and
    controller_epoch, so a znode missing any of them is malformed here too —
    a half-decoded state would make an ISR comparison lie.  Other keys
    (version, leader_recovery_state) are ignored for forward compatibility.
    """
    obj = _json(data)
    if not isinstance(obj, dict):
        return None
    leader, leader_epoch, isr, controller_epoch = (obj.get(k) for k in
                                                   ("leader", "leader_epoch", "isr", "controller_epoch"))
    if not (_is_int(leader) and _is_int(leader_epoch) and _is_int(controller_epoch)):
        return None
    if not isinstance(isr, list) or not all(_is_int(b) for b in isr):
        return None
    return {"leader": leader, "leader_epoch": leader_epoch, "isr": list(isr), "controller_epoch": controller_epoch}


def parse_controller(data: bytes | None) -> int | None:
    """The ``brokerid`` of ``/controller`` (``{"version":2,"brokerid":1,"timestamp":"…"}``); None when malformed."""
    obj = _json(data)
    if not isinstance(obj, dict):
        return None
    broker = obj.get("brokerid")
    return broker if _is_int(broker) and broker >= 0 else None


def parse_controller_epoch(data: bytes | None) -> int | None:
    """``/controller_epoch`` holds a bare decimal integer; None when it does not."""
    if data is None:
        return None
    try:
        text = data.decode("ascii").strip()
    except UnicodeDecodeError:
        return None
    return int(text) if text.isdigit() else None


def parse_broker_ids(children: Iterable[str]) -> tuple[set[int], list[str]]:
    """Children of ``/brokers/ids`` as ints, plus the names that are not broker ids."""
    ids: set[int] = set()
    bad: list[str] = []
    for name in children:
        if name.isdigit():
            ids.add(int(name))
        else:
            bad.append(name)
    return ids, bad


# --------------------------------------------------------------------------- 4lw → records

Outcome = Any  # a parsed answer (SrvrStats / mntr dict) or the exception the probe raised


def describe_failure(command: str, exc: BaseException) -> str:
    """A short, stable reason for a failed 4lw probe (alerts and dashboards show it verbatim)."""
    if isinstance(exc, FourLetterNotWhitelisted):
        return f"4lw not whitelisted: {command}"
    if isinstance(exc, FourLetterTimeout):
        return TIMEOUT
    if isinstance(exc, FourLetterNotServing):
        return NOT_SERVING
    if isinstance(exc, FourLetterUnreachable):
        return REFUSED if isinstance(exc.__cause__, ConnectionRefusedError) else UNREACHABLE
    if isinstance(exc, FourLetterError):
        return IO_ERROR
    if isinstance(exc, ValueError):
        return f"unparseable {command} answer"
    return f"{command} failed: {type(exc).__name__}"


def _mntr_int(m: Mapping[str, Any], *keys: str) -> int | None:
    for key in keys:
        value = m.get(key)
        if _is_int(value):
            return int(value)
    return None


def _mntr_float(m: Mapping[str, Any], key: str) -> float | None:
    value = m.get(key)
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def server_record(cluster: str, server: str, srvr: Outcome, mntr: Outcome) -> ZkServerRecord:
    """Combine one server's ``srvr`` and ``mntr`` outcomes (answers or exceptions) into a record.

    ``srvr`` is the verdict: timeout / refused / not serving there means not
    serving, whatever ``mntr`` said a moment later.  Only when ``srvr`` is
    refused by the whitelist or unparseable — i.e. says nothing about the
    server — does a good ``mntr`` answer decide instead.
    """
    rec = ZkServerRecord(cluster=cluster, server=server, serving=False)
    notes: list[str] = []
    srvr_ok = not isinstance(srvr, BaseException)
    mntr_ok = not isinstance(mntr, BaseException)
    srvr_inconclusive = isinstance(srvr, FourLetterNotWhitelisted | ValueError)
    if srvr_ok:
        stats: SrvrStats = srvr
        rec.serving = True
        rec.mode = stats["mode"]
        rec.latency_avg_ms = stats["latency_avg"]
        rec.latency_max_ms = stats["latency_max"]
        rec.outstanding_requests = stats["outstanding"]
        rec.connections = stats["connections"]
        rec.znode_count = stats["node_count"]
        with contextlib.suppress(ValueError):
            rec.zxid_epoch, rec.zxid_counter = split_zxid(stats["zxid"])
            rec.zxid = stats["zxid"]
    elif srvr_inconclusive and mntr_ok and isinstance(mntr.get("zk_server_state"), str):
        rec.serving = True
        rec.mode = str(mntr["zk_server_state"]).lower()
        notes.append(describe_failure("srvr", srvr))
    else:
        reason = describe_failure("srvr", srvr)
        if srvr_inconclusive and not mntr_ok:
            # mntr's failure is the better verdict (timeout, not serving…) unless it says nothing either.
            if isinstance(mntr, FourLetterNotWhitelisted):
                if isinstance(srvr, FourLetterNotWhitelisted):
                    reason = "4lw not whitelisted: srvr, mntr"
            elif not isinstance(mntr, ValueError):
                reason = describe_failure("mntr", mntr)
        rec.error = reason
        return rec

    if mntr_ok:
        m: Mapping[str, Any] = mntr
        if rec.latency_avg_ms is None:
            rec.latency_avg_ms = _mntr_float(m, "zk_avg_latency")
        if rec.latency_max_ms is None:
            rec.latency_max_ms = _mntr_float(m, "zk_max_latency")
        if rec.outstanding_requests is None:
            rec.outstanding_requests = _mntr_int(m, "zk_outstanding_requests")
        if rec.connections is None:
            rec.connections = _mntr_int(m, "zk_num_alive_connections")
        if rec.znode_count is None:
            rec.znode_count = _mntr_int(m, "zk_znode_count")
        # zk_learners since 3.6; 3.4/3.5 leaders call it zk_followers.  Leader-only keys.
        rec.learners = _mntr_int(m, "zk_learners", "zk_followers")
        rec.synced_followers = _mntr_int(m, "zk_synced_followers")
    else:
        note = describe_failure("mntr", mntr)
        notes.append(note if "mntr" in note else f"mntr {note}")
    rec.error = "; ".join(notes) or None
    return rec


def server_answered(rec: ZkServerRecord) -> bool:
    """True when the server's state is known: serving, or it said it is not serving."""
    return rec.serving or rec.error == NOT_SERVING


def follower_lags(servers: Sequence[ZkServerRecord]) -> dict[str, int | None]:
    """Transactions each follower/observer is behind the leader; None where that cannot be told.

    Unknown (None) when there is not exactly one serving leader, for the leader
    itself, for servers not serving, for a follower at ``Zxid: 0x0`` (the
    post-election state before the first write of the new epoch) and for a
    follower whose zxid epoch differs from the leader's (counters of different
    epochs are not comparable).
    """
    lags: dict[str, int | None] = {s.server: None for s in servers}
    leaders = [s for s in servers if s.serving and s.mode == "leader"]
    if len(leaders) != 1:
        return lags
    leader = leaders[0]
    if leader.zxid_epoch is None or leader.zxid_counter is None:
        return lags
    for s in servers:
        if s is leader or not s.serving or s.mode not in ("follower", "observer"):
            continue
        if not s.zxid or s.zxid_epoch != leader.zxid_epoch or s.zxid_counter is None:
            continue
        lags[s.server] = max(0, leader.zxid_counter - s.zxid_counter)
    return lags


def finalize_servers(servers: Sequence[ZkServerRecord]) -> list[ZkServerRecord]:
    """Copies of ``servers`` with ``lag_behind_leader`` filled in (see follower_lags)."""
    lags = follower_lags(servers)
    return [dataclasses.replace(s, lag_behind_leader=lags[s.server]) for s in servers]


def _probe(host: str, port: int, command: str, timeout_s: float) -> Outcome:
    """One 4lw probe; failures are returned, not raised, so the pool never hides them in a future."""
    try:
        text = send_four_letter(host, port, command, timeout_s)
        return parse_srvr(text) if command == "srvr" else parse_mntr(text)
    except (FourLetterError, ValueError) as e:
        return e
    except Exception as e:  # a bug must cost one server's figures, not the poll
        log.exception("4lw %s to %s failed unexpectedly", command, format_server(host, port))
        return e


# --------------------------------------------------------------------------- znode reads


class _DeadlineExceeded(Exception):
    pass


class _ErrorLines:
    """Error lines capped at ``limit`` plus a count, so a broken cluster does not flood the snapshot."""

    def __init__(self, limit: int = MAX_ZNODE_ERRORS) -> None:
        self.limit = limit
        self.lines: list[str] = []
        self.suppressed = 0

    def add(self, line: str) -> None:
        if len(self.lines) < self.limit:
            self.lines.append(line)
        else:
            self.suppressed += 1

    def drain_into(self, out: list[str]) -> None:
        out.extend(self.lines)
        if self.suppressed:
            out.append(f"znodes: {self.suppressed} more znode problems not listed")


class _Reads:
    """Settles kazoo async results against one deadline; pipelines many in a bounded window."""

    def __init__(self, deadline: float, window: int = PIPELINE_WINDOW) -> None:
        self.deadline = deadline
        self.window = window
        self.answered = 0

    def settle(self, result: IAsyncResult) -> Any:
        """The result's value; per-znode errors (NoNode, NoAuth) are returned, session errors raised."""
        if not result.wait(max(0.0, self.deadline - time.monotonic())):
            raise _DeadlineExceeded()
        self.answered += 1
        try:
            return result.get(block=False)
        except (NoNodeError, NoAuthError) as e:
            return e

    def pipeline(self, keys: Iterable[K], submit: Callable[[K], IAsyncResult]) -> Iterator[tuple[K, Any]]:
        """Submit one read per key, keeping at most ``window`` in flight; yield (key, value) in order.

        ZooKeeper answers a session's requests in order, so waiting on the
        oldest in-flight read never waits behind a later one.
        """
        inflight: deque[tuple[K, IAsyncResult]] = deque()
        for key in keys:
            if len(inflight) >= self.window:
                k, r = inflight.popleft()
                yield k, self.settle(r)
            inflight.append((key, submit(key)))
        while inflight:
            k, r = inflight.popleft()
            yield k, self.settle(r)


def _stop_client(client: KazooClient) -> None:
    with contextlib.suppress(Exception):
        client.stop()
    with contextlib.suppress(Exception):
        client.close()


class ZkAdapter:
    """Observes one cluster's ZooKeeper ensemble; keep one per cluster and call observe() each poll."""

    def __init__(self, cluster: str, connect: str, kazoo_settings: Mapping[str, Any] | None = None,
                 four_letter_words: bool = True, timeout_s: float = 5.0) -> None:
        if timeout_s <= 0:
            raise ValueError(f"timeout_s must be positive, got {timeout_s!r}")
        self.cluster = cluster
        self.connect = connect
        self.servers, self.chroot = split_connect_string(connect)
        self.kazoo_settings = dict(kazoo_settings or {})
        self.four_letter_words = four_letter_words
        self.timeout_s = timeout_s
        self._lock = threading.Lock()
        self._client: KazooClient | None = None
        self._live: threading.Event | None = None
        self._closers: list[threading.Thread] = []
        self._closed = False
        self._pool = concurrent.futures.ThreadPoolExecutor(
            max_workers=min(32, 2 * len(self.servers)), thread_name_prefix=f"zk4lw-{cluster}")

    def __enter__(self) -> ZkAdapter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ----------------------------------------------------------------- the poll

    def observe(self, read_znodes: bool = True) -> ZkObservation:
        """One observation; ZooKeeper trouble ends up in errors/stale_sections, never in an exception."""
        with self._lock:
            if self._closed:
                raise RuntimeError("ZkAdapter is closed")
            started = time.monotonic()
            obs = ZkObservation()
            probes = self._start_probes() if self.four_letter_words else None
            if read_znodes:
                try:
                    self._read_znodes(obs, started + 2 * self.timeout_s)
                except Exception as e:  # an adapter bug must not take the poll down
                    log.exception("cluster %s: reading znodes failed unexpectedly", self.cluster)
                    obs.errors.append(f"znodes: unexpected {type(e).__name__}: {e}")
                    obs.stale_sections.add(STALE_ZNODES)
                    self._discard_client()
            if probes is not None:
                self._collect_probes(obs, probes, started + self.timeout_s + _PROBE_GRACE_S)
            return obs

    def close(self) -> None:
        """Close the session and the probe pool; waits (bounded) for background closes to finish."""
        with self._lock:
            self._closed = True
            self._discard_client()
            closers, self._closers = self._closers, []
        self._pool.shutdown(wait=False, cancel_futures=True)
        deadline = time.monotonic() + 2 * self.timeout_s
        for t in closers:
            t.join(max(0.0, deadline - time.monotonic()))

    # ----------------------------------------------------------------- 4lw

    def _start_probes(self) -> dict[tuple[str, int, str], concurrent.futures.Future[Outcome]]:
        return {(host, port, cmd): self._pool.submit(_probe, host, port, cmd, self.timeout_s)
                for host, port in self.servers for cmd in ("srvr", "mntr")}

    def _collect_probes(self, obs: ZkObservation,
                        probes: dict[tuple[str, int, str], concurrent.futures.Future[Outcome]],
                        deadline: float) -> None:
        concurrent.futures.wait(probes.values(), timeout=max(0.0, deadline - time.monotonic()))
        records = []
        for host, port in self.servers:
            name = format_server(host, port)
            outcomes: dict[str, Outcome] = {}
            for cmd in ("srvr", "mntr"):
                fut = probes[(host, port, cmd)]
                outcomes[cmd] = fut.result() if fut.done() and not fut.cancelled() else FourLetterTimeout(
                    f"{cmd} @ {name}: no answer within the poll deadline", host=host, port=port, command=cmd)
            records.append(server_record(self.cluster, name, outcomes["srvr"], outcomes["mntr"]))
        obs.servers = finalize_servers(records)
        for rec in obs.servers:
            if not rec.serving:
                obs.errors.append(f"zookeeper {rec.server}: {rec.error}")
        if not all(server_answered(r) for r in obs.servers):
            obs.stale_sections.add(STALE_ZOOKEEPER)

    # ----------------------------------------------------------------- kazoo

    def _kazoo_hosts(self) -> Any:
        hosts = self.kazoo_settings.get("hosts")
        if hosts is None:
            return join_connect_string(self.servers, self.chroot)
        if isinstance(hosts, str) and self.chroot and "/" not in hosts:
            return hosts + self.chroot
        return hosts

    def _new_client(self) -> KazooClient:
        settings = dict(self.kazoo_settings)
        settings["hosts"] = self._kazoo_hosts()
        settings.setdefault("connection_retry", dict(_CONNECTION_RETRY))
        return KazooClient(**settings)

    def _session(self, obs: ZkObservation, deadline: float) -> KazooClient | None:
        """The kept-open client once connected, or None (with the reason recorded) by the deadline."""
        if self._client is None:
            try:
                self._client = self._new_client()
                # start_async, not start(): start() stops the client itself on a
                # timeout, and that stop can block well beyond our deadline.
                self._live = self._client.start_async()
            except Exception as e:
                obs.errors.append(f"znodes: cannot start a ZooKeeper client: {type(e).__name__}: {e}")
                obs.stale_sections.add(STALE_ZNODES)
                self._discard_client()
                return None
        assert self._live is not None
        if not self._live.wait(max(0.0, deadline - time.monotonic())):
            state = self._client.state if self._client is not None else "closed"
            obs.errors.append(f"znodes: no ZooKeeper session within {2 * self.timeout_s:g}s (client {state})")
            obs.stale_sections.add(STALE_ZNODES)
            self._discard_client()
            return None
        return self._client

    def _discard_client(self) -> None:
        client, self._client, self._live = self._client, None, None
        if client is None:
            return
        t = threading.Thread(target=_stop_client, args=(client,), name=f"zk-close-{self.cluster}", daemon=True)
        t.start()
        self._closers = [c for c in self._closers if c.is_alive()] + [t]

    def _read_znodes(self, obs: ZkObservation, deadline: float) -> None:
        client = self._session(obs, deadline)
        if client is None:
            return
        reads = _Reads(deadline)
        problems = _ErrorLines()
        phase = "broker registrations"
        total = done = 0
        try:
            ids_r = client.get_children_async("/brokers/ids")
            controller_r = client.get_async("/controller")
            epoch_r = client.get_async("/controller_epoch")
            topics_r = client.get_children_async("/brokers/topics")

            ids = reads.settle(ids_r)
            if isinstance(ids, NoNodeError):
                obs.errors.append(f"znodes: {self._path('/brokers/ids')} does not exist "
                                  "(is this Kafka's ZooKeeper, and is the chroot right?)")
                obs.stale_sections.add(STALE_ZNODES)
            elif isinstance(ids, Exception):
                problems.add(f"znodes: cannot read /brokers/ids: {type(ids).__name__}")
                obs.stale_sections.add(STALE_ZNODES)
            else:
                obs.broker_ids, bad = parse_broker_ids(ids)
                for name in bad:
                    problems.add(f"znodes: /brokers/ids/{name} is not a broker id")

            phase = "controller"
            value = reads.settle(controller_r)
            if not isinstance(value, NoNodeError):  # no /controller: an election is in progress
                obs.controller_id = self._decoded(value, "/controller", parse_controller, problems)
            value = reads.settle(epoch_r)
            if not isinstance(value, NoNodeError):
                obs.controller_epoch = self._decoded(value, "/controller_epoch", parse_controller_epoch, problems)

            phase = "topics"
            topics = reads.settle(topics_r)
            if isinstance(topics, Exception):
                if not isinstance(topics, NoNodeError):  # no /brokers/topics: no topic was ever created
                    problems.add(f"znodes: cannot read /brokers/topics: {type(topics).__name__}")
                topics = []
            partitions: list[tuple[str, int]] = []
            for topic, children in reads.pipeline(
                    sorted(topics), lambda t: client.get_children_async(f"/brokers/topics/{t}/partitions")):
                if isinstance(children, Exception):
                    why = "has no partitions znode" if isinstance(children, NoNodeError) else type(children).__name__
                    problems.add(f"znodes: topic {topic} {why}; skipped")
                    continue
                for child in children:
                    if child.isdigit():
                        partitions.append((topic, int(child)))
                    else:
                        problems.add(f"znodes: /brokers/topics/{topic}/partitions/{child} is not a partition")

            phase = "partition states"
            total = len(partitions)
            for (topic, index), value in reads.pipeline(
                    sorted(partitions),
                    lambda tp: client.get_async(f"/brokers/topics/{tp[0]}/partitions/{tp[1]}/state")):
                done += 1
                path = f"/brokers/topics/{topic}/partitions/{index}/state"
                state = self._decoded(value, path, parse_partition_state, problems)
                if state is not None:
                    obs.partition_states[(topic, index)] = state
        except _DeadlineExceeded:
            progress = f" ({done} of {total} partition states read)" if phase == "partition states" else ""
            obs.errors.append(f"znodes: deadline of {2 * self.timeout_s:g}s passed while reading {phase}{progress}")
            obs.stale_sections.add(STALE_ZNODES)
            if reads.answered == 0 or not client.connected:
                self._discard_client()
        except Exception as e:  # ConnectionLoss, SessionExpired, ConnectionClosed, AuthFailed, …
            obs.errors.append(f"znodes: reading {phase} failed: {type(e).__name__}: {e}".rstrip(": "))
            obs.stale_sections.add(STALE_ZNODES)
            self._discard_client()
        finally:
            problems.drain_into(obs.errors)

    def _path(self, path: str) -> str:
        return f"{self.chroot}{path}" if self.chroot else path

    @staticmethod
    def _decoded(value: Any, path: str, parse: Callable[[bytes], Any], problems: _ErrorLines) -> Any:
        """Parse a get() answer ``(data, stat)``; record why when it is missing or malformed."""
        if isinstance(value, NoNodeError):
            problems.add(f"znodes: {path} is missing (deleted while reading?)")
            return None
        if isinstance(value, Exception):
            problems.add(f"znodes: cannot read {path}: {type(value).__name__}")
            return None
        data = value[0]
        parsed = parse(data)
        if parsed is None:
            problems.add(f"znodes: malformed {path}: {bytes(data or b'')[:80]!r}")
        return parsed
