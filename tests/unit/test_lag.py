"""collectors.model.lag: offset history, lag in seconds, Burrow-style status, retention risk, lag in messages."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from itertools import pairwise

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from collectors.model.lag import (
    PARTITION_STATUS_ORDER,
    CommitWindow,
    OffsetHistory,
    evaluate_partition,
    group_status,
    lag_messages,
    lag_seconds,
    seconds_to_retention,
    worst_partition_status,
)
from collectors.model.vocabulary import PARTITION_STATUSES


def history(*samples: tuple[int, float], max_points: int = 60) -> OffsetHistory:
    h = OffsetHistory(max_points)
    for offset, t in samples:
        h.add(offset, t)
    return h


def window(*observations: tuple[int, float, int], size: int = 10) -> CommitWindow:
    w = CommitWindow(size)
    for offset, t, lag in observations:
        w.observe(offset, t, lag)
    return w


def assert_sane(value: float | None) -> None:
    assert value is None or (math.isfinite(value) and value >= 0.0)


# --------------------------------------------------------------------------- OffsetHistory


@pytest.mark.parametrize(
    ("samples", "max_points", "expected"),
    [
        pytest.param([], 60, [], id="empty"),
        pytest.param([(100, 1.0)], 60, [(100, 1.0, 1.0)], id="one-point"),
        pytest.param([(100, 1.0), (100, 2.0), (100, 3.0)], 60, [(100, 1.0, 3.0)], id="equal-run-compressed"),
        pytest.param([(100, 1.0), (100, 2.0), (150, 3.0), (150, 4.0), (150, 5.0), (200, 6.0)], 60,
                     [(100, 1.0, 2.0), (150, 3.0, 5.0), (200, 6.0, 6.0)], id="runs-keep-first-and-last-seen"),
        pytest.param([(100, 1.0), (200, 2.0), (50, 3.0)], 60, [(50, 3.0, 3.0)], id="offset-backwards-resets"),
        pytest.param([(100, 1.0), (200, 2.0), (200, 3.0), (0, 4.0), (10, 5.0)], 60,
                     [(0, 4.0, 4.0), (10, 5.0, 5.0)], id="recreated-partition-starts-over"),
        pytest.param([(100, 10.0), (200, 20.0), (300, 15.0)], 60, [(300, 15.0, 15.0)], id="time-backwards-resets"),
        pytest.param([(100, 10.0), (100, 5.0)], 60, [(100, 5.0, 5.0)], id="time-backwards-same-offset-resets"),
        pytest.param([(o, float(o)) for o in range(10)], 4,
                     [(6, 6.0, 6.0), (7, 7.0, 7.0), (8, 8.0, 8.0), (9, 9.0, 9.0)], id="bounded-drops-oldest"),
        pytest.param([(0, 0.0), (1, 1.0), (1, 2.0), (2, 3.0)], 1, [(2, 3.0, 3.0)], id="max-points-one"),
    ],
)
def test_offset_history_add(samples: list[tuple[int, float]], max_points: int,
                            expected: list[tuple[int, float, float]]) -> None:
    h = history(*samples, max_points=max_points)
    assert h.points() == expected
    assert len(h) == len(expected)
    assert h.newest_offset == (expected[-1][0] if expected else None)
    assert h.oldest_offset == (expected[0][0] if expected else None)
    assert h.last_seen == (expected[-1][2] if expected else None)


def test_offset_history_bounded_at_default_size() -> None:
    h = OffsetHistory()
    for i in range(1000):
        h.add(i * 10, float(i))
    assert len(h) == h.max_points == 60
    assert h.oldest_offset == 9400 and h.newest_offset == 9990


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), float("-inf")])
def test_offset_history_rejects_non_finite_time(bad: float) -> None:
    with pytest.raises(ValueError):
        OffsetHistory().add(1, bad)


def test_offset_history_rejects_empty_table_size() -> None:
    with pytest.raises(ValueError):
        OffsetHistory(0)


def test_offset_history_clear() -> None:
    h = history((1, 1.0), (2, 2.0))
    h.clear()
    assert len(h) == 0 and h.points() == [] and lag_seconds(h, 0, 10.0) is None


# --------------------------------------------------------------------------- lag_seconds

# A known linear series: the log end grows by 10 messages a second, polled every 5 s from t=1000.
LINEAR = [(10 * k, 1000.0 + k) for k in range(0, 60, 5)]  # offsets 0..550, t 1000..1055


@pytest.mark.parametrize(
    ("samples", "committed", "now", "expected"),
    [
        pytest.param([], 5, 100.0, None, id="no-history"),
        pytest.param([(100, 1.0)], None, 100.0, None, id="no-commit"),
        pytest.param([(100, 1.0)], -1, 100.0, None, id="negative-commit-means-none"),
        pytest.param([(100, 1.0)], 100, 100.0, 0.0, id="caught-up-one-point"),
        pytest.param(LINEAR, 550, 2000.0, 0.0, id="caught-up"),
        pytest.param(LINEAR, 600, 2000.0, 0.0, id="commit-above-log-end"),
        pytest.param(LINEAR, 0, 1060.0, 60.0, id="exact-at-oldest-point"),
        pytest.param(LINEAR, 120, 1060.0, 48.0, id="interpolated-mid-segment"),
        pytest.param(LINEAR, 125, 1060.0, 47.5, id="interpolated-fraction"),
        pytest.param(LINEAR, 500, 1060.0, 10.0, id="exact-at-inner-point"),
        pytest.param(LINEAR, 549, 1055.0, 0.1, id="just-behind-newest"),
        pytest.param([(100, 50.0)], 40, 80.0, 30.0, id="single-point-lower-bound"),
        pytest.param([(100, 50.0), (100, 70.0)], 40, 80.0, 30.0, id="single-run-lower-bound-uses-first-seen"),
        pytest.param([(100, 50.0)], 40, 20.0, 0.0, id="now-before-history-clamped"),
        pytest.param(LINEAR, 120, 900.0, 0.0, id="clock-skew-clamped"),
    ],
)
def test_lag_seconds(samples: list[tuple[int, float]], committed: int | None, now: float,
                     expected: float | None) -> None:
    result = lag_seconds(history(*samples), committed, now)
    assert_sane(result)
    if expected is None:
        assert result is None
    else:
        assert result == pytest.approx(expected, abs=1e-9)


def test_lag_seconds_exact_on_linear_series_everywhere() -> None:
    h = history(*LINEAR)
    for committed in range(0, 550):
        # Offset c was written at 1000 + c / 10 on this series.
        assert lag_seconds(h, committed, 1100.0) == pytest.approx(100.0 - committed / 10, abs=1e-9)


def test_lag_seconds_idle_stretch_is_not_lag() -> None:
    """Caught up during an hour of idling, then one burst: the lag is the burst's age, not the idle hour."""
    h = history((500, 0.0))
    for t in range(60, 3601, 60):
        h.add(500, float(t))  # idle for an hour at log end 500
    h.add(510, 3660.0)  # ten messages written between 3600 and 3660
    lag = lag_seconds(h, 500, 3660.0)
    assert lag is not None and lag <= 60.0
    # kafka-lag-exporter's table (first-seen times only) would have said 3660 s.
    assert lag == pytest.approx(60.0)


