"""Incident lifecycle: identity across polls, severity, events, and damping.

`correlate` says which causes are present in one poll; this tracker makes each cause one incident for as
long as it lasts: the same cause (cluster, kind, key) keeps its id and its opened time, its severity is
its worst alert now, and it produces events only when something a person cares about changes — opened,
severity changed, resolved, reopened — or when the history would otherwise be wrong about it: its blast radius
grew past what the events said so far (`GROWTH_PERCENT`: a new broker down, or a count up by 10 %), or a day passed
since its last event while it stays open (`RESTATE_S`). Those are ``updated`` events too.

Why: the weekly report reads incidents from these events alone. With events only on severity changes, a broker
incident that opened critical with one broker and then took a second kept the second out of the report's
"brokers" and its peak out of "partitions" (unless it was still down at the resolution), and an incident open for
weeks without a change was absent from every later week's report.

Damping: a cause that comes back within `hold_down_s` of resolving (a group that keeps flipping at the
edge of the retention-risk threshold, a broker that restarts and crashes again) continues its incident —
same id, a "reopened" event — instead of opening a new one, so a flapping cause is one incident in the
weekly report, not twenty.

An alert stays in its incident: `correlate` places each poll's alerts from that poll alone, and an alert it places
elsewhere than the incident it was in at the last poll stays there (`IncidentTracker._keep_homes`) when

* that incident's cause is still present this poll (a partition still catching up after one of two down brokers
  returned stays in the broker incident rather than opening one for its topic);
* it is a loss alert (`loss` family: data truncated, unclean election, …), open an hour after the loss: the loss
  happened under that cause. A broker incident whose brokers are back stays open for the loss proven during the
  outage (`aftermath`: "broker 3 is back; still open: …") rather than a second critical incident paging for it;
* this poll could not read the partitions (`Cause.measured` False: unreachable cluster, stale ``partitions``; of
  one topic whose Metadata answered an error, only that topic's causes): a
  kept alert's place is not known, so it keeps the one it had (and its incident keeps its last known blast radius),
  rather than an unreachable cluster during an outage opening an incident per topic and per group.

Otherwise it goes where `correlate` put it. The places are memory of the last poll; a restart from a checkpoint
takes them from its alerts' incident ids (`restore`). A history carried on (`adopt`) records no alert's incident,
so each alert carried on is placed in the one incident carried on that can hold it (`_recorded_homes`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass

from collectors.alerting.catalogue import rules_of
from collectors.alerting.correlation import BROKER, CONSENSUS, Cause, aftermath, correlate
from collectors.alerting.lifecycle import first_of_each
from collectors.model.poll import IncidentEvent
from collectors.model.records import AlertRecord, ClusterSnapshot, IncidentRecord
from collectors.model.vocabulary import CLUSTER_WIDE_INCIDENT_KINDS, SEVERITY_RANK

OPENED, UPDATED, RESOLVED, REOPENED = "opened", "updated", "resolved", "reopened"

Key = tuple[str, str, str]  # cluster, kind, key
AlertKey = tuple[str, str, str]  # cluster, rule, subject

LOSS_RULES = rules_of("loss")
"""Alerts about loss that happened: they stay in the incident of the cause they happened under."""

GROWTH_PERCENT = 10
"""An open incident's blast-radius count (`RADIUS`) this many percent above the most its events have recorded
(rounded up, and at least one more) is an ``updated`` event: the report's maxima stay within 10 % of the real
peak, and a growing outage writes a few dozen events, not one a poll."""
RESTATE_S = 86_400.0
"""An incident open this long since its last event is recorded again (``updated``), so every week's report,
which reads two weeks of events, sees every incident open in it."""
RADIUS = ("alerts", "partitions", "topics", "offline", "under_min_isr")
"""The counts the report takes the most of over an incident's events."""
HOLDS_OTHERS = frozenset({BROKER, CONSENSUS})
"""The kinds whose incident `correlate` gives alerts another cause would have alone: a down broker's holds the
partition alerts of its partitions, the groups and transactions stuck on them and the stale data it left; the
consensus layer's holds the stale data of that layer."""


