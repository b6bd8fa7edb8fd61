"""The time range a report covers: an ISO week as a half-open ``[start, end)`` in epoch seconds (UTC).

Plain Python (no Spark), so the CLI can parse ``--week`` and name output directories before a session exists.
"""

from __future__ import annotations

import calendar
import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta

WEEK_RE = re.compile(r"^(\d{4})-W(\d{2})$")
DAY_S = 86400
"""Seconds in a UTC day: daily roll-ups are keyed by the epoch day, ``floor(time / DAY_S)``."""


def day_start(day: str) -> float:
    """``YYYY-MM-DD`` -> its 00:00 UTC in epoch seconds."""
    return float(calendar.timegm(date.fromisoformat(day).timetuple()))


def epoch_day(day: str) -> int:
    """``YYYY-MM-DD`` -> days since 1970-01-01 (the ``day`` column of the roll-ups)."""
    return int(day_start(day) // DAY_S)


@dataclass(frozen=True)
class Period:
    """A half-open time range ``[start, end)`` in epoch seconds, with a label (an ISO week like 2026-W47)."""

    start: float
    end: float
    label: str

    @property
    def seconds(self) -> float:
        return self.end - self.start

    @classmethod
    def iso_week(cls, label: str) -> Period:
        """``YYYY-Www`` -> Monday 00:00 UTC to the next Monday; ValueError on a malformed or impossible week."""
        m = WEEK_RE.match(label.strip())
        if not m:
            raise ValueError(f"{label!r} is not an ISO week like 2026-W47")
        year, week = int(m.group(1)), int(m.group(2))
        try:
            monday = date.fromisocalendar(year, week, 1)
        except ValueError as e:
            raise ValueError(f"{label!r} is not a week of {year}: {e}") from None
        start = calendar.timegm(monday.timetuple())
        return cls(float(start), float(start + 7 * 86400), f"{year}-W{week:02d}")

    @classmethod
    def containing(cls, t: float) -> Period:
        y, w, _ = datetime.fromtimestamp(t, UTC).isocalendar()
        return cls.iso_week(f"{y}-W{w:02d}")

    @classmethod
    def last_complete_week(cls, now: float) -> Period:
        return cls.containing(now).previous()

    def previous(self) -> Period:
        d = datetime.fromtimestamp(self.start, UTC).date() - timedelta(days=7)
        y, w, _ = d.isocalendar()
        return Period.iso_week(f"{y}-W{w:02d}")

    @property
    def epoch_days(self) -> tuple[int, int]:
        """The half-open range of epoch days the period covers (periods are whole UTC days)."""
        return int(self.start // DAY_S), int(self.end // DAY_S)

    def days(self) -> list[str]:
        first = datetime.fromtimestamp(self.start, UTC).date()
        n = round(self.seconds / DAY_S)
        return [(first + timedelta(days=i)).isoformat() for i in range(n)]
