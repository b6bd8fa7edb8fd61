"""Consumer lag: in messages, in seconds, Burrow-style status, and retention risk.

Everything here is pure: no I/O and no clock.  Every function that needs the
current time takes ``now`` (epoch seconds) explicitly, so the poller decides
what "now" is (one value per poll, shared by all partitions) and tests can
replay any timeline exactly.

Two small state classes hold what must survive between polls:

* :class:`OffsetHistory` -- per partition, a table of (log-end offset, time)
  points, from which :func:`lag_seconds` derives lag in time the way
  kafka-lag-exporter did, minus its flaws (NaN with fewer than two points,
  idle stretches counted as lag, unbounded extrapolation).
* :class:`CommitWindow` -- per group-partition, a ring of the last polled
  committed offsets, from which :func:`evaluate_partition` derives Burrow's
  OK / WARN / STALL / STOP / REWIND, minus Burrow's best-known false alarm
  (an idle topic reported as a stopped consumer).

The poller keeps up to 100,000 of each, so both classes use ``__slots__`` and
``array`` storage (8 bytes a number, no per-point Python objects) and are
bounded: about 1.8 KB for a full 60-point history and 0.7 KB for a full
10-observation window (measured with tracemalloc, array headers included),
i.e. under 260 MB for 100,000 of each.

Results follow the record vocabulary of :mod:`collectors.model.records`: unknown is
``None`` -- never -1, NaN or inf -- and lags are never negative, so sums and
maxima downstream cannot be poisoned.
"""

from __future__ import annotations

import math
import operator
from array import array
from bisect import bisect_right
from collections.abc import Iterable
from typing import Protocol

from collectors.model.vocabulary import (
    ERR,
    GROUP_STATUS_OF,
    OK,
    PARTITION_STATUS_RANK,
    PARTITION_STATUSES,
    REWIND,
    STALL,
    STOP,
    WARN,
)

__all__ = [
    "ERR",
    "OK",
    "PARTITION_STATUS_ORDER",
    "REWIND",
    "STALL",
    "STOP",
    "WARN",
    "CommitWindow",
    "LagSettings",
    "OffsetHistory",
    "evaluate_partition",
    "group_status",
    "judge_partition",
    "lag_messages",
    "lag_seconds",
    "seconds_to_retention",
    "worst_partition_status",
]

# The statuses and their order live in `collectors.model.vocabulary` (why each ranks where it does is
# written there); re-exported here because the lag math is where they are decided.
PARTITION_STATUS_ORDER: tuple[str, ...] = PARTITION_STATUSES


class LagSettings(Protocol):
    """The thresholds lag status needs (`collectors.alerting.thresholds.Thresholds` has them; the model names
    only what it reads, so it does not depend on where the configuration lives)."""

    lag_allowed_messages: int
    lag_min_points: int
    consumer_stop_after_s: float
    group_abandoned_after_s: float
    lag_seconds_slo: float

_SEVERITY = PARTITION_STATUS_RANK
_GROUP_OF = GROUP_STATUS_OF


class _Points:
    """What both per-partition tables share: an ``array`` of offsets, one per point, whose length is theirs."""

    __slots__ = ()
    _offsets: array[int]

    def __len__(self) -> int:
        return len(self._offsets)


