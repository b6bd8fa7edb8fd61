"""Fleet policy against the sandbox over TCP: filters cut requests, a group nobody runs never pages, a consumer
seen running that stops still does, and policy labels and caps what it matches.

The sandbox's `old-etl` group has no members from the start (its offsets sit at 0 while `orders` grows): the
monitor finds it Empty, so it is INACTIVE. `billing` consumes until the scripted `consumer_stop`, after which it
must go STOP and page, as before this policy existed. `console-consumer-7` is denied by the filters: it is never
described and its offsets never fetched, which the request count shows. `audit` runs throughout: the owners the
monitor reads from its members' assignments are compared with the sandbox's own range assignment, and served by
the JSON API.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from collectors.config import MonitorConfig
from collectors.runtime.poller import ClusterPoller, PollResult
from sandbox.runner import Sandbox
from tests.support.monitor import FAST_THRESHOLDS, poll, poll_until
from tests.support.sandbox import frozen, running_sandbox, scenario

pytestmark = pytest.mark.integration

CLUSTER = {
    "brokers": 3,
    "topics": [{"name": "orders", "partitions": 3, "replication_factor": 3, "produce_rate": 30},
               {"name": "scratch", "partitions": 2, "replication_factor": 1, "produce_rate": 5}],
    "groups": [{"group_id": "billing", "topics": ["orders"], "members": 2, "commit_interval_s": 1},
               {"group_id": "old-etl", "topics": ["orders"], "members": 0},
               {"group_id": "console-consumer-7", "topics": ["orders"], "members": 1},
               {"group_id": "reporting", "topics": ["orders"], "members": 1, "commit_interval_s": 1},
               {"group_id": "audit", "topics": ["orders"], "members": 2, "commit_interval_s": 1}],
    # left-behind console consumers, enough that describing them takes requests of their own (500 a request)
    "generated_groups": {"count": 3000, "prefix": "console-consumer-x", "members": 0},
}
DENY_CONSOLE = {"groups": {"deny": ["^console-consumer-"]}, "topics": {"deny": ["^scratch$"]}}
INCIDENTS = [{"type": "consumer_stop", "at": 40, "group": "billing"},
             {"type": "consumer_stall", "at": 40, "group": "reporting"}]


def config(sb: Sandbox, filters: dict[str, Any] | None) -> MonitorConfig:
    return MonitorConfig.model_validate({
        "clusters": [{"name": "fleet", "bootstrap_servers": sb.bootstrap_servers, "filters": filters or {}}],
        "poll_interval_s": 5, "request_timeout_s": 20,  # 3,005 groups answered by one event loop: a bound only
        "thresholds": {**FAST_THRESHOLDS, "consumer_stop_after_s": 20, "lag_seconds_slo": 600},
        "policies": [{"group": "^billing$", "team": "payments"},
                     {"group": "^reporting$", "team": "bi", "max_severity": "warning"},
                     {"topic": "^orders$", "team": "orders-team"}]})


@pytest.fixture(scope="module")
def sb() -> Iterator[Sandbox]:
    with running_sandbox(scenario(CLUSTER, INCIDENTS), speed=10.0) as s:
        s.advance_to(s.cluster.start + 5)
        yield s


def test_filters_leave_groups_and_topics_out_before_any_request(sb: Sandbox) -> None:
    everything = ClusterPoller(config(sb, None).clusters[0], config(sb, None))
    filtered_cfg = config(sb, DENY_CONSOLE)
    filtered = ClusterPoller(filtered_cfg.clusters[0], filtered_cfg)
    try:
        a, b = poll(everything, sb), poll(filtered, sb)
    finally:
        everything.close()
        filtered.close()
    assert "console-consumer-7" in {g.group_id for g in a.snapshot.groups}
    assert "console-consumer-7" not in {g.group_id for g in b.snapshot.groups}
    assert "scratch" not in {t.topic for t in b.snapshot.topics} and "scratch" in {t.topic for t in a.snapshot.topics}
    assert "__consumer_offsets" in {t.topic for t in b.snapshot.topics}  # internal topics stay watched
    assert (b.snapshot.filtered_groups, b.snapshot.filtered_topics) == (3001, 1)
    assert len(a.snapshot.groups) == len(b.snapshot.groups) + 3001
    # 3,001 groups fewer to find coordinators for, describe and fetch offsets of: fewer requests
    assert b.snapshot.requests < a.snapshot.requests


def test_a_group_found_empty_never_pages_and_a_stopped_consumer_still_does(sb: Sandbox) -> None:
    cfg = config(sb, DENY_CONSOLE)
    poller = ClusterPoller(cfg.clusters[0], cfg)
    seen: list[PollResult] = []
    try:
        last = poll_until(poller, sb, lambda r: seen.append(r) or any(
            a.rule == "consumer_lag_status" and a.subject == "billing" for a in r.snapshot.alerts), timeout=60)
    finally:
        poller.close()
    groups = {g.group_id: g for g in last.snapshot.groups}
    assert groups["old-etl"].status == "INACTIVE" and groups["old-etl"].lag_sum
    assert not [a for r in seen for a in r.snapshot.alerts if a.subject == "old-etl"]
    stop = next(a for a in last.snapshot.alerts if a.rule == "consumer_lag_status" and a.subject == "billing")
    assert stop.severity == "critical" and stop.team == "payments"
    assert groups["billing"].status == "ERR" and groups["billing"].activity == "active"
    reporting = [a for a in last.snapshot.alerts if a.subject == "reporting"]
    assert reporting and all(a.severity in ("warning", "info") and a.team == "bi" for a in reporting)
    assert {t.topic: t.team for t in last.snapshot.topics}["orders"] == "orders-team"


def test_owners_and_the_json_api_against_the_sandbox(sb: Sandbox) -> None:
    """Owners come from the members' real assignments (the bytes DescribeGroups carries) and equal the sandbox's
    range assignment; the API serves them, the group's deciding rule and the policy team over HTTP."""
    import json
    import urllib.request

    from collectors.alerting.catalogue import RISK_RULES
    from collectors.outputs.api import API_PREFIX, JsonApi
    from collectors.outputs.exporter import MetricsEndpoint, MetricsServer
    from sandbox.groups import client_host, client_id, member_id

    cfg = config(sb, DENY_CONSOLE)
    poller = ClusterPoller(cfg.clusters[0], cfg)
    try:
        with frozen(sb):  # no rebalance (new member ids) between the answer and the ground truth
            r = poll(poller, sb)
            g = sb.cluster.groups["audit"]
            truth = {(t, p): member_id(g, i) for i, held in enumerate(sb.cluster.assignment(g))
                     for t, ps in held.items() for p in ps}
    finally:
        poller.close()
    owned = {(gp.topic, gp.partition): gp for gp in r.snapshot.group_partitions if gp.group_id == "audit"}
    assert len(truth) == 3 and {k: gp.owner_member_id for k, gp in owned.items()} == truth
    one = owned[("orders", 2)]  # two members, three partitions: member 0 holds 0-1, member 1 holds 2
    assert (one.owner_client_id, one.owner_host) == (client_id(g, 1), client_host(1))
    idle = [gp for gp in r.snapshot.group_partitions if gp.group_id == "old-etl"]
    assert idle and all(gp.owner_member_id is None for gp in idle)  # nobody holds what nobody runs

    api = JsonApi(RISK_RULES)
    api.update([r.snapshot])
    srv = MetricsServer(MetricsEndpoint(), port=0, api=api).start()
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{srv.port}{API_PREFIX}/clusters/fleet/groups/audit",
                                    timeout=5) as resp:
            body = json.loads(resp.read())
    finally:
        srv.close()
    audit = next(x for x in r.snapshot.groups if x.group_id == "audit")
    assert body["group"]["group_id"] == "audit" and body["status"] == audit.status
    assert {(p["topic"], p["partition"]): p["owner"]["member_id"] for p in body["partitions"]} == truth
    assert body["decided_by"]["reason"]
