"""The Overview's "Data lost" panel: the loss ledger of the last week, and how much of the week was watched.

The ledger is the history's ``loss_events`` table (`docs/history-schema.md`): evidence, not risk. A week with
no entry is believable only as far as the monitor was polling: `coverage` says how many polls it made against
how many the interval asks for, and lists the gaps, so a zero with gaps says so.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import pandas as pd

from collectors.model import vocabulary as V
from collectors.model.wording import plural
from dashboard.views.common import fmt_count, fmt_duration, fmt_utc, is_missing

WEEK_S = 7 * 86_400.0
KIND_LABELS = {V.TRUNCATION: "truncated after a leader change", V.UNCLEAN_ELECTION: "unclean election",
               V.RETENTION_SKIPPED: "deleted unread by retention", V.BEYOND_LOG_END: "read past a truncation",
               V.ZXID_REGRESSED: "ZooKeeper data went back in time",
               V.TXN_TIMEOUT_ABORT: "transaction aborted at its timeout",
               V.TXN_PRODUCER_RETURNED: "fenced producer came back"}
COUNTED_AS = {V.UNCLEAN_ELECTION: ("unclean election", "unclean elections"),
              V.BEYOND_LOG_END: ("read past a truncation", "reads past a truncation"),
              V.ZXID_REGRESSED: ("time ZooKeeper's data went back", "times ZooKeeper's data went back"),
              V.TXN_TIMEOUT_ABORT: ("transaction aborted at its timeout", "transactions aborted at their timeout")}
"""The events the headline counts, not their messages: ``1 unclean election``, ``2 unclean elections``."""
LEDGER_COLUMNS = ["time_utc", "cluster", "kind", "subject", "group", "messages", "evidence"]


@dataclass
class Coverage:
    polls: int
    expected: int
    gaps: list[tuple[float, float]] = field(default_factory=list)  # (from, to) longer than 3 poll intervals

    @property
    def share(self) -> float:
        return min(1.0, self.polls / self.expected) if self.expected else 0.0


def coverage(poll_times: list[float], start: float, end: float, interval: float) -> Coverage:
    """Polls in [start, end) against what `interval` asks for, and the gaps (no poll for > 3 intervals,
    the edges of the window included)."""
    times = sorted(t for t in poll_times if start <= t < end)
    expected = max(1, int((end - start) // interval)) if interval > 0 else 0
    gaps = [(a, b) for a, b in itertools.pairwise([start, *times, end]) if b - a > 3 * interval]
    return Coverage(len(times), expected, gaps)


def first_records(events: pd.DataFrame, since: float | None = None) -> pd.DataFrame:
    """The ledger's rows from `since` on but the records of a leader change's loss again
    (`V.LEADER_CHANGE_LOSSES`): the first row of each `V.SAME_LOSS` is kept, as the weekly report counts them
    (`spark_analytics.aggregations.losses`). A collector killed between its ledger write and its checkpoint records
    the same truncation after its restart. `events` may start earlier, as context: a loss first recorded before
    `since` is not counted again from its later record (the report reads the week before for the same reason)."""
    if not events.empty and all(c in events.columns for c in V.SAME_LOSS):  # else: rows as they are
        ordered = events.sort_values(["time", "evidence"] if "evidence" in events.columns else ["time"],
                                     kind="stable")
        again = ordered["kind"].isin(V.LEADER_CHANGE_LOSSES) & ordered.duplicated(subset=list(V.SAME_LOSS))
        events = ordered[~again]
    return events if since is None or events.empty else events[events["time"] >= since]


def ledger_frame(events: pd.DataFrame) -> pd.DataFrame:
    """The ledger's rows, newest first, for a table."""
    if events.empty:
        return pd.DataFrame({c: pd.Series(dtype="object") for c in LEDGER_COLUMNS})
    rows = []
    for r in events.sort_values("time", ascending=False).to_dict("records"):
        topic, part = r.get("topic"), r.get("partition")
        subject = f"{topic}-{int(part)}" if not is_missing(topic) and not is_missing(part) else (
            topic if not is_missing(topic) else next((str(r[k]) for k in ("server", "transactional_id")
                                                      if not is_missing(r.get(k))), ""))
        rows.append({"time_utc": fmt_utc(r.get("time")), "cluster": r.get("cluster"),
                     "kind": KIND_LABELS.get(str(r.get("kind")), r.get("kind")), "subject": subject,
                     "group": r.get("group_id") if not is_missing(r.get("group_id")) else "",
                     "messages": None if is_missing(r.get("messages")) else int(r["messages"]),
                     "evidence": r.get("evidence")})
    return pd.DataFrame(rows, columns=LEDGER_COLUMNS)


def headline(events: pd.DataFrame) -> str:
    """``1,240 messages truncated after a leader change (orders), 300 deleted unread by retention (billing)``."""
    if events.empty:
        return ""
    parts = []
    for kind in (k for k in V.LOSS_KINDS if k in V.MESSAGES_GONE_KINDS):
        rows = events[events["kind"] == kind]
        if rows.empty:
            continue
        n = int(rows["messages"].fillna(0).sum())
        who = sorted({str(x) for x in (rows["group_id"] if kind == V.RETENTION_SKIPPED else rows["topic"])
                      if not is_missing(x)})
        parts.append(f"{fmt_count(n)} messages {KIND_LABELS[kind]} ({', '.join(who[:3])}"
                     f"{' …' if len(who) > 3 else ''})")
    for kind, (one, many) in COUNTED_AS.items():
        n = int((events["kind"] == kind).sum())
        if n:
            parts.append(plural(n, one, many))
    return "; ".join(parts)


def coverage_text(c: Coverage, interval: float) -> str:
    """``polls: 20,160 of 20,160 expected (100%)`` and the gaps, if any."""
    text = f"polls: {fmt_count(c.polls)} of {fmt_count(c.expected)} expected every {fmt_duration(interval)} " \
           f"({c.share:.0%})"
    if c.gaps:
        longest = max(b - a for a, b in c.gaps)
        text += f"; {plural(len(c.gaps), 'gap')} (longest {fmt_duration(longest)}, from " \
                f"{fmt_utc(max(c.gaps, key=lambda g: g[1] - g[0])[0])})"
    return text


WATCHED_ENOUGH = 0.9
"""Below this share of the week's expected polls, an empty ledger is not "no data lost" (`no_loss_banner`)."""


def no_loss_banner(coverages: dict[str, tuple[Coverage, float]]) -> tuple[str, str]:
    """(level, text) of an empty ledger: ``success`` only when every cluster was polled for at least
    `WATCHED_ENOUGH` of the week without gaps; ``warning`` when one was polled for less (a zero then says little);
    ``info`` when the share is there but with gaps. `coverages`: cluster -> (coverage, poll interval)."""
    texts = " · ".join(f"{name}: {coverage_text(c, interval)}" for name, (c, interval) in coverages.items())
    low = [name for name, (c, _) in coverages.items() if c.share < WATCHED_ENOUGH]
    gaps = [name for name, (c, _) in coverages.items() if c.gaps]
    if low:
        return "warning", (f"**No loss recorded** in the last 7 days, but the monitor polled {', '.join(low)} for "
                           f"less than {WATCHED_ENOUGH:.0%} of the week: what happened while nothing polled is not "
                           f"in it — {texts}")
    if gaps:
        return "info", (f"**No data lost** in the last 7 days, as far as the monitor saw; what happened in the gaps "
                        f"without a poll is not in it — {texts}")
    return "success", f"**No data lost** in the last 7 days, as far as the monitor saw — {texts}"
