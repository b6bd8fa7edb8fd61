"""ZooKeeper four-letter-word (4lw) client and parsers.

The 4lw interface is what an operator can still reach when a ZooKeeper node is
sick: it needs no session, no client library and no quorum.  That makes it the
right probe for a reliability monitor, but only if the probe itself cannot
wedge: a node that is SIGSTOPped, swapping or stuck in a GC pause accepts TCP
connections (the kernel completes the handshake) and then never answers.  So
every call here runs against one total deadline rather than per-operation
timeouts, and every failure mode an alert rule needs to tell apart gets its own
exception class.

The parsers are pure functions so that they can be tested on captured texts and
reused on answers obtained by other means (e.g. through an SSH tunnel).

An ensemble that only listens on its secure client port (ZooKeeper 3.5+ with
the Netty connection factory and ``secureClientPort``) answers four-letter
words there too, after the TLS handshake: ``send_four_letter(..., tls=ctx)``
with the context `tls_context` builds, which trusts exactly what kazoo's own
connections trust.  Sent in plaintext to such a port, a probe gets no answer
(ZooKeeper's TLS layer waits for the rest of a TLS record that never comes)
or a closed connection: a healthy server would read as timed out or not
serving.
"""

from __future__ import annotations

import contextlib
import math
import re
import socket
import ssl
import time
from collections.abc import Callable
from typing import Any, ClassVar, TypedDict

__all__ = [
    "NOT_SERVING_MARKER",
    "NOT_WHITELISTED_MARKER",
    "FourLetterError",
    "FourLetterNotServing",
    "FourLetterNotWhitelisted",
    "FourLetterTimeout",
    "FourLetterTlsError",
    "FourLetterUnreachable",
    "SrvrStats",
    "parse_mntr",
    "parse_srvr",
    "send_four_letter",
    "split_zxid",
    "tls_context",
]

# Exact phrases ZooKeeper (3.4 - 3.9) writes instead of the command's answer.
NOT_WHITELISTED_MARKER = "is not executed because it is not in the whitelist"
NOT_SERVING_MARKER = "This ZooKeeper instance is not currently serving requests"

_COMMAND_RE = re.compile(r"^[a-z]{4}$")
_MAX_RESPONSE_BYTES = 16 * 1024 * 1024  # a runaway peer must not exhaust our memory


class FourLetterError(Exception):
    """A 4lw probe did not yield a usable answer.

    ``kind`` lets callers (alert rules, dashboards) branch on the failure mode
    without an isinstance ladder; the subclasses let ``except`` clauses do the
    same.  ``kind == "io"`` is an unexpected I/O failure after the connection
    was established (e.g. a reset mid-answer).
    """

    kind: ClassVar[str] = "io"

    def __init__(self, message: str, *, host: str, port: int, command: str, response: str = "") -> None:
        super().__init__(message)
        self.host = host
        self.port = port
        self.command = command
        self.response = response


class FourLetterUnreachable(FourLetterError):
    """Nothing accepted the connection: process dead, port wrong or filtered."""

    kind: ClassVar[str] = "unreachable"


class FourLetterTimeout(FourLetterError):
    """The deadline passed: the process exists but does not answer (stopped, paused, overloaded)."""

    kind: ClassVar[str] = "timeout"


class FourLetterNotWhitelisted(FourLetterError):
    """The server is up but refuses this command; a config problem, not an outage."""

    kind: ClassVar[str] = "not_whitelisted"


class FourLetterNotServing(FourLetterError):
    """The JVM answers but has no quorum (LOOKING / electing / syncing)."""

    kind: ClassVar[str] = "not_serving"


class FourLetterTlsError(FourLetterError):
    """The TLS handshake failed, or TLS broke down before the answer: the server's certificate is not trusted
    (unknown issuer, a host name it does not name, expired), the server refused ours, or the port does not speak
    TLS.  Something listens, but the probe could not (or must not) talk to it."""

    kind: ClassVar[str] = "tls"


def tls_context(*, ca: str | None = None, certfile: str | None = None, keyfile: str | None = None,
                keyfile_password: str | None = None, verify_certs: bool = True,
                check_hostname: bool = True) -> ssl.SSLContext:
    """A client context for `send_four_letter` that trusts what kazoo's own connections trust.

    Built as kazoo (2.x, ``kazoo.handlers.utils.create_tcp_connection``) builds one from the KazooClient
    keywords of the same names: the system's default CA certificates plus ``ca``, the client certificate when
    both ``certfile`` and ``keyfile`` are given, and the host-name check as asked (kazoo's own default is off;
    this one's is on).  As kazoo, refuses ``check_hostname`` without ``verify_certs``.  Raises OSError /
    ssl.SSLError when a file cannot be read.
    """
    if check_hostname and not verify_certs:
        raise ValueError("verify_certs must be True when check_hostname is True")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.load_default_certs(ssl.Purpose.SERVER_AUTH)
    context.check_hostname = check_hostname  # before verify_mode: CERT_NONE is refused while it is on
    context.verify_mode = ssl.CERT_REQUIRED if verify_certs else ssl.CERT_NONE
    if ca:
        context.load_verify_locations(ca)
    if certfile and keyfile:
        context.load_cert_chain(certfile=certfile, keyfile=keyfile, password=keyfile_password)
    return context


