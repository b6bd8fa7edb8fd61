"""ZooKeeper server health from four-letter words: one ``srvr`` + ``mntr`` answer pair per server → one record.

The 4lw view needs no session and no quorum, so it still describes a sick ensemble: who leads, who is
LOOKING, who is paused. `collectors.sources.zk_adapter` sends the probes (every server, concurrently, each
bounded by the poll's timeout) and hands the answers, or the exceptions met instead, to the pure functions
here, which tests feed with captured answers.

Decisions, written down so nobody has to rediscover them:

* ``srvr`` is the verdict on a server; ``mntr`` only adds learner counts (it is
  not in ZooKeeper's default whitelist, which is ``srvr`` alone).  A server
  whose ``mntr`` is refused is still serving, with the refusal noted in
  ``error``.  When ``srvr`` itself is refused or unparseable, a good ``mntr``
  answer stands in for it (mode, latencies, counts — but no zxid).
* "zookeeper" is stale when some server gave no usable answer (timeout,
  refused, I/O error, both words refused).  A definite "not serving" answer is
  evidence, not missing data, so it does not make the section stale.
* A probe whose TLS failed (certificate not trusted, a host name it does not
  name, our certificate refused, no TLS on the port) says ``TLS failed: srvr``
  rather than "i/o error": nothing broke off, the monitor could not (or must
  not) talk to that server.  The details are in the poll's errors.
* ``lag_behind_leader`` is set on followers and observers only (None on the
  leader and on standalone servers), and only when exactly one server claims
  leadership and both zxids are in the same epoch.  A follower reporting
  ``Zxid: 0x0`` (ZooKeeper does this right after an election until the first
  write of the new epoch) or a zxid of an older epoch is unknown, not
  "billions behind".  Concurrent probes can catch a follower a few
  transactions *ahead* of the leader's answer; that clamps to 0.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import ssl
from collections.abc import Mapping, Sequence
from typing import Final

from collectors.model.records import ZkServerRecord
from collectors.model.vocabulary import (
    ZK_IO_ERROR,
    ZK_NOT_SERVING,
    ZK_REFUSED,
    ZK_TIMEOUT,
    ZK_TLS_FAILED,
    ZK_UNREACHABLE,
)
from collectors.sources.endpoints import format_server
from collectors.sources.zk_fourletter import (
    FourLetterError,
    FourLetterNotServing,
    FourLetterNotWhitelisted,
    FourLetterTimeout,
    FourLetterTlsError,
    FourLetterUnreachable,
    SrvrStats,
    parse_mntr,
    parse_srvr,
    send_four_letter,
    split_zxid,
)

__all__ = [
    "IO_ERROR",
    "NOT_SERVING",
    "REFUSED",
    "STALE_ZOOKEEPER",
    "TIMEOUT",
    "UNREACHABLE",
    "MntrAnswer",
    "Outcome",
    "describe_failure",
    "finalize_servers",
    "follower_lags",
    "probe",
    "server_answered",
    "server_record",
]

log = logging.getLogger(__name__)

NOT_SERVING: Final = ZK_NOT_SERVING
TIMEOUT: Final = ZK_TIMEOUT
REFUSED: Final = ZK_REFUSED
UNREACHABLE: Final = ZK_UNREACHABLE
IO_ERROR: Final = ZK_IO_ERROR

STALE_ZOOKEEPER: Final = "zookeeper"
"""The stale section of the 4lw view (see `server_answered`)."""

MntrAnswer = dict[str, int | float | str]
"""A parsed ``mntr`` answer (`parse_mntr`)."""
Outcome = SrvrStats | MntrAnswer | BaseException
"""What one probe yields: the parsed answer, or the exception the probe met instead."""


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
    if isinstance(exc, FourLetterTlsError):
        # Not "i/o error" ("broke off mid-answer"): the server may be fine and the certificate the problem.
        return f"{ZK_TLS_FAILED}: {command}"
    if isinstance(exc, FourLetterError):
        return IO_ERROR
    if isinstance(exc, ValueError):
        return f"unparseable {command} answer"
    return f"{command} failed: {type(exc).__name__}"


def _mntr_int(m: Mapping[str, object], *keys: str) -> int | None:
    for key in keys:
        value = m.get(key)
        if isinstance(value, int) and not isinstance(value, bool):
            return int(value)
    return None


def _mntr_float(m: Mapping[str, object], key: str) -> float | None:
    value = m.get(key)
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def server_record(cluster: str, server: str, srvr: SrvrStats | BaseException,
                  mntr: MntrAnswer | BaseException) -> ZkServerRecord:
    """Combine one server's ``srvr`` and ``mntr`` outcomes (answers or exceptions) into a record.

    ``srvr`` is the verdict: timeout / refused / not serving there means not
    serving, whatever ``mntr`` said a moment later.  Only when ``srvr`` is
    refused by the whitelist or unparseable — i.e. says nothing about the
    server — does a good ``mntr`` answer decide instead.
    """
    rec = ZkServerRecord(cluster=cluster, server=server, serving=False)
    notes: list[str] = []
    srvr_inconclusive = isinstance(srvr, FourLetterNotWhitelisted | ValueError)
    if not isinstance(srvr, BaseException):
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
    elif srvr_inconclusive and not isinstance(mntr, BaseException) and isinstance(mntr.get("zk_server_state"), str):
        rec.serving = True
        rec.mode = str(mntr["zk_server_state"]).lower()
        notes.append(describe_failure("srvr", srvr))
    else:
        reason = describe_failure("srvr", srvr)
        if srvr_inconclusive and isinstance(mntr, BaseException):
            # mntr's failure is the better verdict (timeout, not serving…) unless it says nothing either.
            if isinstance(mntr, FourLetterNotWhitelisted):
                if isinstance(srvr, FourLetterNotWhitelisted):
                    reason = "4lw not whitelisted: srvr, mntr"
            elif not isinstance(mntr, ValueError):
                reason = describe_failure("mntr", mntr)
        rec.error = reason
        return rec

    if not isinstance(mntr, BaseException):
        m: Mapping[str, object] = mntr
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
    """True when the server's state is known: serving, or it said it is not serving.

    A server for which this is False makes the "zookeeper" section stale: its figures are missing, not bad.
    """
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


def probe(host: str, port: int, command: str, timeout_s: float, tls: ssl.SSLContext | None = None) -> Outcome:
    """One 4lw probe (over TLS with ``tls``); failures are returned, not raised, so the pool never hides them in a
    future."""
    try:
        text = send_four_letter(host, port, command, timeout_s, tls=tls)
        return parse_srvr(text) if command == "srvr" else parse_mntr(text)
    except (FourLetterError, ValueError) as e:
        return e
    except Exception as e:  # a bug must cost one server's figures, not the poll
        log.exception("4lw %s to %s failed unexpectedly", command, format_server(host, port))
        return e