class OffsetHistory(_Points):
    """Per-partition table of (log-end offset, first seen, last seen) points.

    A point ``(o, first, last)`` says: the log end (high watermark) was ``o``
    at every poll from ``first`` to ``last``.  Hence every offset below ``o``
    was written by ``first``, and offset ``o`` itself was not written yet at
    ``last``.  Runs of equal offsets are compressed into one point, so 60
    points cover 60 *changes* of the log end, however long the topic idles
    between them.

    Why keep ``last`` as well as ``first`` (kafka-lag-exporter kept one time):
    the messages between ``o_i`` and ``o_{i+1}`` were written after the log
    end left ``o_i``, i.e. in ``(last_i, first_{i+1}]``.  Interpolating from
    ``first_i`` instead would date them back to the start of an idle stretch:
    a consumer caught up on a topic idle for an hour would show an hour of lag
    as soon as one new message arrived.

    Offsets going backwards (the partition was deleted and recreated, or an
    unclean leader election truncated the log) and times going backwards (the
    wall clock was stepped back) reset the table to the new point: the
    interpolation needs both axes monotonic, and points from before such an
    event describe a log that no longer exists.

    Storage: one ``array('q')`` of offsets and one ``array('d')`` of
    interleaved (first, last) times, bounded to ``max_points`` (oldest
    dropped first).
    """

    __slots__ = ("_max_points", "_offsets", "_times")

    def __init__(self, max_points: int = 60) -> None:
        if max_points < 1:
            raise ValueError(f"max_points must be >= 1, got {max_points}")
        self._max_points = max_points
        self._offsets = array("q")
        self._times = array("d")  # first_0, last_0, first_1, last_1, ...

    def add(self, offset: int, t: float) -> None:
        """Record that the log end was ``offset`` at time ``t`` (epoch seconds)."""
        if not math.isfinite(t):
            raise ValueError(f"time must be finite, got {t!r}")
        offsets = self._offsets
        times = self._times
        if offsets:
            newest = offsets[-1]
            if offset == newest and t >= times[-1]:
                times[-1] = t  # same run: only the last-seen time moves
                return
            if offset > newest and t >= times[-1]:
                offsets.append(offset)
                times.append(t)
                times.append(t)
                if len(offsets) > self._max_points:
                    del offsets[0]
                    del times[0:2]
                return
            # Backwards in offset or in time: start over from this point.
            del offsets[:]
            del times[:]
        offsets.append(offset)
        times.append(t)
        times.append(t)

    def clear(self) -> None:
        """Forget every point (e.g. when the partition disappears)."""
        del self._offsets[:]
        del self._times[:]

    @property
    def max_points(self) -> int:
        return self._max_points

    @property
    def newest_offset(self) -> int | None:
        return self._offsets[-1] if self._offsets else None

    @property
    def oldest_offset(self) -> int | None:
        return self._offsets[0] if self._offsets else None

    @property
    def last_seen(self) -> float | None:
        """When the newest offset was last seen (the latest poll that reached us)."""
        return self._times[-1] if self._times else None

    def points(self) -> list[tuple[int, float, float]]:
        """The table as ``(offset, first_seen, last_seen)`` tuples, oldest first (for tests and debugging)."""
        times = self._times
        return [(o, times[2 * i], times[2 * i + 1]) for i, o in enumerate(self._offsets)]

    def raw(self) -> tuple[array, array]:
        """The backing arrays ``(offsets, interleaved first/last times)``, for checkpoints; do not mutate."""
        return self._offsets, self._times

    @classmethod
    def from_raw(cls, max_points: int, offsets: array, times: array) -> OffsetHistory:
        """Rebuild from `raw` arrays (a checkpoint), keeping the newest ``max_points`` points (may adopt them).

        Raises ValueError when the arrays cannot be a history (lengths, order), so a damaged checkpoint
        is refused rather than producing nonsense lags.
        """
        if len(times) != 2 * len(offsets):
            raise ValueError(f"{len(offsets)} offsets need {2 * len(offsets)} times, got {len(times)}")
        if not (all(map(operator.lt, offsets, offsets[1:])) and all(map(operator.le, times, times[1:]))):
            raise ValueError("offsets and times must both increase")
        h = cls(max_points)
        drop = max(0, len(offsets) - max_points)
        h._offsets = array("q", offsets[drop:]) if drop or offsets.typecode != "q" else offsets
        h._times = array("d", times[2 * drop:]) if drop or times.typecode != "d" else times
        return h

    def __repr__(self) -> str:
        return f"OffsetHistory(max_points={self._max_points}, points={self.points()!r})"


