"""Shared pieces of the views: the colour-blind-safe palette, time formatting, freshness, record frames.

Everything here is pure (no Streamlit): inputs are plain dicts (latest-state documents) and pandas frames
(history), outputs are display frames and strings. The plotly helpers are in `dashboard.views.plotting`.

Times are epoch seconds (UTC) everywhere in the data. They are shown in the viewer's time zone with UTC
available on hover; plotly has no notion of time zones, so figures get naive local wall-clock datetimes on
the axis and the UTC time in ``customdata`` for the hover text.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import pandas as pd

from collectors.model.vocabulary import SEVERITY_RANK
from spark_analytics import formatting
from spark_analytics.formatting import is_missing

# Okabe & Ito (2008), the palette designed to stay distinguishable with every common colour-vision deficiency.
OKABE_ITO = {
    "black": "#000000", "orange": "#E69F00", "sky_blue": "#56B4E9", "bluish_green": "#009E73",
    "yellow": "#F0E442", "blue": "#0072B2", "vermillion": "#D55E00", "reddish_purple": "#CC79A7",
}
SERIES_COLORS = ["#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#000000", "#F0E442"]
SEVERITY_COLORS = {"critical": OKABE_ITO["vermillion"], "warning": OKABE_ITO["orange"], "info": OKABE_ITO["sky_blue"]}
SEVERITY_ORDER = SEVERITY_RANK
# Cell styles (st.dataframe via pandas Styler): background from the palette, text colour for contrast.
SEVERITY_STYLE = {"critical": "background-color: #D55E00; color: #ffffff", "warning": "background-color: #E69F00; "
                  "color: #000000", "info": "background-color: #56B4E9; color: #000000"}
STATUS_STYLE = {"ERR": SEVERITY_STYLE["critical"], "WARN": SEVERITY_STYLE["warning"],
                "STOP": SEVERITY_STYLE["critical"], "STALL": SEVERITY_STYLE["critical"],
                "REWIND": SEVERITY_STYLE["critical"], "DOWN": SEVERITY_STYLE["critical"],
                "UNREACHABLE": SEVERITY_STYLE["critical"], "NOT REGISTERED": SEVERITY_STYLE["critical"],
                "INACTIVE": SEVERITY_STYLE["info"], "ABANDONED": SEVERITY_STYLE["info"]}


def tzinfo(tz: str | None) -> ZoneInfo:
    try:
        return ZoneInfo(tz) if tz else ZoneInfo("UTC")
    except (ZoneInfoNotFoundError, ValueError):
        return ZoneInfo("UTC")


def fmt_ts(t: float | None, tz: str | None = None, with_zone: bool = True) -> str:
    """``2025-11-22 14:03:12 CET`` in the viewer's zone; an em dash when unknown."""
    if is_missing(t):
        return "—"
    d = datetime.fromtimestamp(float(t), UTC).astimezone(tzinfo(tz))
    return d.strftime("%Y-%m-%d %H:%M:%S %Z" if with_zone else "%Y-%m-%d %H:%M:%S")


def fmt_utc(t: float | None) -> str:
    return fmt_ts(t, "UTC")


def fmt_duration(seconds: float | None) -> str:
    """Short human duration for dense tables and banners: ``45s``, ``3m 12s``, ``2h 05m``, ``3d 04h`` (the weekly
    report's rule, compact: `spark_analytics.formatting.fmt_duration`); negative clamps to 0s; an em dash when
    unknown."""
    return "—" if is_missing(seconds) else formatting.fmt_duration(seconds, compact=True)


def fmt_count(n: Any) -> str:
    if is_missing(n):
        return "—"
    return f"{int(n):,}"


def epoch_to_local(values: Any, tz: str | None) -> pd.Series:
    """Epoch seconds -> tz-aware datetimes in the viewer's zone (for tables)."""
    s = pd.to_datetime(pd.Series(values, dtype="Float64").astype("float64"), unit="s", utc=True)
    return s.dt.tz_convert(tzinfo(tz))


def epoch_to_axis(values: Any, tz: str | None) -> pd.Series:
    """Epoch seconds -> naive local wall-clock datetimes, for plotly axes (plotly ignores zones). Rounded to the
    microsecond: a float epoch carries nanoseconds, which a single value (an election's line, `add_vline`) takes into
    Python's datetime, dropping them with a warning in the dashboard's log at every rerun."""
    return epoch_to_local(values, tz).dt.tz_localize(None).dt.round("us")


def epoch_to_utc_text(values: Any) -> list[str]:
    return [fmt_utc(v) for v in values]


def zxid_parts(zxid: int | None) -> tuple[int | None, int | None]:
    if is_missing(zxid):
        return None, None
    z = int(zxid)
    return z >> 32, z & 0xFFFFFFFF


def fmt_zxid(epoch: Any, counter: Any) -> str:
    """``epoch:counter`` as ZooKeeper people read a zxid, e.g. ``2:26``."""
    if is_missing(epoch) or is_missing(counter):
        return "—"
    return f"{int(epoch)}:{int(counter)}"


