"""A real Prometheus scrapes the exporter and evaluates deploy/prometheus/alerts.yml against a sandbox incident.

The exporter runs in-process over a sandbox (speed x10) polled every ~0.5 s of real time; Prometheus
(Debian's package, started here on a free loopback port with its own TSDB in tmp) scrapes it every 2 s and
evaluates the real rule file every second. A broker crash takes the RF-1 topic "single" offline, so
KafkaOfflinePartitions (for: 30s) must go pending, then fire with the right labels, stay firing while the
topic's Metadata answers an error (the collector keeps its alert over that stale topic, so the twin must too),
then resolve once the broker is back. Every wait is bounded; Prometheus is stopped by its PID and its log stays in the
test's tmp directory (and is printed) when something fails.
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from collectors.alerting.catalogue import stale_kinds
from collectors.model.records import ClusterSnapshot
from collectors.outputs.exporter import MetricsEndpoint, MetricsServer
from sandbox.runner import Sandbox
from tests.support.monitor import make_poller
from tests.support.processes import stop
from tests.support.sandbox import running_sandbox, scenario

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
ALERTS = ROOT / "deploy" / "prometheus" / "alerts.yml"
JOB = "kafka-reliability-monitor"
ALERT = "KafkaOfflinePartitions"  # for: 30s, the shortest `for:` of an alert a broker crash causes


@dataclass
class Exporter:
    sb: Sandbox
    server: MetricsServer
    polls: int = 0
    errors: list[str] = field(default_factory=list)
    last: ClusterSnapshot | None = None


@dataclass
class Prometheus:
    url: str
    proc: subprocess.Popen[bytes]
    log: Path

    def log_tail(self, lines: int = 40) -> str:
        text = self.log.read_text(errors="replace") if self.log.exists() else ""
        return "\n".join(text.splitlines()[-lines:])

    def api(self, path: str, **params: str) -> Any:
        url = f"{self.url}/api/v1/{path}"
        if params:
            url += "?" + urllib.parse.urlencode(params)
        with urllib.request.urlopen(url, timeout=5) as r:
            body = json.load(r)
        assert body["status"] == "success", body
        return body["data"]


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait(what: str, predicate: Callable[[], Any], timeout: float, prom: Prometheus | None = None,
          every: float = 0.5) -> Any:
    deadline = time.monotonic() + timeout
    last_error: BaseException | None = None
    while time.monotonic() < deadline:
        try:
            result = predicate()
            if result:
                return result
        except (OSError, ValueError, KeyError) as e:  # Prometheus still starting, connection refused, ...
            last_error = e
        time.sleep(every)
    log = f"\n--- prometheus log ({prom.log}) ---\n{prom.log_tail()}" if prom else ""
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what} (last error: {last_error}){log}")


@pytest.fixture
def exporter() -> Iterator[Exporter]:
    with running_sandbox(scenario(), speed=10.0) as sb:
        poller = make_poller(sb)
        endpoint = MetricsEndpoint(stale_kinds=stale_kinds())  # as the runtime builds it
        server = MetricsServer(endpoint, "127.0.0.1", 0).start()
        ex = Exporter(sb, server)
        stop = threading.Event()

        def poll_loop() -> None:
            while not stop.is_set():
                try:
                    ex.last = poller.poll(sb.clock.now()).snapshot
                    endpoint.update([ex.last])
                    ex.polls += 1
                except Exception as e:  # reported by the test, never silently swallowed
                    ex.errors.append(repr(e))
                stop.wait(0.5)

        thread = threading.Thread(target=poll_loop, name="test-poll-loop", daemon=True)
        thread.start()
        try:
            yield ex
        finally:
            stop.set()
            thread.join(timeout=15)
            server.close()
            poller.close()


@pytest.fixture
def prometheus(exporter: Exporter, tmp_path: Path) -> Iterator[Prometheus]:
    exe = shutil.which("prometheus")
    assert exe, "prometheus missing: ./run.sh setup installs Debian's prometheus package"
    config = {
        # one scrape that fails (the exporter answering late on a loaded machine) marks every series stale and
        # drops the alert: 2 s to answer, not 1
        "global": {"scrape_interval": "2s", "scrape_timeout": "2s", "evaluation_interval": "1s"},
        "rule_files": [str(ALERTS)],
        "scrape_configs": [{"job_name": JOB, "static_configs": [{"targets": [f"127.0.0.1:{exporter.server.port}"]}]}],
    }
    config_file = tmp_path / "prometheus.yml"
    config_file.write_text(yaml.safe_dump(config))
    log = tmp_path / "prometheus.log"
    port = _free_port()
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [exe, f"--config.file={config_file}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
             "--storage.tsdb.retention.time=1h", f"--web.listen-address=127.0.0.1:{port}", "--log.level=info"],
            stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    prom = Prometheus(f"http://127.0.0.1:{port}", proc, log)
    try:
        def ready() -> bool:
            assert proc.poll() is None, f"prometheus exited with {proc.returncode}:\n{prom.log_tail()}"
            with urllib.request.urlopen(f"{prom.url}/-/ready", timeout=2) as r:
                return r.status == 200

        _wait("Prometheus to be ready", ready, 30, prom)
        yield prom
    finally:
        stop(proc)


def _alerts(prom: Prometheus, **labels: str) -> list[dict[str, Any]]:
    return [a for a in prom.api("alerts")["alerts"]
            if a["labels"].get("alertname") == ALERT and all(a["labels"].get(k) == v for k, v in labels.items())]


def test_prometheus_fires_and_resolves_an_alert_from_alerts_yml(exporter: Exporter, prometheus: Prometheus) -> None:
    prom, sb = prometheus, exporter.sb

    # 1. The real rule file is loaded, and the exporter's series reach the TSDB.
    groups = prom.api("rules")["groups"]
    loaded = {r["name"] for g in groups for r in g["rules"]}
    expected = {r.get("alert") or r["record"] for g in yaml.safe_load(ALERTS.read_text())["groups"] for r in g["rules"]}
    assert loaded == expected
    # The default granularity (exceptions): roll-ups for every topic, per-partition series only where something
    # is not healthy -- here "single" (RF 1: at min ISR by design), never a healthy "orders" partition.
    isr = _wait("kafka_topic_partition_in_sync_replica samples",
                lambda: prom.api("query", query='kafka_topic_partition_in_sync_replica{cluster="sandbox"}')["result"],
                30, prom)
    assert "single" in {s["metric"]["topic"] for s in isr} and "orders" not in {s["metric"]["topic"] for s in isr}
    assert all(s["metric"]["job"] == JOB for s in isr)
    topics = prom.api("query", query='kafka_topic_partitions{cluster="sandbox"}')["result"]
    assert {s["metric"]["topic"] for s in topics} >= {"orders", "single"}
    # Prometheus asks for gzip; the body (built once per poll) and the per-scrape lines are two gzip members
    # of one stream: both reached the TSDB.
    both = f'kafka_monitor_build_info{{job="{JOB}"}} or process_cpu_seconds_total{{job="{JOB}"}}'
    tail = prom.api("query", query=both)
    assert {s["metric"]["__name__"] for s in tail["result"]} == {"kafka_monitor_build_info",
                                                                 "process_cpu_seconds_total"}
    assert exporter.server.endpoint.renders <= exporter.polls + 1  # scrapes (one in 2 s) render nothing
    up = prom.api("query", query=f'up{{job="{JOB}"}}')["result"]
    assert [s["value"][1] for s in up] == ["1"]
    assert not _alerts(prom), "offline partitions on a healthy sandbox"

    # 2. Crash broker 2: single-1 (RF 1) goes offline once its session expires (18 s simulated, 1.8 s real).
    sb.call(lambda c: c.crash_broker(2))
    crashed = time.monotonic()
    pending = _wait(f"{ALERT} pending", lambda: _alerts(prom, cluster="sandbox", topic="single"), 30, prom)
    assert pending[0]["state"] == "pending", pending  # held back by `for: 30s`
    firing = _wait(f"{ALERT} firing",
                   lambda: [a for a in _alerts(prom, cluster="sandbox", topic="single") if a["state"] == "firing"],
                   60, prom)
    fired = time.monotonic()
    alert = firing[0]
    assert alert["labels"] == {"alertname": ALERT, "cluster": "sandbox", "topic": "single", "severity": "critical"}
    assert alert["annotations"]["summary"] == "1 offline partition of single on sandbox"
    assert "First step:" in alert["annotations"]["description"]
    assert fired - crashed >= 30, "fired before its `for:` elapsed"

    # 3. The topic's Metadata answers an error: the exporter drops its series, the collector keeps its alert
    #    (nothing says the partition is back), and so does the twin, with its value, for as long as it lasts.
    sb.call(lambda c: c.topic_errors.update(single=3))
    _wait("topic single stale in Prometheus", lambda: prom.api(
        "query", query='kafka_monitor_stale_subject{cluster="sandbox",section="partitions",topic="single"}')["result"]
        and not prom.api("query", query='kafka_topic_offline_partitions{cluster="sandbox",topic="single"}')["result"],
        30, prom)
    held = time.monotonic()
    while time.monotonic() - held < 5:  # five evaluations of the rule over the stale section
        last = exporter.last
        assert last is not None and last.stale_subjects.get("partitions") == ["single"], last
        assert "single-1" in {a.subject for a in last.alerts if a.rule == "offline_partition"}, last.alerts
        now = [a for a in _alerts(prom, cluster="sandbox", topic="single") if a["state"] == "firing"]
        assert [(a["activeAt"], a["annotations"]["summary"]) for a in now] == [
            (alert["activeAt"], "1 offline partition of single on sandbox")], now
        time.sleep(1)
    sb.call(lambda c: c.topic_errors.clear())

    # 4. Restart it: the partition gets its leader back and the alert resolves (leaves the active list).
    sb.call(lambda c: c.restart_broker(2))
    _wait(f"{ALERT} to resolve", lambda: not _alerts(prom, cluster="sandbox"), 30, prom)

    # 5. Every rule evaluated cleanly against real data (no many-to-many matches, no bad templates).
    broken = {r["name"]: r.get("lastError") for g in prom.api("rules")["groups"] for r in g["rules"]
              if r["health"] != "ok"}
    assert not broken, broken
    assert not exporter.errors, exporter.errors[:3]
    assert exporter.polls > 10
