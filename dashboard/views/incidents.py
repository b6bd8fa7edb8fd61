"""Incidents: the Overview's first table (one row per open cause), the alerts that make each one, and the risks.

The collector correlates alerts into incidents (`collectors.alerting.correlation`) and writes them in the
snapshot's ``incidents`` list with their counts and blast radius; each open alert carries the ``incident`` id
of the incident it belongs to, so `incident_members` is one grouping pass over the open alerts (a broker down
on 100,000 partitions: ~50 ms).

State written before alerts carried that id (no alert has the key) is still read: `incident_members` then
recovers the membership from the snapshot alone, with one pass over the open alerts:

* a broker or partition alert belongs to the broker incident when its partition has one of the incident's
  ``brokers`` among its replicas (the collector's rule), else to the incident of its topic;
* consensus, cluster and monitor alerts go to the one incident of their kind;
* a group or transaction alert goes to the incident with its subject, or, when the collector listed it as a
  consequence of the broker incident (``group billing`` / ``transaction on orders-1``), to that one.

A unit test cross-checks both paths against `correlate`.

Risks (rules with ``risk: true``) are never incidents: `split_risks` keeps them apart.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from collectors.alerting.catalogue import (
    BROKER_CAUSES,
    CLUSTER_RULES,
    CONSENSUS_RULES,
    MONITOR_RULES,
    PARTITION_SYMPTOMS,
    RISK_RULES,
    RULES,
)
from collectors.model.vocabulary import INCIDENT_KINDS, SEVERITY_RANK, topic_of
from collectors.model.wording import plural
from dashboard.views.alerts import alert_target
from dashboard.views.common import fmt_count, fmt_duration, fmt_utc, is_missing

KIND_ORDER = INCIDENT_KINDS  # causes first
INCIDENT_COLUMNS = ["severity", "cluster", "kind", "subject", "summary", "open_for", "alerts", "blast radius",
                    "consequences", "opened_utc", "id", "open_for_s"]
MEMBER_COLUMNS = ["severity", "rule", "subject", "open_for", "summary", "opened_utc"]
MEMBER_LIMIT = 1000  # member rows sent to the browser at once; a search narrows them server-side


def is_open(a: dict[str, Any]) -> bool:
    return is_missing(a.get("resolved_at"))


def split_risks(alerts: list[dict[str, Any]] | None) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Open alerts as (those incidents are made of, configuration and placement risks)."""
    causes, risks = [], []
    for a in alerts or []:
        if is_open(a):
            (risks if a.get("rule") in RISK_RULES else causes).append(a)
    return causes, risks


def open_incidents(doc: dict[str, Any]) -> list[dict[str, Any]]:
    return [i for i in (doc.get("incidents") or []) if is_missing(i.get("resolved_at"))]


def incident_sort_key(inc: dict[str, Any], ref: float | None = None) -> tuple[Any, ...]:
    """Worst first: severity, then causes before symptoms (kind order), then the longest open, then subject."""
    kind = inc.get("kind")
    opened = inc.get("opened")
    return (SEVERITY_RANK.get(inc.get("severity", "info"), 9), KIND_ORDER.index(kind) if kind in KIND_ORDER else 99,
            float(opened) if not is_missing(opened) else float("inf"), str(inc.get("subject", "")))


def blast_radius(inc: dict[str, Any]) -> str:
    """``19,999 partitions on 2,000 topics · 19,999 at min ISR`` — only the figures the incident has, and of
    offline / under / at min ISR / unclean only those that are not zero; an empty string when it has none."""
    parts = []
    n, topics = inc.get("partitions"), inc.get("topics")
    if not is_missing(n):
        what = plural(int(n), "partition")
        if not is_missing(topics) and inc.get("kind") != "topic":
            what += f" on {plural(int(topics), 'topic')}"
        parts.append(what)
    for key, label in (("offline", "offline"), ("under_min_isr", "under min ISR"), ("at_min_isr", "at min ISR"),
                       ("unclean_topics", "topics with unclean election")):
        v = inc.get(key)
        if not is_missing(v) and v:
            parts.append(f"{fmt_count(v)} {label}")
    return " · ".join(parts)


