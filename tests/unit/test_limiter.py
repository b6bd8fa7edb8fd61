"""The request limiter behind max_concurrent_requests: a bound that holds under contention and never
deadlocks callers that each take slots, send, and give them back."""

from __future__ import annotations

import threading
import time

import pytest

from collectors.sources.limiter import RequestLimiter


def test_takes_what_is_free_up_to_the_ask() -> None:
    lim = RequestLimiter(4)
    assert lim.acquire_up_to(3) == 3
    assert lim.acquire_up_to(3) == 1  # only one left: take it rather than wait for three
    assert lim.in_flight == 4 and lim.peak == 4
    lim.release(4)
    assert lim.in_flight == 0
    with pytest.raises(RuntimeError):
        lim.release(1)
    with pytest.raises(ValueError):
        RequestLimiter(0)
    with pytest.raises(ValueError):
        lim.acquire_up_to(0)


def test_bound_holds_across_threads() -> None:
    lim = RequestLimiter(3)
    lock = threading.Lock()
    live, worst = 0, 0
    done = []

    def worker(n: int) -> None:
        nonlocal live, worst
        sent = 0
        while sent < n:
            taken = lim.acquire_up_to(n - sent)
            with lock:
                live += taken
                worst = max(worst, live)
            time.sleep(0.002)
            with lock:
                live -= taken
            lim.release(taken)
            sent += taken
        done.append(sent)

    threads = [threading.Thread(target=worker, args=(n,)) for n in (1, 5, 7, 2, 9, 3, 4, 6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert sorted(done) == [1, 2, 3, 4, 5, 6, 7, 9]  # everyone finished: no deadlock, nothing lost
    assert worst <= 3 and lim.peak == worst
    assert lim.in_flight == 0
