"""deploy/alertmanager/alertmanager.yml: amtool accepts it, it routes and inhibits the alerts of
deploy/prometheus/alerts.yml as docs/alerts.md says, and a real Alertmanager groups a broker outage into one page.

* `amtool check-config` and `amtool config routes test` run for real (Debian's prometheus-alertmanager package,
  installed by ./run.sh setup; a missing amtool is a failure, not a skip).
* Every alert of alerts.yml routes where the policy says: critical incidents, the alerts about the monitor itself
  (`PROMETHEUS_ONLY`: no incident can exist when the monitor is dead or stuck) and critical risks (never an
  incident) to the pager, info nowhere, everything else to the non-paging channel; docs/alerts.md's paging table
  says the same.
* Every inhibit rule names alerts that exist and compares labels both sides carry; the broker rules silence every
  partition-level warning the collector's broker incident explains.
* A real Alertmanager, fed a broker outage, makes one pager group of it and suppresses its warnings.
"""

from __future__ import annotations

import json
import re
import shutil
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from collectors.alerting.catalogue import CATALOGUE, INCIDENT_ALERTS, PROMETHEUS_ONLY, RISK_RULES, RULES
from collectors.alerting.correlation import INCIDENT_KINDS, PARTITION_SYMPTOMS

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / "deploy" / "alertmanager" / "alertmanager.yml"
ALERTS = ROOT / "deploy" / "prometheus" / "alerts.yml"
PAGER, CHANNEL, BLACKHOLE = "kafka-pager", "kafka-channel", "blackhole"


def _config() -> dict[str, Any]:
    return yaml.safe_load(CONFIG.read_text())


def _alert_rules() -> dict[str, dict[str, Any]]:
    doc = yaml.safe_load(ALERTS.read_text())
    return {r["alert"]: r for g in doc["groups"] for r in g["rules"] if "alert" in r}


def _labels_of(rule: dict[str, Any]) -> set[str]:
    """The labels an alert carries: its grouping labels, its static labels and alertname."""
    by = {c.strip() for clause in re.findall(r"\bby\s*\(([^)]*)\)", rule["expr"]) for c in clause.split(",")}
    if "up{" in rule["expr"]:
        by |= {"job", "instance"}
    return by | set(rule.get("labels", {})) | {"alertname"}


def _amtool(*args: str) -> subprocess.CompletedProcess[str]:
    exe = shutil.which("amtool")
    assert exe, "amtool missing: ./run.sh setup installs Debian's prometheus-alertmanager package"
    return subprocess.run([exe, *args], capture_output=True, text=True, timeout=60, cwd=ROOT)


def _route(**labels: str) -> list[str]:
    r = _amtool("config", "routes", "test", f"--config.file={CONFIG}", *(f"{k}={v}" for k, v in labels.items()))
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout.split()


RISK_ALERTS = {a for r in CATALOGUE if r.name in RISK_RULES for a in r.prometheus}
"""Alerts on standing risks (configuration, leader placement): the collector never makes incidents of them."""


def _expected_receiver(alert: str, severity: str) -> str:
    """The paging policy: a critical incident pages; so does a critical alert no incident can stand for (the
    monitor itself, critical risks). Info goes nowhere; everything else to the channel."""
    if alert == "KafkaIncidentCritical" or alert in PROMETHEUS_ONLY:
        return PAGER
    if severity == "critical" and alert in RISK_ALERTS:
        return PAGER
    return BLACKHOLE if severity == "info" else CHANNEL


# ----------------------------------------------------------------------------- amtool


def test_amtool_check_config() -> None:
    r = _amtool("check-config", str(CONFIG))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "SUCCESS" in r.stdout
    assert f"{len(_config()['inhibit_rules'])} inhibit rules" in r.stdout


def test_every_alert_routes_by_the_paging_policy() -> None:
    rules = _alert_rules()
    assert set(INCIDENT_ALERTS) <= set(rules)
    for name, rule in rules.items():
        severity = rule["labels"]["severity"]
        labels = {"alertname": name, "severity": severity, "cluster": "a"}
        if name in INCIDENT_ALERTS:
            for kind in INCIDENT_KINDS:
                got = _route(**labels, kind=kind, subject="x")
                assert got == [_expected_receiver(name, severity)], f"{name} {kind}: {got}"
        else:
            got = _route(**labels)
            assert got == [_expected_receiver(name, severity)], f"{name}: {got}"