def incident_rows(docs: dict[str, dict[str, Any]]) -> pd.DataFrame:
    """One row per open incident of every cluster, worst first (`incident_sort_key`); "open for" on the
    collector's clock (the snapshot's ``time`` - ``opened``), like the alerts."""
    rows = []
    for cluster, doc in docs.items():
        ref = doc.get("time")
        for inc in sorted(open_incidents(doc), key=incident_sort_key):
            opened = inc.get("opened")
            age = None if is_missing(ref) or is_missing(opened) else max(0.0, float(ref) - float(opened))
            rows.append({"severity": inc.get("severity", "info"), "cluster": cluster,
                         "kind": inc.get("kind"), "subject": inc.get("subject"), "summary": inc.get("summary"),
                         "open_for": fmt_duration(age), "alerts": int(inc.get("alerts") or 0),
                         "blast radius": blast_radius(inc), "consequences": ", ".join(inc.get("consequences") or []),
                         "opened_utc": fmt_utc(opened), "id": inc.get("id"), "open_for_s": age,
                         "_key": incident_sort_key(inc)})
    if not rows:
        return pd.DataFrame({c: pd.Series(dtype="object") for c in INCIDENT_COLUMNS})
    rows.sort(key=lambda r: r["_key"])
    return pd.DataFrame(rows, columns=INCIDENT_COLUMNS).reset_index(drop=True)


