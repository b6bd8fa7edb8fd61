"""How the weekly report's figures read, written once for the report page and the dashboard.

The HTML page (`spark_analytics.render`) and the dashboard's History page (`dashboard.views.reports`) show the
same figures from the same ``summary.json``, and the dashboard embeds the page right below its own cards. With a
formatter each they disagreed: the same lag read ``4 min 28 s`` on the page and ``4m 28s`` on the cards, an
interpolated LSO gap ``12 msgs`` and ``12.30 msgs``, a figure with a unit the page did not know lost its unit.
Now both call `fmt_value` and `fmt_change`.

Plain Python and pandas only (no Spark, no plotly): the dashboard imports this without starting a JVM.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import Any

import pandas as pd

from collectors.model.wording import count_of

# The units of the headline figures (`spark_analytics.figures`) and of the summary's week-over-week rows.
COUNT = ""
SECONDS = "s"
MINUTES = "min"
SHARE = "share"  # a fraction 0..1, shown in %
PER_SECOND = "/s"
MESSAGES = "msgs"
RECORDS = "records"
DISCRETE = (MESSAGES, RECORDS)
"""Units that come in whole items: an interpolated percentile of 12.3 messages reads as 12 messages."""


def is_missing(v: Any) -> bool:
    """None, pandas' NA / NaT or a float NaN: a figure that is unknown, as opposed to zero."""
    if v is None or v is pd.NA or v is pd.NaT:
        return True
    try:
        return isinstance(v, float) and math.isnan(v)
    except TypeError:
        return False


SPELLED_UNITS = (" s", " min", " h", " d")
COMPACT_UNITS = ("s", "m", "h", "d")


def fmt_duration(s: Any, compact: bool = False) -> str:
    """``45 s``, ``3 min 12 s``, ``2 h 05 min``, ``3 d 04 h``: the two largest units, spelled like the ``min`` of the
    minute figures; `compact` (``45s``, ``3m 12s``, ``2h 05m``, ``3d 04h``) for the dashboard's dense tables.

    Rounded to the second first, so 59.6 s is a minute, not "60 s". A negative duration (clock skew between
    hosts) reads as 0 s.
    """
    if is_missing(s):
        return "n/a"
    u_s, u_min, u_h, u_d = COMPACT_UNITS if compact else SPELLED_UNITS
    sec = max(0, round(float(s)))
    if sec < 60:
        return f"{sec}{u_s}"
    if sec < 3600:
        return f"{sec // 60}{u_min} {sec % 60:02d}{u_s}"
    if sec < 86400:
        return f"{sec // 3600}{u_h} {sec % 3600 // 60:02d}{u_min}"
    return f"{sec // 86400}{u_d} {sec % 86400 // 3600:02d}{u_h}"


def fmt_num(v: Any, digits: int = 1) -> str:
    """Thousands separated; whole numbers without decimals (counts stay counts), others with `digits`."""
    if is_missing(v):
        return "n/a"
    f = float(v)
    if f.is_integer() and abs(f) < 1e15:
        return f"{int(f):,}"
    return f"{f:,.{digits}f}"


def fmt_counted(v: Any, word: str, many: str | None = None) -> str:
    """`fmt_num` of a count with its noun agreeing: ``1 incident``, ``12 incidents``, ``n/a incidents`` when the
    summary lacks it (`collectors.model.wording.plural`, for a figure that may be missing)."""
    one = not is_missing(v) and float(v) == 1
    return f"{fmt_num(v)} {count_of(1 if one else 2, word, many)}"


def _number(v: Any) -> float | str:
    """The value as a float to format, or the text to show instead: ``n/a`` when unknown, a value that is not a
    number (a hand-edited summary) as it is, rather than failing the page."""
    if is_missing(v):
        return "n/a"
    try:
        return float(v)
    except (TypeError, ValueError):
        return str(v)


def fmt_value(v: Any, unit: str) -> str:
    """A figure with its unit: ``97.50 %``, ``12.5 min``, ``4 min 28 s``, ``3.25/s``, ``12 msgs``, ``7``; any
    other unit is kept after the number."""
    f = _number(v)
    if isinstance(f, str):
        return f
    if unit == SHARE:
        return f"{f * 100:.2f} %"
    if unit == MINUTES:
        return f"{f:,.1f} min"
    if unit == SECONDS:
        return fmt_duration(f)
    if unit == PER_SECOND:
        return f"{f:,.2f}/s"
    text = fmt_num(f, 0 if unit in DISCRETE else 1)
    return f"{text} {unit}" if unit else text


def fmt_change(change: Any, unit: str) -> str:
    """A week-over-week change with sign and unit: ``+10.0 min``, ``-2.00 pp``, ``+4 min 28 s``, ``+3``.

    Shares change by percentage points (``pp``), not by percent of themselves. No change is exactly ``0``, and
    the sign is ASCII: Streamlit's ``st.metric`` greys out a delta of "0" and reads the arrow's direction from
    a leading "-" (a typographic minus would show a rise).
    """
    f = _number(change)
    if isinstance(f, str):
        return f
    if f == 0:
        return "0"
    sign = "+" if f > 0 else "-"
    if unit == SHARE:
        return f"{sign}{abs(f) * 100:.2f} pp"
    return sign + fmt_value(abs(f), unit)


def fmt_time(t: Any) -> str:
    """An epoch time as UTC with the weekday (a weekly report is read by day): ``Tue 2026-11-17 08:15:00``."""
    if is_missing(t):
        return "—"
    return datetime.fromtimestamp(float(t), UTC).strftime("%a %Y-%m-%d %H:%M:%S")
