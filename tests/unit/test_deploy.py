"""deploy/docker-compose.yml is validated here, since these machines have no Docker engine."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from collectors.config import load_config

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"


def compose() -> dict:  # type: ignore[type-arg]
    return yaml.safe_load((DEPLOY / "docker-compose.yml").read_text())


def test_every_service_has_a_pinned_image_or_a_build() -> None:
    for name, svc in compose()["services"].items():
        assert "image" in svc or "build" in svc, name
        if "build" in svc:
            assert (DEPLOY / svc["build"]["context"] / "Dockerfile").exists()
            continue
        image = svc["image"]
        assert re.match(r"^[\w./-]+:[\w.-]+$", image), f"{name}: {image}"
        assert not image.endswith(":latest") or image.startswith("kafka-reliability-monitor"), name


def test_published_ports_bind_loopback_only() -> None:
    for name, svc in compose()["services"].items():
        for port in svc.get("ports", []):
            assert str(port).startswith("127.0.0.1:"), f"{name} publishes {port} beyond loopback"


def test_collector_configs_load_and_point_at_compose_brokers() -> None:
    c = compose()
    services = c["services"]
    for collector in ("collector", "collector-zookeeper"):
        svc = services[collector]
        mount = next(v for v in svc["volumes"] if v.endswith(":/etc/kafka-monitor/config.yaml:ro"))
        cfg = load_config(DEPLOY / mount.split(":")[0])
        for cluster in cfg.clusters:
            for server in cluster.bootstrap_servers:
                host, port = server.rsplit(":", 1)
                assert host in services, f"{collector}: bootstrap host {host} is not a compose service"
                listeners = services[host]["environment"]["KAFKA_LISTENERS"]
                assert f":{port}" in listeners, f"{host} does not listen on {port}"
                assert host in services[collector]["depends_on"] or collector == "collector"
            if cluster.zookeeper is not None:
                for hp in cluster.zookeeper.connect.split(","):
                    assert hp.split(":")[0] in services
        published = [p for p in svc["ports"] if p.endswith(f":{cfg.exporter.port}")]
        assert published, f"{collector} does not publish its exporter port {cfg.exporter.port}"
        assert cfg.exporter.host == "0.0.0.0"  # inside the container; published on 127.0.0.1 above


def test_kraft_quorum_and_zookeeper_ensemble_are_consistent() -> None:
    services = compose()["services"]
    voters = services["kafka-1"]["environment"]["KAFKA_CONTROLLER_QUORUM_VOTERS"]
    for i in (1, 2, 3):
        env = services[f"kafka-{i}"]["environment"]
        assert env["KAFKA_NODE_ID"] == i and f"{i}@kafka-{i}:9093" in voters
        assert env["KAFKA_ADVERTISED_LISTENERS"] == f"PLAINTEXT://kafka-{i}:9092"
        zk = services[f"zookeeper-{i}"]
        assert zk["environment"]["ZOO_MY_ID"] == i and "srvr" in zk["environment"]["ZOO_4LW_COMMANDS_WHITELIST"]
        assert services[f"kafka-zk-{i}"]["environment"]["KAFKA_BROKER_ID"] == i


def test_prometheus_scrapes_the_collector_with_the_shipped_rules() -> None:
    services = compose()["services"]
    prom = yaml.safe_load((DEPLOY / "compose" / "prometheus.yml").read_text())
    targets = prom["scrape_configs"][0]["static_configs"][0]["targets"]
    assert targets == ["collector:9308"]
    mounts = services["prometheus"]["volumes"]
    assert any(m.startswith("./prometheus/alerts.yml:") for m in mounts)
    assert (DEPLOY / "prometheus" / "alerts.yml").exists()
    assert prom["rule_files"] == ["/etc/prometheus/alerts.yml"]


def test_dockerfile_runs_as_non_root_with_a_metrics_healthcheck() -> None:
    text = (ROOT / "Dockerfile").read_text()
    assert "USER monitor" in text and "HEALTHCHECK" in text and "/metrics" in text
    assert "AS spark" in text and "openjdk-17-jre-headless" in text


def test_prometheus_sends_alerts_to_the_alertmanager_with_the_shipped_config() -> None:
    services = compose()["services"]
    prom = yaml.safe_load((DEPLOY / "compose" / "prometheus.yml").read_text())
    targets = [t for am in prom["alerting"]["alertmanagers"] for sc in am["static_configs"] for t in sc["targets"]]
    assert targets == ["alertmanager:9093"]
    am = services["alertmanager"]
    assert "./alertmanager/alertmanager.yml:/etc/alertmanager/alertmanager.yml:ro" in am["volumes"]
    assert (DEPLOY / "alertmanager" / "alertmanager.yml").exists()
    assert "alertmanager" in services["prometheus"]["depends_on"]
    assert am["image"].startswith("prom/alertmanager:v")