@dataclass(slots=True)
class _Told:
    """What an open incident's events have recorded so far: the last event's time, the most of each count and
    every broker."""

    time: float
    counts: dict[str, int]
    brokers: frozenset[int]

    @classmethod
    def of(cls, inc: IncidentRecord, now: float, before: _Told | None = None) -> _Told:
        counts = {f: getattr(inc, f) or 0 for f in RADIUS}
        brokers = frozenset(inc.brokers)
        if before is not None:
            counts = {f: max(v, before.counts.get(f, 0)) for f, v in counts.items()}
            brokers |= before.brokers
        return cls(now, counts, brokers)

    def outgrown_by(self, inc: IncidentRecord) -> bool:
        """`inc` holds a broker the events never named, or a count past the most recorded by `GROWTH_PERCENT`."""
        if not set(inc.brokers) <= self.brokers:
            return True
        for f in RADIUS:
            told = self.counts.get(f, 0)
            if (getattr(inc, f) or 0) >= told + max(1, -(-told * GROWTH_PERCENT // 100)):  # integers: exact
                return True
        return False


def incident_id(cluster: str, kind: str, key: str, opened: float) -> str:
    """Short, stable, unique per cause occurrence (names can be long or hold any character)."""
    digest = hashlib.sha1(f"{cluster}\0{kind}\0{key}\0{opened!r}".encode("utf-8", "surrogatepass")).hexdigest()
    return f"{kind}-{digest[:10]}"


class IncidentTracker:
    def __init__(self, hold_down_s: float = 300.0) -> None:
        self.hold_down_s = hold_down_s
        self.open: dict[Key, IncidentRecord] = {}
        self.recent: dict[Key, IncidentRecord] = {}  # resolved within the hold-down window
        self._told: dict[Key, _Told] = {}  # open incidents: what their events recorded
        self._home: dict[AlertKey, Key] = {}  # the incident each alert was in at its cluster's last poll
        self._reopening: set[Key] = set()  # open incidents carried on from a history that holds them resolved

    def open_for(self, cluster: str) -> list[IncidentRecord]:
        return [i for k, i in self.open.items() if k[0] == cluster]

    def recent_for(self, cluster: str) -> list[IncidentRecord]:
        return [i for k, i in self.recent.items() if k[0] == cluster]

    def forget(self, cluster: str) -> None:
        """Drop the cluster's incidents without events (their memory is being discarded)."""
        self.open = {k: i for k, i in self.open.items() if k[0] != cluster}
        self.recent = {k: i for k, i in self.recent.items() if k[0] != cluster}
        self._told = {k: t for k, t in self._told.items() if k[0] != cluster}
        self._home = {k: h for k, h in self._home.items() if k[0] != cluster}
        self._reopening = {k for k in self._reopening if k[0] != cluster}

    def restore(self, incidents: Iterable[IncidentRecord], alerts: Iterable[AlertRecord] = ()) -> None:
        """Take over incidents from a checkpoint (open ones, and resolved ones still within the hold-down), and where
        each of its `alerts` was (their ``incident`` ids): the first poll after the restart keeps an alert in its
        incident as any poll does (an unreachable first poll during an outage is not a page per topic)."""
        by_id: dict[str, Key] = {}
        for inc in incidents:
            key = (inc.cluster, inc.kind, _key_of(inc))
            (self.recent if inc.resolved_at is not None else self.open)[key] = inc
            if inc.resolved_at is None:
                by_id[inc.id] = key
        for a in alerts:
            home = by_id.get(a.incident or "")
            if home is not None:
                self._home[a.key] = home

    def adopt(self, incidents: Iterable[IncidentRecord], alerts: Iterable[AlertRecord] = ()
              ) -> dict[str, str | None]:
        """Carry on incidents another collector recorded and left open (a history taken over, or left by a collector
        that stopped shortly before this one started): recorded id -> the id of ours it replaces (None: carried).

        An open incident of ours for the same cause takes the recorded id and opening, so the history keeps one
        incident for the cause (the events already buffered under our id are to be dropped); a recorded one we
        have no cause for is carried as open, and the next poll resolves it if its cause is gone. `alerts`, the
        alerts carried on with them, are placed in them as `restore` places a checkpoint's (`_recorded_homes`).
        A recorded incident resolved (``resolved_at`` set: within the hold-down) replaces ours of the same
        occurrence of its cause, which goes on under its id, resolved or reopened (`_adopt_resolved`)."""
        adopted: dict[str, str | None] = {}
        for rec in incidents:
            key = (rec.cluster, rec.kind, _key_of(rec))
            if rec.resolved_at is not None:
                adopted[rec.id] = self._adopt_resolved(key, rec)
                continue
            ours = self.open.get(key)
            if ours is not None:  # the same incident (a resumed checkpoint's) keeps its own, unrounded times
                adopted[rec.id] = ours.id if ours.id != rec.id else None
                if ours.id != rec.id:
                    ours.id, ours.opened = rec.id, rec.opened
            else:
                self.open[key] = rec
                self._told.pop(key, None)
                adopted[rec.id] = None
        self._recorded_homes(list(alerts))
        return adopted

    def _adopt_resolved(self, key: Key, rec: IncidentRecord) -> str | None:
        """A recorded incident its collector resolved (within the hold-down) before this one took its history
        over: the id of ours it replaces, if any. A standby tracked the same cause under an id of its own, the
        events of which it did not write; resolved at its own later poll, or still open at its last one, it wrote
        the resolution of an incident the history never opened: one cause, two incidents in the weekly report.

        Ours of the cause, open or resolved, is the same occurrence when it opened before the recorded one resolved
        or within the hold-down after (its collector would have reopened it): it goes on as the recorded incident.
        Resolved, as the recorded one; open (we saw the cause at our last poll), open under the recorded id and
        opening, ``reopened`` by the next poll that still finds the cause (`_apply`) or resolved by one that does
        not: the history holds it resolved, and a reopening it does not record would leave the report ending it
        there. Without one of ours, the recorded one is remembered resolved (a return within the hold-down reopens
        it, as its collector would have); a later occurrence of ours keeps its own incident."""
        assert rec.resolved_at is not None
        ours = self.open.get(key) or self.recent.get(key)
        if ours is not None and (ours.id == rec.id or ours.opened > rec.resolved_at + self.hold_down_s):
            return None  # the same record (a resumed checkpoint's), or a later occurrence of the cause
        if ours is not None and key in self.open:
            given_up = ours.id
            ours.id, ours.opened = rec.id, rec.opened
            self._told.pop(key, None)
            self._reopening.add(key)
            return given_up
        self.recent[key] = rec
        return None if ours is None else ours.id

    def _recorded_homes(self, alerts: list[AlertRecord]) -> None:
        """Where each alert a history left open was: the history records no alert's incident (only an incident's
        member count per rule), and without a place the first poll after the takeover placed every alert afresh.
        An alert outside `correlate`'s placement of that poll then left the incident carried on for one of its
        own cause, opened anew for the same outage: an incident per topic for the partitions still catching up
        after one of two down brokers returned, or for every partition (and group) of a broker outage at a first
        poll that could not read the partitions. A checkpoint's alerts keep theirs (`restore`).

        An alert was in the incident of the cause it makes alone (`correlate` given it and nothing else), or in one
        of a kind that holds others' alerts (`HOLDS_OTHERS`) whose members have its rule. Placed where only one
        incident open now fits; where both do (a topic incident beside the broker one holding the same rule), the
        poll places it as before: either is an incident carried on, not a new one. Alerts that have a place of ours
        (a standby's own polls, a resumed checkpoint) keep it."""
        by_cluster: dict[str, list[AlertRecord]] = {}
        for a in alerts:
            if a.key not in self._home:
                by_cluster.setdefault(a.cluster, []).append(a)
        for cluster, items in by_cluster.items():
            here = {k: i for k, i in self.open.items() if k[0] == cluster}
            holders: dict[str, list[Key]] = {}
            for k, i in here.items():
                if k[1] in HOLDS_OTHERS:
                    for rule in i.members:
                        holders.setdefault(rule, []).append(k)
            for c in correlate(ClusterSnapshot(cluster=cluster, time=0.0), items):
                own = (cluster, c.kind, c.key)
                for a in c.alerts:
                    fits = set(holders.get(a.rule, ())) | ({own} if own in here else set())
                    if len(fits) == 1:
                        self._home[a.key] = fits.pop()

    def update(self, cluster: str, causes: Iterable[Cause], now: float
               ) -> tuple[list[IncidentRecord], list[IncidentEvent]]:
        """Apply one poll's causes: returns (the cluster's open incidents worst first, events).

        Stamps every member alert with its incident's id (`AlertRecord.incident`); alerts of no cause keep the
        None the caller left them with."""
        events: list[IncidentEvent] = []
        seen: set[Key] = set()
        homes: dict[AlertKey, Key] = {}
        for key, c in first_of_each(self._keep_homes(cluster, list(causes)), lambda c: (cluster, c.kind, c.key), seen):
            inc = self._apply(key, c, cluster, now, events)
            for a in c.alerts:
                a.incident = inc.id
                homes[a.key] = key
        self._home = {k: h for k, h in self._home.items() if k[0] != cluster} | homes
        for key in [k for k in self.open if k[0] == cluster and k not in seen]:
            inc = self.open.pop(key)
            self._told.pop(key, None)
            self._reopening.discard(key)
            inc.resolved_at = now
            self.recent[key] = inc
            events.append(IncidentEvent(now, RESOLVED, _copy(inc)))
        for key in [k for k, i in self.recent.items() if k[0] == cluster and
                    now - (i.resolved_at or now) > self.hold_down_s]:
            del self.recent[key]
        current = sorted(self.open_for(cluster), key=lambda i: (SEVERITY_RANK.get(i.severity, 9), i.opened, i.id))
        return current, events

    def _keep_homes(self, cluster: str, causes: list[Cause]) -> list[Cause]:
        """This poll's causes, each alert kept in the incident it was in where `correlate`'s placement is not news
        (see the module's documentation); an open incident whose cause is gone but which keeps alerts continues as
        their `aftermath`."""
        keyed: dict[Key, Cause] = {}
        for c in causes:
            keyed.setdefault((cluster, c.kind, c.key), c)
        moving: dict[Key, list[AlertRecord]] = {}
        for key, c in keyed.items():
            for a in c.alerts:
                home = self._home.get(a.key)
                if home is not None and home != key and home in self.open and (
                        home in keyed or a.rule in LOSS_RULES or not c.measured):
                    moving.setdefault(home, []).append(a)
        if not moving:
            return causes
        gone = {id(a) for alerts in moving.values() for a in alerts}
        out = {key: c.without(gone) if any(id(a) in gone for a in c.alerts) else c for key, c in keyed.items()}
        for home, alerts in moving.items():
            target = out.get(home)
            out[home] = aftermath(home[2], self.open[home], alerts) if target is None else target.joined(alerts)
        return [c for c in out.values() if c.alerts]

    def _apply(self, key: Key, c: Cause, cluster: str, now: float, events: list[IncidentEvent]) -> IncidentRecord:
        """One cause of this poll: continue its open incident, reopen a recent one (hold-down), or open one."""
        inc = self.open.get(key)
        if inc is None:
            inc = self.recent.pop(key, None)
            if inc is not None and now - (inc.resolved_at or now) <= self.hold_down_s:
                inc.resolved_at = None
                self.open[key] = inc
                return self._reopen(key, inc, c, now, events)
            inc = _copy(c.incident)
            inc.id = incident_id(cluster, c.kind, c.key, now)
            inc.cluster, inc.opened, inc.last_seen = cluster, now, now
            self.open[key] = inc
            events.append(IncidentEvent(now, OPENED, _copy(inc)))
            self._told[key] = _Told.of(inc, now)
            return inc
        if key in self._reopening:  # carried on open from a history that holds it resolved: say it goes on
            self._reopening.discard(key)
            return self._reopen(key, inc, c, now, events)
        before = inc.severity
        # restored from a checkpoint or carried on from a history: what its events said is not known, but its record
        # is what the last poll before the restart saw; a change since then is recorded, the restart itself is not
        told = self._told.get(key) or _Told.of(inc, now)
        if not c.measured:
            c.measure_from(inc)
        _fill(inc, c, now)
        if inc.severity != before or told.outgrown_by(inc) or now - told.time >= RESTATE_S:
            events.append(IncidentEvent(now, UPDATED, _copy(inc)))
            told = _Told.of(inc, now, told)
        self._told[key] = told
        return inc

    def _reopen(self, key: Key, inc: IncidentRecord, c: Cause, now: float, events: list[IncidentEvent]
                ) -> IncidentRecord:
        """`inc`, open again (the caller put it in `open`), with this poll's cause: a ``reopened`` event."""
        if not c.measured:
            c.measure_from(inc)
        _fill(inc, c, now)
        events.append(IncidentEvent(now, REOPENED, _copy(inc)))
        self._told[key] = _Told.of(inc, now)
        return inc


def _key_of(inc: IncidentRecord) -> str:
    """The correlation key of a restored incident (what `Cause.key` was for it): one broker incident and one
    consensus incident per cluster, the cluster and the monitor by kind, the others by their subject."""
    if inc.kind == "broker":
        return "brokers"
    if inc.kind in CLUSTER_WIDE_INCIDENT_KINDS:
        return inc.kind
    return inc.subject


_IDENTITY = frozenset({"cluster", "id", "opened", "last_seen", "resolved_at"})
_CONTENT = tuple(f for f in IncidentRecord.__dataclass_fields__ if f not in _IDENTITY)
"""What a poll's cause says about its incident; identity and times are the tracker's."""


def _fill(inc: IncidentRecord, c: Cause, now: float) -> None:
    for name in _CONTENT:
        value = getattr(c.incident, name)
        setattr(inc, name, list(value) if isinstance(value, list) else value)
    inc.last_seen = now


def _copy(inc: IncidentRecord) -> IncidentRecord:
    """An event's own copy: the open record keeps changing with later polls."""
    return IncidentRecord(**{f: getattr(inc, f) for f in IncidentRecord.__dataclass_fields__})