def send_four_letter(host: str, port: int, command: str, timeout: float = 2.0, *,
                     tls: ssl.SSLContext | None = None) -> str:
    """Send one 4lw command and return the server's full answer.

    ZooKeeper closes the connection after answering, so EOF is the only
    reliable end-of-answer marker; ``timeout`` bounds connect + send + the
    whole read, so a server that accepts but never answers costs at most
    ``timeout`` seconds.

    With ``tls`` (see `tls_context`) the command goes over TLS, the server's
    certificate checked against ``host`` when the context checks host names;
    the handshake counts against the same ``timeout``.  A failed handshake,
    or a TLS error while reading, is a `FourLetterTlsError`.
    """
    if not _COMMAND_RE.match(command):
        raise ValueError(f"a four-letter word is 4 lowercase ASCII letters, got {command!r}")
    if timeout <= 0:
        raise ValueError(f"timeout must be positive, got {timeout!r}")

    where = f"{command} @ {host}:{port}"
    ctx = {"host": host, "port": port, "command": command}
    deadline = time.monotonic() + timeout

    def remaining() -> float:
        left = deadline - time.monotonic()
        if left <= 0:
            raise FourLetterTimeout(f"{where}: no complete answer within {timeout:g}s", **ctx)
        return left

    try:
        sock = socket.create_connection((host, port), timeout=remaining())
    except TimeoutError as exc:
        raise FourLetterTimeout(f"{where}: connect timed out after {timeout:g}s", **ctx) from exc
    except OSError as exc:
        # ECONNREFUSED, EHOSTUNREACH, name resolution failures...: nobody to talk to.
        raise FourLetterUnreachable(f"{where}: unreachable ({exc})", **ctx) from exc

    if tls is not None:
        sock = _tls_handshake(sock, tls, where, timeout, remaining, ctx)

    chunks: list[bytes] = []
    size = 0
    try:
        with sock:
            sock.settimeout(remaining())
            sock.sendall(command.encode("ascii"))
            while True:
                sock.settimeout(remaining())
                chunk = sock.recv(65536)
                if not chunk:
                    break
                chunks.append(chunk)
                size += len(chunk)
                if size > _MAX_RESPONSE_BYTES:
                    raise FourLetterError(f"{where}: answer exceeds {_MAX_RESPONSE_BYTES} bytes", **ctx)
    except TimeoutError as exc:
        raise FourLetterTimeout(f"{where}: no complete answer within {timeout:g}s", **ctx) from exc
    except FourLetterError:
        raise
    except ssl.SSLError as exc:
        # e.g. TLS 1.3: a server that refuses our certificate says so after the client's side of the handshake
        raise FourLetterTlsError(f"{where}: TLS error ({exc})", **ctx) from exc
    except OSError as exc:
        raise FourLetterError(f"{where}: I/O error ({exc})", **ctx) from exc

    text = b"".join(chunks).decode("utf-8", errors="replace")
    if NOT_WHITELISTED_MARKER in text:
        raise FourLetterNotWhitelisted(f"{where}: {text.strip()}", response=text, **ctx)
    if NOT_SERVING_MARKER in text:
        raise FourLetterNotServing(f"{where}: {text.strip()}", response=text, **ctx)
    if not text.strip():
        # Accepted, then closed without a word: what a server does while it tears down its client
        # connections to change roles (quorum lost, going LOOKING). It is not serving at that moment;
        # calling the answer "unparseable" would send on-call looking for a protocol problem.
        raise FourLetterNotServing(f"{where}: closed the connection without an answer", response=text, **ctx)
    return text


def _tls_handshake(sock: socket.socket, tls: ssl.SSLContext, where: str, timeout: float,
                   remaining: Callable[[], float], ctx: dict[str, Any]) -> ssl.SSLSocket:
    """``sock`` wrapped in TLS, the handshake done within the probe's deadline; closes ``sock`` on failure."""
    try:
        sock.settimeout(remaining())
        return tls.wrap_socket(sock, server_hostname=ctx["host"])
    except FourLetterTimeout:
        sock.close()
        raise
    except TimeoutError as exc:  # accepted, then no handshake: as stopped as a server that never answers
        sock.close()
        raise FourLetterTimeout(f"{where}: TLS handshake timed out after {timeout:g}s", **ctx) from exc
    except (OSError, ValueError) as exc:  # ssl.SSLError (certificate refused...), or reset/closed mid-handshake
        with contextlib.suppress(OSError):
            sock.close()
        raise FourLetterTlsError(f"{where}: TLS handshake failed ({exc})", **ctx) from exc