@pytest.mark.parametrize(
    ("samples", "committed", "now", "expected"),
    [
        # Oldest segment: 100 msgs between last_0=10 and first_1=20 -> 0.1 s a message; 50 msgs -> 5 s before first_0.
        pytest.param([(100, 10.0), (200, 20.0), (300, 30.0)], 50, 40.0, 35.0, id="extrapolated-at-segment-rate"),
        # A flat run at the oldest offset: the rate is the producing segment's (100 msgs in 10 s), anchored at first_0.
        pytest.param([(100, 0.0), (100, 10.0), (200, 20.0)], 50, 40.0, 45.0, id="extrapolated-from-first-seen"),
        pytest.param([(100, 10.0), (200, 20.0), (300, 30.0)], -1, 40.0, None, id="no-commit"),
        # 1,000,000 messages back at 10 msg/s would be 100,000 s; capped at the 20 s span the table covers.
        pytest.param([(1_000_100, 10.0), (1_000_200, 20.0), (1_000_300, 30.0)], 100, 40.0, 50.0,
                     id="wild-extrapolation-capped-at-span"),
        # Two points polled at the same instant: the rate is unknown, so only the certain lower bound is reported.
        pytest.param([(100, 10.0), (200, 10.0)], 50, 40.0, 30.0, id="zero-duration-segment-lower-bound"),
        pytest.param([(0, 0.0), (2**62, 1.0)], 0, 10.0, 10.0, id="huge-offsets-finite"),
        pytest.param([(2**62, 0.0), (2**62 + 1, 1e-9)], 0, 10.0, 10.0 + 1e-9, id="tiny-rate-capped-finite"),
    ],
)
def test_lag_seconds_extrapolation_is_bounded(samples: list[tuple[int, float]], committed: int, now: float,
                                              expected: float | None) -> None:
    h = history(*samples)
    result = lag_seconds(h, committed, now)
    assert_sane(result)
    if expected is None:
        assert result is None
        return
    assert result == pytest.approx(expected, abs=1e-6)
    points = h.points()
    span = points[-1][2] - points[0][1]
    assert now - points[0][1] <= result + 1e-9 <= now - points[0][1] + span + 1e-6


