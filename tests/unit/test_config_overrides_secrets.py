"""KMON__ overrides and problem messages around secrets, and problems found across sections placed at their field.

* No message quotes a secret: not an override that tries to descend into one, not a bad value that is text
  naming a secret setting, not what a YAML error quotes from inside a secret value, not a top level that is
  one line of text (a secret file passed by mistake).
* An override under a secret-named key, or of a librdkafka setting, is taken as written: ``007`` is not 7,
  ``on`` is not true. Typed fields still read their text.
* A policy's lag_min_points larger than the thresholds' window names the policy's field and its line.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from collectors.config import MonitorConfig, confluent_settings, kazoo_settings, load_config, parse_config
from collectors.config.problems import ConfigError

ROOT = Path(__file__).resolve().parents[2]
ZK_SECRET = "Zk-Hunter2-secret"
SECRET = "Hunter2xyz"

ZK_CONFIG = """\
clusters:
  - name: prod
    bootstrap_servers: k:9092
    zookeeper:
      connect: zk:2181
      auth_scheme: digest
      username: mon
      password: ${ZK_PASSWORD}
"""

SASL_CONFIG = """\
clusters:
  - name: prod
    bootstrap_servers: k:9092
    kafka:
      security.protocol: SASL_SSL
      sasl.mechanism: PLAIN
      sasl.username: mon
      sasl.password: placeholder
