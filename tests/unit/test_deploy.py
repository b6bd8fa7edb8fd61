"""deploy/docker-compose.yml is validated here, since these machines have no Docker engine."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import yaml

from collectors.config import load_config
from spark_analytics.session import CLASS_ARCHIVE_ENV

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
    # `kafka-storage format` takes the cluster id as a Kafka Uuid (Uuid.fromString): 22 characters of URL-safe
    # base64 for 16 bytes; anything else and the brokers never format their logs
    import base64

    cluster_id = services["kafka-1"]["environment"]["CLUSTER_ID"]
    assert re.fullmatch(r"[A-Za-z0-9_-]{22}", cluster_id), cluster_id
    assert len(base64.urlsafe_b64decode(cluster_id + "==")) == 16


def _scrape_targets(job: dict) -> set[str]:  # type: ignore[type-arg]
    """host:port of every target of a scrape job: static ones and the DNS names it resolves."""
    static = {t for sc in job.get("static_configs", []) for t in sc["targets"]}
    dns = {f"{n}:{sd['port']}" for sd in job.get("dns_sd_configs", []) for n in sd["names"]}
    return static | dns


def _collectors() -> dict[str, dict]:  # type: ignore[type-arg]
    """Compose services running the collector: built from the collector target or using its image."""
    services = compose()["services"]
    image = services["collector"]["image"]
    return {name: svc for name, svc in services.items()
            if svc.get("build", {}).get("target") == "collector" or svc.get("image") == image}


def test_collectors_get_time_to_flush_and_checkpoint_when_stopped() -> None:
    """A stop waits for the poll under way (requests to a hung broker time out after request_timeout_s each), then
    flushes the history and saves the checkpoint: Docker's default 10 s grace would SIGKILL it first."""
    for name, svc in _collectors().items():
        grace = svc.get("stop_grace_period", "10s")
        assert re.fullmatch(r"\d+s", grace) and int(grace[:-1]) >= 60, (name, grace)


def test_prometheus_scrapes_every_collector_in_compose() -> None:
    prom = yaml.safe_load((DEPLOY / "compose" / "prometheus.yml").read_text())
    (job,) = [j for j in prom["scrape_configs"] if j["job_name"] == "kafka-reliability-monitor"]  # KafkaMonitorDown
    targets = _scrape_targets(job)
    collectors = _collectors()
    assert set(collectors) >= {"collector", "collector-zookeeper"}
    for name, svc in collectors.items():
        mount = next(v for v in svc["volumes"] if v.endswith(":/etc/kafka-monitor/config.yaml:ro"))
        port = load_config(DEPLOY / mount.split(":")[0]).exporter.port
        assert f"{name}:{port}" in targets, f"Prometheus does not scrape {name}:{port}"
        # a service that only runs with a profile is found by DNS: no target (rather than a down one) without it
        static = {t for sc in job.get("static_configs", []) for t in sc["targets"]}
        assert (f"{name}:{port}" in static) == (not svc.get("profiles")), name
    assert targets <= {f"{n}:9308" for n in collectors}, "a scrape target is not a compose collector"


def test_prometheus_scrapes_the_collector_with_the_shipped_rules() -> None:
    services = compose()["services"]
    prom = yaml.safe_load((DEPLOY / "compose" / "prometheus.yml").read_text())
    assert "collector:9308" in prom["scrape_configs"][0]["static_configs"][0]["targets"]
    mounts = services["prometheus"]["volumes"]
    assert any(m.startswith("./prometheus/alerts.yml:") for m in mounts)
    assert (DEPLOY / "prometheus" / "alerts.yml").exists()
    assert prom["rule_files"] == ["/etc/prometheus/alerts.yml"]


def dockerfile_stages() -> dict[str, dict]:  # type: ignore[type-arg]
    """Stages of the Dockerfile: name -> {"from": base, "lines": its instructions (continuations joined)}."""
    text = (ROOT / "Dockerfile").read_text().replace("\\\n", " ")
    stages: dict[str, dict] = {}  # type: ignore[type-arg]
    current: dict | None = None  # type: ignore[type-arg]
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        m = re.match(r"FROM\s+(\S+)(?:\s+AS\s+(\S+))?$", line, re.IGNORECASE)
        if m:
            current = {"from": m.group(1), "lines": []}
            stages[m.group(2) or f"stage-{len(stages)}"] = current
        elif current is not None:
            current["lines"].append(line)
    return stages