@pytest.mark.parametrize("now", [float("nan"), float("inf")])
def test_lag_seconds_non_finite_now_is_unknown(now: float) -> None:
    assert lag_seconds(history(*LINEAR), 10, now) is None


increasing_series = st.lists(
    st.tuples(st.integers(min_value=0, max_value=10**6), st.floats(min_value=0.0, max_value=10**5)),
    min_size=0, max_size=80,
).map(lambda steps: _cumulate(steps))


def _cumulate(steps: list[tuple[int, float]]) -> list[tuple[int, float]]:
    """Turn (offset step >= 0, time step >= 0) pairs into a non-decreasing series starting at offset 1000, t=1e9."""
    out, offset, t = [], 1000, 1e9
    for d_offset, d_t in steps:
        offset += d_offset
        t += d_t
        out.append((offset, t))
    return out


@settings(max_examples=300, deadline=None)
@given(series=increasing_series,
       max_points=st.integers(min_value=1, max_value=60),
       committed=st.one_of(st.none(), st.integers(min_value=-5, max_value=10**8)),
       ahead=st.floats(min_value=0.0, max_value=10**7))
def test_lag_seconds_property_finite_non_negative(series: list[tuple[int, float]], max_points: int,
                                                  committed: int | None, ahead: float) -> None:
    h = history(*series, max_points=max_points)
    now = (series[-1][1] if series else 1e9) + ahead
    result = lag_seconds(h, committed, now)
    assert result is None or (isinstance(result, float) and math.isfinite(result) and result >= 0.0)
    if result is not None and len(h) > 0:
        points = h.points()
        # Never below the certain lower bound: an unread message was written by the time the newest log end
        # was first seen...
        if committed is not None and committed < points[-1][0]:
            assert result >= max(0.0, now - points[-1][1]) - 1e-6
        # ...and never beyond the bounded extrapolation.
        assert result <= now - points[0][1] + (points[-1][2] - points[0][1]) + 1e-6
    # History invariants: bounded, strictly increasing offsets.
    offsets = [p[0] for p in h.points()]
    assert len(offsets) <= max_points
    assert all(a < b for a, b in pairwise(offsets))


@settings(max_examples=200, deadline=None)
@given(series=increasing_series.filter(bool),
       a=st.integers(min_value=0, max_value=10**8), b=st.integers(min_value=0, max_value=10**8),
       ahead=st.floats(min_value=0.0, max_value=10**6))
def test_lag_seconds_property_monotonic_in_committed(series: list[tuple[int, float]], a: int, b: int,
                                                     ahead: float) -> None:
    """Having consumed more never makes the lag larger."""
    h = history(*series)
    now = series[-1][1] + ahead
    lo, hi = sorted((a, b))
    lag_lo, lag_hi = lag_seconds(h, lo, now), lag_seconds(h, hi, now)
    assert lag_lo is not None and lag_hi is not None
    assert lag_hi <= lag_lo + 1e-6


# --------------------------------------------------------------------------- CommitWindow


def test_commit_window_ring_and_last_change_time() -> None:
    w = window(*[(100 + t, float(t), 5) for t in range(5)], size=3)
    assert len(w) == 3 and w.size == 3
    assert w.observations() == [(102, 2.0, 5), (103, 3.0, 5), (104, 4.0, 5)]
    assert w.last_change_time == 4.0
    w.observe(104, 4.5, 9)  # the same offset again refreshes the lag, adds no entry
    assert len(w) == 3 and w.latest == (104, 4.0, 9) and w.last_change_time == 4.0
    w.observe(110, 5.0, 2)
    assert w.last_change_time == 5.0 and w.latest == (110, 5.0, 2)
    w.observe(110, 6.0, -3)  # negative lag clamped
    assert w.latest == (110, 5.0, 0) and w.last_change_time == 5.0
    w.observe(90, 7.0, 10)  # a rewind is a change too
    assert w.last_change_time == 7.0
    w.clear()
    assert len(w) == 0 and w.latest is None and w.last_change_time is None