def fmt_zxid_hex(epoch: Any, counter: Any) -> str:
    """The 64-bit zxid in hex as ``srvr`` prints it, e.g. ``0x20000001a``."""
    if is_missing(epoch) or is_missing(counter):
        return "—"
    return hex((int(epoch) << 32) | int(counter))


# ----- freshness


@dataclass(frozen=True)
class Freshness:
    """How far the dashboard can trust one cluster's latest snapshot."""

    cluster: str
    level: str  # ok / partial / stale / unreachable
    age_s: float | None  # seconds since the collector wrote the file (wall clock)
    written_at: float | None
    snapshot_time: float | None
    since: float | None  # when the problem began, when known
    message: str

    @property
    def ok(self) -> bool:
        return self.level == "ok"


def freshness(doc: dict[str, Any], now: float, stale_after_s: float, tz: str | None = None) -> Freshness:
    """Classify a latest-state document.

    - unreachable: the last poll reached no broker (since = when ``cluster_unreachable`` opened), and the collector
      still writes;
    - stale: the collector has not written the file for more than `stale_after_s` (wall clock; the file's
      ``written_at``, or the snapshot ``time`` when absent; whether its last poll reached the cluster or not), or
      the snapshot was already that old when written;
    - partial: the last poll could not refresh some sections (``stale_sections``);
    - ok otherwise.
    """
    cluster = str(doc.get("cluster", "?"))
    snap_t = _num(doc.get("time"))
    written = _num(doc.get("written_at"))
    ref = written if written is not None else snap_t
    age = None if ref is None else now - ref
    alerts = doc.get("alerts") or []

    def opened(rule: str) -> float | None:
        times = [_num(a.get("first_seen")) for a in alerts if a.get("rule") == rule]
        times = [t for t in times if t is not None]
        return min(times) if times else None

    if doc.get("reachable") is False:
        since = opened("cluster_unreachable") or snap_t
        errors = doc.get("errors") or []
        why = f": {errors[0]}" if errors else ""
        if age is not None and age > stale_after_s:  # the collector stopped too: the cluster may be back since
            return Freshness(cluster, "stale", age, written, snap_t, ref,
                             f"Data for {cluster} is STALE: no new data from the collector for {fmt_duration(age)} "
                             f"(last written {fmt_ts(ref, tz)}); its last poll found the cluster UNREACHABLE (since "
                             f"{fmt_ts(since, tz)}{why}), how it is now is unknown. Is the collector running?")
        return Freshness(cluster, "unreachable", age, written, snap_t, since,
                         f"Cluster {cluster} is UNREACHABLE since {fmt_ts(since, tz)}{why}. "
                         "Everything shown for it is from its last successful poll or missing.")
    lag_at_write = (written - snap_t) if written is not None and snap_t is not None else 0.0
    if age is None or age > stale_after_s or lag_at_write > stale_after_s:
        when = fmt_ts(ref, tz) if ref is not None else "an unknown time"
        if age is not None and age > stale_after_s:
            what = f"no new data from the collector for {fmt_duration(age)} (last written {when})"
        elif age is None:
            what = "the snapshot carries no time"
        else:
            what = f"the snapshot was already {fmt_duration(lag_at_write)} old when written ({fmt_ts(snap_t, tz)})"
        return Freshness(cluster, "stale", age, written, snap_t, ref,
                         f"Data for {cluster} is STALE: {what}. Is the collector running?")
    sections = [s for s in (doc.get("stale_sections") or []) if s]
    if sections or doc.get("stale"):
        since = opened("data_stale") or snap_t
        return Freshness(cluster, "partial", age, written, snap_t, since,
                         f"Part of the last poll of {cluster} failed since {fmt_ts(since, tz)}: "
                         f"{', '.join(sections) or 'some sections'} not refreshed; those figures are older or "
                         "missing.")
    return Freshness(cluster, "ok", age, written, snap_t, None,
                     f"{cluster}: data as of {fmt_ts(snap_t, tz)} (written {fmt_duration(age)} ago)")


def infer_poll_interval(times: Iterable[float], default: float = 30.0) -> float:
    """Median spacing of the last polls (history ``cluster`` table times of one cluster)."""
    ts = sorted({float(t) for t in times if not is_missing(t)})[-21:]
    if len(ts) < 3:
        return default
    diffs = sorted(b - a for a, b in itertools.pairwise(ts) if b > a)
    if not diffs:
        return default
    return float(diffs[len(diffs) // 2])


def _num(v: Any) -> float | None:
    if is_missing(v):
        return None
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


# ----- frames


def records_frame(records: list[dict[str, Any]] | None, columns: Iterable[str]) -> pd.DataFrame:
    """A list of record dicts as a frame with (at least) `columns`, even when empty."""
    cols = list(columns)
    df = pd.DataFrame(records or [])
    for c in cols:
        if c not in df.columns:
            df[c] = pd.Series([None] * len(df), dtype="object")
    return df
