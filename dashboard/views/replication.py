"""Replication: the topic x partition ISR heatmap, brokers, durability posture and config risks."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from dashboard.views.common import OKABE_ITO, epoch_to_local, fmt_duration, fmt_utc, is_missing, records_frame
from dashboard.views.plotting import base_layout, empty_figure

# The four partition states, worst last, with colour-blind-safe colours that also differ in lightness
# (sky blue, yellow, vermillion, black) and a short text that is printed in the cells as well.
STATES = ("in sync", "under-replicated", "under min ISR", "offline")
STATE_CODE = {s: i for i, s in enumerate(STATES)}
STATE_COLORS = {"in sync": OKABE_ITO["sky_blue"], "under-replicated": OKABE_ITO["yellow"],
                "under min ISR": OKABE_ITO["vermillion"], "offline": OKABE_ITO["black"]}
STATE_STYLE = {"in sync": "", "under-replicated": "background-color: #F0E442; color: #000000",
               "under-replicated (at min ISR)": "background-color: #F0E442; color: #000000",
               "under min ISR": "background-color: #D55E00; color: #ffffff",
               "offline": "background-color: #000000; color: #ffffff"}
STATE_HELP = {
    "in sync": "every replica in the ISR",
    "under-replicated": "ISR smaller than the replica set; writes still succeed",
    "under min ISR": "ISR below min.insync.replicas: acks=all producers get NOT_ENOUGH_REPLICAS",
    "offline": "no leader: reads and writes fail",
}
PARTITION_COLUMNS = ["topic", "partition", "leader", "leader_epoch", "replicas", "isr", "offline_replicas",
                     "min_insync_replicas", "high_watermark", "last_stable_offset", "zk_leader", "zk_isr"]


def partition_state(leader: Any, replicas: list[int] | None, isr: list[int] | None, min_isr: Any) -> str:
    """Classify one partition: offline > under min ISR > under-replicated > in sync."""
    if is_missing(leader) or int(leader) < 0:
        return "offline"
    n_isr = len(isr or [])
    if not is_missing(min_isr) and n_isr < int(min_isr):
        return "under min ISR"
    if n_isr < len(replicas or []):
        return "under-replicated"
    return "in sync"


def partitions_frame(doc: dict[str, Any], topics: list[str] | None = None) -> pd.DataFrame:
    """The snapshot's partitions with their state, ISR size, RF and preferred-leader flag."""
    df = records_frame(doc.get("partitions"), PARTITION_COLUMNS)
    if topics:
        df = df[df["topic"].isin(topics)]
    df = df.copy()
    df["state"] = [partition_state(lead, r, i, m) for lead, r, i, m in
                   zip(df["leader"], df["replicas"], df["isr"], df["min_insync_replicas"], strict=False)]
    df["rf"] = [len(r or []) for r in df["replicas"]]
    df["isr_size"] = [len(i or []) for i in df["isr"]]
    df["preferred_leader"] = [bool(r) and not is_missing(lead) and lead == r[0]
                              for lead, r in zip(df["leader"], df["replicas"], strict=False)]
    df["at_min_isr"] = [s != "offline" and not is_missing(m) and n == int(m)
                        for s, n, m in zip(df["state"], df["isr_size"], df["min_insync_replicas"], strict=False)]
    return df.reset_index(drop=True)


def state_counts(parts: pd.DataFrame) -> dict[str, int]:
    counts = parts["state"].value_counts().to_dict() if not parts.empty else {}
    out = {s: int(counts.get(s, 0)) for s in STATES}
    out["at min ISR"] = int(parts["at_min_isr"].sum()) if not parts.empty else 0
    return out


def topic_order(parts: pd.DataFrame) -> list[str]:
    """Topics, worst first (offline, under min ISR, under-replicated counts), then by name."""
    if parts.empty:
        return []
    counts = pd.crosstab(parts["topic"], parts["state"].map(STATE_CODE))
    for code in range(len(STATES)):
        if code not in counts.columns:
            counts[code] = 0
    counts = counts.reset_index().sort_values([3, 2, 1, "topic"], ascending=[False, False, False, True])
    return list(counts["topic"])


