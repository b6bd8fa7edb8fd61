"""Consensus: ZooKeeper members (zxid as epoch:counter), elections over time, the KRaft quorum, ZK/metadata ISR."""

from __future__ import annotations

from typing import Any

import pandas as pd
import plotly.graph_objects as go

from dashboard.views.common import (
    OKABE_ITO,
    epoch_to_axis,
    epoch_to_local,
    epoch_to_utc_text,
    fmt_zxid,
    fmt_zxid_hex,
    is_missing,
    zxid_parts,
)
from dashboard.views.plotting import base_layout, empty_figure

MODE_COLORS = {"leader": OKABE_ITO["blue"], "standalone": OKABE_ITO["blue"], "follower": OKABE_ITO["sky_blue"],
               "observer": OKABE_ITO["bluish_green"], "not serving": OKABE_ITO["vermillion"],
               "voter": OKABE_ITO["sky_blue"]}
MODE_SYMBOLS = {"leader": "star", "standalone": "star", "follower": "circle", "observer": "diamond",
                "not serving": "x", "voter": "circle"}


def _epoch_counter(z: dict[str, Any]) -> tuple[Any, Any]:
    e, c = z.get("zxid_epoch"), z.get("zxid_counter")
    if (is_missing(e) or is_missing(c)) and not is_missing(z.get("zxid")):
        e, c = zxid_parts(z.get("zxid"))
    return e, c


def zookeeper_frame(doc: dict[str, Any]) -> pd.DataFrame:
    """ZooKeeper members: leader first, zxid as epoch:counter and hex, lag behind the leader, latency, queue."""
    cols = ["server", "serving", "mode", "zxid (epoch:counter)", "zxid (hex)", "behind leader (txns)",
            "latency avg (ms)", "latency max (ms)", "outstanding requests", "connections", "znodes", "learners",
            "synced followers", "error"]
    rows = []
    for z in doc.get("zookeeper") or []:
        e, c = _epoch_counter(z)
        rows.append({"server": z.get("server"), "serving": bool(z.get("serving")),
                     "mode": z.get("mode") or ("not serving" if not z.get("serving") else "?"),
                     "zxid (epoch:counter)": fmt_zxid(e, c), "zxid (hex)": fmt_zxid_hex(e, c),
                     "behind leader (txns)": z.get("lag_behind_leader"), "latency avg (ms)": z.get("latency_avg_ms"),
                     "latency max (ms)": z.get("latency_max_ms"),
                     "outstanding requests": z.get("outstanding_requests"), "connections": z.get("connections"),
                     "znodes": z.get("znode_count"), "learners": z.get("learners"),
                     "synced followers": z.get("synced_followers"), "error": z.get("error") or ""})
    if not rows:
        return pd.DataFrame(columns=cols)
    df = pd.DataFrame(rows, columns=cols)
    for c in ("behind leader (txns)", "outstanding requests", "connections", "znodes", "learners", "synced followers"):
        df[c] = pd.array(pd.to_numeric(df[c], errors="coerce"), dtype="Float64").astype("Int64")
    for c in ("latency avg (ms)", "latency max (ms)"):
        df[c] = pd.array(pd.to_numeric(df[c], errors="coerce"), dtype="Float64")
    rank = {"leader": 0, "standalone": 0, "follower": 1, "observer": 2}
    df["_r"] = df["mode"].map(rank).fillna(3)
    return df.sort_values(["_r", "server"]).drop(columns="_r").reset_index(drop=True)


LEADER_MODES = ("leader", "standalone")
"""ZooKeeper modes that lead: a standalone server is its own (one-server) ensemble's leader, as on the Overview."""


def zk_leaders(zk: pd.DataFrame) -> pd.DataFrame:
    """The serving leaders among `zookeeper_frame`'s rows (standalone included)."""
    if zk is None or zk.empty:
        return zk
    return zk[zk["mode"].isin(LEADER_MODES) & zk["serving"].astype(bool)]


