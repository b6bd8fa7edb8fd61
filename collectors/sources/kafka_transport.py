"""Concurrent, individually-failing protocol requests over kafka-python's connection manager.

kafka-python's admin methods raise on the first error of a batch, so one
coordinator answering NOT_COORDINATOR would cost the whole poll. Here every
request is fired before any is awaited (they run concurrently on the client's
IO thread) and each result is either its response or the exception it met,
so the caller decides per broker what is stale. kafka-python is pinned
(requirements.txt); `_manager` is its documented-in-source transport.
"""

from __future__ import annotations

import logging
import ssl
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import kafka.errors as kafka_errors
from kafka.admin import KafkaAdminClient
from kafka.net.compat import KafkaNetClient

from collectors.model.secrets import REDACTED, is_secret_key
from collectors.sources.client_settings import CLIENT_ID
from collectors.sources.limiter import RequestLimiter

log = logging.getLogger(__name__)


class _RedactClientConfig(logging.Filter):
    """KafkaAdminClient logs its whole configuration at DEBUG, sasl_plain_password included: redact it.

    The CLI raises the `kafka` loggers to CRITICAL, but an embedding program (or a test's log capture) may not.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, Mapping):  # logging unwraps a lone dict argument into record.args
            record.args = {k: (REDACTED if isinstance(k, str) and is_secret_key(k) and v is not None else v)
                           for k, v in record.args.items()}
        return True


logging.getLogger("kafka.admin.client").addFilter(_RedactClientConfig())

_SASL_AUTHENTICATE = 36  # api key of SaslAuthenticate, whose auth_bytes carry a PLAIN password or an OAuth token


def _is_sasl_authenticate(arg: object) -> bool:
    if isinstance(arg, bytes | bytearray | memoryview):  # a raw frame: int32 size, then int16 api key
        frame = bytes(arg[:6])
        return len(frame) == 6 and int.from_bytes(frame[4:6], "big") == _SASL_AUTHENTICATE
    return type(arg).__name__.startswith(("SaslAuthenticateRequest", "SaslBytesRequest"))


class _RedactSaslRequests(logging.Filter):
    """At DEBUG kafka-python logs every request it sends, as an object and as raw bytes; a SaslAuthenticate
    request holds the PLAIN password or the OAUTHBEARER token. Those arguments are replaced."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple) and any(_is_sasl_authenticate(a) for a in record.args):
            record.args = tuple(f"<{type(a).__name__} redacted: SASL credentials>" if _is_sasl_authenticate(a) else a
                                for a in record.args)
        return True


for _name in ("kafka.net.connection", "kafka.protocol.parser"):
    logging.getLogger(_name).addFilter(_RedactSaslRequests())


@dataclass(frozen=True)
class Outcome:
    node_id: int | None
    request: Any
    response: Any | None
    error: BaseException | None

    @property
    def ok(self) -> bool:
        return self.error is None


# Rejections that retrying cannot fix: wrong credentials or mechanism, or a certificate the client does not trust.
FATAL_CONNECT_ERRORS = (kafka_errors.SaslAuthenticationFailedError, kafka_errors.UnsupportedSaslMechanismError,
                        kafka_errors.IllegalSaslStateError, kafka_errors.AuthorizationError,
                        ssl.SSLCertVerificationError)


def is_fatal_connect_error(exc: BaseException) -> bool:
    """FATAL_CONNECT_ERRORS, and a TLS verification failure that kafka-python re-raised as a connection error
    (``KafkaConnectionError('Handshake failed: [SSL: CERTIFICATE_VERIFY_FAILED] ...')``, without a cause)."""
    if isinstance(exc, FATAL_CONNECT_ERRORS):
        return True
    return isinstance(exc, kafka_errors.KafkaConnectionError) and "CERTIFICATE_VERIFY_FAILED" in str(exc)


@dataclass
class _BootstrapWatch:
    """What kafka-python's bootstrap met, so a failed bootstrap can say why (kafka-python 3.0.12).

    Its bootstrap loop retries every failure until the deadline and then raises only "Unable to bootstrap":
    a wrong password or an untrusted certificate would read like a network outage, and be retried (a failed
    login each time) for the whole timeout. `_connect` means to make authentication failures sticky
    (`_auth_failures`) but never sees them, because connection setup reports through the connection's init
    future. Here that future is watched: once every bootstrap server has rejected us for a reason retrying
    cannot fix (`is_fatal_connect_error`), the failures are made sticky so bootstrap stops at once with that
    error; a bootstrap that times out after some such rejection raises the rejection instead of the timeout.
    """

    clients: list[KafkaNetClient] = field(default_factory=list)
    failures: dict[Any, BaseException] = field(default_factory=dict)

    def make_client(self, **configs: Any) -> KafkaNetClient:
        client = KafkaNetClient(**configs)
        self.clients.append(client)
        manager = client._manager
        get_connection = manager.get_connection

        def watched(node_id: Any, *args: Any, **kwargs: Any) -> Any:
            conn = get_connection(node_id, *args, **kwargs)
            if not manager.bootstrapped:
                conn.init_future.add_errback(self._failed, manager, node_id)
            return conn

        manager.get_connection = watched
        return client

    def _failed(self, manager: Any, node_id: Any, exc: BaseException) -> None:
        if manager.bootstrapped or not is_fatal_connect_error(exc):
            return
        self.failures[node_id] = exc
        if {b.node_id for b in manager.cluster.bootstrap_brokers()} <= set(self.failures):
            manager._auth_failures.update(self.failures)

    def close_all(self) -> None:
        """Stop the IO thread and sockets of clients whose admin never came up (KafkaAdminClient leaks them)."""
        for client in self.clients:
            try:
                client.close()
            except Exception:
                log.debug("closing a failed kafka-python client failed", exc_info=True)


