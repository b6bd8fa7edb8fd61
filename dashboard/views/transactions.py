"""Transactions: open transactions against their timeout, stuck and hanging ones, LSO gaps, producer epochs."""

from __future__ import annotations

from typing import Any

import pandas as pd
import plotly.graph_objects as go

from collectors.model.txn_clients import counted_increase
from collectors.model.vocabulary import OPEN_TXN_STATES, epochs_bump_at_every_end, topic_of
from dashboard.views.common import SERIES_COLORS, epoch_to_local, fmt_duration, is_missing
from dashboard.views.plotting import base_layout, empty_figure, time_trace


def _stuck_ids(doc: dict[str, Any]) -> set[str]:
    return {str(a.get("subject")) for a in doc.get("alerts") or [] if a.get("rule") == "stuck_transaction"
            and is_missing(a.get("resolved_at"))}


def transactions_frame(doc: dict[str, Any], open_only: bool = True, txn: str | None = None,
                       topics: list[str] | None = None) -> pd.DataFrame:
    """Transactions with their age as a fraction of ``transaction.timeout.ms``; stuck ones first."""
    cols = ["flag", "transactional id", "state", "age", "timeout", "age / timeout", "age (s)", "producer id",
            "epoch", "coordinator", "partitions"]
    stuck = _stuck_ids(doc)
    rows = []
    for t in doc.get("transactions") or []:
        tid = str(t.get("transactional_id"))
        is_open = t.get("state") in OPEN_TXN_STATES
        if open_only and not is_open:
            continue
        if txn and tid != txn:
            continue
        parts = list(t.get("partitions") or [])
        if topics and not any(topic_of(p) in topics for p in parts):
            continue
        age, timeout_s = t.get("age_seconds"), (t.get("timeout_ms") or 0) / 1000.0
        frac = (float(age) / timeout_s) if is_open and not is_missing(age) and timeout_s > 0 else None
        over = t.get("state") == "Ongoing" and frac is not None and frac > 1.0
        flag = "STUCK" if tid in stuck or over else ("open" if is_open else "")
        rows.append({"flag": flag, "transactional id": tid, "state": t.get("state"),
                     "age": fmt_duration(age) if is_open else "—", "timeout": fmt_duration(timeout_s),
                     "age / timeout": frac, "age (s)": None if is_missing(age) else round(float(age), 1),
                     "producer id": t.get("producer_id"), "epoch": t.get("producer_epoch"),
                     "coordinator": t.get("coordinator"), "partitions": ", ".join(parts)})
    if not rows:
        return pd.DataFrame(columns=cols)
    df = pd.DataFrame(rows, columns=cols)
    df["_stuck"] = df["flag"] == "STUCK"
    df["_frac"] = pd.to_numeric(df["age / timeout"], errors="coerce").fillna(-1)
    return df.sort_values(["_stuck", "_frac"], ascending=[False, False]).drop(columns=["_stuck", "_frac"]) \
        .reset_index(drop=True)


def hanging_frame(doc: dict[str, Any], topics: list[str] | None = None, tz: str | None = None) -> pd.DataFrame:
    """Open transactions on partitions that no coordinator knows (from DescribeProducers)."""
    rows = [p for p in doc.get("producers") or [] if p.get("hanging") and (not topics or p.get("topic") in topics)]
    cols = ["topic", "partition", "producer id", "epoch", "open since offset", "last write"]
    if not rows:
        return pd.DataFrame(columns=cols)
    df = pd.DataFrame(rows)
    return pd.DataFrame({"topic": df["topic"], "partition": df["partition"], "producer id": df["producer_id"],
                         "epoch": df["producer_epoch"], "open since offset": df["txn_start_offset"],
                         "last write": epoch_to_local(df["last_timestamp"], tz)}, columns=cols)


