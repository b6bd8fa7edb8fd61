"""The JSON API's answers, from hand-made snapshots: paths, errors with their status codes, the group page (the
partition and rule that decided its status, owners), incidents and risks, Burrow's statuses beside ours, and
the same answers over HTTP from the exporter's server."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest

from collectors.alerting.catalogue import RISK_RULES
from collectors.model.records import (
    AlertRecord,
    BrokerRecord,
    ClusterSnapshot,
    GroupPartitionRecord,
    GroupRecord,
    IncidentRecord,
    PartitionRecord,
)
from collectors.outputs.api import API_PREFIX, ENDPOINTS, ApiView, JsonApi, answer, burrow_status
from collectors.outputs.exporter import MetricsEndpoint, MetricsServer

T = 1_800_000_000.0


def gp(group: str, partition: int, status: str, lag: int, lag_s: float | None, reason: str,
       owner: str | None = "c-1") -> GroupPartitionRecord:
    return GroupPartitionRecord(
        "prod", group, "orders", partition, committed_offset=100, log_start_offset=0, high_watermark=100 + lag,
        last_stable_offset=100 + lag, lag=lag, lag_seconds=lag_s, status=status, status_reason=reason,
        owner_member_id=f"{owner}-uuid" if owner else None, owner_client_id=owner,
        owner_host="/10.0.0.7" if owner else None)


def snapshot() -> ClusterSnapshot:
    groups = [
        GroupRecord("prod", "billing", "Stable", 2, 1, status="ERR", worst_partition_status="STALL", lag_sum=5100,
                    lag_seconds_max=900.0, partitions=3, topics=["orders"], team="payments", policy="policies[0]"),
        GroupRecord("prod", "etl/nightly", "Empty", 0, 1, status="OK", lag_sum=0, partitions=1, topics=["orders"],
                    idle=True, team="bi"),
        GroupRecord("prod", "old", "Empty", 0, 1, status="ABANDONED", worst_partition_status="ABANDONED",
                    lag_sum=24000, partitions=1, topics=["orders"], activity="abandoned"),
        GroupRecord("prod", "web", "Stable", 1, 2, status="WARN", worst_partition_status="WARN", lag_sum=50,
                    lag_seconds_max=30.0, partitions=1, topics=["orders"], team="web"),
    ]
    parts = [
        gp("billing", 0, "OK", 0, 0.0, "lag 0 <= allowed 0"),
        gp("billing", 1, "STALL", 5000, 900.0, "commit unchanged for 900s (> 300s) with lag 5,000; members hold it",
           owner="c-2"),
        gp("billing", 2, "WARN", 100, 20.0, "lag at commit rose over the last 3 commits (10 -> 100)", owner=None),
        gp("etl/nightly", 0, "OK", 0, None, "idle window"),
        gp("old", 0, "ABANDONED", 24000, None, "no members and no commit for 8 days", owner=None),
        gp("web", 0, "WARN", 50, 30.0, "lag at commit rose over the last 3 commits (5 -> 50)"),
    ]
    alerts = [
        AlertRecord("consumer_lag_status", "critical", "prod", "billing", "billing STALL", T - 600, T,
                    incident="inc-g1", team="payments"),
        AlertRecord("consumer_lag_seconds", "warning", "prod", "billing", "billing 900 s behind", T - 300, T,
                    incident="inc-g1", team="payments"),
        AlertRecord("unsafe_durability", "warning", "prod", "orders", "orders min.insync.replicas=1", T - 9000, T),
        AlertRecord("consumer_lag_status", "warning", "prod", "web", "web WARN", T - 100, T, resolved_at=T),
    ]
    incidents = [
        IncidentRecord("prod", "inc-g1", "group", "billing", "critical", "billing stalled", T - 600, T, alerts=2,
                       members={"consumer_lag_status": 1, "consumer_lag_seconds": 1}, team="payments"),
        IncidentRecord("prod", "inc-old", "topic", "payments", "warning", "over", T - 9000, T - 5000,
                       resolved_at=T - 5000),
        IncidentRecord("prod", "inc-b3", "broker", "broker 3", "warning", "broker 3 down", T - 60, T, brokers=[3],
                       partitions=10),
    ]
    return ClusterSnapshot(
        "prod", T, mode="kraft", cluster_id="abc", controller_id=1,
        brokers=[BrokerRecord("prod", 1, "k1", 9092), BrokerRecord("prod", 3, "k3", 9092, alive=False)],
        partitions=[PartitionRecord("prod", "orders", 0, 1, 5, [1, 3], [1], [3], 2),
                    PartitionRecord("prod", "orders", 1, -1, 5, [3], [], [3], 1)],
        groups=groups, group_partitions=parts, alerts=alerts, incidents=incidents, filtered_groups=7)


def view() -> ApiView:
    return ApiView.of([snapshot(), ClusterSnapshot("stage", T, reachable=False, stale=True,
                                                   stale_sections=["metadata"], errors=["unreachable"])], RISK_RULES)


def get(path: str, method: str = "GET") -> tuple[int, dict]:
    a = answer(view(), method, path)
    return a.status, json.loads(a.encode())


def test_index_lists_every_endpoint() -> None:
    status, body = get(API_PREFIX)
    assert status == 200 and body["endpoints"] == ENDPOINTS
    assert get(API_PREFIX + "/")[1] == body


def test_clusters_summarise_each_cluster() -> None:
    status, body = get(f"{API_PREFIX}/clusters")
    assert status == 200
    prod, stage = body["clusters"]
    assert (prod["cluster"], prod["brokers"], prod["brokers_alive"], prod["partitions"]) == ("prod", 2, 1, 2)
    assert (prod["under_replicated"], prod["under_min_isr"], prod["offline"]) == (2, 2, 1)
    assert (prod["groups"], prod["groups_filtered"], prod["incidents_open"], prod["incidents_critical"]) == (4, 7, 2, 1)
    assert prod["alerts_open"] == 3 and prod["as_of"] == T
    assert stage["reachable"] is False and stage["stale"] is True and stage["stale_sections"] == ["metadata"]
    one = get(f"{API_PREFIX}/clusters/prod")[1]
    assert [b["broker_id"] for b in one["brokers"]] == [1, 3] and one["mode"] == "kraft"


def test_group_says_which_partition_and_rule_decided_its_status_and_who_owns_each_partition() -> None:
    status, body = get(f"{API_PREFIX}/clusters/prod/groups/billing")
    assert status == 200
    assert body["status"] == "ERR" and body["burrow_status"] == "ERR"
    assert body["decided_by"] == {
        "topic": "orders", "partition": 1, "status": "STALL", "group_status_from_partition": "ERR",
        "rule": "lag evaluation",
        "reason": "commit unchanged for 900s (> 300s) with lag 5,000; members hold it"}
    p = {x["partition"]: x for x in body["partitions"]}
    assert p[1]["owner"] == {"member_id": "c-2-uuid", "client_id": "c-2", "host": "/10.0.0.7"}
    assert p[2]["owner"] is None  # unassigned
    assert (p[1]["lag"], p[1]["lag_seconds"], p[1]["status"]) == (5000, 900.0, "STALL")
    assert body["group"]["team"] == "payments" and body["group"]["policy"] == "policies[0]"
    assert [a["rule"] for a in body["alerts"]] == ["consumer_lag_status", "consumer_lag_seconds"]  # worst first
    assert get(f"{API_PREFIX}/clusters/prod/groups/billing/lag")[1] == body  # Burrow's path shape


def test_group_ids_with_slashes_are_asked_for_percent_encoded() -> None:
    status, body = get(f"{API_PREFIX}/clusters/prod/groups/etl%2Fnightly")
    assert status == 200 and body["group"]["group_id"] == "etl/nightly"
    assert body["decided_by"]["rule"] == "idle window of its policy"


def test_a_group_nobody_runs_is_info_here_and_what_burrow_would_say_beside_it() -> None:
    body = get(f"{API_PREFIX}/clusters/prod/groups/old")[1]
    assert body["status"] == "ABANDONED" and body["burrow_status"] == "ERR"
    assert body["partitions"][0]["burrow_status"] == "STOP"
    assert body["decided_by"]["rule"] == "activity"
    assert burrow_status("INACTIVE") == "STOP" and burrow_status("INACTIVE", group=True) == "ERR"
    assert burrow_status("STALL") == "STALL" and burrow_status("ERR", group=True) == "ERR"


def test_groups_worst_first_and_filtered_by_status_team_and_activity() -> None:
    body = get(f"{API_PREFIX}/clusters/prod/groups")[1]
    assert [g["group_id"] for g in body["groups"]] == ["billing", "web", "etl/nightly", "old"]
    assert [g["group_id"] for g in get(f"{API_PREFIX}/clusters/prod/groups?status=ERR,WARN")[1]["groups"]] == [
        "billing", "web"]
    assert [g["group_id"] for g in get(f"{API_PREFIX}/clusters/prod/groups?team=bi")[1]["groups"]] == ["etl/nightly"]
    assert "old" not in {g["group_id"] for g in get(f"{API_PREFIX}/clusters/prod/groups?activity=active")[1]["groups"]}


def test_incidents_open_worst_first_and_resolved_on_request() -> None:
    body = get(f"{API_PREFIX}/clusters/prod/incidents")[1]
    assert [i["id"] for i in body["incidents"]] == ["inc-g1", "inc-b3"]
    assert {i["id"] for i in get(f"{API_PREFIX}/clusters/prod/incidents?all=1")[1]["incidents"]} == {
        "inc-g1", "inc-b3", "inc-old"}
    assert [i["id"] for i in get(f"{API_PREFIX}/incidents")[1]["incidents"]] == ["inc-g1", "inc-b3"]


def test_risks_are_the_standing_risks_only_and_alerts_filter_by_rule_and_severity() -> None:
    assert [a["rule"] for a in get(f"{API_PREFIX}/clusters/prod/risks")[1]["risks"]] == ["unsafe_durability"]
    assert [a["cluster"] for a in get(f"{API_PREFIX}/risks")[1]["risks"]] == ["prod"]
    alerts = get(f"{API_PREFIX}/clusters/prod/alerts")[1]["alerts"]
    assert len(alerts) == 3 and alerts[0]["severity"] == "critical"  # the resolved one is not open
    assert [a["subject"] for a in get(f"{API_PREFIX}/clusters/prod/alerts?severity=warning")[1]["alerts"]] == [
        "orders", "billing"]


@pytest.mark.parametrize(("path", "status", "words"), [
    (f"{API_PREFIX}/clusters/nope", 404, "no cluster named 'nope'"),
    (f"{API_PREFIX}/clusters/prod/groups/nope", 404, "no group 'nope' in cluster 'prod'"),
    (f"{API_PREFIX}/clusters/prod/topics", 404, "no endpoint"),
    (f"{API_PREFIX}/whatever", 404, "no endpoint"),
    ("/api/v2/clusters", 404, "not an API path"),
    (f"{API_PREFIX}/clusters/prod/groups?status=BROKEN", 400, "status: unknown value BROKEN"),
    (f"{API_PREFIX}/clusters/prod/alerts?severity=loud", 400, "severity: unknown value loud"),
])
def test_bad_requests_get_a_json_error_with_the_right_status(path: str, status: int, words: str) -> None:
    got, body = get(path)
    assert got == status and body["status"] == status and words in body["error"]


def test_unknown_cluster_lists_the_known_ones() -> None:
    assert get(f"{API_PREFIX}/clusters/nope")[1]["clusters"] == ["prod", "stage"]


def test_read_only_and_not_before_the_first_poll() -> None:
    a = answer(view(), "POST", f"{API_PREFIX}/clusters")
    assert a.status == 405 and ("Allow", "GET, HEAD") in a.headers
    assert answer(ApiView(), "GET", f"{API_PREFIX}/clusters").status == 503
    assert answer(ApiView(), "GET", API_PREFIX).status == 200  # the index needs no poll


def test_served_over_http_beside_metrics() -> None:
    api, ep = JsonApi(RISK_RULES), MetricsEndpoint()
    srv = MetricsServer(ep, port=0, api=api).start()
    base = f"http://127.0.0.1:{srv.port}"
    try:
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(f"{base}{API_PREFIX}/clusters", timeout=5)
        assert e.value.code == 503 and json.loads(e.value.read())["status"] == 503
        api.update([snapshot()])
        ep.update([snapshot()])
        with urllib.request.urlopen(f"{base}{API_PREFIX}/clusters/prod/groups/billing?pretty=1", timeout=5) as r:
            assert r.headers["Content-Type"] == "application/json"
            text = r.read().decode()
        assert json.loads(text)["decided_by"]["partition"] == 1 and "\n  " in text  # pretty on request
        req = urllib.request.Request(f"{base}{API_PREFIX}/clusters", method="DELETE")
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(req, timeout=5)
        assert e.value.code == 405
        with urllib.request.urlopen(f"{base}/metrics", timeout=5) as r:
            assert b"kafka_brokers" in r.read()
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(f"{base}/nothing", timeout=5)
        assert e.value.code == 404 and API_PREFIX.encode() in e.value.read()
    finally:
        srv.close()


@pytest.mark.parametrize("method", ["OPTIONS", "TRACE", "FOO"])
def test_any_other_method_is_405_and_the_server_names_no_python(method: str) -> None:
    """docs/api.md: GET and HEAD, any other method 405. OPTIONS, TRACE or a made-up method fell through to Python's
    own 501 HTML page, whose ``Server`` header, like every answer's, named the Python version."""
    import http.client

    srv = MetricsServer(MetricsEndpoint(), port=0, api=JsonApi(RISK_RULES)).start()
    try:
        for path in (f"{API_PREFIX}/clusters", "/metrics"):
            conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=5)
            conn.request(method, path)
            r = conn.getresponse()
            assert r.status == 405 and r.getheader("Allow") == "GET, HEAD", (path, r.status)
            r.read()
            conn.close()
            assert "Python" not in (r.getheader("Server") or "") and r.getheader("Server") == "kafka-monitor"
    finally:
        srv.close()


def test_a_connection_that_sends_nothing_is_closed(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every connection has a thread; one that sent nothing held its thread for good, and a few thousand such
    exhausted the process (helper-69). Now the server closes it after `REQUEST_TIMEOUT_S` (here made short)."""
    import socket

    from collectors.outputs import http_server

    monkeypatch.setattr(http_server, "REQUEST_TIMEOUT_S", 0.2)
    srv = MetricsServer(MetricsEndpoint(), port=0).start()
    try:
        with socket.create_connection(("127.0.0.1", srv.port), timeout=30) as idle:
            assert idle.recv(1) == b""  # closed by the server, not by our own 30 s timeout (that raises)
        with urllib.request.urlopen(f"http://127.0.0.1:{srv.port}/healthz", timeout=5) as r:  # still serving
            assert r.read() == b"ok\n"
    finally:
        srv.close()


def test_docs_list_every_endpoint() -> None:
    from pathlib import Path

    from collectors.outputs.api import endpoints_markdown

    doc = (Path(__file__).resolve().parents[2] / "docs" / "api.md").read_text()
    assert endpoints_markdown() in doc
