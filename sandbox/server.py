"""TCP listeners, one per simulated broker, speaking Kafka's framed protocol.

A crashed broker closes its listener (clients then see connection refused, as
with a dead JVM) and reopens on the same port when it returns, so clients keep
their bootstrap lists. Everything runs on one asyncio loop with the model, so
handlers read a consistent model without locks.

Security, as a Kafka listener has it: with an `ssl.SSLContext` the listener
speaks TLS (asyncio does the handshake before the first frame); with a
`SaslConfig` every connection must authenticate first (see `sandbox.auth` for
the state machine), and ApiVersions then also advertises SaslHandshake and
SaslAuthenticate. The model's handlers never see an unauthenticated request.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
import struct
from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any

from sandbox.auth import SASL_API_RANGES, SaslConfig, SaslConnection
from sandbox.protocol import (
    APIS,
    UNSUPPORTED_VERSION,
    Request,
    UnsupportedRequest,
    decode_request,
    encode_response,
    response_field_names,
    supported_api_versions,
)

log = logging.getLogger(__name__)

Handler = Callable[[int, Request], Mapping[str, Any]]
MAX_FRAME = 100 * 1024 * 1024
FAILED_AUTH_CLOSE_DELAY_S = 0.1
"""Kafka's connection.failed.authentication.delay.ms: the error answer goes out, the close follows later.
Closing at once lets a client see the close before it has read the answer (kafka-python over TLS does)."""


class InFlight:
    """Requests received and not yet answered, across the listeners that share it: what clients have
    outstanding at once (a monitor's `max_concurrent_requests` is checked against `peak`). Touched only on
    the sandbox's event loop."""

    def __init__(self) -> None:
        self.now = 0
        self.peak = 0

    def received(self) -> None:
        self.now += 1
        self.peak = max(self.peak, self.now)

    def answered(self) -> None:
        self.now -= 1


class BrokerListener:
    """The socket side of one simulated broker."""

    def __init__(self, node_id: int, handler: Handler, host: str = "127.0.0.1", port: int = 0,
                 ssl_context: ssl.SSLContext | None = None, sasl: SaslConfig | None = None,
                 in_flight: InFlight | None = None) -> None:
        self.node_id = node_id
        self.in_flight = in_flight or InFlight()
        self.host = host
        self.port = port
        self._handler = handler
        self.ssl_context = ssl_context
        self.sasl = sasl
        self._server: asyncio.base_events.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self.response_delay_s = 0.0
        self.request_counts: Counter[str] = Counter()
        # (client software name from ApiVersions, mechanism, user) -> count, successes and failures
        self.authentications: Counter[tuple[str, str, str]] = Counter()
        self.failed_authentications: Counter[tuple[str, str, str]] = Counter()

    @property
    def running(self) -> bool:
        return self._server is not None

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, self.host, self.port, reuse_address=True,
                                                  ssl=self.ssl_context)
        self.port = self._server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        """Close the listener and drop every open connection, as a crashed broker would."""
        if self._server is None:
            return
        self._server.close()
        for w in list(self._writers):
            w.close()
        self._writers.clear()
        for t in list(self._tasks):
            t.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks.clear()
        await self._server.wait_closed()
        self._server = None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Read frames as they arrive, answer them one at a time in order (as a Kafka broker does per
        connection). Reading ahead of answering is what lets `in_flight` count what the client really has
        outstanding: requests it sent and has no answer to yet."""
        self._writers.add(writer)
        task = asyncio.current_task()
        if task is not None:
            self._tasks.add(task)  # type: ignore[arg-type]
        conn = self.sasl.connection() if self.sasl is not None else None
        peer = writer.get_extra_info("peername")
        peer_text = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
        frames: asyncio.Queue[bytes | None] = asyncio.Queue()
        receiving = asyncio.create_task(self._receive(reader, frames))
        try:
            while (frame := await frames.get()) is not None:
                try:
                    reply, close = self._answer(frame, conn, peer_text)
                    if self.response_delay_s > 0:
                        await asyncio.sleep(self.response_delay_s)
                    if reply is not None and not writer.is_closing():
                        writer.write(reply)
                        await writer.drain()
                finally:
                    self.in_flight.answered()
                if close:
                    if reply is not None:
                        await asyncio.sleep(FAILED_AUTH_CLOSE_DELAY_S)
                    return
        except (ConnectionError, ssl.SSLError, asyncio.CancelledError):
            pass
        finally:
            receiving.cancel()
            while not frames.empty():  # received, never answered: the connection took them along
                if frames.get_nowait() is not None:
                    self.in_flight.answered()
            if task is not None:
                self._tasks.discard(task)  # type: ignore[arg-type]
            self._writers.discard(writer)
            writer.close()

    async def _receive(self, reader: asyncio.StreamReader, frames: asyncio.Queue[bytes | None]) -> None:
        try:
            while True:
                head = await reader.readexactly(4)
                (size,) = struct.unpack(">i", head)
                if size <= 0 or size > MAX_FRAME:
                    log.warning("broker %s: bad frame size %s; closing", self.node_id, size)
                    return
                frame = await reader.readexactly(size)
                self.in_flight.received()
                frames.put_nowait(frame)
        except (asyncio.IncompleteReadError, ConnectionError, ssl.SSLError, asyncio.CancelledError):
            pass
        finally:
            frames.put_nowait(None)

    def _answer(self, frame: bytes, conn: SaslConnection | None = None, peer: str = "?") -> tuple[bytes | None, bool]:
        """The encoded reply (None: no answer) and whether to close the connection after it."""
        try:
            req = decode_request(frame)
        except Exception:
            log.exception("broker %s: undecodable request", self.node_id)
            return None, conn is not None and not conn.authenticated
        pair = APIS.get(req.api_key)
        name = pair.name if pair else f"api{req.api_key}"
        self.request_counts[name] += 1
        if conn is not None and (not conn.authenticated or req.api_key in SASL_API_RANGES):
            gated = self._sasl_gate(req, conn, peer)
            if gated is not None:
                return gated
        if req.body is None:
            return unsupported_answer(req, self._extra_api_keys()), False
        try:
            fields = self._handler(self.node_id, req)
        except UnsupportedRequest:
            return unsupported_answer(req, self._extra_api_keys()), False
        except Exception:
            log.exception("broker %s: handler for %s v%s failed", self.node_id, name, req.api_version)
            return unsupported_answer(req), False
        if req.api_key == 18 and self.sasl is not None:
            fields = {**fields, "api_keys": _merge_api_keys(fields.get("api_keys", []), self._extra_api_keys())}
        return encode_response(req.api_key, req.api_version, req.correlation_id, fields), False

    def _sasl_gate(self, req: Request, conn: SaslConnection, peer: str) -> tuple[bytes | None, bool] | None:
        """Let `conn` rule on a request while SASL is unfinished (or a SASL request after it); None = serve it."""
        if req.api_key == 18 and req.body is not None:
            conn.client_software = getattr(req.body, "client_software_name", None) or conn.client_software
        was_authenticated = conn.authenticated
        verdict = conn.handle(req.api_key, req.api_version, req.body, peer)
        who = (conn.client_software or "unknown", conn.mechanism or "", conn.username or "")
        if conn.authenticated and not was_authenticated:
            self.authentications[who] += 1
        elif req.api_key == 36 and verdict.close:
            self.failed_authentications[who] += 1
        if verdict.passthrough:
            return None
        reply = None
        if verdict.fields is not None:
            reply = encode_response(req.api_key, req.api_version, req.correlation_id, verdict.fields)
        elif verdict.error_code is not None and req.api_key in APIS and "error_code" in response_field_names(
                req.api_key):
            reply = error_answer(req, verdict.error_code)  # Kafka's getErrorResponse; without a code, just close
        return reply, verdict.close

    def _extra_api_keys(self) -> list[dict[str, int]]:
        """ApiVersions entries this listener adds to the model's: the SASL APIs when SASL is on."""
        if self.sasl is None:
            return []
        return [{"api_key": k, "min_version": lo, "max_version": hi} for k, (lo, hi) in SASL_API_RANGES.items()]