def test_sampling_faster_than_commits_is_not_a_stall() -> None:
    w = CommitWindow(10)
    for k in range(20):  # polled every 0.1 s, the consumer commits once a second
        w.observe(100 + 10 * (k // 10), k * 0.1, 1 + k % 10)
    assert evaluate_partition(w, 2.0, has_members=True) == "OK"


def test_commit_window_rejects_empty_ring() -> None:
    with pytest.raises(ValueError):
        CommitWindow(0)


# --------------------------------------------------------------------------- evaluate_partition

HOUR = 3600.0


@pytest.mark.parametrize(
    ("observations", "now", "has_members", "kwargs", "expected"),
    [
        pytest.param([], 100.0, True, {}, "OK", id="no-observations"),
        pytest.param([(100, 0.0, 0)], 100.0, False, {}, "OK", id="single-caught-up"),
        pytest.param([(100, 0.0, 0), *[(100, 60.0 * k, 0) for k in range(1, 10)]], 6 * HOUR, False, {}, "OK",
                     id="idle-caught-up-hours-without-commit-no-members"),
        pytest.param([(100, 0.0, 0), *[(100, 60.0 * k, 0) for k in range(1, 10)]], 6 * HOUR, True, {}, "OK",
                     id="idle-caught-up-hours-without-commit-members"),
        pytest.param([(100, 0.0, 4), (100, 30.0, 4), (100, 60.0, 4)], 6 * HOUR, False, {"allowed_lag": 5}, "OK",
                     id="within-allowed-lag"),
        pytest.param([(100, 0.0, 50), (100, 30.0, 50), (100, 60.0, 50)], 90.0, True, {}, "OK",
                     id="idle-backlog-members-not-moving-yet"),
        pytest.param([(100, 0.0, 50), (100, 30.0, 50), (100, 60.0, 50)], 301.0, True, {}, "STALL",
                     id="idle-backlog-members-not-moving"),
        pytest.param([(100, 0.0, 50), (100, 30.0, 50), (100, 60.0, 50)], 301.0, False, {}, "STOP",
                     id="idle-backlog-no-members"),
        pytest.param([(100, 0.0, 50)], 301.0, False, {}, "STOP", id="no-change-beyond-stop-after-no-members"),
        pytest.param([(100, 0.0, 50)], 301.0, True, {}, "STALL", id="no-change-beyond-stop-after-members"),
        pytest.param([(100, 0.0, 50)], 299.0, False, {}, "OK", id="too-few-points-and-too-recent"),
        pytest.param([(100, 0.0, 50), (100, 30.0, 50)], 60.0, False, {}, "OK", id="below-min-points"),
        pytest.param([(100, 0.0, 50), (110, 30.0, 60)], 60.0, True, {"min_points": 2}, "WARN",
                     id="min-points-configurable"),
        pytest.param([(100, 0.0, 50)], 100.0, False, {"stop_after_s": 60.0}, "STOP", id="stop-after-configurable"),
        pytest.param([(10, 0.0, 100), (20, 30.0, 150), (30, 60.0, 200)], 90.0, True, {}, "WARN",
                     id="moving-but-lag-growing"),
        pytest.param([(10, 0.0, 100), (20, 30.0, 100), (30, 60.0, 150), (40, 90.0, 150)], 100.0, True, {}, "WARN",
                     id="lag-non-decreasing-with-plateaus"),
        pytest.param([(10, 0.0, 100), (20, 30.0, 100), (30, 60.0, 100)], 90.0, True, {}, "OK",
                     id="steady-constant-lag-is-not-falling-behind"),
        pytest.param([(10, 0.0, 200), (20, 30.0, 150), (30, 60.0, 100)], 90.0, True, {}, "OK",
                     id="recovering-lag-decreasing"),
        pytest.param([(10, 0.0, 100), (20, 30.0, 90), (30, 60.0, 150)], 90.0, True, {}, "OK",
                     id="lag-dipped-once-not-warn"),
        pytest.param([(10, 0.0, 100), (20, 30.0, 0), (30, 60.0, 150), (40, 90.0, 200)], 100.0, True, {}, "OK",
                     id="caught-up-inside-window-not-warn"),
        pytest.param([(500, 0.0, 10), (600, 30.0, 10), (200, 60.0, 410)], 90.0, True, {}, "REWIND", id="rewind"),
        pytest.param([(500, 0.0, 10), (200, 30.0, 310), (300, 60.0, 210)], 90.0, False, {}, "REWIND",
                     id="rewind-not-yet-recovered"),
        pytest.param([(500, 0.0, 10), (200, 30.0, 310), (600, 60.0, 10)], 90.0, True, {}, "OK",
                     id="rewind-recovered"),
        pytest.param([(500, 0.0, 10), (200, 30.0, 0)], 90.0, True, {}, "OK", id="rewind-but-caught-up"),
        pytest.param([(500, 0.0, 100), (200, 30.0, 400)], 10 * HOUR, False, {}, "REWIND",
                     id="rewind-ranks-before-stop-rule"),
        pytest.param([(500, 0.0, 10), *[(200 + k, 30.0 * k, 310) for k in range(1, 12)]], 400.0, True, {}, "OK",
                     id="rewind-evicted-from-window-then-moving"),
        pytest.param([(10 * k, 30.0 * k, 100 + k) for k in range(10)], 300.0, True, {"allowed_lag": 200}, "OK",
                     id="growing-but-within-allowed"),
    ],
)
def test_evaluate_partition(observations: list[tuple[int, float, int]], now: float, has_members: bool,
                            kwargs: dict[str, float], expected: str) -> None:
    assert evaluate_partition(window(*observations), now, has_members=has_members, **kwargs) == expected


def test_evaluate_partition_uses_last_change_time_beyond_window() -> None:
    """A 3-poll window, stuck for 20 minutes: still known stuck even though the window spans 60 s."""
    w = CommitWindow(3)
    w.observe(100, 0.0, 10)
    for t in range(30, 1201, 30):
        w.observe(100, float(t), 10 + t)
    assert w.last_change_time == 0.0
    assert evaluate_partition(w, 1200.0, has_members=False) == "STOP"
    assert evaluate_partition(w, 1200.0, has_members=True) == "STALL"


def test_evaluate_partition_rejects_min_points_below_two() -> None:
    with pytest.raises(ValueError):
        evaluate_partition(CommitWindow(), 0.0, has_members=True, min_points=1)


# --------------------------------------------------------------------------- roll-ups


@pytest.mark.parametrize(
    ("statuses", "worst", "group"),
    [
        pytest.param([], "OK", "OK", id="empty"),
        pytest.param(["OK", "OK"], "OK", "OK", id="all-ok"),
        pytest.param(["OK", "WARN", "OK"], "WARN", "WARN", id="warn"),
        pytest.param(["WARN", "REWIND"], "REWIND", "ERR", id="rewind-is-err"),
        pytest.param(["REWIND", "STALL", "WARN"], "STALL", "ERR", id="stall-above-rewind"),
        pytest.param(["STOP", "STALL", "REWIND", "WARN", "OK"], "STOP", "ERR", id="stop-is-worst"),
        pytest.param(iter(["OK", "STOP"]), "STOP", "ERR", id="any-iterable"),
    ],
)
def test_roll_ups(statuses: list[str], worst: str, group: str) -> None:
    statuses = list(statuses)
    assert worst_partition_status(statuses) == worst
    assert group_status(statuses) == group


def test_status_order_covers_record_vocabulary() -> None:
    assert PARTITION_STATUS_ORDER == ("OK", "WARN", "REWIND", "STALL", "STOP")
    assert set(PARTITION_STATUS_ORDER) == set(PARTITION_STATUSES)


@pytest.mark.parametrize("func", [worst_partition_status, group_status])
def test_roll_ups_reject_unknown_status(func: Callable[[Iterable[str]], str]) -> None:
    with pytest.raises(ValueError):
        func(["OK", "ERR"])


# --------------------------------------------------------------------------- seconds_to_retention

DAY_MS = 86_400_000


@pytest.mark.parametrize(
    ("samples", "committed", "log_start", "retention_ms", "now", "expected"),
    [
        pytest.param(LINEAR, None, 0, DAY_MS, 1060.0, None, id="no-commit"),
        pytest.param(LINEAR, 120, 0, None, 1060.0, None, id="infinite-retention-none"),
        pytest.param(LINEAR, 120, 0, -1, 1060.0, None, id="infinite-retention-minus-one"),
        pytest.param([], 120, 0, DAY_MS, 1060.0, None, id="no-history"),
        pytest.param(LINEAR, 120, 200, DAY_MS, 1060.0, 0.0, id="already-lost"),
        pytest.param(LINEAR, 120, 0, DAY_MS, 1060.0, 86_400.0 - 48.0, id="interpolated"),
        pytest.param(LINEAR, 120, None, DAY_MS, 1060.0, 86_400.0 - 48.0, id="log-start-unknown"),
        pytest.param(LINEAR, 120, 120, 60_000, 1060.0, 12.0, id="at-log-start-soon"),
        pytest.param(LINEAR, 120, 0, 30_000, 1060.0, 0.0, id="overdue-clamped"),
        pytest.param(LINEAR, 550, 0, DAY_MS, 1060.0, 86_400.0, id="caught-up-full-retention"),
        pytest.param([(100, 50.0)], 40, 0, 60_000, 80.0, 30.0, id="single-point"),
    ],
)
def test_seconds_to_retention(samples: list[tuple[int, float]], committed: int | None, log_start: int | None,
                              retention_ms: int | None, now: float, expected: float | None) -> None:
    result = seconds_to_retention(history(*samples), committed, log_start, retention_ms, now)
    assert_sane(result)
    if expected is None:
        assert result is None
    else:
        assert result == pytest.approx(expected, abs=1e-9)


# --------------------------------------------------------------------------- lag_messages


@pytest.mark.parametrize(
    ("high_watermark", "committed", "expected"),
    [
        (None, 5, None),
        (10, None, None),
        (None, None, None),
        (10, -1, None),
        (-1, 5, None),
        (10, 4, 6),
        (10, 10, 0),
        (10, 12, 0),  # commit above the high watermark after truncation: 0, never negative
        (0, 0, 0),
        (2**62, 0, 2**62),
    ],
)
def test_lag_messages(high_watermark: int | None, committed: int | None, expected: int | None) -> None:
    assert lag_messages(high_watermark, committed) == expected


def test_sawtooth_between_commits_is_not_falling_behind() -> None:
    """A consumer at the head commits every 5 s, polled every 6 s: the lag seen at each poll climbs
    by what was produced since the commit (1, 2, 3, 4 s of traffic) -- a healthy sawtooth."""
    w = CommitWindow(10)
    rate = 100
    for k in range(1, 5):
        t = 6.0 * k
        commit_time = 5.0 * (t // 5.0)
        committed = int(commit_time * rate)
        hw = int(t * rate)
        w.observe(committed, t, hw - committed, hw)
    assert [lag for _, _, lag in w.observations()] == [100, 200, 300, 400]  # what the poll saw
    assert evaluate_partition(w, 24.0, has_members=True) == "OK"
    assert w.lags_at_commit()[1:] == [0, 0, 0]


def test_falling_behind_is_warned_on_lags_at_commit() -> None:
    """1,000 behind, producing 100/s, consuming 60/s: even the lower bound at commit keeps climbing
    (it trails the true lag by one poll interval of traffic, so a backlog under that never warns)."""
    w = CommitWindow(10)
    for k in range(1, 6):
        t = 6.0 * k
        committed, hw = int(60 * t), int(100 * t) + 1000
        w.observe(committed, t, hw - committed, hw)
    floors = w.lags_at_commit()
    assert floors[0] == -1  # the first commit's lag at commit is unknown: no earlier high watermark
    assert floors[1:] == sorted(floors[1:]) and floors[-1] > floors[1] > 0
    assert evaluate_partition(w, 30.0, has_members=True) == "WARN"


def test_lag_at_commit_ignores_refreshes_and_resets_on_clear() -> None:
    w = CommitWindow(10)
    w.observe(100, 0.0, 50, 150)  # first observation: no earlier high watermark, lag at commit unknown
    w.observe(100, 1.0, 80, 180)  # same offset: lag refreshed, floor kept
    w.observe(170, 2.0, 30, 200)  # committed after the poll that saw 180: at least 10 behind then
    assert w.lags_at_commit() == [-1, 10] and w.latest == (170, 2.0, 30)
    w.clear()
    w.observe(300, 3.0, 5, 305)
    assert w.lags_at_commit() == [-1]
    w.observe(400, 4.0, 7)  # no high watermark given: the lag itself stands in
    assert w.lags_at_commit() == [-1, 7]
