"""TCP listeners, one per simulated broker, speaking Kafka's framed protocol.

A crashed broker closes its listener (clients then see connection refused, as
with a dead JVM) and reopens on the same port when it returns, so clients keep
their bootstrap lists. Everything runs on one asyncio loop with the model, so
handlers read a consistent model without locks.
"""

from __future__ import annotations

import asyncio
import logging
import struct
from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any

from sandbox.protocol import APIS, UNSUPPORTED_VERSION, Request, decode_request, encode_response

log = logging.getLogger(__name__)

Handler = Callable[[int, Request], Mapping[str, Any]]
MAX_FRAME = 100 * 1024 * 1024


class BrokerListener:
    """The socket side of one simulated broker."""

    def __init__(self, node_id: int, handler: Handler, host: str = "127.0.0.1", port: int = 0) -> None:
        self.node_id = node_id
        self.host = host
        self.port = port
        self._handler = handler
        self._server: asyncio.base_events.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self.response_delay_s = 0.0
        self.request_counts: Counter[str] = Counter()

    @property
    def running(self) -> bool:
        return self._server is not None

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, self.host, self.port, reuse_address=True)
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
        self._writers.add(writer)
        task = asyncio.current_task()
        if task is not None:
            self._tasks.add(task)  # type: ignore[arg-type]
        try:
            while True:
                head = await reader.readexactly(4)
                (size,) = struct.unpack(">i", head)
                if size <= 0 or size > MAX_FRAME:
                    log.warning("broker %s: bad frame size %s; closing", self.node_id, size)
                    return
                frame = await reader.readexactly(size)
                reply = self._answer(frame)
                if self.response_delay_s > 0:
                    await asyncio.sleep(self.response_delay_s)
                if reply is not None and not writer.is_closing():
                    writer.write(reply)
                    await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
            pass
        finally:
            if task is not None:
                self._tasks.discard(task)  # type: ignore[arg-type]
            self._writers.discard(writer)
            writer.close()

    def _answer(self, frame: bytes) -> bytes | None:
        try:
            req = decode_request(frame)
        except Exception:
            log.exception("broker %s: undecodable request", self.node_id)
            return None
        pair = APIS.get(req.api_key)
        name = pair.name if pair else f"api{req.api_key}"
        self.request_counts[name] += 1
        if req.body is None:
            return unsupported_answer(req)
        try:
            fields = self._handler(self.node_id, req)
        except UnsupportedRequest:
            return unsupported_answer(req)
        except Exception:
            log.exception("broker %s: handler for %s v%s failed", self.node_id, name, req.api_version)
            return unsupported_answer(req)
        return encode_response(req.api_key, req.api_version, req.correlation_id, fields)


class UnsupportedRequest(Exception):
    """Raised by a handler for an API (or version) the sandbox does not implement."""


def unsupported_answer(req: Request) -> bytes | None:
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
        from sandbox.handlers import supported_api_versions

        return encode_response(18, 0, req.correlation_id,
                               {"error_code": UNSUPPORTED_VERSION, "api_keys": supported_api_versions()})
    version = min(max(req.api_version, pair.min_version), pair.max_version)
    names = {f.name for f in pair.response._struct._fields}
    fields: dict[str, Any] = {}
    if "error_code" in names:
        fields["error_code"] = UNSUPPORTED_VERSION
    return encode_response(req.api_key, version, req.correlation_id, fields)