def incident_members(doc: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """Open alerts of each open incident of one snapshot: ``{incident id: [alert dict, ...]}``: by the ids the
    collector stamped on them, or recovered for older state (see the module docstring). Alerts that no open
    incident claims (risks, or a snapshot from before incidents) are under the key ``""``."""
    incidents = open_incidents(doc)
    out: dict[str, list[dict[str, Any]]] = {str(i.get("id")): [] for i in incidents}
    out[""] = []
    alerts = [a for a in doc.get("alerts") or [] if is_open(a)]
    if any("incident" in a for a in alerts):
        for a in alerts:
            target = a.get("incident")
            out[target if isinstance(target, str) and target in out else ""].append(a)
        return out
    return _recovered_members(incidents, alerts, doc, out)


def _recovered_members(incidents: list[dict[str, Any]], alerts: list[dict[str, Any]], doc: dict[str, Any],
                       out: dict[str, list[dict[str, Any]]]) -> dict[str, list[dict[str, Any]]]:
    """`incident_members` of state written before alerts carried their incident's id."""
    by_kind_subject = {(i.get("kind"), str(i.get("subject"))): str(i.get("id")) for i in incidents}
    first_of_kind: dict[str, str] = {}
    for i in incidents:
        first_of_kind.setdefault(str(i.get("kind")), str(i.get("id")))
    broker_inc = next((i for i in incidents if i.get("kind") == "broker"), None)
    down = {int(b) for b in (broker_inc or {}).get("brokers") or []}
    broker_id = str(broker_inc.get("id")) if broker_inc is not None else None
    consequences = set((broker_inc or {}).get("consequences") or [])
    replicas: dict[str, tuple[str, list[int]]] = {}
    if down and any(a.get("rule") in PARTITION_SYMPTOMS for a in alerts):
        for p in doc.get("partitions") or []:
            replicas[f"{p.get('topic')}-{p.get('partition')}"] = (str(p.get("topic")), p.get("replicas") or [])
    for a in alerts:
        rule, subject = a.get("rule"), str(a.get("subject", ""))
        target: str | None = None
        if rule in RISK_RULES:
            target = None
        elif rule in BROKER_CAUSES:
            target = broker_id
        elif rule in PARTITION_SYMPTOMS:
            topic, reps = replicas.get(subject, (None, []))
            if broker_id is not None and not down.isdisjoint(reps):
                target = broker_id
            else:
                topic = topic or topic_of(subject)
                target = by_kind_subject.get(("topic", topic))
        elif rule in CONSENSUS_RULES:
            target = first_of_kind.get("consensus")
        elif rule in CLUSTER_RULES:
            target = first_of_kind.get("cluster")
        elif rule in MONITOR_RULES:
            target = first_of_kind.get("monitor")
        else:
            spec = RULES.get(rule or "")
            if spec is not None and spec.subject == "group":
                target = by_kind_subject.get(("group", subject))
                if target is None and f"group {subject}" in consequences:
                    target = broker_id
            elif spec is not None and spec.family == "transactions":
                target = by_kind_subject.get(("transaction", subject))
                if target is None and f"transaction on {subject}" in consequences:
                    target = broker_id
        out[target if target is not None and target in out else ""].append(a)
    return out


def member_frame(alerts: list[dict[str, Any]], ref: float | None, query: str = "",
                 limit: int = MEMBER_LIMIT) -> tuple[pd.DataFrame, int]:
    """The member alerts of one incident as a table, worst and longest open first: at most `limit` rows of those
    whose rule, subject or summary contains `query` (case-insensitive), and how many matched in all. Filtering
    and cutting happen here, on the server, so a broker incident of 100,000 alerts never ships 100,000 rows."""
    q = query.strip().lower()
    matched = alerts if not q else [
        a for a in alerts if q in str(a.get("subject", "")).lower() or q in str(a.get("rule", "")).lower()
        or q in str(a.get("summary", "")).lower()]
    total = len(matched)

    def key(a: dict[str, Any]) -> tuple[Any, ...]:
        first = a.get("first_seen")
        return (SEVERITY_RANK.get(a.get("severity", "info"), 9), float(first) if not is_missing(first) else 0.0,
                str(a.get("rule", "")), str(a.get("subject", "")))

    top = sorted(matched, key=key)[:limit] if total > limit else sorted(matched, key=key)
    rows = []
    for a in top:
        first = a.get("first_seen")
        age = None if is_missing(ref) or is_missing(first) else float(ref) - float(first)
        rows.append({"severity": a.get("severity", "info"), "rule": a.get("rule"), "subject": a.get("subject"),
                     "open_for": fmt_duration(age), "summary": a.get("summary"), "opened_utc": fmt_utc(first)})
    return pd.DataFrame(rows, columns=MEMBER_COLUMNS), total


def risk_frame(docs: dict[str, dict[str, Any]]) -> pd.DataFrame:
    """Open configuration and placement risks of every cluster (never incidents), by rule then subject."""
    rows = []
    for cluster, doc in docs.items():
        for a in split_risks(doc.get("alerts"))[1]:
            spec = RULES.get(str(a.get("rule")))
            rows.append({"severity": a.get("severity", "info"), "cluster": cluster, "rule": a.get("rule"),
                         "subject": a.get("subject"), "summary": a.get("summary"),
                         "first step": spec.first_step if spec is not None else ""})
    cols = ["severity", "cluster", "rule", "subject", "summary", "first step"]
    if not rows:
        return pd.DataFrame({c: pd.Series(dtype="object") for c in cols})
    df = pd.DataFrame(rows, columns=cols)
    return df.sort_values(["cluster", "rule", "subject"], kind="stable").reset_index(drop=True)


def health_sentence(doc: dict[str, Any], limit: int = 3) -> list[str]:
    """What on-call needs to read on the health card: the summaries of the worst open incidents (at most
    `limit`, then "+N more incidents"); an empty list when there is none."""
    incs = sorted(open_incidents(doc), key=incident_sort_key)
    out = [str(i.get("summary") or f"{i.get('kind')} {i.get('subject')}") for i in incs[:limit]]
    if len(incs) > limit:
        out.append(f"+{plural(len(incs) - limit, 'more incident')}")
    return out


def data_age_text(snapshot_time: float | None, newest: float | None) -> str:
    """How old a snapshot is, measured on the collector's clock, never the viewer's.

    The demo runs the sandbox on a simulated clock that goes faster than the wall clock, so a snapshot's
    ``time`` can be minutes *ahead* of the browser's or the dashboard server's ``time.time()``: a relative
    time against the wall clock would read "in 3 minutes". The snapshot's age is therefore taken against
    `newest`, the newest time on the same clock (its own ``written_at`` is the wall clock and is only used
    for staleness; the newest snapshot time over all clusters is on the collector's clock), and a negative
    difference is clamped: the result is "latest poll" or "N older than the newest snapshot", never a future.
    """
    if is_missing(snapshot_time):
        return "time unknown"
    if is_missing(newest) or float(newest) - float(snapshot_time) < 1.0:
        return "latest poll"
    return f"{fmt_duration(float(newest) - float(snapshot_time))} older than the newest snapshot"


def incident_target(inc: dict[str, Any]) -> tuple[str, dict[str, str]]:
    """(page slug, query parameters) of the page that shows what an incident is about."""
    cluster = inc.get("cluster")
    params: dict[str, str] = {"cluster": str(cluster)} if cluster else {}
    kind, subject = inc.get("kind"), str(inc.get("subject", ""))
    if kind == "broker":
        brokers = inc.get("brokers") or []
        if len(brokers) == 1:
            params["broker"] = str(brokers[0])
        return "replication", params
    if kind == "topic":
        return "replication", {**params, "topic": subject}
    if kind == "group":
        return "consumers", {**params, "group": subject}
    if kind == "transaction":  # the subject is a transactional id or, for a hanging one, a partition
        rule, _, member = str((inc.get("sample") or [""])[0]).partition(" ")
        return alert_target(rule, member, str(cluster) if cluster else None) if member else \
            ("transactions", {**params, "txn": subject})
    if kind == "consensus":
        return "consensus", params
    return "history", params