def _merge_api_keys(base: list[dict[str, int]], extra: list[dict[str, int]]) -> list[dict[str, int]]:
    have = {k["api_key"] for k in base}
    return sorted([*base, *(e for e in extra if e["api_key"] not in have)], key=lambda k: k["api_key"])


def unsupported_answer(req: Request, extra_api_keys: list[dict[str, int]] | None = None) -> bytes | None:
    """Kafka's answer to a request it cannot serve: UNSUPPORTED_VERSION where the schema has a place.

    ApiVersions gets the v0 error answer (the client then retries with a version
    we advertise); other APIs get a response whose top-level error code is set.
    An API key not known at all has no schema to answer with, so the connection
    is left open and the request unanswered only in that case.
    """
    pair = APIS.get(req.api_key)
    if pair is None:
        return None
    if req.api_key == 18:
        keys = _merge_api_keys(supported_api_versions(), extra_api_keys or [])
        return encode_response(18, 0, req.correlation_id, {"error_code": UNSUPPORTED_VERSION, "api_keys": keys})
    return error_answer(req, UNSUPPORTED_VERSION)


def error_answer(req: Request, error_code: int) -> bytes | None:
    """The request's response with its top-level error_code set (None for an API key with no schema)."""
    pair = APIS.get(req.api_key)
    if pair is None:
        return None
    version = min(max(req.api_version, pair.min_version), pair.max_version)
    names = {f.name for f in pair.response._struct._fields}
    fields: dict[str, Any] = {}
    if "error_code" in names:
        fields["error_code"] = error_code
    return encode_response(req.api_key, version, req.correlation_id, fields)