class SrvrStats(TypedDict):
    """Typed so a misspelt key in an alert rule is a type error rather than a silent KeyError at 3 am."""

    version: str
    latency_min: float | None  # None: not a finite number (`_srvr_latency`)
    latency_avg: float | None
    latency_max: float | None
    received: int
    sent: int
    connections: int
    outstanding: int
    zxid: int
    mode: str
    node_count: int


_SRVR_INT_FIELDS = {
    "received": "received",
    "sent": "sent",
    "connections": "connections",
    "outstanding": "outstanding",
    "node count": "node_count",
}


def _srvr_latency(value: str) -> float | None:
    """One of srvr's latencies, None where it is not a finite number ("NaN", "inf", "1e400"): as `parse_mntr` keeps
    those out of its numbers, so that they never reach the exporter or the rules as values. Unknown, not an
    unparseable answer: the server answered, and its mode and zxid are good."""
    number = float(value)  # anything else but a number is a ValueError: the answer is unparseable
    return number if math.isfinite(number) else None


def parse_srvr(text: str) -> SrvrStats:
    """Parse a ``srvr`` answer.

    Lines we do not know (e.g. ``Proposal sizes last/min/max`` on leaders) are
    ignored so a newer server does not break the monitor; a missing field we
    rely on is an error, because a silently defaulted zxid or mode would make
    the monitor lie.
    """
    found: dict[str, object] = {}
    for raw in text.splitlines():
        label, sep, value = raw.partition(":")
        if not sep:
            continue
        key = label.strip().lower()
        value = value.strip()
        try:
            if key == "zookeeper version":
                found["version"] = value
            elif key == "latency min/avg/max":
                lo, avg, hi = (_srvr_latency(v) for v in value.split("/"))
                found.update(latency_min=lo, latency_avg=avg, latency_max=hi)
            elif key in _SRVR_INT_FIELDS:
                found[_SRVR_INT_FIELDS[key]] = int(value)
            elif key == "zxid":
                found["zxid"] = int(value, 16) if value.lower().startswith("0x") else int(value)
            elif key == "mode":
                found["mode"] = value.lower()
        except ValueError as exc:
            raise ValueError(f"srvr: bad value for {label.strip()!r}: {value!r}") from exc

    missing = [k for k in SrvrStats.__annotations__ if k not in found]
    if missing:
        snippet = text.strip()[:200]
        raise ValueError(f"srvr: answer lacks {', '.join(missing)}: {snippet!r}")
    return SrvrStats(**found)  # type: ignore[typeddict-item]


_INT_RE = re.compile(r"^[-+]?\d+$")
_FLOAT_RE = re.compile(r"^[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?$")


def _mntr_value(value: str) -> int | float | str:
    # Regexes rather than try/float(): "NaN", "inf" and "1_000" must stay strings
    # instead of becoming numbers that poison averages.
    if _INT_RE.match(value):
        return int(value)
    if _FLOAT_RE.match(value):
        number = float(value)
        return number if math.isfinite(number) else value  # "1e400" overflows to inf: a string too
    return value


def parse_mntr(text: str) -> dict[str, int | float | str]:
    """Parse a ``mntr`` answer (one ``key<TAB>value`` per line).

    Keys are kept verbatim (``zk_...``) so they match ZooKeeper's documentation
    and the Prometheus names operators already know.
    """
    result: dict[str, int | float | str] = {}
    for raw in text.splitlines():
        key, sep, value = raw.partition("\t")
        key = key.strip()
        if not sep or not key:
            continue
        result[key] = _mntr_value(value.strip())
    if not result:
        raise ValueError(f"mntr: no key/value lines in answer: {text.strip()[:200]!r}")
    return result


def split_zxid(zxid: int) -> tuple[int, int]:
    """Split a zxid into (epoch, counter).

    The epoch (high 32 bits) increases with every successful leader election,
    which is how the monitor detects elections between two polls even when it
    never saw a LOOKING state; the counter (low 32 bits) counts transactions
    within that epoch.
    """
    if not 0 <= zxid < 1 << 64:
        raise ValueError(f"zxid must be an unsigned 64-bit integer, got {zxid!r}")
    return zxid >> 32, zxid & 0xFFFFFFFF
