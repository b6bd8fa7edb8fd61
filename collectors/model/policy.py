"""Per-group and per-topic policy: one fleet, many expectations.

A payments group with a 10 s SLO, a reporting group that may be an hour behind, an hourly batch job idle by
design between runs, a dev topic that must never page: the thresholds are one set of numbers for everything,
and the ``policies:`` list of the configuration refines them by name. Each rule matches groups *or* topics by
regular expression (`collectors.model.patterns`: unanchored ``re.search``, as the peers' filters), optionally
only on some clusters, and sets any of the fields below. The first matching rule wins; what it leaves unset
falls back to the thresholds. No peer has this (Burrow, kafka-lag-exporter, kminion and kafka_exporter have
filters only).

Resolution is pure and remembered per name, so 1,000 rules cost one pass per new group or topic, not per poll.
`explain_group` / `explain_topic` say which rule decided, for ``python -m collectors.config explain`` and the
dashboard.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from pydantic import Field, field_validator, model_validator

from collectors.model.patterns import Pattern, compile_patterns
from collectors.model.settings import MAX_DURATION_S, MAX_OFFSET_DELTA, Count, Seconds, StrictModel

__all__ = ["GroupPolicy", "Policies", "PolicyRule", "TopicPolicy", "in_idle_window", "parse_window"]

Severity = Literal["critical", "warning", "info"]
_WINDOW = re.compile(r"^\s*([01]?\d|2[0-3]):([0-5]\d)\s*-\s*([01]?\d|2[0-4]):([0-5]\d)\s*$")
GROUP_ONLY = ("lag_seconds_slo", "lag_allowed_messages", "lag_min_points", "consumer_stop_after_s", "idle_max_s",
              "idle_windows")


def parse_window(text: str) -> tuple[int, int]:
    """``"22:00-06:00"`` (UTC) → (start, end) in minutes of the day; a window may wrap midnight."""
    m = _WINDOW.match(text)
    if m is None:
        raise ValueError(f"idle window {text!r}: expected 'HH:MM-HH:MM' in UTC, e.g. '22:00-06:00'")
    start, end = int(m[1]) * 60 + int(m[2]), int(m[3]) * 60 + int(m[4])
    if end > 24 * 60 or start == end:
        raise ValueError(f"idle window {text!r}: start and end must differ and end at 24:00 at the latest")
    return start, end


def in_idle_window(windows: Sequence[tuple[int, int]], now: float) -> bool:
    """Whether `now` (epoch seconds) falls in one of the daily UTC windows."""
    minute = int(now // 60) % (24 * 60)
    return any(s <= minute < e if s < e else (minute >= s or minute < e) for s, e in windows)


class PolicyRule(StrictModel):
    """One rule of ``policies:``. Exactly one of `group` / `topic`; every setting is optional."""

    group: Pattern | None = None
    """Regular expression of the consumer groups this rule is for."""
    topic: Pattern | None = None
    """Regular expression of the topics this rule is for (their partition, topic and loss alerts)."""
    cluster: Pattern | None = None
    """Only on clusters whose name matches (default: every cluster)."""
    team: str | None = Field(None, min_length=1, max_length=100, pattern=r"^[^\x00-\x1f\x7f]+$")
    """Owner team: a label on the alerts, incidents and metrics of what matches, so Alertmanager can route by it."""
    lag_seconds_slo: Seconds | None = Field(None, ge=0, le=MAX_DURATION_S)
    """Groups: time lag above this breaches their SLO (thresholds.lag_seconds_slo otherwise)."""
    lag_allowed_messages: Count | None = Field(None, ge=0, le=MAX_OFFSET_DELTA)
    """Groups: lag at or below this is OK whatever its trend (a consumer committing every N messages)."""
    lag_min_points: Count | None = Field(None, ge=2, le=10_000)
    """Groups: commits in the window before a falling-behind trend (WARN) is judged; at most
    thresholds.lag_window_points (the window kept)."""
    consumer_stop_after_s: Seconds | None = Field(None, ge=0, le=MAX_DURATION_S)
    """Groups: a commit standing still this long with lag is STALL (members) or STOP (none)."""
    retention_risk_s: Seconds | None = Field(None, ge=0, le=MAX_DURATION_S)
    """Groups or topics: warn when unread messages will be deleted by retention within this long."""
    max_severity: Severity | None = None
    """The highest severity an alert about what matches may have (``warning``: never pages; ``info``: context)."""
    idle_max_s: Seconds | None = Field(None, gt=0, le=MAX_DURATION_S)
    """Groups, batch jobs: the longest the commit may stand still between runs by design; no STALL/STOP until
    then (an hourly job: a little over 3600)."""
    idle_windows: list[str] | None = None
    """Groups, batch jobs: daily UTC windows ``"HH:MM-HH:MM"`` in which the group is idle by design: no
    STALL/STOP and no lag-seconds alert inside them (a nightly job: ``["06:00-23:00"]``)."""

    @field_validator("idle_windows")
    @classmethod
    def _check_windows(cls, value: list[str] | None) -> list[str] | None:
        for w in value or []:
            parse_window(w)
        return value

    @model_validator(mode="after")
    def _one_target(self) -> PolicyRule:
        if (self.group is None) == (self.topic is None):
            raise ValueError("set exactly one of 'group' or 'topic' (the regular expression the rule matches)")
        if self.topic is not None:
            wrong = [f for f in GROUP_ONLY if getattr(self, f) is not None]
            if wrong:
                raise ValueError(f"{', '.join(wrong)} apply to consumer groups: use 'group', not 'topic'")
        return self


@dataclass(frozen=True, slots=True)
class GroupPolicy:
    """What one group is held to. None: the thresholds decide (the rule did not set it, or no rule matched)."""

    rule: str | None = None  # "policies[3]"
    team: str | None = None
    lag_seconds_slo: float | None = None
    lag_allowed_messages: int | None = None
    lag_min_points: int | None = None
    consumer_stop_after_s: float | None = None
    retention_risk_s: float | None = None
    max_severity: str | None = None
    idle_max_s: float | None = None
    idle_windows: tuple[tuple[int, int], ...] = ()


@dataclass(frozen=True, slots=True)
class TopicPolicy:
    rule: str | None = None
    team: str | None = None
    retention_risk_s: float | None = None
    max_severity: str | None = None


NO_GROUP_POLICY = GroupPolicy()
NO_TOPIC_POLICY = TopicPolicy()


class Policies:
    """The ``policies:`` list, resolved per (cluster, name) and remembered (bounded)."""

    CACHE_LIMIT = 200_000

    def __init__(self, rules: Sequence[PolicyRule] = ()) -> None:
        self.rules = list(rules)
        compiled = [(i, r, re.compile(r.group or r.topic or ""), re.compile(r.cluster) if r.cluster else None)
                    for i, r in enumerate(self.rules)]
        self._groups = [c for c in compiled if c[1].group is not None]
        self._topics = [c for c in compiled if c[1].topic is not None]
        # one search says "no rule matches" for most names of a big fleet, instead of one search per rule
        self._any_group = compile_patterns([r.group for _, r, _, _ in self._groups if r.group])
        self._any_topic = compile_patterns([r.topic for _, r, _, _ in self._topics if r.topic])
        self._group_cache: dict[tuple[str, str], GroupPolicy] = {}
        self._topic_cache: dict[tuple[str, str], TopicPolicy] = {}

    def __bool__(self) -> bool:
        return bool(self.rules)

    @staticmethod
    def _first(rules: list[tuple[int, PolicyRule, re.Pattern[str], re.Pattern[str] | None]], cluster: str,
               name: str) -> tuple[int, PolicyRule] | None:
        for i, r, pattern, on in rules:
            if (on is None or on.search(cluster)) and pattern.search(name):
                return i, r
        return None

    def for_group(self, cluster: str, group: str) -> GroupPolicy:
        key = (cluster, group)
        got = self._group_cache.get(key)
        if got is not None:
            return got
        any_rule = self._any_group
        hit = self._first(self._groups, cluster, group) if any_rule is not None and any_rule.search(group) else None
        if hit is None:
            got = NO_GROUP_POLICY
        else:
            i, r = hit
            got = GroupPolicy(f"policies[{i}]", r.team, r.lag_seconds_slo, r.lag_allowed_messages, r.lag_min_points,
                              r.consumer_stop_after_s, r.retention_risk_s, r.max_severity, r.idle_max_s,
                              tuple(parse_window(w) for w in r.idle_windows or ()))
        if len(self._group_cache) >= self.CACHE_LIMIT:
            self._group_cache.clear()
        self._group_cache[key] = got
        return got

    def for_topic(self, cluster: str, topic: str) -> TopicPolicy:
        key = (cluster, topic)
        got = self._topic_cache.get(key)
        if got is not None:
            return got
        any_rule = self._any_topic
        hit = self._first(self._topics, cluster, topic) if any_rule is not None and any_rule.search(topic) else None
        got = NO_TOPIC_POLICY if hit is None else TopicPolicy(f"policies[{hit[0]}]", hit[1].team,
                                                              hit[1].retention_risk_s, hit[1].max_severity)
        if len(self._topic_cache) >= self.CACHE_LIMIT:
            self._topic_cache.clear()
        self._topic_cache[key] = got
        return got