def lag_seconds(history: OffsetHistory, committed: int | None, now: float) -> float | None:
    """Age, at ``now``, of the oldest message the group has not consumed (the one at ``committed``).

    Returns ``None`` when it cannot be known -- no commit (``None`` or Kafka's
    negative "no offset"), an empty history, or a non-finite ``now`` -- so the
    exporter omits the sample instead of publishing NaN.  Otherwise a finite
    float ``>= 0``:

    * ``committed >= newest log end``: caught up, ``0.0``.
    * ``o_i <= committed < o_{i+1}`` for two points of the table: the log end
      passed ``committed`` between ``last_i`` and ``first_{i+1}``; the time is
      interpolated linearly in that interval (see :class:`OffsetHistory` for
      why the interval starts at ``last_i``), and lag = ``now`` − that time.
    * ``committed`` below the oldest point, one point only: the message was
      written before we first saw the log end above it, so ``now − first_0``
      is a certain *lower bound*; we report it rather than nothing (where
      kafka-lag-exporter produced NaN).
    * ``committed`` below the oldest point, two points or more: extrapolate
      back from ``first_0`` at the production rate of the oldest segment
      (``(o_1 − o_0) / (first_1 − last_0)``: the pace the producer wrote at
      when it did write).  The extrapolated extra age is capped at the span
      the table covers (newest last-seen − oldest first-seen): a straight line
      fitted on S seconds of observation is not trusted further than S seconds
      outside them.  With a zero-length segment (rate unknown) or a zero span,
      no extra age is added.  So the result always lies in
      ``[now − first_0, now − first_0 + span]``: finite, and never below the
      certain lower bound.

    A ``now`` earlier than the estimated write time (clock skew) clamps to 0.
    The estimate is monotonic: a larger ``committed`` never gives a larger lag.
    """
    if committed is None or committed < 0 or not math.isfinite(now):
        return None
    offsets = history._offsets
    n = len(offsets)
    if n == 0:
        return None
    if committed >= offsets[-1]:
        return 0.0
    times = history._times
    if committed < offsets[0]:
        written_at = times[0]
        if n >= 2:
            segment_s = times[2] - times[1]  # first_1 - last_0
            span_s = times[-1] - times[0]
            if segment_s > 0.0 and span_s > 0.0:
                extra = (offsets[0] - committed) * segment_s / (offsets[1] - offsets[0])
                written_at -= min(extra, span_s)
    else:
        i = bisect_right(offsets, committed) - 1  # offsets[i] <= committed < offsets[i + 1]
        lo_o = offsets[i]
        lo_t = times[2 * i + 1]  # last time the log end was still at lo_o
        hi_t = times[2 * i + 2]  # first time the log end was seen at offsets[i + 1]
        written_at = lo_t + (hi_t - lo_t) * ((committed - lo_o) / (offsets[i + 1] - lo_o))
    lag = now - written_at
    return lag if lag > 0.0 else 0.0


class CommitWindow(_Points):
    """Ring of the last ``size`` distinct committed offsets ``(offset, first seen, latest lag)``.

    Like Burrow's ring of commits: polls that see the same committed offset
    again do not add an entry (sampling faster than the consumer commits
    would otherwise look like a stall); they refresh that entry's lag, so the
    newest entry always carries the current lag.  A consumer that stops
    committing is caught by time instead: ``last_change_time`` -- when the
    committed offset last changed, the first observation counting as a
    change -- survives the ring's evictions, so "no progress for 20 minutes"
    stays measurable with a 10-entry window.

    Each entry also keeps its *lag at commit*, a lower bound: a commit first
    seen at this poll was made after the previous poll, when the log end was
    at least the high watermark seen then, so ``previous high watermark -
    offset`` is lag the consumer certainly had when it committed.  The lag
    measured at the poll adds whatever was produced between the commit and
    the poll -- up to a commit interval's worth -- which makes a healthy
    consumer's lag a sawtooth whose rising edge looks like falling behind.
    The "falling behind" rule judges the lower bounds, which stay near zero
    for a consumer that commits at the head.  On the first observation with
    a high watermark the lower bound is unknown, kept as -1 and left out of
    that rule; callers that pass no high watermark at all get the lag itself.

    Observe only polls where the lag is known (a commit and a high watermark
    both present); negative lags are clamped to 0.  Storage: four bounded
    arrays, one float and one int.
    """

    __slots__ = ("_floors", "_lags", "_last_change_time", "_offsets", "_prev_hw", "_size", "_times")

    def __init__(self, size: int = 10) -> None:
        if size < 1:
            raise ValueError(f"size must be >= 1, got {size}")
        self._size = size
        self._offsets = array("q")
        self._times = array("d")
        self._lags = array("q")
        self._floors = array("q")
        self._last_change_time: float | None = None
        self._prev_hw: int | None = None

    def observe(self, offset: int, t: float, lag: int, high_watermark: int | None = None) -> None:
        """Record one poll: the group's committed ``offset``, its ``lag`` (messages) and the log end at ``t``."""
        lag = lag if lag > 0 else 0
        prev_hw = self._prev_hw
        if high_watermark is not None:
            self._prev_hw = high_watermark
        offsets = self._offsets
        if offsets and offsets[-1] == offset:
            self._lags[-1] = lag
            return
        floor = lag  # no high watermark given: the lag itself stands in
        if high_watermark is not None:
            floor = -1 if prev_hw is None else max(0, min(lag, prev_hw - offset))
        self._last_change_time = t
        offsets.append(offset)
        self._times.append(t)
        self._lags.append(lag)
        self._floors.append(floor)
        if len(offsets) > self._size:
            del offsets[0]
            del self._times[0]
            del self._lags[0]
            del self._floors[0]

    def clear(self) -> None:
        del self._offsets[:]
        del self._times[:]
        del self._lags[:]
        del self._floors[:]
        self._last_change_time = None
        self._prev_hw = None

    @property
    def size(self) -> int:
        return self._size

    @property
    def last_change_time(self) -> float | None:
        """When the committed offset last changed (``GroupPartitionRecord.last_commit_time``)."""
        return self._last_change_time

    @property
    def last_high_watermark(self) -> int | None:
        """The log end passed with the latest observation that had one (None after `clear`)."""
        return self._prev_hw

    @property
    def latest(self) -> tuple[int, float, int] | None:
        if not self._offsets:
            return None
        return self._offsets[-1], self._times[-1], self._lags[-1]

    def observations(self) -> list[tuple[int, float, int]]:
        """The ring as ``(offset, time, lag)`` tuples, oldest first."""
        return list(zip(self._offsets, self._times, self._lags, strict=True))

    def raw(self) -> tuple[array, array, array, array, float | None, int | None]:
        """``(offsets, times, lags, lags at commit, last change time, previous high watermark)``, for checkpoints."""
        return self._offsets, self._times, self._lags, self._floors, self._last_change_time, self._prev_hw

    @classmethod
    def from_raw(cls, size: int, offsets: array, times: array, lags: array, floors: array,
                 last_change_time: float | None, prev_hw: int | None) -> CommitWindow:
        """Rebuild from `raw` (a checkpoint), keeping the newest ``size`` entries (may adopt the arrays).

        ValueError if inconsistent."""
        n = len(offsets)
        if not (len(times) == len(lags) == len(floors) == n):
            raise ValueError(f"window arrays differ in length: {n}, {len(times)}, {len(lags)}, {len(floors)}")
        w = cls(size)
        drop = max(0, n - size)

        def own(a: array, typecode: str) -> array:  # takes the caller's array when it fits as it is
            return array(typecode, a[drop:]) if drop or a.typecode != typecode else a

        w._offsets, w._times = own(offsets, "q"), own(times, "d")
        w._lags, w._floors = own(lags, "q"), own(floors, "q")
        w._last_change_time = last_change_time
        w._prev_hw = prev_hw
        return w

    def lags_at_commit(self) -> list[int]:
        """Each entry's lower-bound lag when it was committed, oldest first (-1: unknown)."""
        return list(self._floors)

    def __repr__(self) -> str:
        return (f"CommitWindow(size={self._size}, last_change_time={self._last_change_time!r}, "
                f"observations={self.observations()!r})")


