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
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from kafka.admin import KafkaAdminClient

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Outcome:
    node_id: int | None
    request: Any
    response: Any | None
    error: BaseException | None

    @property
    def ok(self) -> bool:
        return self.error is None


class KafkaTransport:
    """One kafka-python admin client per cluster, used only as a connection pool."""

    def __init__(self, settings: dict[str, Any], request_timeout_s: float) -> None:
        self.timeout_ms = int(request_timeout_s * 1000)
        kwargs = {"client_id": "kafka-reliability-monitor", "request_timeout_ms": self.timeout_ms,
                  "bootstrap_timeout_ms": self.timeout_ms, **settings}
        self.admin = KafkaAdminClient(**kwargs)
        self._manager = self.admin._manager
        self.sent = 0

    def close(self) -> None:
        try:
            self.admin.close()
        except Exception:
            log.debug("closing kafka-python admin failed", exc_info=True)

    def send_many(self, requests: Sequence[tuple[int | None, Any]]) -> list[Outcome]:
        """Send every (node_id, request) concurrently; node None = any broker. Never raises."""
        if not requests:
            return []
        self.sent += len(requests)
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