def lso_gap_frame(doc: dict[str, Any], topics: list[str] | None = None) -> pd.DataFrame:
    """Partitions whose last stable offset is behind the high watermark, and who holds them open."""
    holders: dict[tuple[str, int], list[str]] = {}
    for p in doc.get("producers") or []:
        who = p.get("transactional_id") or f"producer {p.get('producer_id')} (HANGING)"
        holders.setdefault((p.get("topic"), p.get("partition")), []).append(str(who))
    rows = []
    for p in doc.get("partitions") or []:
        if topics and p.get("topic") not in topics:
            continue
        hw, lso = p.get("high_watermark"), p.get("last_stable_offset")
        if is_missing(hw) or is_missing(lso):
            continue
        gap = max(0, int(hw) - int(lso))
        if gap > 0:
            rows.append({"partition": f"{p.get('topic')}-{p.get('partition')}", "topic": p.get("topic"),
                         "LSO gap (messages)": gap, "high watermark": hw, "LSO": lso,
                         "held by": ", ".join(holders.get((p.get("topic"), p.get("partition")), []))})
    cols = ["partition", "topic", "LSO gap (messages)", "high watermark", "LSO", "held by"]
    if not rows:
        return pd.DataFrame(columns=cols)
    return pd.DataFrame(rows, columns=cols).sort_values("LSO gap (messages)", ascending=False).reset_index(drop=True)


def lso_gap_figure(hist: pd.DataFrame, tz: str | None, topics: list[str] | None = None, top_n: int = 8) -> go.Figure:
    """LSO gap over time for the partitions with the largest gaps (history ``lso_gap``)."""
    if hist is None or hist.empty:
        return empty_figure("No LSO gap recorded in this time range (no open transaction held a partition back).")
    h = hist if not topics else hist[hist["topic"].isin(topics)]
    if h.empty:
        return empty_figure("No LSO gap recorded for these topics in this time range.")
    h = h.assign(series=h["topic"].astype(str) + "-" + h["partition"].astype(str), value=h["lso_gap"].astype("float64"))
    keep = list(h.groupby("series")["value"].max().sort_values(ascending=False).index[:top_n])
    fig = go.Figure()
    for i, s in enumerate(keep):
        d = h[h["series"] == s].sort_values("time")
        fig.add_trace(time_trace(d["time"], d["value"], tz, s, "LSO gap", "%{y:,} messages", mode="lines+markers",
                                 marker={"size": 4}, line={"color": SERIES_COLORS[i % len(SERIES_COLORS)]}))
    fig.update_yaxes(title="LSO gap (messages)", rangemode="tozero")
    fig.update_xaxes(title=None)
    return base_layout(fig, height=300)