def stage_lines(stages: dict[str, dict], name: str) -> list[str]:  # type: ignore[type-arg]
    """A stage's instructions with those of the stages it is built FROM, base first."""
    stage = stages[name]
    return (stage_lines(stages, stage["from"]) if stage["from"] in stages else []) + stage["lines"]


def test_dockerfile_images_have_pinned_bases_and_run_as_non_root() -> None:
    stages = dockerfile_stages()
    assert {"collector", "dashboard", "spark"} <= set(stages)
    assert list(stages)[-1] == "collector", "the default target (the last stage) is the collector"
    for name, stage in stages.items():
        if stage["from"] not in stages:
            assert re.fullmatch(r"[\w./-]+:\d+\.\d+\.\d+[\w.-]*(@sha256:[0-9a-f]{64})?", stage["from"]), name
    for name in ("collector", "dashboard", "spark"):
        users = [ln for ln in stage_lines(stages, name) if ln.startswith("USER ")]
        assert users and users[-1] == "USER monitor", f"{name} does not run as the monitor user"
    assert "useradd --create-home --uid 10001 monitor" in " ".join(stage_lines(stages, "collector"))


def test_collector_image_is_lean_with_a_healthz_healthcheck(tmp_path: Path) -> None:
    """Only collectors/ and pyproject's core dependencies (which hold no pyspark/streamlit/plotly/pandas)."""
    import tomllib

    stages = dockerfile_stages()
    lines = stage_lines(stages, "collector")
    copies = [ln for ln in lines if ln.startswith("COPY") and "--from=" not in ln]
    assert copies == ["COPY collectors/ collectors/"], copies
    from_build = [ln for ln in lines if ln.startswith("COPY --from=")]
    assert from_build == ["COPY --from=build /dist/core.txt /tmp/core.txt"], from_build
    installs = [ln for ln in lines if "pip install" in ln]
    assert installs == ["RUN pip install -r /tmp/core.txt && rm /tmp/core.txt"], installs
    # what the build stage writes to core.txt, by running its own script here
    (script,) = re.findall(r'python -c "([^"]+)"', " ".join(stages["build"]["lines"]))
    out = tmp_path / "core.txt"
    subprocess.run([sys.executable, "-c", script.replace("/dist/core.txt", str(out))], cwd=ROOT, check=True)
    core = out.read_text().splitlines()
    assert core == tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    names = {re.split(r"[=<>\[; ]", d, maxsplit=1)[0].lower() for d in core}
    assert "confluent-kafka" in names and not names & {"pyspark", "streamlit", "plotly", "pandas"}
    text = " ".join(lines)
    assert not re.search(r"pyspark|streamlit|plotly|pandas|dashboard|spark_analytics|sandbox", text), text
    (health,) = [ln for ln in lines if ln.startswith("HEALTHCHECK")]
    assert "http://127.0.0.1:9308/healthz" in health and "/metrics" not in health


def test_the_collector_image_writes_its_default_paths_on_the_volume() -> None:
    """A config that leaves state_dir and history.root out gets relative defaults: resolved from the collector's
    working directory they must land on the /data volume, which the monitor user owns (not /app, root's)."""
    from pathlib import PurePosixPath

    from collectors.config.models import MonitorConfig
    from collectors.outputs.settings import HistoryConfig

    stages = dockerfile_stages()
    workdir = [ln.split()[1] for ln in stage_lines(stages, "collector") if ln.startswith("WORKDIR ")][-1]
    assert "mkdir -p /data && chown monitor /data" in " ".join(stage_lines(stages, "collector"))
    for default in (MonitorConfig.model_fields["state_dir"].default, HistoryConfig.model_fields["root"].default):
        path = PurePosixPath(workdir) / PurePosixPath(str(default))
        assert path.is_relative_to("/data"), (workdir, default)


