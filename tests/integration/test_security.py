"""Read-only against clusters, secrets kept out of every output, servers on loopback."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from collectors.outputs.exporter import MetricsEndpoint, MetricsServer
from sandbox.runner import Sandbox
from tests.support.monitor import make_poller, poll
from tests.support.sandbox import running_sandbox, scenario

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]
READ_APIS = {"ApiVersions", "Metadata", "DescribeCluster", "DescribeConfigs", "ListGroups", "DescribeGroups",
             "FindCoordinator", "OffsetFetch", "ListOffsets", "ListTransactions", "DescribeTransactions",
             "DescribeProducers", "DescribeQuorum"}


def locked_config(sb: Sandbox, extra: str = "") -> str:
    """A cluster the sandbox refuses (it speaks no SASL), with both passwords from the environment."""
    return ("request_timeout_s: 2\n" + extra + "clusters:\n  - name: locked\n"
            f"    bootstrap_servers: '{sb.bootstrap_servers}'\n"
            "    kafka:\n      security.protocol: SASL_PLAINTEXT\n      sasl.mechanism: PLAIN\n"
            "      sasl.username: monitor\n      sasl.password: ${KAFKA_PASSWORD}\n"
            "    zookeeper:\n      connect: 127.0.0.1:1\n      auth_scheme: digest\n      username: kmon\n"
            "      password: ${ZK_PASSWORD}\n")


def test_collector_sends_only_read_requests() -> None:
    with running_sandbox(scenario(), speed=10.0) as sb:
        sb.advance_to(sb.cluster.start + 10)
        sb.reset_request_counts()
        p = make_poller(sb)
        try:
            for _ in range(3):
                poll(p, sb)
        finally:
            p.close()
        sent = {api for counts in sb.request_counts().values() for api in counts}
    assert sent, "the poll sent nothing?"
    assert sent <= READ_APIS, f"write or unexpected APIs sent: {sorted(sent - READ_APIS)}"


def test_secrets_never_reach_json_logs_or_metrics(tmp_path: Path) -> None:
    secret = "s3cr3t-Pa55w0rd-do-not-leak"
    zk_secret = "zk-s3cr3t-also-private"
    with running_sandbox(scenario(), speed=10.0) as sb:
        cfg = tmp_path / "c.yaml"
        cfg.write_text(locked_config(sb))
        env = {"KAFKA_PASSWORD": secret, "ZK_PASSWORD": zk_secret, "PATH": "/usr/bin:/bin"}
        r = subprocess.run([sys.executable, "-m", "collectors", "--config", str(cfg), "--once", "--json",
                            "--log-level", "DEBUG"], cwd=ROOT, capture_output=True, text=True, timeout=90, env=env)
        shown = subprocess.run([sys.executable, "-m", "collectors.config", str(cfg)], cwd=ROOT,
                               capture_output=True, text=True, timeout=60, env=env)
    assert r.returncode == 1  # the sandbox speaks no SASL: unreachable, reported, not crashed
    doc = json.loads(r.stdout)
    assert doc["clusters"][0]["reachable"] is False
    for text in (r.stdout, r.stderr, shown.stdout, shown.stderr):
        assert secret not in text and zk_secret not in text
    assert "***" in shown.stdout
    ep = MetricsEndpoint()
    from collectors.model.records import ClusterSnapshot

    ep.update([ClusterSnapshot(cluster="locked", time=0.0, reachable=False, errors=doc["clusters"][0]["errors"])])
    assert secret.encode() not in ep.render()


def test_metrics_server_binds_loopback_by_default() -> None:
    ep = MetricsEndpoint()
    srv = MetricsServer(ep, port=0).start()
    try:
        assert srv.httpd.server_address[0] == "127.0.0.1"
        with urllib.request.urlopen(f"http://127.0.0.1:{srv.port}/healthz", timeout=5) as resp:
            assert resp.status == 200
    finally:
        srv.close()
    from collectors.config import MonitorConfig

    cfg = MonitorConfig.model_validate({"clusters": [{"name": "x", "bootstrap_servers": "h:1"}]})
    assert cfg.exporter.host == "127.0.0.1"


def test_json_api_never_shows_the_configured_secrets(tmp_path: Path) -> None:
    """The collector's own loop, its exporter on a free port, a cluster that refuses it (the sandbox speaks no
    SASL): every API answer, errors included, is grepped for the configured passwords."""
    import signal
    import socket
    import time
    import urllib.error

    secret, zk_secret = "api-s3cr3t-Pa55w0rd", "api-zk-s3cr3t"
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with running_sandbox(scenario(), speed=10.0) as sb:
        cfg = tmp_path / "c.yaml"
        cfg.write_text(locked_config(sb, f"poll_interval_s: 2\nstate_dir: {tmp_path / 'state'}\n"
                                         f"history: {{enabled: false}}\nexporter: {{port: {port}}}\n"))
        env = {"KAFKA_PASSWORD": secret, "ZK_PASSWORD": zk_secret, "PATH": "/usr/bin:/bin"}
        proc = subprocess.Popen([sys.executable, "-m", "collectors", "--config", str(cfg), "--log-level", "DEBUG"],
                                cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        base = f"http://127.0.0.1:{port}/api/v1"
        paths = ["", "/clusters", "/clusters/locked", "/clusters/locked/groups", "/clusters/locked/incidents",
                 "/clusters/locked/alerts", "/clusters/locked/risks", "/incidents", "/risks", "/clusters/nope"]
        bodies: dict[str, bytes] = {}
        try:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                try:
                    with urllib.request.urlopen(base + "/clusters", timeout=5) as resp:
                        if json.loads(resp.read())["clusters"]:
                            break
                except (urllib.error.URLError, ConnectionError):
                    pass
                time.sleep(0.5)
            for p in paths:
                try:
                    with urllib.request.urlopen(base + p, timeout=5) as resp:
                        bodies[p] = resp.read()
                except urllib.error.HTTPError as e:
                    bodies[p] = e.read()
        finally:
            proc.send_signal(signal.SIGTERM)
            out, _ = proc.communicate(timeout=30)
    cluster = json.loads(bodies["/clusters/locked"])
    assert cluster["reachable"] is False and cluster["errors"]  # the refusal is there, in words
    assert json.loads(bodies["/clusters/nope"])["status"] == 404
    for p, body in bodies.items():
        assert secret.encode() not in body and zk_secret.encode() not in body, p
    assert secret.encode() not in out and zk_secret.encode() not in out
