"""The read-only JSON API on the exporter's port: clusters, a group's lag and why, open incidents, risks.

In the spirit of Burrow's ``/v3/kafka/<cluster>/consumer/<group>/lag``: a script, a chat bot or another
dashboard asks the monitor what it already knows instead of polling Kafka a second time. Like ``/metrics``
it answers from the snapshots of the last poll and never reaches the cluster, so a busy caller costs the
cluster nothing; it is served by the same server (same bind address, same access rules) and only answers
GET and HEAD. The records are the snapshot's own (``docs/snapshot-schema.md``): none carries a setting (a
broker config the cluster marks sensitive has no value). The errors they hold are the clients' own messages,
which name settings, not their values (librdkafka's for a bad PEM, keystore, key password or JAAS setting were
checked); the OIDC token endpoint's, which could echo the client secret, is scrubbed where it is made
(`collectors.sources.oauth`). Nothing here scrubs them again.

`answer` is a pure function from an `ApiView` (the last poll's snapshots, indexed once) and a request path to
an `ApiAnswer`; the HTTP handler in `collectors.outputs.exporter` only writes it out. Paths and answers are
documented, with examples, in docs/api.md.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any
from urllib.parse import parse_qs, unquote

import orjson

from collectors.model.records import (
    AlertRecord,
    ClusterSnapshot,
    GroupPartitionRecord,
    GroupRecord,
    IncidentRecord,
    record_to_dict,
)
from collectors.model.vocabulary import (
    ERR,
    GROUP_ACTIVITIES,
    GROUP_STATUS_OF,
    IDLE_GROUP_STATUSES,
    PARTITION_STATUS_RANK,
    SEVERITY_RANK,
    STOP,
)
from collectors.model.wording import count_of

__all__ = ["API_PREFIX", "ENDPOINTS", "ApiAnswer", "ApiView", "JsonApi", "answer", "burrow_status",
           "endpoints_markdown"]

API_PREFIX = "/api/v1"

ENDPOINTS: dict[str, str] = {
    f"{API_PREFIX}/clusters": "every cluster: reachability, staleness, broker / partition / group counts",
    f"{API_PREFIX}/clusters/{{cluster}}": "one cluster, with its brokers",
    f"{API_PREFIX}/clusters/{{cluster}}/groups": "its groups, worst first (?status=ERR,WARN ?team=T ?activity=active)",
    f"{API_PREFIX}/clusters/{{cluster}}/groups/{{group}}": "a group's status, the partition and rule that decided it, "
                                                            "each partition's lag and owner, its open alerts",
    f"{API_PREFIX}/clusters/{{cluster}}/groups/{{group}}/lag": "the same (Burrow's path shape)",
    f"{API_PREFIX}/clusters/{{cluster}}/incidents": "its open incidents, worst first (?all=1 adds those resolved "
                                                      "within thresholds.incident_hold_down_s)",
    f"{API_PREFIX}/clusters/{{cluster}}/alerts": "its open alerts, worst first (?rule=R ?severity=S)",
    f"{API_PREFIX}/clusters/{{cluster}}/risks": "its standing risks (configuration, leader placement)",
    f"{API_PREFIX}/incidents": "open incidents of every cluster (?all=1 as above)",
    f"{API_PREFIX}/risks": "standing risks of every cluster",
}

def endpoints_markdown() -> str:
    """The endpoint table of docs/api.md, generated so it cannot drift from the router."""
    rows = ["| path | answers |", "| --- | --- |"]
    rows += [f"| `{path}` | {what} |" for path, what in ENDPOINTS.items()]
    return "\n".join(rows) + "\n"


def burrow_status(status: str, group: bool = False) -> str:
    """The status Burrow would show for one of ours. The words are Burrow's own (partition OK / WARN / REWIND /
    STALL / STOP, group OK / WARN / ERR); a group nobody runs, INACTIVE or ABANDONED here (info, never paging),
    is what Burrow calls STOP for each partition and ERR for the group."""
    if status in IDLE_GROUP_STATUSES:
        return ERR if group else STOP
    return status


@dataclass(frozen=True, slots=True)
class ApiAnswer:
    status: int
    body: Any
    headers: tuple[tuple[str, str], ...] = ()
    pretty: bool = False  # ?pretty=1: indented

    def encode(self) -> bytes:
        option = orjson.OPT_INDENT_2 if self.pretty else 0
        return orjson.dumps(self.body, option=option | orjson.OPT_APPEND_NEWLINE | orjson.OPT_NON_STR_KEYS)


def _error(status: int, message: str, headers: tuple[tuple[str, str], ...] = (), **extra: Any) -> ApiAnswer:
    return ApiAnswer(status, {"error": message, "status": status, **extra}, headers)


def _flag(query: dict[str, str], name: str) -> bool:
    """A yes/no query parameter: present with any value but empty, 0, false or no."""
    return query.get(name, "") not in ("", "0", "false", "no")


@dataclass(slots=True)
class _ClusterIndex:
    """A cluster's groups and their partitions by group id, built on the first request that needs them."""

    groups: dict[str, GroupRecord]
    partitions: dict[str, list[GroupPartitionRecord]]
    alerts_by_subject: dict[str, list[AlertRecord]]