def test_a_broker_outage_pages_once() -> None:
    """Every alert a broker outage raises, through the routes: only the broker incident reaches the pager."""
    outage = [
        {"alertname": "KafkaIncidentCritical", "severity": "critical", "kind": "broker", "subject": "broker 2"},
        {"alertname": "KafkaBrokerDown", "severity": "critical", "broker": "2"},
        *({"alertname": a, "severity": _alert_rules()[a]["labels"]["severity"], "topic": "orders"}
          for r in sorted(PARTITION_SYMPTOMS) for a in RULES[r].prometheus),
        {"alertname": "KafkaPreferredLeaderImbalance", "severity": "info"},
    ]
    paged = [a["alertname"] for a in outage if _route(cluster="a", **a) == [PAGER]]
    assert paged == ["KafkaIncidentCritical"]


def test_docs_paging_table_matches_the_routes() -> None:
    """docs/alerts.md's "Paging" table puts every alert in exactly one row, whose receiver is where it routes."""
    doc = (ROOT / "docs" / "alerts.md").read_text()
    section = doc.split("## Paging: incidents, not symptoms", 1)[1].split("\n## ", 1)[0]
    rules = _alert_rules()
    seen: dict[str, str] = {}
    for row in re.findall(r"^\| (.*) \|$", section, re.M):
        cells = [c.strip() for c in row.split(" | ")]
        receiver = re.search(r"`(kafka-pager|kafka-channel|blackhole)`", cells[0])
        if receiver is None:
            continue  # header
        for name in re.findall(r"`([A-Z]\w+)`", cells[1]):
            assert name not in seen, f"{name} in two rows of the paging table"
            seen[name] = receiver.group(1)
    assert set(seen) == set(rules), f"paging table: missing {sorted(set(rules) - set(seen))}"
    for name, receiver in seen.items():
        assert receiver == _expected_receiver(name, rules[name]["labels"]["severity"]), name


# ----------------------------------------------------------------------------- inhibition


def _matchers(ms: list[str]) -> dict[str, tuple[str, str]]:
    out = {}
    for m in ms:
        k, op, v = re.fullmatch(r'(\w+)\s*(=~|!=|!~|=)\s*"?(.*?)"?', m.strip()).groups()  # type: ignore[union-attr]
        out[k] = (op, v)
    return out


def _alertnames(ms: list[str], alerts: set[str]) -> set[str]:
    op, value = _matchers(ms)["alertname"]
    assert op in ("=", "=~"), ms
    names = set(value.split("|")) if op == "=~" else {value}
    assert names <= alerts, f"inhibit rule names alerts not in alerts.yml: {sorted(names - alerts)}"
    return names


def test_inhibit_rules_name_real_alerts_and_labels_both_sides_carry() -> None:
    rules = _alert_rules()
    for inhibit in _config()["inhibit_rules"]:
        sources = _alertnames(inhibit["source_matchers"], set(rules))
        targets = _alertnames(inhibit["target_matchers"], set(rules))
        assert "cluster" in inhibit["equal"], inhibit  # never across clusters
        for name in sources | targets:
            carried = _labels_of(rules[name])
            assert set(inhibit["equal"]) <= carried, f"{name} lacks {set(inhibit['equal']) - carried}"
        for name in sources:
            assert set(_matchers(inhibit["source_matchers"])) <= _labels_of(rules[name]), name
        # a page is never silenced by something that does not page: targets are never the pager's
        assert not targets & ({"KafkaIncidentCritical"} | set(PROMETHEUS_ONLY)), inhibit


def test_a_down_broker_silences_every_partition_warning_its_incident_explains() -> None:
    rules = _alert_rules()
    warnings = {a for r in PARTITION_SYMPTOMS for a in RULES[r].prometheus
                if rules[a]["labels"]["severity"] != "critical"}
    assert warnings  # at-min-ISR, under-replicated, ISR flapping
    by_source: dict[str, set[str]] = {}
    for inhibit in _config()["inhibit_rules"]:
        m = _matchers(inhibit["source_matchers"])
        broker_source = "KafkaBrokerDown" in m["alertname"][1] or m.get("kind") == ("=", "broker")
        if inhibit["equal"] == ["cluster"] and broker_source:
            key = "incident" if "kind" in m else "KafkaBrokerDown"
            by_source[key] = _alertnames(inhibit["target_matchers"], set(rules))
    assert set(by_source) == {"incident", "KafkaBrokerDown"}
    for key, targets in by_source.items():
        assert warnings <= targets, f"{key}: {sorted(warnings - targets)} not inhibited"
        assert all(rules[t]["labels"]["severity"] != "critical" for t in targets), key