def zk_elections(hist: pd.DataFrame) -> pd.DataFrame:
    """Elections seen in history ``consensus``: the leader's zxid epoch went up (or the leader changed).

    Per poll, the epoch is the highest ``zxid_epoch`` of a serving leader (falling back to any serving
    server); a poll with none serving leaves a gap rather than an election.
    """
    cols = ["time", "epoch before", "epoch after", "leader before", "leader after"]
    if hist is None or hist.empty:
        return pd.DataFrame(columns=cols)
    h = hist[(hist["kind"] == "zookeeper")] if "kind" in hist.columns else hist
    h = h[h["serving"].fillna(False).astype(bool)].dropna(subset=["zxid_epoch"])
    if h.empty:
        return pd.DataFrame(columns=cols)
    rows = []
    prev_epoch = prev_leader = None
    for t, d in h.groupby("time", sort=True):
        leaders = d[d["mode"].isin(LEADER_MODES)]
        src = leaders if not leaders.empty else d
        epoch = int(src["zxid_epoch"].max())
        leader = str(leaders.iloc[0]["server"]) if not leaders.empty else None
        if prev_epoch is not None and (epoch > prev_epoch or (leader and prev_leader and leader != prev_leader)):
            rows.append({"time": float(t), "epoch before": prev_epoch, "epoch after": epoch,
                         "leader before": prev_leader, "leader after": leader})
        prev_epoch = max(epoch, prev_epoch or 0)
        prev_leader = leader or prev_leader
    return pd.DataFrame(rows, columns=cols)


def zk_timeline_figure(hist: pd.DataFrame, tz: str | None) -> go.Figure:
    """Each ZooKeeper server's mode at every poll (leader = star), with the elections as vertical lines."""
    if hist is None or hist.empty:
        return empty_figure("No ZooKeeper history yet — the collector writes it every flush interval.")
    h = hist[hist["kind"] == "zookeeper"] if "kind" in hist.columns else hist
    if h.empty:
        return empty_figure("No ZooKeeper history in this time range.")
    h = h.assign(state=[m if s and isinstance(m, str) else "not serving"
                        for m, s in zip(h["mode"], h["serving"].fillna(False), strict=False)])
    fig = go.Figure()
    for state in ("leader", "standalone", "follower", "observer", "not serving"):
        d = h[h["state"] == state]
        if d.empty:
            continue
        custom = list(zip(epoch_to_utc_text(d["time"]),
                          [fmt_zxid(e, c) for e, c in zip(d["zxid_epoch"], d["zxid_counter"], strict=False)],
                          [fmt_zxid_hex(e, c) for e, c in zip(d["zxid_epoch"], d["zxid_counter"], strict=False)],
                          strict=False))
        fig.add_trace(go.Scatter(
            x=epoch_to_axis(d["time"], tz), y=d["server"], mode="markers", name=state,
            marker={"color": MODE_COLORS[state], "symbol": MODE_SYMBOLS[state], "size": 9 if state != "leader" else 12,
                    "line": {"width": 0.5, "color": "#333"}},
            customdata=custom,
            hovertemplate="%{y}: " + state + "<br>%{x|%Y-%m-%d %H:%M:%S} (local)<br>%{customdata[0]}<br>"
                          "zxid %{customdata[1]} (%{customdata[2]})<extra></extra>"))
    for e in zk_elections(hist).itertuples(index=False):
        x = epoch_to_axis([e.time], tz).iloc[0]
        fig.add_vline(x=x, line={"color": OKABE_ITO["reddish_purple"], "dash": "dash", "width": 1.5})
        fig.add_annotation(x=x, y=1.0, yref="paper", text=f"election → epoch {e[2]}", showarrow=False,
                           yanchor="bottom", font={"size": 11, "color": OKABE_ITO["reddish_purple"]})
    fig.update_yaxes(type="category", title=None, automargin=True)
    fig.update_xaxes(title=None)
    base_layout(fig, height=170 + 30 * h["server"].nunique())
    fig.update_layout(margin={"t": 40, "b": 50}, legend={"orientation": "h", "yanchor": "top", "y": -0.25, "x": 0})
    return fig


