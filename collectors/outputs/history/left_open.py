"""What a history says is still open: the incidents and alerts a collector can carry on.

A collector that takes a history root over from another (`lease`: a standby of an HA pair, or a restart without
its checkpoint) has tracked the same causes under incident ids, and the same alerts under first-seen times, of its
own. Carrying on the ids and first-seen times the history already holds keeps one cause one incident, and one
alert one episode, in the weekly report (opened once, resolved once) instead of two. An open incident or alert is
recorded at least once a day (`collectors.alerting.incidents.RESTATE_S`, `collectors.alerting.lifecycle.RESTATE_S`),
so a window of two days finds every one still open (alerts since the twenty-second session: an alert of older
history opened earlier and still open is not found, and is opened again as before). What is not carried on (the
collector started too long after the last one, or polls another cluster of the name) is ended with a ``lost`` event
at the last poll that saw it open (`collectors.model.vocabulary.LOST`), so it does not stay open for good.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import fields as dataclass_fields
from dataclasses import replace
from pathlib import Path
from typing import Any, NamedTuple

from collectors.model.poll import IncidentEvent
from collectors.model.records import AlertRecord, IncidentRecord, LossRecord
from collectors.model.vocabulary import ALERT_EVENT_ORDER, INCIDENT_EVENT_ORDER, LOST
from collectors.outputs.history.lease import Holder
from collectors.outputs.history.reader import read_arrow

WINDOW_S = 2 * 86_400.0


def _rows_since(root: Path, table: str, clusters: Sequence[str], now: float | Mapping[str, float], window_s: float,
                columns: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """The rows of `clusters` since `window_s` before `now`: one time for all, or each cluster's own (a mapping).

    Given each cluster's own, one read serves them all: from the earliest start, each cluster's rows then kept from
    its own. A read a cluster, of two days of event files (1,440 a table a day at a flush a minute), took 6.2 s for
    the 32 clusters of a history nobody polls any more, each with its own last poll (`HistorySink._lose_unpolled`).
    Each finds what a read of its own found: the same ``>=`` on the same float seconds as `read_arrow`'s start."""
    if not isinstance(now, Mapping):
        return read_arrow(Path(root), table, start=now - window_s, clusters=list(clusters), columns=columns).to_pylist()
    starts = {c: now[c] - window_s for c in clusters}
    if not starts:
        return []
    rows = read_arrow(Path(root), table, start=min(starts.values()), clusters=list(starts), columns=columns)
    return [r for r in rows.to_pylist() if r["time"] >= starts[r["cluster"]]]


def open_incidents(root: Path, clusters: Sequence[str], now: float | Mapping[str, float], window_s: float = WINDOW_S,
                   resolved_since: float | None = None) -> list[IncidentRecord]:
    """The incidents of `clusters` whose last event since `window_s` before `now` (per cluster, given a mapping:
    `_rows_since`) is not ``resolved`` or ``lost``; with `resolved_since`, also those resolved since then (their
    ``resolved_at`` set): a standby taking over must know the holder resolved the incident it tracks too.

    Reads Arrow, not pandas: the collector's image has no pandas."""
    events = _rows_since(root, "incident_events", clusters, now, window_s)
    last: dict[tuple[str, str], dict[str, Any]] = {}
    for row in sorted(events, key=lambda r: (r["time"], INCIDENT_EVENT_ORDER.get(r["event"], 2))):
        last[(row["cluster"], row["id"])] = row
    out = []
    for r in last.values():
        resolved = None
        if r["event"] == "resolved":
            resolved = float(r.get("resolved_at") or r["time"])
            if resolved_since is None or resolved < resolved_since:
                continue
        if r["event"] == LOST or r.get("opened") is None:
            continue
        out.append(IncidentRecord(
            cluster=r["cluster"], id=r["id"], kind=r["kind"], subject=r["subject"], severity=r["severity"],
            summary=r.get("summary") or "", opened=float(r["opened"]), last_seen=float(r["time"]),
            alerts=r.get("alerts") or 0, members=json.loads(r["members"]) if r.get("members") else {},
            brokers=list(r.get("brokers") or []), partitions=r.get("partitions"), topics=r.get("topics"),
            offline=r.get("offline"), under_min_isr=r.get("under_min_isr"), at_min_isr=r.get("at_min_isr"),
            unclean_topics=r.get("unclean_topics"), consequences=list(r.get("consequences") or []),
            resolved_at=resolved))
    return sorted(out, key=lambda i: (i.cluster, i.opened, i.id))


