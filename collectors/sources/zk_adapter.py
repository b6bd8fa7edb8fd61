"""One poll of a ZooKeeper ensemble: server health over 4lw, Kafka's znodes over kazoo.

Two independent views, because they fail independently:

* **Four-letter words** (``srvr`` + ``mntr``) go to *every* server of the
  connect string, concurrently, each bounded by ``timeout_s``.  They need no
  session and no quorum, so they still describe a sick ensemble: who leads,
  who is LOOKING, who is paused (a SIGSTOPped JVM accepts TCP connections and
  never answers, hence the hard deadline).  Answers become records in
  `collectors.sources.zk_servers`.
* **kazoo** reads what Kafka publishes (``/brokers/ids``, ``/controller``,
  ``/controller_epoch``, every ``/brokers/topics/<t>/partitions/<p>/state``)
  through one session kept open across polls, so a healthy poll costs no
  handshake.  The reads are pipelined (`collectors.sources.zk_znodes`, with
  the measurements behind the window size).

``observe()`` never raises for ZooKeeper trouble and returns within about
``2 × timeout_s``: the 4lw probes run in a thread pool while the calling
thread reads the znodes against one overall deadline.  Whatever could not be
refreshed is named in ``errors`` and in ``stale_sections`` ("zookeeper" for
the 4lw view, "znodes" for the kazoo view) so the rules keep alerts open on
missing evidence instead of resolving them.

This module holds the parts with state — the probe pool and the kazoo
session — and re-exports the pure helpers the tests and callers have always
imported from here.  Decisions about the session and the whole poll, written
down so nobody has to rediscover them:

* ``four_letter_words=False`` yields **no server records** (``servers == []``)
  rather than records with ``serving=False``: without 4lw we know nothing about
  the servers, and ``serving=False`` would raise false "quorum lost" criticals
  and a non-zero exit code.  The section is not marked stale either, because
  nothing failed — the operator chose not to look.
* The kazoo session is dropped (closed in a background thread, recreated on the
  next poll) when it cannot be established in time, when a read fails for a
  session reason, or when the deadline passes with no read answered.  A
  deadline passed while answers were still flowing (a huge cluster on a slow
  link) keeps the session: recreating it would only make the next poll slower.
  kazoo's ``stop()`` can block for seconds while it is mid-way through a
  connection attempt, which is why closing never happens on the poll's thread.
* When ``kazoo_settings`` gives its own ``hosts`` string without a chroot, the
  connect string's chroot is appended, so the chroot cannot be lost by the
  configuration layer.
* With ``use_ssl`` the four-letter words go over TLS too, with the context
  kazoo would build from the same settings (`tls_context`): the same CA file,
  client certificate and host-name check.  An ensemble that only listens on
  its secure client port answers them there; sent in plaintext they got no
  answer (the server's TLS layer waits for the rest of a TLS record), i.e. a
  "timeout" for every healthy server and a false ``zk_quorum_lost``.  A TLS
  ``kazoo_settings`` without ``check_hostname`` gets it on (kazoo's own
  default is off), as does ``verify_certs``: the host-name check is turned off
  only explicitly (`collectors.sources.client_settings.kazoo_settings` does
  for ``endpoint_identification_algorithm: none``).  The probes' context is kept
  across polls (building one reads the system's CA store, ~40 ms) and rebuilt
  when one of its files changes, so a rotated certificate reaches the probes as
  it reaches kazoo (which reads the files at each connection).  One that cannot
  be built fails every probe of that poll, the reason in the poll's errors.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import logging
import os
import ssl
import threading
import time
from collections.abc import Mapping

from kazoo.client import KazooClient

from collectors.model.observations import ZkObservation
from collectors.sources.endpoints import DEFAULT_ZK_PORT, format_server, join_connect_string, split_connect_string
from collectors.sources.zk_fourletter import FourLetterTimeout, FourLetterTlsError, tls_context
from collectors.sources.zk_servers import (
    STALE_ZOOKEEPER,
    Outcome,
    describe_failure,
    finalize_servers,
    follower_lags,
    probe,
    server_answered,
    server_record,
)
from collectors.sources.zk_znodes import (
    MAX_ZNODE_ERRORS,
    PIPELINE_WINDOW,
    STALE_ZNODES,
    parse_broker_ids,
    parse_controller,
    parse_controller_epoch,
    parse_partition_state,
    read_kafka_znodes,
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

# Slack for thread scheduling on top of the 4lw timeout (each probe already
# bounds itself by timeout_s; this only guards against a starved pool).
_PROBE_GRACE_S = 0.5
# kazoo's default connection retry backs off up to an hour; a monitor's session
# must come back as soon as a server does.
_CONNECTION_RETRY = {"max_tries": -1, "delay": 0.1, "backoff": 2, "max_delay": 1.0}

_Probes = dict[tuple[str, int, str], concurrent.futures.Future[Outcome]]
"""(host, port, command) → the probe's future."""