def evaluate_partition(
    window: CommitWindow,
    now: float,
    *,
    has_members: bool,
    allowed_lag: int = 0,
    min_points: int = 3,
    stop_after_s: float = 300.0,
) -> str:
    """Burrow-style status of one group-partition: OK, WARN, STALL, STOP or REWIND.

    Rules, first match wins:

    1. No observation: ``OK`` (nothing to judge).
    2. Current lag ``<= allowed_lag``: ``OK``.  Improvement over Burrow, whose
       STOP rule fires on the time since the last commit: a consumer caught up
       on an idle partition has nothing to commit, and is healthy however
       long ago it last committed.
    3. ``REWIND``: the committed offset went backwards inside the window and
       the latest offset is still below the highest earlier one (a rewind that
       was since overtaken, or evicted from the window, no longer counts).
    4. No change of the committed offset for more than ``stop_after_s`` (by
       ``last_change_time``, which outlives the window): ``STOP`` when the
       group has no members -- nobody consumes and the backlog only grows --
       and ``STALL`` when members hold the partition without progressing.
       Improvement over Burrow: the member count tells a dead consumer from
       a stuck one, and the threshold is a time, not the window's span.
    5. At least ``min_points`` commits in the window whose lag at commit is
       known, every one with lag above
       ``allowed_lag`` (Burrow: "no commit in the window had zero lag"):
       ``WARN`` when the lag never decreased across the window *and* ended
       higher than it started -- the consumer moves but falls further behind.
       Judged on each commit's lag at commit (see :class:`CommitWindow`),
       not on the lag at the poll, so a healthy consumer's sawtooth between
       commits does not read as falling behind.
       (Burrow's STALL-by-equal-offsets cannot arise: the window holds
       distinct offsets, and a consumer re-committing one offset is judged by
       rule 4's clock instead, which does not depend on the poll rate.)
       Improvement over Burrow: a constant non-zero lag with moving offsets
       is a steady state (consumption keeps pace with production), not
       falling behind, so it stays ``OK``.
    6. Otherwise ``OK`` (e.g. a recovering consumer whose lag decreases).
    """
    return judge_partition(window, now, has_members=has_members, allowed_lag=allowed_lag, min_points=min_points,
                           stop_after_s=stop_after_s)[0]