def epoch_changes(hist: pd.DataFrame, clusters: pd.DataFrame | None = None) -> pd.DataFrame:
    """Each change of a transactional id's producer epoch between two polls (time, id, from, to) from history
    ``transactions``, and the restarts, fences and timeout aborts it counts (``bumps``: `txn_clients.
    counted_increase`, the weekly report's rule). `clusters`: the ``cluster`` rows of the range (cluster, time,
    transaction_version). At a poll at Transaction V2 every transaction end moves the epoch, so a change into or
    out of one counts only out of an epoch the producer proved keeps V1's rules (``keeps_v1``); a new producer id
    counts nothing either. A history without the columns reads as before them: one producer, V1."""
    cols = ["time", "transactional_id", "from", "to", "bumps"]
    if hist is None or hist.empty:
        return pd.DataFrame(columns=cols)
    by_cluster = "cluster" in hist and (clusters is None or "cluster" in clusters)
    h = hist.dropna(subset=["producer_epoch"])
    h = h.assign(**{c: h.get(c, v) for c, v in (("producer_id", 0), ("keeps_v1", False))},
                 cluster=h["cluster"] if by_cluster else "")
    v2: set[tuple[str, float]] = set()
    if clusters is not None and "transaction_version" in clusters:
        at_v2 = clusters[clusters["transaction_version"].map(
            lambda v: epochs_bump_at_every_end(None if is_missing(v) else int(v))).astype(bool)]
        v2 = set(zip(at_v2["cluster"] if by_cluster else [""] * len(at_v2), at_v2["time"].astype(float),
                     strict=True))
    # per poll, the highest epoch seen, with its producer id and V1 proof, as the report takes them
    polls = h.sort_values(["time", "producer_epoch"]).drop_duplicates(["cluster", "transactional_id", "time"],
                                                                       keep="last")
    rows = []
    for (cluster, tid), d in polls.groupby(["cluster", "transactional_id"]):
        prev: tuple[Any, int, bool, bool] | None = None
        for t, pid, e, keeps in zip(d["time"], d["producer_id"], d["producer_epoch"], d["keeps_v1"], strict=True):
            now = (None if is_missing(pid) else int(pid), int(e), not is_missing(keeps) and bool(keeps),
                   (cluster, float(t)) in v2)
            if prev is not None and now[1] != prev[1]:
                rows.append({"time": float(t), "transactional_id": tid, "from": prev[1], "to": now[1],
                             "bumps": counted_increase(prev[0], prev[1], now[0], now[1], prev[2], prev[3], now[3])})
            prev = now
    return pd.DataFrame(rows, columns=cols)


def producer_epoch_figure(hist: pd.DataFrame, tz: str | None, txns: list[str] | None = None,
                          top_n: int = 8, clusters: pd.DataFrame | None = None) -> go.Figure:
    """Producer epoch per transactional id over time (steps up on fencing, restarts and timeouts, and at Transaction
    V2 at every transaction end), the ids with the most restarts, fences and timeout aborts first (`epoch_changes`
    of `clusters`)."""
    if hist is None or hist.empty:
        return empty_figure("No transactions seen in this time range.")
    h = hist if not txns else hist[hist["transactional_id"].isin(txns)]
    h = h.dropna(subset=["producer_epoch"])
    if h.empty:
        return empty_figure("No transactions seen for this selection in this time range.")
    bumps = epoch_changes(h, clusters)
    bumps = bumps[bumps["bumps"] > 0]
    order = list(bumps.groupby("transactional_id")["bumps"].sum().sort_values(ascending=False).index)
    order += [t for t in sorted(h["transactional_id"].unique()) if t not in order]
    fig = go.Figure()
    for i, tid in enumerate(order[:top_n]):
        d = h[h["transactional_id"] == tid].sort_values("time")
        fig.add_trace(time_trace(d["time"], d["producer_epoch"].astype("float64"), tz, str(tid), "epoch", "%{y}",
                                 mode="lines+markers", line={"shape": "hv", "color": SERIES_COLORS[i % 8]},
                                 marker={"size": 4}))
    fig.update_yaxes(title="producer epoch", rangemode="tozero", dtick=1 if h["producer_epoch"].max() < 12 else None)
    fig.update_xaxes(title=None)
    return base_layout(fig, height=280)


def epoch_changes_display(hist: pd.DataFrame, tz: str | None,
                          clusters: pd.DataFrame | None = None) -> tuple[pd.DataFrame, int]:
    """The epoch changes that count restarts, fences or timeout aborts (`epoch_changes`), newest first, and how many
    other changes were left out (transaction ends at Transaction V2, new producer ids)."""
    ch = epoch_changes(hist, clusters)
    counted = ch[ch["bumps"] > 0].sort_values("time", ascending=False)
    shown = pd.DataFrame({"time": epoch_to_local(counted["time"], tz), "transactional id": counted["transactional_id"],
                          "epoch": [f"{a} → {b}" for a, b in zip(counted["from"], counted["to"], strict=True)],
                          "bumps": counted["bumps"]}, columns=["time", "transactional id", "epoch", "bumps"])
    return shown, len(ch) - len(counted)
