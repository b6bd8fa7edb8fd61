"""The time range a report covers: an ISO week as a half-open ``[start, end)`` in epoch seconds (UTC).

Plain Python (no Spark), so the CLI can parse ``--week`` and name output directories before a session exists.
"""

from __future__ import annotations

import calendar
import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta

WEEK_RE = re.compile(r"^(\d{4})-W(\d{2})$")


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

    def days(self) -> list[str]:
        first = datetime.fromtimestamp(self.start, UTC).date()
        n = round(self.seconds / 86400)
        return [(first + timedelta(days=i)).isoformat() for i in range(n)]