@dataclass
class ApiView:
    """The last poll's snapshots, as the API reads them. Replaced whole after every poll (`update`), so a
    request sees one poll's view even while the next one is being installed."""

    snapshots: dict[str, ClusterSnapshot] = field(default_factory=dict)
    risk_rules: frozenset[str] = frozenset()
    polled: bool = False
    resolved: dict[str, list[IncidentRecord]] = field(default_factory=dict)
    """Per cluster, its incidents resolved within the hold-down (`ClusterPoller.resolved_incidents`): a snapshot
    holds the open ones only, and these are what ``?all=1`` adds."""
    _index: dict[str, _ClusterIndex] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @classmethod
    def of(cls, snapshots: Iterable[ClusterSnapshot], risk_rules: Iterable[str] = (),
           resolved: Mapping[str, Iterable[IncidentRecord]] | None = None) -> ApiView:
        return cls({s.cluster: s for s in snapshots}, frozenset(risk_rules), polled=True,
                   resolved={c: list(i) for c, i in (resolved or {}).items()})

    def index(self, cluster: str) -> _ClusterIndex:
        with self._lock:  # two first requests at once build it once
            idx = self._index.get(cluster)
            if idx is None:
                snap = self.snapshots[cluster]
                parts: dict[str, list[GroupPartitionRecord]] = {}
                for gp in snap.group_partitions:
                    parts.setdefault(gp.group_id, []).append(gp)
                alerts: dict[str, list[AlertRecord]] = {}
                for a in snap.alerts:
                    if a.resolved_at is None:
                        alerts.setdefault(a.subject, []).append(a)
                idx = self._index[cluster] = _ClusterIndex({g.group_id: g for g in snap.groups}, parts, alerts)
            return idx


class JsonApi:
    """Holds the current `ApiView` for the HTTP server; `update` after every poll."""

    def __init__(self, risk_rules: Iterable[str] = ()) -> None:
        self.risk_rules = frozenset(risk_rules)
        self.view = ApiView(risk_rules=self.risk_rules)

    def update(self, snapshots: Sequence[ClusterSnapshot],
               resolved: Mapping[str, Iterable[IncidentRecord]] | None = None) -> None:
        """`resolved`: per cluster, its recently resolved incidents (`ApiView.resolved`)."""
        self.view = ApiView.of(snapshots, self.risk_rules, resolved)

    def handle(self, method: str, raw_path: str) -> ApiAnswer:
        return answer(self.view, method, raw_path)


# ----------------------------------------------------------------------------- the answers


def answer(view: ApiView, method: str, raw_path: str) -> ApiAnswer:
    """The answer to one request. Path segments are percent-decoded one by one, so a group id with a slash
    is asked for as ``%2F``."""
    if method not in ("GET", "HEAD"):
        return _error(405, f"{method} not allowed: the API is read-only", (("Allow", "GET, HEAD"),))
    path, _, query_text = raw_path.partition("?")
    try:
        query = {k: v[-1] for k, v in parse_qs(query_text, keep_blank_values=True, strict_parsing=False).items()}
    except ValueError as e:
        return _error(400, f"bad query string: {e}")
    return replace(_answer(view, path, query), pretty=_flag(query, "pretty"))


def _answer(view: ApiView, path: str, query: dict[str, str]) -> ApiAnswer:
    parts = [unquote(p) for p in path.split("/") if p]
    base = [p for p in API_PREFIX.split("/") if p]
    if parts[:len(base)] != base:
        return _error(404, "not an API path", endpoints=sorted(ENDPOINTS))
    rest = parts[len(base):]
    if not rest:
        return ApiAnswer(200, {"endpoints": ENDPOINTS})
    if not view.polled:
        return _error(503, "no poll has finished yet; ask again after the first poll")
    try:
        return _route(view, rest, query)
    except _BadQuery as e:
        return _error(400, str(e))