"""


def problems(text: str, env: dict[str, str] | None = None) -> list[str]:
    with pytest.raises(ConfigError) as info:
        parse_config(text, "cfg.yaml", env or {})
    return info.value.problems


# --------------------------------------------------------------------------- no message quotes a secret


@pytest.mark.parametrize("var", [
    "KMON__CLUSTERS__0__ZOOKEEPER__PASSWORD__VALUE",
    "KMON__CLUSTERS__0__ZOOKEEPER__PASSWORD__0",
    "KMON__CLUSTERS__0__ZOOKEEPER__PASSWORD__VALUE__DEEPER",
])
def test_an_override_through_a_secret_does_not_quote_it(var: str) -> None:
    (p,) = problems(ZK_CONFIG, {"ZK_PASSWORD": ZK_SECRET, var: "x"})
    assert p.startswith(f"cfg.yaml: environment override {var}: clusters[0].zookeeper.password is text"), p
    assert "not a mapping or list" in p
    assert ZK_SECRET not in p and "Hunter2" not in p, p


def test_an_override_through_other_text_still_quotes_it() -> None:
    (p,) = problems(ZK_CONFIG, {"ZK_PASSWORD": ZK_SECRET, "KMON__CLUSTERS__0__ZOOKEEPER__USERNAME__X": "x"})
    assert 'clusters[0].zookeeper.username is text "mon", not a mapping or list' in p, p


def test_cli_does_not_print_a_secret_an_override_went_through(tmp_path: Path) -> None:
    config = tmp_path / "cfgzk.yaml"
    config.write_text(ZK_CONFIG, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith("KMON__")}
    env.update({"ZK_PASSWORD": ZK_SECRET, "KMON__CLUSTERS__0__ZOOKEEPER__PASSWORD__VALUE": "x"})
    done = subprocess.run([sys.executable, "-m", "collectors.config", str(config)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 1, done.stderr
    assert "clusters[0].zookeeper.password" in done.stderr, done.stderr
    assert ZK_SECRET not in done.stdout + done.stderr


@pytest.mark.parametrize(("text", "field"), [
    # one space short of a mapping: the section is one string that holds the password
    ("clusters:\n  - name: a\n    bootstrap_servers: h:1\n    zookeeper:\n      password:Hunter2xyz\n",
     "cfg.yaml:5: clusters[0].zookeeper: "),
    ("clusters:\n  - name: a\n    bootstrap_servers: h:1\n    kafka:\n      sasl.password:Hunter2xyz\n",
     "cfg.yaml:5: clusters[0].kafka: "),
])
def test_a_bad_value_naming_a_secret_setting_is_not_quoted(text: str, field: str) -> None:
    (p,) = problems(text)
    assert p.startswith(field) and "got text" in p, p
    assert SECRET not in p and "Hunter2" not in p, p


@pytest.mark.parametrize(("value", "line"), [
    ("sasl.password: *Hunter2xyz", 8),  # an undefined alias: PyYAML quotes its name
    ("sasl.password:\n        *Hunter2xyz", 9),
    ("sasl.password: !Hunter2xyz x", 8),  # an unknown tag: PyYAML quotes it
    ('sasl.password: "Hunter2xyz\\q"', 8),  # an unknown escape: PyYAML quotes the character
    ("sasl.jaas.config: !Hunter2xyz x", 8),
])
def test_a_yaml_error_in_a_secret_value_quotes_none_of_it(value: str, line: int) -> None:
    text = SASL_CONFIG.replace("sasl.password: placeholder", value)
    (p,) = problems(text)
    assert p.startswith(f"cfg.yaml:{line}: not valid YAML: "), p
    assert "Hunter2" not in p and "'q'" not in p, p
    assert "not quoted" in p, p


def test_a_yaml_error_in_a_zookeeper_password_quotes_none_of_it() -> None:
    (p,) = problems(ZK_CONFIG.replace("${ZK_PASSWORD}", "*Hunter2xyz"))
    assert p.startswith("cfg.yaml:8: not valid YAML: found undefined alias") and "Hunter2" not in p, p


@pytest.mark.parametrize(("text", "expected"), [
    ("clusters:\n  - name: *nosuch\n", "found undefined alias 'nosuch'"),
    ("x: !include other.yaml\n", "the tag '!include'"),
    ("a: 1\na: 2\n", "duplicate key 'a'"),
    (SASL_CONFIG.replace("sasl.username: mon", "sasl.username: *mon"), "found undefined alias 'mon'"),
    ("clusters: [a, b", "expected ',' or ']', but got '<stream end>'"),
])
def test_a_yaml_error_elsewhere_still_quotes_what_it_found(text: str, expected: str) -> None:
    (p,) = problems(text)
    assert expected in p, p


def test_a_top_level_of_text_is_not_quoted() -> None:
    """A secret file given instead of the configuration must not be printed back."""
    (p,) = problems("Hunter2xyz\n")
    assert "top level must be a mapping" in p and "got text" in p and "Hunter2" not in p, p


# --------------------------------------------------------------------------- override values as written


def load(text: str, env: dict[str, str]) -> MonitorConfig:
    return parse_config(text, "cfg.yaml", env)


@pytest.mark.parametrize("value", ["007", "on", "yes", "off", "true", "1e3", "0.50", "+5", "null", "~", " 12 ",
                                   "12:34", "0777"])
def test_a_kafka_secret_override_is_taken_as_written(value: str) -> None:
    config = load(SASL_CONFIG, {"KMON__CLUSTERS__0__KAFKA__SASL_PASSWORD": value})
    c = config.clusters[0]
    assert c.kafka["sasl.password"] == value
    assert confluent_settings(c, 10)["sasl.password"] == value


@pytest.mark.parametrize("value", ["007", "on", "1e3", "null", "False"])
def test_a_zookeeper_password_override_is_taken_as_written(value: str) -> None:
    config = load(ZK_CONFIG, {"ZK_PASSWORD": "x", "KMON__CLUSTERS__0__ZOOKEEPER__PASSWORD": value})
    zk = config.clusters[0].zookeeper
    assert zk is not None and zk.password is not None and zk.password.get_secret_value() == value
    assert kazoo_settings(zk)["auth_data"] == [("digest", f"mon:{value}")]


def test_quotes_around_a_secret_are_still_removed() -> None:
    config = load(SASL_CONFIG, {"KMON__CLUSTERS__0__KAFKA__SASL_PASSWORD": "'007'"})
    assert config.clusters[0].kafka["sasl.password"] == "007"


@pytest.mark.parametrize(("var", "value"), [
    ("KMON__CLUSTERS__0__KAFKA__CLIENT_ID", "007"),
    ("KMON__CLUSTERS__0__KAFKA__SASL_USERNAME", "on"),
    ("KMON__CLUSTERS__0__KAFKA__SASL_USERNAME", "0777"),
    ("KMON__CLUSTERS__0__KAFKA__SOCKET_TIMEOUT_MS", "5000"),
    ("KMON__CLUSTERS__0__KAFKA__ENABLE_SSL_CERTIFICATE_VERIFICATION", "false"),
])
def test_a_librdkafka_setting_override_is_text_as_written(var: str, value: str) -> None:
    c = load(SASL_CONFIG, {var: value}).clusters[0]
    key = var.removeprefix("KMON__CLUSTERS__0__KAFKA__").lower().replace("_", ".")
    assert c.kafka[key] == value


def test_librdkafka_accepts_settings_given_as_text() -> None:
    admin = pytest.importorskip("confluent_kafka.admin")
    env = {"KMON__CLUSTERS__0__KAFKA__SOCKET_TIMEOUT_MS": "5000", "KMON__CLUSTERS__0__KAFKA__SASL_PASSWORD": "007",
           "KMON__CLUSTERS__0__KAFKA__ENABLE_SSL_CERTIFICATE_VERIFICATION": "true",
           "KMON__CLUSTERS__0__KAFKA__SSL_ENDPOINT_IDENTIFICATION_ALGORITHM": "none",
           "KMON__CLUSTERS__0__BOOTSTRAP_SERVERS": "127.0.0.1:1"}
    c = load(SASL_CONFIG, env).clusters[0]
    admin.AdminClient(confluent_settings(c, 5))  # raises KafkaException on an invalid value


def test_typed_fields_still_read_override_text() -> None:
    text = SASL_CONFIG + "    kraft: false\n"
    env = {
        "KMON__POLL_INTERVAL_S": "30",
        "KMON__REQUEST_TIMEOUT_S": "0.50e1",
        "KMON__EXPORTER__PORT": "09400",
        "KMON__EXPORTER__ENABLED": "off",
        "KMON__EXPORTER__PARTITION_SERIES": "yes",
        "KMON__HISTORY__ENABLED": "True",
        "KMON__THRESHOLDS__LAG_WINDOW_POINTS": "1e3",
        "KMON__THRESHOLDS__LAG_MIN_POINTS": "+5",
        "KMON__THRESHOLDS__PREFERRED_LEADER_IMBALANCE_RATIO": ".5",
        "KMON__CLUSTERS__0__KRAFT": "on",
        "KMON__CLUSTERS__0__NAME": "007",
    }
    config = load(text, env)
    assert config.poll_interval_s == 30 and config.request_timeout_s == 5
    assert config.exporter.port == 9400 and config.exporter.enabled is False
    assert config.exporter.partition_series is True and config.exporter.granularity == "partition"
    assert config.history.enabled is True
    assert config.thresholds.lag_window_points == 1000 and config.thresholds.lag_min_points == 5
    assert config.thresholds.preferred_leader_imbalance_ratio == 0.5
    assert config.clusters[0].kraft is True
    assert config.clusters[0].name == "007"  # a text field keeps the zeros (it refused the number 7 before)


def test_an_unreadable_typed_override_names_the_variable() -> None:
    (p,) = problems(SASL_CONFIG, {"KMON__EXPORTER__PORT": "on"})
    assert p.startswith("cfg.yaml: exporter.port: ") and "KMON__EXPORTER__PORT" in p, p


# --------------------------------------------------------------------------- problems across sections


POLICY_CONFIG = """\
clusters:
  - name: a
    bootstrap_servers: h:9092
