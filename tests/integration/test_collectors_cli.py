"""`python -m collectors` as a user runs it, and the bounded request cost of a poll."""

from __future__ import annotations

import json
import math
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.monitor import make_poller
from tests.support.sandbox import running_sandbox, scenario

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]


def run_cli(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "collectors", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout)


def write(tmp_path: Path, text: str) -> str:
    f = tmp_path / "config.yaml"
    f.write_text(text)
    return str(f)


def test_bad_config_exits_2_naming_the_field(tmp_path: Path) -> None:
    cfg = write(tmp_path, "clusters:\n  - name: prod\n    bootstrap_servers: 'nohostport'\npoll_interval_s: -1\n")
    r = run_cli("--config", cfg, "--once", "--json")
    assert r.returncode == 2
    assert "clusters[0].bootstrap_servers" in r.stderr and "poll_interval_s" in r.stderr
    assert "Traceback" not in r.stderr and r.stdout == ""


def test_missing_arguments_exit_2() -> None:
    r = run_cli("--once")
    assert r.returncode == 2 and "--config" in r.stderr


def test_once_json_against_the_sandbox(tmp_path: Path) -> None:
    with running_sandbox(scenario(), speed=10.0) as sb:
        sb.advance_to(sb.cluster.start + 10)
        cfg = write(tmp_path, f"clusters:\n  - name: local\n    bootstrap_servers: '{sb.bootstrap_servers}'\n")
        r = run_cli("--config", cfg, "--once", "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["schema_version"] == 1
    (c,) = doc["clusters"]
    assert c["cluster"] == "local" and c["reachable"] is True and c["cluster_id"] == "sandbox-cluster-0001"
    assert {p["topic"] for p in c["partitions"]} >= {"orders", "single"}
    assert all("under_replicated" in p and "lso_gap" in p for p in c["partitions"])
    assert {g["group_id"] for g in c["groups"]} == {"billing", "reporting"}
    assert all(gp["lag"] is None or gp["lag"] >= 0 for gp in c["group_partitions"])
    assert "NaN" not in r.stdout


def test_once_json_unreachable_cluster_exits_1_with_alert(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cfg = write(tmp_path, "request_timeout_s: 2\nclusters:\n  - name: gone\n"
                          f"    bootstrap_servers: '127.0.0.1:{port}'\n")
    r = run_cli("--config", cfg, "--once", "--json")
    assert r.returncode == 1
    (c,) = json.loads(r.stdout)["clusters"]
    assert c["reachable"] is False and c["stale"] is True
    assert [a["rule"] for a in c["alerts"]] == ["cluster_unreachable"]


def request_bound(brokers: int, coordinators: int, groups_per_coordinator: list[int], open_partitions: int,
                  txn_ids: int, groups: int) -> int:
    """The documented cost of one steady-state poll outside KRaft (collectors/sources/kafka_adapter.py)."""
    return (1 + 3 * brokers + brokers + brokers + brokers + 2 + math.ceil(groups / 1000)
            + math.ceil(max(txn_ids, 1) / 1000)
            + sum(2 * math.ceil(g / 500) for g in groups_per_coordinator) + coordinators
            + brokers * math.ceil(max(open_partitions, 1) / 500) + 1)


@pytest.mark.parametrize(("topics", "partitions", "groups"), [(2, 3, 4), (20, 30, 40)])
def test_requests_per_poll_are_bounded_by_brokers_and_groups_not_partitions(
        topics: int, partitions: int, groups: int) -> None:
    cluster = {
        "brokers": 3, "broker_config": {"min.insync.replicas": "2"},
        "topics": [{"name": f"t{i}", "partitions": partitions, "replication_factor": 3, "produce_rate": 5}
                   for i in range(topics)],
        "groups": [{"group_id": f"g{i}", "topics": [f"t{i % topics}"]} for i in range(groups)],
        "transactional_producers": [{"transactional_id": "tx", "topics": ["t0"]}],
    }
    with running_sandbox(scenario(cluster), speed=5.0) as sb:
        sb.advance_to(sb.cluster.start + 10)
        p = make_poller(sb)
        try:
            p.poll(sb.clock.now())  # connection set-up (ApiVersions) happens once
            sb.reset_request_counts()
            r = p.poll(sb.clock.now())
            counts = sb.request_counts()
        finally:
            p.close()
    total = sum(sum(c.values()) for c in counts.values())
    per_api: dict[str, int] = {}
    for c in counts.values():
        for k, v in c.items():
            per_api[k] = per_api.get(k, 0) + v
    coords = {g.coordinator for g in r.snapshot.groups}
    per_coord = [sum(1 for g in r.snapshot.groups if g.coordinator == c) for c in coords]
    open_parts = sum(1 for x in r.snapshot.partitions if x.lso_gap)
    bound = request_bound(3, len(coords), per_coord, open_parts, 1, groups)
    assert total <= bound, (total, bound, per_api)
    # one Metadata of the cluster, and one of a few topics to each broker (`collectors.model.metadata_lag`)
    assert 3 <= per_api.get("Metadata", 0) <= 1 + 3 and per_api["ListOffsets"] == 9
    assert per_api["OffsetFetch"] == len(coords) and per_api["DescribeGroups"] == len(coords)
    assert per_api["DescribeConfigs"] <= 2
