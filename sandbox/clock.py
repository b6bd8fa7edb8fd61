"""Simulated time: wall-clock epoch seconds that can run faster than real time.

The model only ever sees the numbers this returns, so a test can cover an hour
of cluster life in a minute (speed factor) or step time by hand (ManualClock).
Timestamps stay epoch-based so that clients see plausible dates.
"""

from __future__ import annotations

import time


class SimClock:
    def __init__(self, speed: float = 1.0, start: float | None = None) -> None:
        if speed <= 0:
            raise ValueError("speed must be > 0")
        self.speed = speed
        self._start = time.time() if start is None else start
        self._mono0 = time.monotonic()
        self._paused_at: float | None = None

    def now(self) -> float:
        if self._paused_at is not None:
            return self._paused_at
        return self._start + (time.monotonic() - self._mono0) * self.speed

    def pause(self) -> None:
        """Freeze simulated time, so a test can compare client answers with the model exactly."""
        if self._paused_at is None:
            self._paused_at = self.now()

    @property
    def paused(self) -> bool:
        return self._paused_at is not None

    def resume(self) -> None:
        if self._paused_at is not None:
            frozen, self._paused_at = self._paused_at, None
            self._mono0 += (self._start + (time.monotonic() - self._mono0) * self.speed - frozen) / self.speed

    def elapsed(self) -> float:
        """Simulated seconds since the clock started."""
        return self.now() - self._start

    def real_seconds(self, sim_seconds: float) -> float:
        return sim_seconds / self.speed


class ManualClock(SimClock):
    """A clock that moves only when told to, for deterministic unit tests."""

    def __init__(self, start: float = 1_700_000_000.0) -> None:
        super().__init__(1.0, start)
        self._now = start

    def now(self) -> float:
        return self._now

    def advance(self, seconds: float) -> float:
        self._now += seconds
        return self._now