def kraft_frame(doc: dict[str, Any], tz: str | None) -> pd.DataFrame:
    cols = ["node", "role", "log end offset", "lag (records)", "last fetch", "last caught up", "leader", "epoch",
            "high watermark"]
    voters = doc.get("kraft_voters") or []
    if not voters:
        return pd.DataFrame(columns=cols)
    v = pd.DataFrame(voters)
    return pd.DataFrame({
        "node": v["node_id"], "role": v["role"], "log end offset": pd.array(v["log_end_offset"], dtype="Int64"),
        "lag (records)": pd.array(v["lag"], dtype="Int64"), "last fetch": epoch_to_local(v["last_fetch_time"], tz),
        "last caught up": epoch_to_local(v["last_caught_up_time"], tz), "leader": v["leader_id"],
        "epoch": v["leader_epoch"], "high watermark": v["high_watermark"]}, columns=cols)


def kraft_elections(hist: pd.DataFrame) -> pd.DataFrame:
    cols = ["time", "epoch before", "epoch after", "leader before", "leader after"]
    if hist is None or hist.empty or "kind" not in hist.columns:
        return pd.DataFrame(columns=cols)
    h = hist[hist["kind"] == "kraft"].dropna(subset=["leader_epoch"])
    rows, prev = [], None
    for t, d in h.groupby("time", sort=True):
        cur = (int(d["leader_epoch"].max()), int(d["leader_id"].iloc[0]) if not is_missing(d["leader_id"].iloc[0])
               else None)
        if prev is not None and cur[0] > prev[0]:
            rows.append({"time": float(t), "epoch before": prev[0], "epoch after": cur[0], "leader before": prev[1],
                         "leader after": cur[1]})
        prev = cur
    return pd.DataFrame(rows, columns=cols)


def elections_display(elections: pd.DataFrame, tz: str | None) -> pd.DataFrame:
    if elections.empty:
        return pd.DataFrame(columns=["time", "epoch", "leader"])
    e = elections.sort_values("time", ascending=False)
    return pd.DataFrame({"time": epoch_to_local(e["time"], tz),
                         "epoch": [f"{a} → {b}" for a, b in zip(e["epoch before"], e["epoch after"], strict=False)],
                         "leader": [f"{a or '?'} → {b or '?'}" for a, b in zip(e["leader before"], e["leader after"],
                                                                             strict=False)]})


def isr_mismatch_frame(doc: dict[str, Any]) -> pd.DataFrame:
    """Partitions where ZooKeeper's partition state disagrees with the metadata (ISR or leader)."""
    cols = ["topic", "partition", "metadata leader", "ZooKeeper leader", "metadata ISR", "ZooKeeper ISR"]
    rows = []
    for p in doc.get("partitions") or []:
        zk_isr, zk_leader = p.get("zk_isr"), p.get("zk_leader")
        if zk_isr is None and is_missing(zk_leader):
            continue
        isr_differs = zk_isr is not None and sorted(zk_isr) != sorted(p.get("isr") or [])
        leader_differs = not is_missing(zk_leader) and zk_leader != p.get("leader")
        if isr_differs or leader_differs:
            rows.append({"topic": p.get("topic"), "partition": p.get("partition"), "metadata leader": p.get("leader"),
                         "ZooKeeper leader": zk_leader, "metadata ISR": ", ".join(map(str, p.get("isr") or [])),
                         "ZooKeeper ISR": ", ".join(map(str, zk_isr or []))})
    return pd.DataFrame(rows, columns=cols)


def has_zk_partition_state(doc: dict[str, Any]) -> bool:
    return any(p.get("zk_isr") is not None for p in doc.get("partitions") or [])