class _BadQuery(ValueError):
    pass


def _route(view: ApiView, rest: list[str], query: dict[str, str]) -> ApiAnswer:
    head, *tail = rest
    if head == "incidents" and not tail:
        return ApiAnswer(200, {"incidents": [i for s in view.snapshots.values() for i in _incidents(view, s, query)]})
    if head == "risks" and not tail:
        return ApiAnswer(200, {"risks": [a for s in view.snapshots.values() for a in _risks(view, s)]})
    if head != "clusters":
        return _error(404, f"no endpoint {'/'.join(rest)!r}", endpoints=sorted(ENDPOINTS))
    if not tail:
        return ApiAnswer(200, {"clusters": [_cluster_summary(s) for s in view.snapshots.values()]})
    name, *what = tail
    snap = view.snapshots.get(name)
    if snap is None:
        return _error(404, f"no cluster named {name!r}", clusters=sorted(view.snapshots))
    if not what:
        return ApiAnswer(200, {**_cluster_summary(snap), "brokers": [record_to_dict(b) for b in snap.brokers]})
    if what == ["groups"]:
        return ApiAnswer(200, _groups(snap, query))
    if what[0] == "groups" and (len(what) == 2 or (len(what) == 3 and what[2] == "lag")):
        return _group(view, snap, what[1])
    if what == ["incidents"]:
        return ApiAnswer(200, {**_as_of(snap), "incidents": _incidents(view, snap, query)})
    if what == ["alerts"]:
        return ApiAnswer(200, {**_as_of(snap), "alerts": _alerts(snap, query)})
    if what == ["risks"]:
        return ApiAnswer(200, {**_as_of(snap), "risks": _risks(view, snap)})
    return _error(404, f"no endpoint {'/'.join(rest)!r}", endpoints=sorted(ENDPOINTS))


def _as_of(snap: ClusterSnapshot) -> dict[str, Any]:
    """What every per-cluster answer starts with: which cluster, as of which poll, and whether it is stale."""
    return {"cluster": snap.cluster, "as_of": snap.time, "stale": snap.stale, "stale_sections": snap.stale_sections}


def _cluster_summary(snap: ClusterSnapshot) -> dict[str, Any]:
    parts = snap.partitions
    open_incidents = [i for i in snap.incidents if i.resolved_at is None]
    return {
        **_as_of(snap),
        "reachable": snap.reachable, "mode": snap.mode, "cluster_id": snap.cluster_id,
        "controller_id": snap.controller_id, "errors": snap.errors,
        "brokers": len(snap.brokers), "brokers_alive": sum(1 for b in snap.brokers if b.alive),
        "topics": len(snap.topics), "partitions": len(parts),
        "under_replicated": sum(1 for p in parts if p.under_replicated),
        "under_min_isr": sum(1 for p in parts if p.under_min_isr),
        "offline": sum(1 for p in parts if p.offline),
        "groups": len(snap.groups), "groups_filtered": snap.filtered_groups, "topics_filtered": snap.filtered_topics,
        "incidents_open": len(open_incidents),
        "incidents_critical": sum(1 for i in open_incidents if i.severity == "critical"),
        "alerts_open": sum(1 for a in snap.alerts if a.resolved_at is None),
    }


def _choices(query: dict[str, str], key: str, allowed: Iterable[str] | None = None) -> set[str] | None:
    raw = query.get(key)
    if raw is None or raw == "":
        return None
    wanted = {v.strip() for v in raw.split(",") if v.strip()}
    if allowed is not None:
        allowed = set(allowed)
        bad = sorted(wanted - allowed)
        if bad:
            raise _BadQuery(f"{key}: unknown {count_of(len(bad), 'value')} {', '.join(bad)}; expected one of "
                            f"{', '.join(sorted(allowed))}")
    return wanted


_GROUP_STATUS_ORDER = {"ERR": 0, "WARN": 1, "OK": 2, "INACTIVE": 3, "ABANDONED": 4}


