"""`build_history`'s sandbox run stays inside one ISO week (tests/support/spark_history.py).

The report tests read the week containing the run's start and hold the report to the whole run's ground truth.
A CI run whose fixture started at 23:57:30 UTC on a Sunday put the run's last minutes in the next week, and six
of them failed (fresh clone, 2026-11-30 00:0x). The start is moved back where that would happen.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from spark_analytics.period import Period
from tests.support.spark_history import WEEK_SLACK_S, one_week_start

RUN_S = 330.0
MONDAY = datetime(2026, 11, 30, tzinfo=UTC).timestamp()  # 2026-W49 begins


@pytest.mark.parametrize("before_monday", [1.0, 150.0, RUN_S, RUN_S + WEEK_SLACK_S - 1.0])
def test_a_run_that_would_cross_into_the_next_week_starts_before_it(before_monday: float) -> None:
    now = MONDAY - before_monday
    start = one_week_start(now, RUN_S)
    assert start is not None and start < now
    week = Period.containing(now)
    assert Period.containing(start) == Period.containing(start + RUN_S) == week
    assert start + RUN_S + WEEK_SLACK_S <= week.end  # overrunning by the slack still ends in it


@pytest.mark.parametrize("now", [MONDAY, MONDAY + 3600.0, MONDAY - RUN_S - WEEK_SLACK_S - 1.0])
def test_a_run_that_ends_in_its_week_starts_now(now: float) -> None:
    assert one_week_start(now, RUN_S) is None
