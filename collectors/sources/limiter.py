"""A bound on the requests in flight at once, shared by every cluster's poll (`max_concurrent_requests`).

Why it exists: a poll fans out (ListOffsets to every leader, DescribeGroups/OffsetFetch to every
coordinator, DescribeProducers in batches), and several clusters poll at once. Against a struggling
cluster — exactly when the monitor matters — an unbounded burst of admin requests adds load where it hurts.

How: a counting limiter. A caller asks for up to `n` slots and gets between 1 and `n`, as many as are free
(waiting only while none is free), sends that many requests, and gives the slots back when their answers
(or timeouts) are in. A caller never waits for slots while holding some, so callers cannot deadlock one
another, and a batch never waits for the whole limit to come free.
"""

from __future__ import annotations

import threading


class RequestLimiter:
    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ValueError(f"limit must be >= 1, got {limit}")
        self.limit = limit
        self._free = limit
        self._cond = threading.Condition()
        self.peak = 0  # the most slots ever taken at once (diagnostics and tests)

    @property
    def in_flight(self) -> int:
        with self._cond:
            return self.limit - self._free

    def acquire_up_to(self, n: int) -> int:
        """Take between 1 and `n` slots (n >= 1), as many as are free; waits while none is."""
        if n < 1:
            raise ValueError(f"n must be >= 1, got {n}")
        with self._cond:
            while self._free == 0:
                self._cond.wait()
            taken = min(n, self._free)
            self._free -= taken
            self.peak = max(self.peak, self.limit - self._free)
            return taken

    def release(self, n: int) -> None:
        with self._cond:
            self._free += n
            if self._free > self.limit:
                self._free = self.limit
                raise RuntimeError("released more request slots than were taken")
            self._cond.notify_all()