class KafkaTransport:
    """One kafka-python admin client per cluster, used only as a connection pool."""

    def __init__(self, settings: dict[str, Any], request_timeout_s: float,
                 limiter: RequestLimiter | None = None) -> None:
        self.timeout_ms = int(request_timeout_s * 1000)
        self.limiter = limiter
        watch = _BootstrapWatch()
        kwargs = {"client_id": CLIENT_ID, "request_timeout_ms": self.timeout_ms,
                  "bootstrap_timeout_ms": self.timeout_ms, **settings, "kafka_client": watch.make_client}
        try:
            self.admin = KafkaAdminClient(**kwargs)
        except kafka_errors.KafkaTimeoutError as e:
            watch.close_all()
            cause = next(reversed(watch.failures.values()), None)
            if cause is not None:  # timed out after some broker had rejected us: that is the news
                raise cause from e
            raise
        except BaseException:
            watch.close_all()
            raise
        self._manager = self.admin._manager
        self.sent = 0

    def close(self) -> None:
        try:
            self.admin.close()
        except Exception:
            log.debug("closing kafka-python admin failed", exc_info=True)

    def send_many(self, requests: Sequence[tuple[int | None, Any]]) -> list[Outcome]:
        """Send every (node_id, request) concurrently, as many at once as the limiter lets; node None = any
        broker. Never raises."""
        if not requests:
            return []
        self.sent += len(requests)
        if self.limiter is None:
            return self._send_batch(requests)
        out: list[Outcome] = []
        while len(out) < len(requests):
            taken = self.limiter.acquire_up_to(len(requests) - len(out))
            try:
                out.extend(self._send_batch(requests[len(out):len(out) + taken]))
            finally:
                self.limiter.release(taken)
        return out

    def _send_batch(self, requests: Sequence[tuple[int | None, Any]]) -> list[Outcome]:
        manager = self._manager
        timeout_ms = self.timeout_ms

        async def run_all() -> list[Outcome]:
            futures = []
            for node_id, req in requests:
                try:
                    futures.append(manager.send(req, node_id=node_id, request_timeout_ms=timeout_ms))
                except Exception as e:  # e.g. unknown broker id
                    futures.append(e)
            out = []
            for (node_id, req), fut in zip(requests, futures, strict=True):
                if isinstance(fut, BaseException):
                    out.append(Outcome(node_id, req, None, fut))
                    continue
                try:
                    resp = await manager.wait_for(fut, timeout_ms + 1000)
                    out.append(Outcome(node_id, req, resp, None))
                except Exception as e:
                    out.append(Outcome(node_id, req, None, e))
            return out

        try:
            return manager.run(run_all)
        except Exception as e:
            return [Outcome(n, r, None, e) for n, r in requests]

    def retry_brokers_now(self) -> None:
        """Let each broker be tried again at the next request to it. kafka-python backs a node whose connection
        failed off exponentially, up to `reconnect_backoff_max_ms` (30 s), and fails requests to it meanwhile without
        trying. A broker back from a restart was then "registered but did not answer", a critical alert, for up to
        30 s after it answered again. A poll is this monitor's own retry cadence, so every poll (`observe`) calls
        this first.

        The failure count is kept, so a broker that fails again is backed off again at once and the rest of the
        poll fails fast, as before. Its connection attempt gets no longer than a request: kafka-python grows that
        timeout with the failures too (up to 30 s), and a blackholed broker's pending connect made every request
        batch of the poll wait out its request timeout. Done on kafka-python's IO thread, which owns the table."""
        manager = self._manager
        backoff = getattr(manager, "_backoff", None)
        if not isinstance(backoff, dict) or not backoff:
            return
        cap = self.timeout_ms

        async def clear() -> None:
            for node, entry in list(backoff.items()):
                try:
                    failures, _until, connect_ms = entry
                except (TypeError, ValueError):  # another kafka-python's bookkeeping: forget the node's backoff
                    manager.reset_backoff(node)
                    continue
                backoff[node] = (failures, 0.0, min(connect_ms, cap))

        try:
            manager.run(clear)
        except Exception:
            log.debug("could not clear kafka-python's reconnect backoff", exc_info=True)

    def send_one(self, node_id: int | None, request: Any) -> Outcome:
        return self.send_many([(node_id, request)])[0]

    def broker_ids(self) -> list[int]:
        return sorted(b.node_id for b in self._manager.cluster.brokers())

    def refresh_brokers(self, metadata_response: Any) -> None:
        """Feed our own Metadata answer to the client so node ids resolve without its own refresh."""
        try:
            self._manager.cluster.update_metadata(metadata_response)
        except Exception:
            log.debug("could not update kafka-python cluster metadata", exc_info=True)