# ----------------------------------------------------------------------------- a real Alertmanager


@pytest.fixture
def alertmanager(tmp_path: Path) -> Iterator[str]:
    exe = shutil.which("prometheus-alertmanager") or shutil.which("alertmanager")
    assert exe, "alertmanager missing: ./run.sh setup installs Debian's prometheus-alertmanager package"
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    proc = subprocess.Popen([exe, f"--config.file={CONFIG}", f"--storage.path={tmp_path}",
                             f"--web.listen-address=127.0.0.1:{port}", "--cluster.listen-address="],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(f"{url}/-/ready", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            assert proc.poll() is None and time.monotonic() < deadline, "alertmanager did not start"
            time.sleep(0.2)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def _api(url: str, path: str, body: Any = None) -> Any:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url + path, data=data, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as r:
        raw = r.read()
    return json.loads(raw) if raw else None


def test_real_alertmanager_groups_a_broker_outage_into_one_page(alertmanager: str) -> None:
    def alert(name: str, severity: str, cluster: str, **labels: str) -> dict[str, Any]:
        return {"labels": {"alertname": name, "severity": severity, "cluster": cluster, **labels}}

    _api(alertmanager, "/api/v2/alerts", [
        # cluster a: brokers 2 then 3 go down — one broker incident whose subject changes, and its symptoms
        alert("KafkaIncidentCritical", "critical", "a", kind="broker", subject="broker 2"),
        alert("KafkaIncidentCritical", "critical", "a", kind="broker", subject="brokers 2, 3"),
        alert("KafkaBrokerDown", "critical", "a", broker="2"),
        alert("KafkaBrokerDown", "critical", "a", broker="3"),
        alert("KafkaOfflinePartitions", "critical", "a", topic="orders"),
        alert("KafkaUnderReplicatedPartitions", "warning", "a", topic="orders"),
        alert("KafkaUnderReplicatedPartitions", "warning", "a", topic="payments"),
        alert("KafkaAtMinIsrPartitions", "warning", "a", topic="payments"),
        # cluster b: a slow follower on one topic, no broker down — its own (warning) incident
        alert("KafkaIncidentWarning", "warning", "b", kind="topic", subject="orders"),
        alert("KafkaUnderReplicatedPartitions", "warning", "b", topic="orders"),
        # cluster c: min.insync.replicas above RF on `legacy` pages once as the risk it is; its partitions' under
        # min ISR symptom is that setting's, while `orders` is under min ISR for a reason of its own
        alert("KafkaTopicMinIsrAboveReplicationFactor", "critical", "c", topic="legacy"),
        alert("KafkaUnderMinIsrPartitions", "critical", "c", topic="legacy"),
        alert("KafkaUnderMinIsrPartitions", "critical", "c", topic="orders"),
    ])
    # The dispatcher files posted alerts into groups asynchronously: wait until all thirteen are in a group.
    deadline = time.monotonic() + 15
    while True:
        groups = _api(alertmanager, "/api/v2/alerts/groups")
        if sum(len(g["alerts"]) for g in groups) >= 13 or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    by_receiver: dict[str, list[dict[str, Any]]] = {}
    for g in groups:
        by_receiver.setdefault(g["receiver"]["name"], []).append(g)

    pages = sorted(by_receiver[PAGER], key=lambda g: g["labels"]["cluster"])
    assert [g["labels"] for g in pages] == [
        {"cluster": "a", "kind": "broker"}, {"alertname": "KafkaTopicMinIsrAboveReplicationFactor", "cluster": "c"}]
    assert sorted(a["labels"]["subject"] for a in pages[0]["alerts"]) == ["broker 2", "brokers 2, 3"]

    channel = {json.dumps(g["labels"], sort_keys=True) for g in by_receiver[CHANNEL]}
    assert json.dumps({"cluster": "b", "kind": "topic", "subject": "orders"}, sort_keys=True) in channel
    assert json.dumps({"alertname": "KafkaBrokerDown", "cluster": "a"}, sort_keys=True) in channel

    suppressed = {(a["labels"]["cluster"], a["labels"]["alertname"], a["labels"].get("topic"))
                  for a in _api(alertmanager, "/api/v2/alerts") if a["status"]["state"] == "suppressed"}
    assert suppressed == {("a", "KafkaUnderReplicatedPartitions", "orders"),
                          ("a", "KafkaUnderReplicatedPartitions", "payments"),
                          ("a", "KafkaAtMinIsrPartitions", "payments"),
                          ("c", "KafkaUnderMinIsrPartitions", "legacy")}
