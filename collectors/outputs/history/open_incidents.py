"""`open_incidents`: the incidents a history says are open, as records a collector can carry on.

A collector that takes a history root over from another (`lease`) has tracked the same causes under incident
ids of its own. Carrying on the ids the history already holds keeps one cause one incident in the weekly report
(opened once, resolved once) instead of two. An open incident is recorded at least once a day
(`collectors.alerting.incidents.RESTATE_S`), so a window of two days finds every one still open.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from collectors.model.records import IncidentRecord
from collectors.model.vocabulary import INCIDENT_EVENT_ORDER
from collectors.outputs.history.reader import read_arrow

WINDOW_S = 2 * 86_400.0


def open_incidents(root: Path, clusters: Sequence[str], now: float, window_s: float = WINDOW_S
                   ) -> list[IncidentRecord]:
    """The incidents of `clusters` whose last event since `window_s` before `now` is not ``resolved``.

    Reads Arrow, not pandas: the collector's image has no pandas."""
    events = read_arrow(Path(root), "incident_events", start=now - window_s, clusters=list(clusters))
    last: dict[tuple[str, str], dict[str, Any]] = {}
    for row in sorted(events.to_pylist(), key=lambda r: (r["time"], INCIDENT_EVENT_ORDER.get(r["event"], 2))):
        last[(row["cluster"], row["id"])] = row
    out = []
    for r in last.values():
        if r["event"] == "resolved" or r.get("opened") is None:
            continue
        out.append(IncidentRecord(
            cluster=r["cluster"], id=r["id"], kind=r["kind"], subject=r["subject"], severity=r["severity"],
            summary=r.get("summary") or "", opened=float(r["opened"]), last_seen=float(r["time"]),
            alerts=r.get("alerts") or 0, members=json.loads(r["members"]) if r.get("members") else {},
            brokers=list(r.get("brokers") or []), partitions=r.get("partitions"), topics=r.get("topics"),
            offline=r.get("offline"), under_min_isr=r.get("under_min_isr"), at_min_isr=r.get("at_min_isr"),
            unclean_topics=r.get("unclean_topics"), consequences=list(r.get("consequences") or [])))
    return sorted(out, key=lambda i: (i.cluster, i.opened, i.id))