def isr_heatmap(parts: pd.DataFrame, max_topics: int = 60, text_limit: int = 2500) -> tuple[go.Figure, int, int]:
    """Topic x partition heatmap of partition states. Returns (figure, topics shown, topics total).

    z holds the state code (0 in sync .. 3 offline; NaN where a topic has no such partition); the colour bar
    is the legend, every cell also carries its ISR size / replication factor as text (when the grid is small
    enough to read) and the full story on hover.
    """
    if parts.empty:
        return empty_figure("No partitions in the latest snapshot."), 0, 0
    order = topic_order(parts)
    shown = order[:max_topics]
    p = parts[parts["topic"].isin(shown)]
    n_parts = int(p["partition"].max()) + 1
    row = {t: i for i, t in enumerate(shown)}
    z = np.full((len(shown), n_parts), np.nan)
    text = np.full((len(shown), n_parts), "", dtype=object)
    hover = np.full((len(shown), n_parts), "", dtype=object)
    for rec in p.itertuples(index=False):
        r, c = row[rec.topic], int(rec.partition)
        z[r, c] = STATE_CODE[rec.state]
        text[r, c] = f"{rec.isr_size}/{rec.rf}"
        extra = " — at min ISR: one more failure stops acks=all writes" if rec.at_min_isr else ""
        hover[r, c] = (f"{rec.topic}-{rec.partition}: <b>{rec.state}</b>{extra}<br>leader {rec.leader}, "
                       f"replicas {list(rec.replicas or [])}, ISR {list(rec.isr or [])}, "
                       f"min.insync.replicas {rec.min_insync_replicas}")
    n = len(STATES)
    scale = []
    for i, s in enumerate(STATES):
        scale += [[i / n, STATE_COLORS[s]], [(i + 1) / n, STATE_COLORS[s]]]
    show_text = z.size <= text_limit
    fig = go.Figure(go.Heatmap(
        z=z, x=list(range(n_parts)), y=shown, colorscale=scale, zmin=-0.5, zmax=n - 0.5,
        text=text if show_text else None, texttemplate="%{text}" if show_text else None,
        textfont={"size": 11}, customdata=hover, hovertemplate="%{customdata}<extra></extra>",
        xgap=2, ygap=2, hoverongaps=False,
        colorbar={"tickvals": list(range(n)), "ticktext": list(STATES), "title": {"text": "partition state"},
                  "thickness": 14, "len": 1.0 if len(shown) > 6 else 1.6, "outlinewidth": 0},
    ))
    fig.update_yaxes(autorange="reversed", type="category", title=None, automargin=True)
    fig.update_xaxes(title="partition", dtick=1 if n_parts <= 60 else None, side="top")
    base_layout(fig, height=min(1400, 90 + 24 * len(shown)), legend=False)
    fig.update_layout(plot_bgcolor="#ffffff")
    return fig, len(shown), len(order)


def problem_partitions(parts: pd.DataFrame, include_all: bool = False) -> pd.DataFrame:
    """Partitions not in sync (or all), worst first, as a display frame."""
    df = parts if include_all else parts[(parts["state"] != "in sync") | parts["at_min_isr"]]
    if df.empty:
        return pd.DataFrame(columns=["topic", "partition", "state", "leader", "replicas", "isr", "offline replicas",
                                     "min ISR", "preferred leader"])
    df = df.assign(_code=df["state"].map(STATE_CODE)).sort_values(["_code", "topic", "partition"],
                                                                   ascending=[False, True, True])
    out = pd.DataFrame({
        "topic": df["topic"], "partition": df["partition"],
        "state": [s + (" (at min ISR)" if a and s != "under min ISR" else "")
                  for s, a in zip(df["state"], df["at_min_isr"], strict=False)],
        "leader": df["leader"], "replicas": [_ids(r) for r in df["replicas"]], "isr": [_ids(i) for i in df["isr"]],
        "offline replicas": [_ids(o) for o in df["offline_replicas"]], "min ISR": df["min_insync_replicas"],
        "preferred leader": df["preferred_leader"]})
    return out.reset_index(drop=True)


def _ids(v: Any) -> str:
    if v is None or (isinstance(v, float) and np.isnan(v)):
        return ""
    return ", ".join(str(x) for x in v)


def brokers_frame(doc: dict[str, Any], parts: pd.DataFrame, changes: pd.DataFrame | None = None,
                  tz: str | None = None) -> pd.DataFrame:
    """Per broker: status, leaders, replicas, partitions where it is out of the ISR now and ISR shrinks seen."""
    brokers = doc.get("brokers") or []
    info = {int(b.get("broker_id")): b for b in brokers}
    ex = parts[["topic", "partition", "replicas", "isr"]].explode("replicas").dropna(subset=["replicas"]) \
        if not parts.empty else pd.DataFrame(columns=["topic", "partition", "replicas", "isr"])
    ex = ex.assign(broker=ex["replicas"].astype(int))
    ex["in_isr"] = [b in (i or ()) for b, i in zip(ex["broker"], ex["isr"], strict=False)]
    hosted = ex.groupby("broker").size()
    out = ex[~ex["in_isr"]]
    out_names = (out["topic"].astype(str) + "-" + out["partition"].astype(str)).groupby(out["broker"]).agg(list)
    leaders = parts["leader"].value_counts() if not parts.empty else pd.Series(dtype=int)
    shrinks: dict[int, list[float]] = {}
    if changes is not None and not changes.empty:
        for t, before, after in zip(changes["time"], changes["isr_before"], changes["isr_after"], strict=False):
            for b in set(before or []) - set(after or []):
                shrinks.setdefault(int(b), []).append(float(t))
    rows = []
    for bid in sorted(set(info) | {int(b) for b in hosted.index}):
        b = info.get(bid, {})
        out_isr = out_names.get(bid, [])
        if not b:
            status = "NOT REGISTERED"
        elif not b.get("alive", True):
            status = "DOWN"
        elif b.get("reachable") is False:
            status = "UNREACHABLE"
        else:
            status = "up"
        seen = shrinks.get(bid, [])
        rows.append({
            "broker": bid, "status": status, "controller": bool(b.get("is_controller")),
            "host": f"{b.get('host')}:{b.get('port')}" if b.get("host") and b.get("port") else "",
            "rack": b.get("rack") or "",
            "in ZooKeeper": b.get("in_zookeeper"),
            # outside KRaft: how long ago, at least, another broker's answer replaced a leader epoch this one still
            # answered (`broker_metadata_lagging`); blank where not asked
            "metadata behind (s, at least)": b.get("metadata_behind_s"), "leaders": int(leaders.get(bid, 0)),
            "replicas": int(hosted.get(bid, 0)), "out of ISR now": len(out_isr),
            "partitions out of ISR": ", ".join(out_isr[:12]) + (" …" if len(out_isr) > 12 else ""),
            "ISR shrinks (range)": len(seen),
            "last dropped from ISR": epoch_to_local([max(seen)], tz).iloc[0] if seen else pd.NaT,
        })
    return pd.DataFrame(rows)