poll_interval_s: 30
thresholds:
  lag_window_points: 10
  lag_seconds_slo: 600
policies:
  - group: payments
    team: pay
  - group: reports
    team: bi
    lag_min_points: 50
  - group: batch
    lag_min_points: 11
"""


def test_a_policy_exceeding_the_window_names_its_field_and_line(tmp_path: Path) -> None:
    path = tmp_path / "a.yaml"
    path.write_text(POLICY_CONFIG, encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_config(path, environ={})
    assert info.value.problems == [
        f"{path}:13: policies[1].lag_min_points: must not exceed thresholds.lag_window_points (10): more points "
        "than are kept never arrive",
        f"{path}:15: policies[2].lag_min_points: must not exceed thresholds.lag_window_points (10): more points "
        "than are kept never arrive",
    ]


def test_a_policy_exceeding_an_overridden_window() -> None:
    (p,) = problems(POLICY_CONFIG.replace("lag_min_points: 11", "lag_min_points: 5"),
                    {"KMON__THRESHOLDS__LAG_WINDOW_POINTS": "50", "KMON__POLICIES__2__LAG_MIN_POINTS": "60"})
    assert p.startswith("cfg.yaml: policies[2].lag_min_points: must not exceed thresholds.lag_window_points (50)")
    assert p.endswith("(from environment variable KMON__POLICIES__2__LAG_MIN_POINTS)"), p