_TLS_FILES = ("ca", "certfile", "keyfile")
"""The kazoo settings naming files the TLS context is built from."""


def _file_signature(path: object) -> object:
    """What tells a changed file from the one a context was built from (None: no such setting)."""
    if not path:
        return None
    try:
        st = os.stat(str(path))
    except OSError as e:
        return (str(path), type(e).__name__)
    return (str(path), st.st_ino, st.st_mtime_ns, st.st_size)


def _stop_client(client: KazooClient) -> None:
    with contextlib.suppress(Exception):
        client.stop()
    with contextlib.suppress(Exception):
        client.close()


class ZkAdapter:
    """Observes one cluster's ZooKeeper ensemble; keep one per cluster and call observe() each poll.

    ``kazoo_settings`` are KazooClient keyword arguments (`collectors.sources.client_settings.kazoo_settings`
    builds them from the configuration); the adapter adds ``connection_retry`` unless given.
    """

    def __init__(self, cluster: str, connect: str, kazoo_settings: Mapping[str, object] | None = None,
                 four_letter_words: bool = True, timeout_s: float = 5.0) -> None:
        if timeout_s <= 0:
            raise ValueError(f"timeout_s must be positive, got {timeout_s!r}")
        self.cluster = cluster
        self.connect = connect
        self.servers, self.chroot = split_connect_string(connect)
        self.kazoo_settings: dict[str, object] = dict(kazoo_settings or {})
        if self.kazoo_settings.get("use_ssl"):
            self.kazoo_settings.setdefault("verify_certs", True)
            self.kazoo_settings.setdefault("check_hostname", bool(self.kazoo_settings["verify_certs"]))
        self._tls: tuple[object, ssl.SSLContext] | None = None  # (files' signature, the probes' context)
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

    def _probe_tls(self) -> ssl.SSLContext | None:
        """The probes' TLS context (None without ``use_ssl``), as kazoo builds its own from the same settings."""
        s = self.kazoo_settings
        if not s.get("use_ssl"):
            return None
        signature = tuple(_file_signature(s.get(k)) for k in _TLS_FILES)
        if self._tls is not None and self._tls[0] == signature:
            return self._tls[1]

        def text(key: str) -> str | None:
            value = s.get(key)
            return str(value) if value else None

        context = tls_context(ca=text("ca"), certfile=text("certfile"), keyfile=text("keyfile"),
                              keyfile_password=text("keyfile_password"),
                              verify_certs=bool(s.get("verify_certs", True)),
                              check_hostname=bool(s.get("check_hostname", True)))
        self._tls = (signature, context)
        return context

    def _start_probes(self) -> _Probes:
        try:
            tls = self._probe_tls()
        except Exception as e:  # a CA file gone, a key that does not match: every probe fails, with the reason
            probes: _Probes = {}
            for host, port in self.servers:
                for cmd in ("srvr", "mntr"):
                    failed: concurrent.futures.Future[Outcome] = concurrent.futures.Future()
                    failed.set_result(FourLetterTlsError(
                        f"{cmd} @ {format_server(host, port)}: cannot set up TLS ({type(e).__name__}: {e})",
                        host=host, port=port, command=cmd))
                    probes[(host, port, cmd)] = failed
            return probes
        return {(host, port, cmd): self._pool.submit(probe, host, port, cmd, self.timeout_s, tls)
                for host, port in self.servers for cmd in ("srvr", "mntr")}

    def _collect_probes(self, obs: ZkObservation, probes: _Probes, deadline: float) -> None:
        concurrent.futures.wait(probes.values(), timeout=max(0.0, deadline - time.monotonic()))
        records = []
        tls_failures: dict[str, FourLetterTlsError] = {}
        for host, port in self.servers:
            name = format_server(host, port)
            outcomes: dict[str, Outcome] = {}
            for cmd in ("srvr", "mntr"):
                fut = probes[(host, port, cmd)]
                outcomes[cmd] = fut.result() if fut.done() and not fut.cancelled() else FourLetterTimeout(
                    f"{cmd} @ {name}: no answer within the poll deadline", host=host, port=port, command=cmd)
            if isinstance(outcomes["srvr"], FourLetterTlsError):
                tls_failures[name] = outcomes["srvr"]
            records.append(server_record(self.cluster, name, outcomes["srvr"], outcomes["mntr"]))
        obs.servers = finalize_servers(records)
        for rec in obs.servers:
            if not rec.serving:
                # A TLS failure's short reason cannot say which check refused: the error line does.
                detail = f" ({tls_failures[rec.server]})" if rec.server in tls_failures else ""
                obs.errors.append(f"zookeeper {rec.server}: {rec.error}{detail}")
        if not all(server_answered(r) for r in obs.servers):
            obs.stale_sections.add(STALE_ZOOKEEPER)

    # ----------------------------------------------------------------- kazoo

    def _kazoo_hosts(self) -> object:
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
        if not read_kafka_znodes(client, obs, deadline, chroot=self.chroot, budget_s=2 * self.timeout_s):
            self._discard_client()