def _groups(snap: ClusterSnapshot, query: dict[str, str]) -> dict[str, Any]:
    statuses = _choices(query, "status", _GROUP_STATUS_ORDER)
    activities = _choices(query, "activity", GROUP_ACTIVITIES)
    teams = _choices(query, "team")
    out = []
    for g in snap.groups:
        if ((statuses is not None and g.status not in statuses)
                or (activities is not None and g.activity not in activities)
                or (teams is not None and (g.team or "") not in teams)):
            continue
        out.append(g)
    out.sort(key=lambda g: (_GROUP_STATUS_ORDER.get(g.status, 9), -(g.lag_seconds_max or 0), g.group_id))
    rows = [{**record_to_dict(g), "burrow_status": burrow_status(g.status, group=True)} for g in out]
    return {**_as_of(snap), "groups": rows}


def _group(view: ApiView, snap: ClusterSnapshot, group_id: str) -> ApiAnswer:
    idx = view.index(snap.cluster)
    g = idx.groups.get(group_id)
    if g is None:
        return _error(404, f"no group {group_id!r} in cluster {snap.cluster!r}: not seen by the last poll, or "
                           "left out by the cluster's filters", cluster=snap.cluster)
    parts = sorted(idx.partitions.get(group_id, ()), key=lambda p: (p.topic, p.partition))
    decided = _deciding_partition(g, parts)
    return ApiAnswer(200, {
        **_as_of(snap),
        "group": record_to_dict(g),
        "status": g.status,
        "burrow_status": burrow_status(g.status, group=True),
        "decided_by": decided,
        "partitions": [_partition(p) for p in parts],
        "alerts": [record_to_dict(a) for a in _worst_first(idx.alerts_by_subject.get(group_id, ()))],
    })


def _deciding_partition(g: GroupRecord, parts: list[GroupPartitionRecord]) -> dict[str, Any] | None:
    """The partition whose status is the group's (the worst; the most lag in seconds among equals) and the rule
    that gave it that status. None for a group without partitions."""
    if not parts:
        return None
    rank = PARTITION_STATUS_RANK

    def badness(p: GroupPartitionRecord) -> tuple[int, float, int]:
        return (rank.get(p.status, len(rank)), p.lag_seconds or 0.0, p.lag or 0)

    worst = max(parts, key=badness)
    why = worst.status_reason or ""
    if g.status in IDLE_GROUP_STATUSES:
        rule = "activity"
    elif g.idle:
        rule = "idle window of its policy"
    else:
        rule = "lag evaluation"
    return {"topic": worst.topic, "partition": worst.partition, "status": worst.status,
            "group_status_from_partition": GROUP_STATUS_OF.get(worst.status, worst.status),
            "rule": rule, "reason": why}


def _partition(p: GroupPartitionRecord) -> dict[str, Any]:
    d = record_to_dict(p)
    for k in ("cluster", "group_id", "owner_member_id", "owner_client_id", "owner_host"):
        d.pop(k)
    d["owner"] = (None if p.owner_member_id is None and p.owner_client_id is None else
                  {"member_id": p.owner_member_id, "client_id": p.owner_client_id, "host": p.owner_host})
    d["burrow_status"] = burrow_status(p.status)
    return d


def _worst_first(alerts: Iterable[AlertRecord]) -> list[AlertRecord]:
    return sorted(alerts, key=lambda a: (SEVERITY_RANK.get(a.severity, 9), a.first_seen, a.rule, a.subject))


def _incidents(view: ApiView, snap: ClusterSnapshot, query: dict[str, str]) -> list[dict[str, Any]]:
    every = _flag(query, "all")
    chosen: list[IncidentRecord] = [i for i in snap.incidents if every or i.resolved_at is None]
    if every:  # the poll's snapshot holds the open ones; the resolved ones stay with the poller (`ApiView.resolved`)
        ids = {i.id for i in chosen}
        chosen += [i for i in view.resolved.get(snap.cluster, ()) if i.id not in ids]
    chosen.sort(key=lambda i: (SEVERITY_RANK.get(i.severity, 9), i.opened, i.id))
    return [record_to_dict(i) for i in chosen]


def _alerts(snap: ClusterSnapshot, query: dict[str, str]) -> list[dict[str, Any]]:
    rules = _choices(query, "rule")
    severities = _choices(query, "severity", SEVERITY_RANK)
    chosen = [a for a in snap.alerts if a.resolved_at is None
              and (rules is None or a.rule in rules) and (severities is None or a.severity in severities)]
    return [record_to_dict(a) for a in _worst_first(chosen)]


def _risks(view: ApiView, snap: ClusterSnapshot) -> list[dict[str, Any]]:
    return [record_to_dict(a) for a in _worst_first(
        a for a in snap.alerts if a.resolved_at is None and a.rule in view.risk_rules)]
