"""Each poll tries each broker again: kafka-python's reconnect backoff (up to 30 s) must not outlive a poll, nor
its connection timeout (grown with the failures, up to 30 s) a request."""

from __future__ import annotations

from types import SimpleNamespace

from kafka.net.manager import KafkaConnectionManager
from kafka.net.selector import NetworkSelector

from collectors.sources.kafka_transport import KafkaTransport

TIMEOUT_MS = 3000


def _transport(manager: object) -> KafkaTransport:
    t = object.__new__(KafkaTransport)  # no bootstrap: only the client's backoff bookkeeping is under test
    t._manager = manager
    t.timeout_ms = TIMEOUT_MS
    return t


def _manager() -> KafkaConnectionManager:
    """kafka-python's own manager on its own event loop (no IO thread: `run` drives it on this thread); nothing
    connects."""
    return KafkaConnectionManager(NetworkSelector())


def test_a_backed_off_broker_is_tried_at_the_next_poll_and_its_failures_are_kept() -> None:
    manager = _manager()
    for _ in range(12):  # a broker down for a dozen polls
        manager.update_backoff(3)
    assert manager.connection_delay(3) > 10  # 50 ms doubled eleven times, capped at 30 s (jitter 0.8-1.2)
    assert manager.socket_connection_setup_timeout_ms(3) > 20_000
    _transport(manager).retry_brokers_now()
    assert manager.connection_delay(3) == 0  # its next request connects instead of failing untried
    assert manager.socket_connection_setup_timeout_ms(3) == TIMEOUT_MS  # and waits no longer than a request
    assert manager.update_backoff(3) > 20_000  # failing again, it is backed off at once: the poll goes on fast


def test_a_broker_never_failed_is_left_alone() -> None:
    manager = _manager()
    _transport(manager).retry_brokers_now()
    assert manager._backoff == {}


def test_bookkeeping_of_another_shape_is_forgotten_not_misread() -> None:
    manager = _manager()
    manager._backoff[3] = ("someday", 1e12)  # another kafka-python's entry
    _transport(manager).retry_brokers_now()
    assert manager.connection_delay(3) == 0
    _transport(SimpleNamespace()).retry_brokers_now()  # a client without the table: nothing to do, no error
