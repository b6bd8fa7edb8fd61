"""The sandbox's listeners follow its broker processes: at once after a `Sandbox.call` that starts or stops one,
never after `stop()`, and a port that cannot be bound fails no call."""

from __future__ import annotations

import contextlib
import socket
import threading
import time

import pytest

from sandbox.runner import Sandbox
from tests.support.sandbox import running_sandbox, scenario

pytestmark = pytest.mark.integration


def _listening(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        return True
    except OSError:
        return False


def test_calls_in_flight_while_the_sandbox_stops_reopen_no_listener() -> None:
    """`stop()` closes the listeners while other threads still call; a call matched the listeners to the broker
    processes (all up) after they had closed, and left a port listening with the sandbox stopped (9 runs in 10)."""
    for _ in range(3):
        sb = Sandbox(scenario(), speed=10.0, tick_s=0.1).start()
        ports = [ln.port for ln in sb.listeners.values()]
        clients = [socket.create_connection(("127.0.0.1", p)) for p in ports for _ in range(3)]
        done = threading.Event()

        def hammer(sb: Sandbox = sb, done: threading.Event = done) -> None:
            while not done.is_set():
                with contextlib.suppress(Exception):  # stopped: the call cannot run any more
                    sb.call(lambda c: None, timeout=1)
                time.sleep(0.005)  # a call refused at once must not spin this thread against the loop's

        threads = [threading.Thread(target=hammer, daemon=True) for _ in range(3)]
        for t in threads:
            t.start()
        time.sleep(0.2)
        sb.stop()
        done.set()
        for t in threads:
            t.join(3)
        for c in clients:
            c.close()
        assert [p for p in ports if _listening(p)] == []


def test_a_port_taken_while_its_broker_is_down_fails_no_call() -> None:
    """The restarted broker cannot listen while something else holds its port: the call that restarted it, and every
    call after, still return (the tick logs the failure and retries); once the port is free, the broker listens."""
    with running_sandbox(scenario(), speed=10.0) as sb:
        port = sb.listeners[3].port
        sb.call(lambda c: c.crash_broker(3))
        squatter = socket.socket()
        squatter.bind(("127.0.0.1", port))
        squatter.listen()
        try:
            sb.call(lambda c: c.restart_broker(3))
            assert sb.call(lambda c: c.brokers[3].process_up)
            assert sb.request_counts()
        finally:
            squatter.close()
        deadline = time.monotonic() + 10
        while not sb.listeners[3].running:
            assert time.monotonic() < deadline, "the broker never listened again"
            time.sleep(0.1)
        assert _listening(port)