def open_alerts(root: Path, clusters: Sequence[str], now: float | Mapping[str, float], window_s: float = WINDOW_S,
                resolved_since: float | None = None) -> list[AlertRecord]:
    """The alerts of `clusters` whose last event since `window_s` before `now` (per cluster, given a mapping:
    `_rows_since`) is not ``resolve`` or ``lost``: per (cluster, rule, subject) the episode first seen last (an
    older one never resolved was lost by its collector). With `resolved_since`, also the episodes resolved since
    then (``resolved_at`` set)."""
    events = _rows_since(root, "alert_events", clusters, now, window_s,
                         columns=["cluster", "time", "event", "rule", "severity", "subject", "summary", "first_seen",
                                  "last_seen", "value", "resolved_at"])
    last: dict[tuple[str, str, str], dict[str, Any]] = {}
    for r in sorted((r for r in events if r["first_seen"] is not None),
                    key=lambda r: (r["first_seen"], r["time"], ALERT_EVENT_ORDER.get(r["event"], 1))):
        last[(r["cluster"], r["rule"], r["subject"])] = r
    def resolved(r: dict[str, Any]) -> float | None:
        return float(r["resolved_at"] or r["time"]) if r["event"] == "resolve" else None

    out = [AlertRecord(rule=r["rule"], severity=r["severity"], cluster=r["cluster"], subject=r["subject"],
                       summary=r["summary"] or "", first_seen=r["first_seen"], last_seen=r["last_seen"] or r["time"],
                       value=r["value"], resolved_at=resolved(r))
           for r in last.values() if r["event"] != LOST and (
               r["event"] != "resolve" or (resolved_since is not None and resolved(r) >= resolved_since))]
    return sorted(out, key=lambda a: (a.cluster, a.first_seen, a.rule, a.subject))


class LastPoll(NamedTuple):
    """A cluster's last poll in a history: when, and the cluster id it reported (None: not recorded)."""

    time: float
    cluster_id: str | None


def recent_losses(root: Path, clusters: Sequence[str], now: float, window_s: float) -> list[LossRecord]:
    """The loss ledger's records of `clusters` from `window_s` before `now` on, oldest first: the losses a poller
    keeps in memory (`ClusterState.recent_losses`) for the alerts that stay open after one (`loss_alert_hold_s`),
    which only the checkpoint holds. A collector carrying a history on without it resolved those alerts at its
    first poll."""
    names = [f.name for f in dataclass_fields(LossRecord)]
    rows = _rows_since(root, "loss_events", clusters, now, window_s)
    out = [LossRecord(**{k: r.get(k) for k in names}) for r in rows if r["time"] <= now]
    return sorted(out, key=lambda x: x.time)


def last_polls(root: Path, clusters: Sequence[str] | None, now: float, window_s: float = WINDOW_S
               ) -> dict[str, LastPoll]:
    """Each of `clusters`' (None: every cluster's) last poll in the history's polls since `window_s` before `now`.
    What is carried on was of that cluster id, and a collector now polling another one of the same name must not
    carry it (`ClusterPoller.expect_cluster_id`); whether it is carried on at all depends on how long ago that was
    (`carry_verdicts`); what is not carried on was last seen open then (`lost_ends`)."""
    polls = read_arrow(Path(root), "cluster", start=now - window_s,
                       clusters=None if clusters is None else list(clusters),
                       columns=["cluster", "time", "cluster_id"])
    out: dict[str, LastPoll] = {}
    for r in sorted(polls.to_pylist(), key=lambda r: r["time"]):
        known = out.get(r["cluster"])
        out[r["cluster"]] = LastPoll(float(r["time"]), r["cluster_id"] or (known.cluster_id if known else None))
    return out


def carry_verdicts(clusters: Sequence[str], polls: dict[str, LastPoll], last: Holder, watched: bool, now: float,
                   max_age_s: float) -> dict[str, str | None]:
    """Per cluster we poll: None when what the history left open of it is carried on, else why not (for the log).

    Decided per cluster, by the cluster's own last poll: a holder that did not poll it (a collector of other
    clusters, or ours with a shorter list) says nothing of how fresh it is, and a cluster polled until a minute
    ago by the collector before that one is as carried on as if it had been the last holder's. A standby that
    watched the holder write (`watched`) carries on the clusters the holder polled whatever `max_age_s`: they were
    polled until it stopped. Without a poll in the history, the holder's last write stands in for it if the holder
    polled the cluster (older history, or one whose cluster table is damaged); otherwise nothing is known to carry."""
    from collectors.outputs.checkpoint import unusable_age

    out: dict[str, str | None] = {}
    for c in clusters:
        held = last.clusters is None or c in last.clusters
        if watched and held:
            out[c] = None
            continue
        p = polls.get(c)
        t = p.time if p is not None else last.flushed_until if held else None
        if t is None:
            out[c] = "no poll of it recorded"
            continue
        age = now - t
        verdict = unusable_age(age, max_age_s)
        if verdict in ("old", "never"):
            out[c] = f"last polled {age:.0f}s ago (carry_max_age_s {max_age_s:.0f}s)"
        elif verdict == "ahead":
            out[c] = f"polled {-age:.0f}s ahead of this collector's clock (stepped back?)"
        else:
            out[c] = None
    return out


def lost_ends(incidents: Sequence[IncidentRecord], alerts: Sequence[AlertRecord], until: float
              ) -> tuple[list[IncidentEvent], list[AlertRecord]]:
    """The ``lost`` events that end what a history left open and nobody carries on: at `until` (the last poll known
    to have seen them open), or at their own ``last_seen`` if later. The alerts' rows are at their ``last_seen``
    (`rows.event_columns`)."""
    events = []
    for i in incidents:
        t = max(until, i.last_seen)
        events.append(IncidentEvent(t, LOST, replace(i, last_seen=t)))
    return events, [replace(a, last_seen=max(until, a.last_seen)) for a in alerts]