def test_dashboard_and_spark_images_install_the_wheel_with_their_extra() -> None:
    stages = dockerfile_stages()
    dashboard = " ".join(stage_lines(stages, "dashboard"))
    assert '.whl)[dashboard]"' in dashboard and "kafka-monitor-dashboard" in dashboard
    assert "/_stcore/health" in dashboard
    spark = " ".join(stage_lines(stages, "spark"))
    assert '.whl)[report]"' in spark and "openjdk-17-jre-headless" in spark and "kafka-monitor-report" in spark
    # the class archive on the data volume (which persists between the jobs' containers), named as the jobs read it
    assert re.search(rf"\b{CLASS_ARCHIVE_ENV}=/data/\S+\.jsa\b", spark), spark
    build = stages["build"]["lines"]
    assert "RUN pip wheel --no-deps -w /dist ." in " ".join(build)
    for package in ("collectors", "dashboard", "spark_analytics", "sandbox"):
        assert f"COPY {package}/ {package}/" in build, package
    ignored = (ROOT / ".dockerignore").read_text().splitlines()
    assert ".venv" in ignored and ".git" in ignored and "README.md" not in ignored  # the wheel needs README.md


def test_compose_services_use_the_image_targets() -> None:
    services = compose()["services"]
    for name, target in (("collector", "collector"), ("dashboard", "dashboard"), ("weekly-report", "spark")):
        assert services[name]["build"] == {"context": "..", "target": target}, name
    assert services["collector-zookeeper"]["image"] == services["collector"]["image"]
    assert services["dashboard"]["command"][:2] == ["--state-dir", "/data/state"]  # args of kafka-monitor-dashboard


def test_zookeeper_profile_brokers_really_run_on_zookeeper() -> None:
    """apache/kafka images are KRaft-only; the ZooKeeper profile needs an image that still runs a ZooKeeper broker
    (Confluent Platform <= 7.x), configured with no KRaft setting."""
    services = compose()["services"]
    for i in (1, 2, 3):
        svc = services[f"kafka-zk-{i}"]
        m = re.fullmatch(r"confluentinc/cp-kafka:(\d+)\.(\d+)\.(\d+)", svc["image"])
        assert m and int(m.group(1)) <= 7, svc["image"]
        env = svc["environment"]
        assert env["KAFKA_ZOOKEEPER_CONNECT"] == "zookeeper-1:2181,zookeeper-2:2181,zookeeper-3:2181"
        assert not {k for k in env if k in ("KAFKA_PROCESS_ROLES", "KAFKA_NODE_ID", "CLUSTER_ID")}
        assert env["KAFKA_LISTENERS"] == "PLAINTEXT://0.0.0.0:9092"
        assert env["KAFKA_ADVERTISED_LISTENERS"] == f"PLAINTEXT://kafka-zk-{i}:9092"
        assert svc["profiles"] == ["zookeeper"]
        assert {"zookeeper-1", "zookeeper-2", "zookeeper-3"} <= set(svc["depends_on"])


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


def test_the_weekly_report_reads_the_daily_rollups_and_makes_the_missing_ones_first(tmp_path: Path) -> None:
    """The report's service rolls up, in its own session, what the daily job did not (``--update-rollups``), then
    reads the week from the same roll-up directory; both command lines parse with the jobs' own parsers, with the
    extra arguments a ``docker compose run`` adds (no Docker engine here: the jobs themselves are tested
    elsewhere, the update in tests/unit/test_report_update_rollups.py)."""
    from spark_analytics import report_args, rollup_job

    services = compose()["services"]
    daily, weekly = services["daily-rollup"], services["weekly-report"]
    for svc in (daily, weekly):
        assert svc["build"] == {"context": "..", "target": "spark"} and svc["profiles"] == ["report"]
        assert svc["volumes"] == ["monitor-data:/data"] and svc["image"] == services["weekly-report"]["image"]
        assert svc["command"] == []
    assert daily["entrypoint"][0] == "kafka-monitor-rollup"
    store = rollup_job.parser().parse_args(daily["entrypoint"][1:]).rollups
    assert weekly["entrypoint"][0] == "kafka-monitor-report"
    (tmp_path / "history").mkdir()
    argv = [tmp_path / "history" if a == "/data/history" else a for a in weekly["entrypoint"][1:]]
    report = report_args.parse_args([str(a) for a in argv] + ["--week", "2026-W47", "--cluster", "a b"])
    assert report.update_rollups and report.opts.rollups == store == "/data/rollups"  # created by the update
    assert (report.history, str(report.out), report.period.label, report.clusters) == (
        str(tmp_path / "history"), "/data/reports", "2026-W47", ["a b"])
    scripts = (ROOT / "pyproject.toml").read_text()
    assert 'kafka-monitor-rollup = "spark_analytics.rollup_job:main"' in scripts
    assert 'kafka-monitor-report = "spark_analytics.weekly_report:main"' in scripts