def durability_frame(doc: dict[str, Any], topics: list[str] | None = None) -> pd.DataFrame:
    """Per topic: how many broker failures before acks=all writes stop and before acknowledged data can be lost."""
    rows = []
    for t in doc.get("topics") or []:
        if topics and t.get("topic") not in topics:
            continue
        ws, dl = t.get("failures_before_write_stop"), t.get("failures_before_data_loss")
        notes = []
        if t.get("unclean_leader_election"):
            notes.append("unclean election: an out-of-sync replica may lead and lose acknowledged writes")
        if not is_missing(ws) and int(ws) == 0:
            notes.append("the next broker failure stops acks=all writes")
        if not is_missing(dl) and int(dl) == 0:
            notes.append("the next broker failure can lose acknowledged data")
        retention = t.get("retention_ms")
        rows.append({
            "topic": t.get("topic"), "internal": bool(t.get("internal")), "partitions": t.get("partitions"),
            "RF": t.get("replication_factor"), "min ISR": t.get("min_insync_replicas"),
            "unclean election": bool(t.get("unclean_leader_election")),
            "failures before writes stop": ws, "failures before data loss": dl,
            "retention": "infinite" if is_missing(retention) else fmt_duration(int(retention) / 1000),
            "cleanup": t.get("cleanup_policy"), "under-replicated": t.get("under_replicated"),
            "under min ISR": t.get("under_min_isr"), "offline": t.get("offline"), "risk": "; ".join(notes),
        })
    cols = ["topic", "internal", "partitions", "RF", "min ISR", "unclean election", "failures before writes stop",
            "failures before data loss", "retention", "cleanup", "under-replicated", "under min ISR", "offline", "risk"]
    df = pd.DataFrame(rows, columns=cols)
    if df.empty:
        return df
    return df.sort_values(["failures before writes stop", "failures before data loss", "topic"]).reset_index(drop=True)


def config_risks(doc: dict[str, Any], topics: list[str] | None = None) -> pd.DataFrame:
    """Open ``unsafe_durability`` alerts (topic settings that can lose acknowledged data or stop writes)."""
    rows = [{"severity": a.get("severity"), "topic": a.get("subject"), "problem": a.get("summary"),
             "since (UTC)": fmt_utc(a.get("first_seen"))}
            for a in doc.get("alerts") or []
            if a.get("rule") == "unsafe_durability" and (not topics or a.get("subject") in topics)]
    return pd.DataFrame(rows, columns=["severity", "topic", "problem", "since (UTC)"])


def isr_changes_frame(changes: pd.DataFrame, tz: str | None, topics: list[str] | None = None,
                      limit: int = 500) -> pd.DataFrame:
    """Leader / ISR change events from history, newest first."""
    cols = ["time", "topic", "partition", "kind", "leader", "ISR before", "ISR after"]
    if changes is None or changes.empty:
        return pd.DataFrame(columns=cols)
    c = changes if not topics else changes[changes["topic"].isin(topics)]
    c = c.sort_values("time", ascending=False).head(limit)
    return pd.DataFrame({
        "time": epoch_to_local(c["time"], tz), "topic": c["topic"], "partition": c["partition"], "kind": c["kind"],
        "leader": [f"{a} → {b}" if a != b else str(a) for a, b in zip(c["leader_before"], c["leader_after"],
                                                                    strict=False)],
        "ISR before": [_ids(v) for v in c["isr_before"]], "ISR after": [_ids(v) for v in c["isr_after"]],
    }, columns=cols).reset_index(drop=True)
