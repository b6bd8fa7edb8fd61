"""Alert lifecycle: one alert per (cluster, rule, subject) while its condition holds.

Rules are stateless and re-evaluated every poll; this tracker gives their
output identity and history: the first-seen time survives across polls, an
alert whose condition is gone is resolved exactly once (an event for history
and notifiers), and something that no longer exists (a deleted group) simply
stops producing candidates and resolves.

An alert open a day since its last event is recorded again (``restate``, `RESTATE_S`), as incidents are: the
weekly report reads two weeks of events, and a collector carrying on a history it took over
(`collectors.outputs.history.left_open.open_alerts`) reads two days, so every alert still open is in both.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import TypeVar

from collectors.alerting.catalogue import Kept, is_kept
from collectors.alerting.rules import Candidate
from collectors.model.records import AlertRecord
from collectors.model.vocabulary import SEVERITY_RANK

T = TypeVar("T")
K = TypeVar("K")


def first_of_each(items: Iterable[T], key: Callable[[T], K], seen: set[K]) -> Iterator[tuple[K, T]]:
    """Each item whose key is not in `seen` yet, with its key, adding it to `seen` (a rule can report the same
    subject twice in one poll; the first report wins, and `seen` is what the poll reported)."""
    for item in items:
        k = key(item)
        if k not in seen:
            seen.add(k)
            yield k, item


RESTATE_S = 86_400.0
"""An alert open this long since its last event is recorded again (a ``restate`` event in the history)."""

SAME_TIME_S = 1e-3
"""Two first-seen times this close are the same: the history keeps microseconds, a resumed checkpoint the float."""

Key = tuple[str, str, str]  # cluster, rule, subject


class AlertTracker:
    def __init__(self) -> None:
        self.open: dict[Key, AlertRecord] = {}
        self._told: dict[Key, float] = {}  # open alerts: when their last event was recorded

    def open_for(self, cluster: str) -> list[AlertRecord]:
        """The cluster's open alerts, in no particular order (for checkpoints)."""
        return [a for k, a in self.open.items() if k[0] == cluster]

    def forget(self, cluster: str) -> None:
        """Drop the cluster's open alerts without resolving them (they belonged to a memory being discarded)."""
        self.open = {k: a for k, a in self.open.items() if k[0] != cluster}
        self._told = {k: t for k, t in self._told.items() if k[0] != cluster}

    def restate_due(self, cluster: str, now: float) -> list[AlertRecord]:
        """The cluster's open alerts whose last event is `RESTATE_S` old, now marked recorded (call after `update`).

        An alert whose last event is not known (restored from a checkpoint, carried on from a history) counts
        from now: a restart records nothing."""
        due = []
        for key, rec in self.open.items():
            if key[0] != cluster:
                continue
            told = self._told.setdefault(key, now)
            if now - told >= RESTATE_S:
                self._told[key] = now
                due.append(rec)
        return due

    def adopt(self, alerts: Iterable[AlertRecord]) -> dict[Key, float | None]:
        """Carry on alerts another collector recorded and left open (see `IncidentTracker.adopt`): key -> the
        first_seen of ours the recorded one replaces (None: carried as open; the next poll resolves it if its
        condition is gone). Ours for the same (cluster, rule, subject) takes the recorded first_seen, so the
        history keeps one episode, not a superseded one and a new one. A recorded episode resolved (``resolved_at``
        set) ends ours when ours, still open, was first seen before that resolution (the same episode, or one a
        standby's slower clock stamped early): the next poll whose condition holds opens a new one."""
        adopted: dict[Key, float | None] = {}
        for rec in alerts:
            key = rec.key
            ours = self.open.get(key)
            if rec.resolved_at is not None:  # resolved by its collector before the takeover
                if ours is not None and ours.first_seen <= rec.resolved_at + SAME_TIME_S:
                    # the episode the history holds resolved, open at our last poll (a standby's, whose events of
                    # it were not written): given up, its events not written (its resolution would have been a
                    # second episode), and opened anew by the next poll whose condition holds; carried on under
                    # the recorded first_seen it ended in the report at that resolution, though it went on
                    del self.open[key]
                    self._told.pop(key, None)
                    adopted[key] = ours.first_seen
                continue
            if ours is not None:  # the same episode (a resumed checkpoint's) keeps its own, unrounded time
                same = abs(ours.first_seen - rec.first_seen) < SAME_TIME_S
                adopted[key] = None if same else ours.first_seen
                if not same:
                    ours.first_seen = rec.first_seen
            else:
                self.open[key] = rec
                self._told.pop(key, None)
                adopted[key] = None
        return adopted

    def update(self, cluster: str, candidates: Iterable[Candidate], now: float,
               keep_rules: frozenset[str] | Kept = frozenset()
               ) -> tuple[list[AlertRecord], list[AlertRecord], list[AlertRecord]]:
        """Apply one poll's candidates for a cluster: returns (open alerts, newly opened, newly resolved).

        `keep_rules` are the open alerts whose inputs could not be refreshed this poll (stale data): rule names
        (every subject's), or per rule the subjects (`catalogue.kept_over_stale`). They are kept as they are
        rather than resolved on missing evidence.
        """
        seen: set[tuple[str, str, str]] = set()
        opened: list[AlertRecord] = []
        for key, c in first_of_each(candidates, lambda c: (cluster, c.rule, c.subject), seen):
            rec = self.open.get(key)
            if rec is None:
                rec = AlertRecord(rule=c.rule, severity=c.severity, cluster=cluster, subject=c.subject,
                                  summary=c.summary, first_seen=now, last_seen=now, value=c.value, team=c.team)
                self.open[key] = rec
                self._told[key] = now
                opened.append(rec)
            else:
                rec.last_seen, rec.summary, rec.value, rec.severity = now, c.summary, c.value, c.severity
                rec.team = c.team
        resolved: list[AlertRecord] = []
        for key in [k for k in self.open if k[0] == cluster and k not in seen]:
            if is_kept(keep_rules, key[1], key[2]):
                continue
            rec = self.open.pop(key)
            self._told.pop(key, None)
            rec.resolved_at = now
            resolved.append(rec)
        current = sorted((r for k, r in self.open.items() if k[0] == cluster),
                         key=lambda r: (SEVERITY_RANK.get(r.severity, 9), r.first_seen, r.rule, r.subject))
        return current, opened, resolved