def judge_partition(
    window: CommitWindow,
    now: float,
    *,
    has_members: bool,
    allowed_lag: int = 0,
    min_points: int = 3,
    stop_after_s: float = 300.0,
) -> tuple[str, str]:
    """`evaluate_partition`'s status and the rule that decided it, in words (the API's ``status_reason``)."""
    if min_points < 2:
        raise ValueError(f"min_points must be >= 2, got {min_points}")
    offsets = window._offsets
    n = len(offsets)
    if n == 0:
        return OK, "no commit seen yet"
    lags = window._lags
    if lags[-1] <= allowed_lag:
        return OK, f"lag {lags[-1]:,} <= allowed {allowed_lag:,}"
    latest = offsets[-1]
    if n >= 2 and latest < max(offsets[:-1]):
        return REWIND, f"committed offset went back from {max(offsets[:-1]):,} to {latest:,}"
    changed = window._last_change_time
    if changed is not None and now - changed > stop_after_s:
        who = "members hold it" if has_members else "no members"
        return (STALL if has_members else STOP,
                f"commit unchanged for {now - changed:.0f}s (> {stop_after_s:.0f}s) with lag {lags[-1]:,}; {who}")
    floors = [f for f in window._floors if f >= 0]
    m = len(floors)
    if (m >= min_points and min(floors) > allowed_lag and floors[-1] > floors[0]
            and all(floors[k] <= floors[k + 1] for k in range(m - 1))):
        return WARN, f"lag at commit rose over the last {m} commits ({floors[0]:,} -> {floors[-1]:,})"
    return OK, "consuming: commits move and the lag is not growing at every commit"


def worst_partition_status(statuses: Iterable[str]) -> str:
    """The most severe partition status, by ``PARTITION_STATUS_ORDER`` (OK < WARN < REWIND < STALL < STOP).

    ``OK`` for no statuses; an unknown status is a caller bug and raises ``ValueError``.
    """
    worst = OK
    rank = 0
    for status in statuses:
        r = _SEVERITY.get(status)
        if r is None:
            raise ValueError(f"unknown partition status {status!r}")
        if r > rank:
            worst, rank = status, r
    return worst


def group_status(statuses: Iterable[str]) -> str:
    """Group roll-up of partition statuses, worst wins: STALL/STOP/REWIND -> ERR, WARN -> WARN, else OK."""
    return _GROUP_OF[worst_partition_status(statuses)]


def seconds_to_retention(
    history: OffsetHistory,
    committed: int | None,
    log_start: int | None,
    retention_ms: int | None,
    now: float,
) -> float | None:
    """Estimated seconds until time-based retention deletes a message the group has not read yet.

    ``None`` when unknown: no commit, infinite retention (``None`` or
    negative, Kafka's -1), no history.  ``0.0`` when ``committed`` is already
    below the log start offset (unread messages are already gone).
    Otherwise the oldest unread message was written at ``now − lag_seconds``
    and becomes deletable ``retention`` after that, so the result is
    ``max(0, retention − lag_seconds)``.  A caught-up group gets the full
    retention: the next message it has to read is not even written yet.

    Conservative (early) estimate: Kafka deletes whole segments, once the
    *newest* message of a segment is older than retention, and only when the
    log cleaner thread runs, so the real deletion comes later.  Caveats: with
    a single history point ``lag_seconds`` is a lower bound, so this is then
    an upper bound; ``retention.bytes`` can delete earlier and is not
    modelled here.
    """
    if committed is None or committed < 0 or retention_ms is None or retention_ms < 0:
        return None
    if len(history) == 0:
        return None
    if log_start is not None and committed < log_start:
        return 0.0
    lag = lag_seconds(history, committed, now)
    if lag is None:
        return None
    written_at = now - lag
    remaining = written_at + retention_ms / 1000.0 - now
    return remaining if remaining > 0.0 else 0.0


def lag_messages(high_watermark: int | None, committed: int | None) -> int | None:
    """Lag in messages, ``max(0, high watermark − committed)``.

    ``None`` when either side is unknown or the commit is Kafka's negative
    "no offset" -- never a negative lag (kafka_exporter's complaint) and never
    a sentinel.  A commit above the high watermark (possible right after an
    unclean election truncated the log) is reported as 0, not negative.
    """
    if high_watermark is None or committed is None or committed < 0 or high_watermark < 0:
        return None
    lag = high_watermark - committed
    return lag if lag > 0 else 0
