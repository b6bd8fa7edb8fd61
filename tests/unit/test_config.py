"""collectors.config: the example file, error messages for every kind of bad input, ${VAR} substitution,
KMON__ overrides, secret hygiene, client-setting translators, and a fuzz test that nothing but ConfigError escapes.
"""

from __future__ import annotations

import json
import textwrap
import unicodedata
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from collectors.config import (
    CLIENT_ID,
    REDACTED,
    ClusterConfig,
    ConfigError,
    KafkaSettings,
    MonitorConfig,
    ZooKeeperConfig,
    confluent_settings,
    is_secret_key,
    kafka_python_settings,
    kafka_python_unsupported,
    kazoo_settings,
    load_config,
    main,
    parse_config,
    redacted,
)

EXAMPLE = Path(__file__).resolve().parents[2] / "collectors" / "config.example.yaml"
SECRET = "Pa55-w0rd-never-logged"

MINIMAL = """
clusters:
  - name: local
    bootstrap_servers: 127.0.0.1:9092
"""


def write(tmp_path: Path, text: str, name: str = "monitor.yaml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def load_text(tmp_path: Path, text: str, environ: dict[str, str] | None = None) -> MonitorConfig:
    return load_config(write(tmp_path, text), environ={} if environ is None else environ)


def config_error(tmp_path: Path, text: str, environ: dict[str, str] | None = None) -> str:
    with pytest.raises(ConfigError) as info:
        load_text(tmp_path, text, environ)
    message = str(info.value)
    assert "Traceback" not in message
    assert message.strip(), "a ConfigError must say something"
    return message


def cluster(**overrides: Any) -> ClusterConfig:
    data: dict[str, Any] = {"name": "c", "bootstrap_servers": "k1:9092"}
    data.update(overrides)
    return ClusterConfig.model_validate(data)


# --------------------------------------------------------------------------- the example file


def test_example_loads_with_password_from_environment() -> None:
    config = load_config(EXAMPLE, environ={"KAFKA_PASSWORD": SECRET})
    sandbox, prod = config.clusters
    assert sandbox.name == "sandbox"
    assert sandbox.bootstrap_servers == ["127.0.0.1:9092"]
    assert sandbox.zookeeper is not None and sandbox.zookeeper.connect == "127.0.0.1:2181"
    assert prod.kafka["security.protocol"] == "SASL_SSL"
    assert prod.kafka["sasl.mechanism"] == "SCRAM-SHA-512"
    assert prod.kafka["sasl.password"] == SECRET
    assert prod.kafka["sasl.username"] == "kmon"
    assert len(prod.bootstrap_servers) == 3
    assert config.exporter.port == 9308
    assert SECRET not in repr(config) and SECRET not in str(config)


def test_example_sandbox_addresses_come_from_the_environment() -> None:
    env = {"KAFKA_PASSWORD": "x", "SANDBOX_BOOTSTRAP": "127.0.0.1:39092,127.0.0.1:39093",
           "SANDBOX_ZK_CONNECT": "127.0.0.1:32181"}
    config = load_config(EXAMPLE, environ=env)
    assert config.clusters[0].bootstrap_servers == ["127.0.0.1:39092", "127.0.0.1:39093"]
    assert config.clusters[0].zookeeper is not None
    assert config.clusters[0].zookeeper.connect == "127.0.0.1:32181"


def test_example_without_password_names_field_and_variable() -> None:
    with pytest.raises(ConfigError) as info:
        load_config(EXAMPLE, environ={})
    message = str(info.value)
    assert str(EXAMPLE) in message
    assert 'clusters[1].kafka["sasl.password"]' in message
    assert "KAFKA_PASSWORD" in message


def test_example_documents_every_field() -> None:
    """Every model field appears in the example, so the example is the reference an operator reads."""
    text = EXAMPLE.read_text()
    from collectors.config import ExporterConfig, HistoryConfig, Thresholds
    from collectors.model.policy import PolicyRule
    from collectors.sources.settings import FiltersConfig, NameFilterConfig

    for model in (MonitorConfig, ClusterConfig, ZooKeeperConfig, Thresholds, ExporterConfig, HistoryConfig,
                  FiltersConfig, NameFilterConfig, PolicyRule):
        for name in model.model_fields:
            assert f"{name}" in text, f"{model.__name__}.{name} missing from the example"


def test_cli_checks_a_file(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KAFKA_PASSWORD", SECRET)
    assert main([str(EXAMPLE)]) == 0
    out = capsys.readouterr().out
    assert json.loads(out)["clusters"][1]["kafka"]["sasl.password"] == REDACTED
    assert SECRET not in out
    monkeypatch.delenv("KAFKA_PASSWORD")
    assert main([str(EXAMPLE)]) == 1
    assert "KAFKA_PASSWORD" in capsys.readouterr().err
    assert main([]) == 2


# --------------------------------------------------------------------------- valid input and defaults


def test_minimal_config_gets_defaults(tmp_path: Path) -> None:
    config = load_text(tmp_path, MINIMAL)
    assert config.poll_interval_s == 30
    assert config.request_timeout_s == 10
    assert config.max_concurrent_requests == 16
    assert config.thresholds.lag_seconds_slo == 300
    assert config.thresholds.preferred_leader_imbalance_ratio == 0.2
    assert config.exporter.host == "127.0.0.1" and config.exporter.port == 9308
    assert config.history.root == Path("data/history") and config.history.partition_detail is False
    assert config.state_dir == Path("data/state")
    assert config.log_level == "INFO"
    assert config.clusters[0].kraft is None and config.clusters[0].zookeeper is None
    assert isinstance(config.clusters[0].kafka, KafkaSettings)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("h1:9092", ["h1:9092"]),
        ("h1:9092, h2:9093 ,", ["h1:9092", "h2:9093"]),
        (["h1:9092", " h2:9093 "], ["h1:9092", "h2:9093"]),
        ("[::1]:9092,[fe80::1%eth0]:9093", ["[::1]:9092", "[fe80::1%eth0]:9093"]),
        ("10.0.0.1:1,kafka_0.svc.cluster.local.:65535", ["10.0.0.1:1", "kafka_0.svc.cluster.local.:65535"]),
    ],
)
def test_bootstrap_servers_normalised_to_list(value: Any, expected: list[str]) -> None:
    assert cluster(bootstrap_servers=value).bootstrap_servers == expected


def test_unicode_cluster_names_allowed_and_normalised(tmp_path: Path) -> None:
    config = load_text(tmp_path, """
        clusters:
          - {name: "  Zürich – prod 🚀  ", bootstrap_servers: "k:1"}
          - {name: "東京", bootstrap_servers: "k:1"}
        """)
    assert [c.name for c in config.clusters] == ["Zürich – prod 🚀", "東京"]


def test_log_level_is_case_insensitive(tmp_path: Path) -> None:
    assert load_text(tmp_path, MINIMAL + "log_level: debug\n").log_level == "DEBUG"


def test_zookeeper_block(tmp_path: Path) -> None:
    config = load_text(tmp_path, """
        clusters:
          - name: zk
            bootstrap_servers: k:9092
            zookeeper:
              connect: "zk1:2181, zk2:2181,[::1]:2181,zk3/kafka/prod"
              auth_scheme: digest
              username: monitor
              password: ${ZK_PASSWORD}
              use_tls: true
              ca_file: /etc/zk/ca.pem
              cert_file: /etc/zk/client.pem
              key_file: /etc/zk/client.key
        """, {"ZK_PASSWORD": SECRET})
    zk = config.clusters[0].zookeeper
    assert zk is not None
    assert zk.connect == "zk1:2181,zk2:2181,[::1]:2181,zk3/kafka/prod"
    assert zk.password is not None and zk.password.get_secret_value() == SECRET
    assert SECRET not in repr(config)


def test_assignment_is_validated_and_keeps_secrets_hidden() -> None:
    c = cluster()
    c.kafka = {"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN", "sasl.username": "u",
               "sasl.password": SECRET}
    assert isinstance(c.kafka, KafkaSettings)
    assert SECRET not in repr(c)
    with pytest.raises(ValidationError):
        c.bootstrap_servers = "no-port"


# --------------------------------------------------------------------------- bad input -> ConfigError


BAD_VALUES = [
    # (yaml appended to / replacing the minimal config, field path expected in the message, extra expected text)
    ("clusters: [{name: a, bootstrap_servers: kafka1}]", "clusters[0].bootstrap_servers", "has no port"),
    ("clusters: [{name: a, bootstrap_servers: 'kafka1:0'}]", "clusters[0].bootstrap_servers", "1 to 65535"),
    ("clusters: [{name: a, bootstrap_servers: 'kafka1:70000'}]", "clusters[0].bootstrap_servers", "1 to 65535"),
    ("clusters: [{name: a, bootstrap_servers: 'kafka1:http'}]", "clusters[0].bootstrap_servers", "port"),
    ("clusters: [{name: a, bootstrap_servers: ':9092'}]", "clusters[0].bootstrap_servers", "no host"),
    ("clusters: [{name: a, bootstrap_servers: '::1:9092'}]", "clusters[0].bootstrap_servers", "brackets"),
    ("clusters: [{name: a, bootstrap_servers: '[nope]:9092'}]", "clusters[0].bootstrap_servers", "IPv6"),
    ("clusters: [{name: a, bootstrap_servers: 'bad host:9092'}]", "clusters[0].bootstrap_servers", "host name"),
    ("clusters: [{name: a, bootstrap_servers: 9092}]", "clusters[0].bootstrap_servers", "host:port"),
    ("clusters: [{name: a, bootstrap_servers: [h:1, 2]}]", "clusters[0].bootstrap_servers", "item 1"),
    ("clusters: [{name: a, bootstrap_servers: ''}]", "clusters[0].bootstrap_servers", "at least one"),
    ("clusters: [{name: a, bootstrap_servers: []}]", "clusters[0].bootstrap_servers", "at least one"),
    ("clusters: [{name: a}]", "clusters[0].bootstrap_servers", "required"),
    ("clusters: [{bootstrap_servers: 'h:1'}]", "clusters[0].name", "required"),
    ("clusters: [{name: '', bootstrap_servers: 'h:1'}]", "clusters[0].name", "empty"),
    ("clusters: [{name: 'a/b', bootstrap_servers: 'h:1'}]", "clusters[0].name", "'/'"),
    ("clusters: [{name: '..', bootstrap_servers: 'h:1'}]", "clusters[0].name", "'..'"),
    ('clusters: [{name: "a\\tb", bootstrap_servers: "h:1"}]', "clusters[0].name", "control"),
    (f"clusters: [{{name: {'x' * 101}, bootstrap_servers: 'h:1'}}]", "clusters[0].name", "100"),
    ("clusters: [{name: 7, bootstrap_servers: 'h:1'}]", "clusters[0].name", "string"),
    ("clusters: [{name: a, bootstrap_servers: 'h:1'}, {name: A, bootstrap_servers: 'h:2'}]", "clusters[1].name",
     "clusters[0] is named 'a' too"),
    ("clusters: []", "clusters", "at least 1"),
    ("clusters: {name: a}", "clusters", "list"),
    ("poll_interval_s: 1", "clusters", "required"),
    ("clusters: [{name: a, bootstrap_servers: 'h:1', kraft: maybe}]", "clusters[0].kraft", "boolean"),
    ("clusters: [{name: a, bootstrap_servers: 'h:1', bootstrap: x}]", "clusters[0].bootstrap",
     "did you mean 'bootstrap_servers'"),
    (MINIMAL + "pol_interval_s: 5", "pol_interval_s", "did you mean 'poll_interval_s'"),
    (MINIMAL + "poll_interval_s: 0", "poll_interval_s", "greater than 0"),
    (MINIMAL + "poll_interval_s: 3601", "poll_interval_s", "3600"),
    (MINIMAL + "poll_interval_s: .nan", "poll_interval_s", "finite"),
    (MINIMAL + "poll_interval_s: .inf", "poll_interval_s", "finite"),
    (MINIMAL + "poll_interval_s: true", "poll_interval_s", "true/false"),
    (MINIMAL + "request_timeout_s: 301", "request_timeout_s", "300"),
    (MINIMAL + "max_concurrent_requests: 0", "max_concurrent_requests", "greater than or equal to 1"),
    (MINIMAL + "max_concurrent_requests: 2.5", "max_concurrent_requests", "integer"),
    (MINIMAL + "log_level: LOUD", "log_level", "'INFO'"),
    (MINIMAL + "state_dir: ''", "state_dir", "empty"),
    (MINIMAL + "state_dir: [a]", "state_dir", "path"),
    (MINIMAL + "thresholds: {lag_seconds_slo: -1}", "thresholds.lag_seconds_slo", "greater than or equal to 0"),
    (MINIMAL + "thresholds: {lag_seconds_slo: soon}", "thresholds.lag_seconds_slo", "number"),
    (MINIMAL + "thresholds: {lag_seconds_slo: 1e400}", "thresholds.lag_seconds_slo", "finite"),
    (MINIMAL + f"thresholds: {{lag_seconds_slo: {10**400}}}", "thresholds.lag_seconds_slo", "very large integer"),
    (MINIMAL + "thresholds: {isr_flap_changes: 0}", "thresholds.isr_flap_changes", "1"),
    (MINIMAL + "thresholds: {preferred_leader_imbalance_ratio: 1.5}", "thresholds.preferred_leader_imbalance_ratio",
     "1"),
    (MINIMAL + "thresholds: {lag_window_points: 3, lag_min_points: 5}", "thresholds.lag_min_points",
     "lag_window_points"),
    (MINIMAL + "thresholds: {lag_slo: 1}", "thresholds.lag_slo", "unknown key"),
    (MINIMAL + "thresholds: 5", "thresholds", "dictionary"),
    (MINIMAL + "exporter: {port: 70000}", "exporter.port", "65535"),
    (MINIMAL + "exporter: {port: 0}", "exporter.port", "1"),
    (MINIMAL + "exporter: {port: http}", "exporter.port", "integer"),
    (MINIMAL + "exporter: {port: true}", "exporter.port", "true/false"),
    (MINIMAL + "exporter: {host: 'not a host'}", "exporter.host", "host name"),
    (MINIMAL + "exporter: {enabled: perhaps}", "exporter.enabled", "boolean"),
    (MINIMAL + "history: {retention_days: 0}", "history.retention_days", "1"),
    (MINIMAL + "history: {compact_min_files: 1}", "history.compact_min_files", "2"),
    (MINIMAL + "history: {root: ''}", "history.root", "empty"),
    (MINIMAL + "history: {flush_interval_s: 0}", "history.flush_interval_s", "greater than 0"),
]


@pytest.mark.parametrize(("text", "field", "expected"), BAD_VALUES)
def test_bad_values_name_the_field(tmp_path: Path, text: str, field: str, expected: str) -> None:
    message = config_error(tmp_path, text)
    path = str(tmp_path / "monitor.yaml")
    assert all(line.startswith(path) for line in message.splitlines()), message
    assert f": {field}: " in message, message
    assert expected in message, message


KAFKA_BAD = [
    ({"sasl.username": "u", "sasl.password": "p", "sasl.mechanism": "PLAIN"}, "connect without authentication"),
    ({"security.protocol": "SASL_PLAINTEXT", "ssl.ca.location": "/ca.pem"}, "would not use TLS"),
    ({"security.protocol": "TLS"}, "security.protocol must be one of"),
    ({"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-1"}, "sasl.mechanism must be one of"),
    ({"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "u"},
     "needs sasl.password"),
    ({"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN", "sasl.mechanisms": "PLAIN"}, "only one"),
    ({"security.protocol": "SSL", "ssl.endpoint.identification.algorithm": "strict"}, "'https'"),
    ({"bootstrap.servers": "h:1"}, "bootstrap_servers"),
    ({"socket.timeout.ms": [1, 2]}, "'socket.timeout.ms': expected a string, integer or true/false"),
    ({"linger.ms": 1.5}, "got float"),
    ("SASL_SSL", "expected a mapping"),
]


@pytest.mark.parametrize(("kafka", "expected"), KAFKA_BAD)
def test_bad_kafka_settings(tmp_path: Path, kafka: Any, expected: str) -> None:
    text = yaml.safe_dump({"clusters": [{"name": "a", "bootstrap_servers": "h:1", "kafka": kafka}]})
    message = config_error(tmp_path, text)
    assert ": clusters[0].kafka: " in message
    assert expected in message


ZK_BAD = [
    ({"connect": ""}, "connect", "host:port"),
    ({"connect": "zk1:2181,,zk2:2181"}, "connect", "host:port"),
    ({"connect": "zk1:99999"}, "connect", "65535"),
    ({"connect": "zk1:2181/"}, "connect", "chroot"),
    ({"connect": "zk1:2181/a//b"}, "connect", "chroot"),
    ({"connect": "zk:1", "auth_scheme": "sasl"}, "auth_scheme", "'digest'"),
    ({"connect": "zk:1", "auth_scheme": "digest", "username": "u"}, "password", "required"),
    ({"connect": "zk:1", "auth_scheme": "digest", "password": "p"}, "username", "required"),
    ({"connect": "zk:1", "auth_scheme": "digest", "username": "a:b", "password": "p"}, "username", "':'"),
    ({"connect": "zk:1", "username": "u"}, "username", "auth_scheme"),
    ({"connect": "zk:1", "password": "p"}, "password", "auth_scheme"),
    ({"connect": "zk:1", "ca_file": "/ca.pem"}, "ca_file", "use_tls"),
    ({"connect": "zk:1", "use_tls": True, "cert_file": "/c.pem"}, "key_file", "cert_file"),
    ({"connect": "zk:1", "use_tls": True, "key_file": "/k.pem"}, "key_file", "cert_file"),
    ({"connect": "zk:1", "session_timeout_s": 0}, "session_timeout_s", "1"),
    ({"connect": "zk:1", "four_letter_words": "sometimes"}, "four_letter_words", "boolean"),
    ({"connect": "zk:1", "chroot": "/kafka"}, "chroot", "unknown key"),
    ({}, "connect", "required"),
]


@pytest.mark.parametrize(("zk", "field", "expected"), ZK_BAD)
def test_bad_zookeeper_settings(tmp_path: Path, zk: dict[str, Any], field: str, expected: str) -> None:
    text = yaml.safe_dump({"clusters": [{"name": "a", "bootstrap_servers": "h:1", "zookeeper": zk}]})
    message = config_error(tmp_path, text)
    assert f": clusters[0].zookeeper.{field}: " in message
    assert expected in message


def test_zookeeper_password_of_wrong_type_is_not_echoed(tmp_path: Path) -> None:
    text = yaml.safe_dump({"clusters": [{"name": "a", "bootstrap_servers": "h:1", "zookeeper": {
        "connect": "zk:1", "auth_scheme": "digest", "username": "u", "password": 918273645}}]})
    message = config_error(tmp_path, text)
    assert "clusters[0].zookeeper.password" in message
    assert "918273645" not in message


def test_every_problem_reported_one_line_each_with_line_numbers(tmp_path: Path) -> None:
    message = config_error(tmp_path, """\
        clusters:
          - name: a
            bootstrap_servers: nohost
        poll_interval_s: -5
        exporter:
          port: 99999
        surprise: 1
        """)
    lines = message.splitlines()
    path = str(tmp_path / "monitor.yaml")
    assert len(lines) == 4, message
    assert f"{path}:3: clusters[0].bootstrap_servers: " in message
    assert f"{path}:4: poll_interval_s: " in message
    assert f"{path}:6: exporter.port: " in message
    assert f"{path}:7: surprise: unknown key; expected one of: clusters, poll_interval_s" in message


def test_a_duplicate_cluster_name_is_reported_at_its_own_line(tmp_path: Path) -> None:
    """Each later cluster of a name already taken, at its name's line, so a long file's culprit is found."""
    message = config_error(tmp_path, """\
        clusters:
          - name: prod
            bootstrap_servers: 'h:1'
          - name: stage
            bootstrap_servers: 'h:2'
          - name: Prod
            bootstrap_servers: 'h:3'
          - name: stage
            bootstrap_servers: 'h:4'
        """)
    path = str(tmp_path / "monitor.yaml")
    assert message.splitlines() == [
        f"{path}:6: clusters[2].name: clusters[0] is named 'prod' too (names are compared ignoring case)",
        f"{path}:8: clusters[3].name: clusters[1] is named 'stage' too"], message


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("clusters: [a, b", "not valid YAML"),
        ("clusters:\n  - name: a\n\tbad: tab", "not valid YAML"),
        ("a: 1\na: 2\n", "duplicate key 'a'"),
        ("clusters:\n  - name: a\n    name: b\n", "duplicate key 'name'"),
        ("when: 2020-13-45\n", "not valid YAML"),
        ("--- {}\n--- {}\n", "not valid YAML"),
        ("x: !!python/object:os.system {}\n", "not valid YAML"),
        ("- a\n- b\n", "top level must be a mapping"),
        ("just a string\n", "top level must be a mapping"),
        ("42\n", "top level must be a mapping"),
        ("", "clusters: required field is missing"),
        ("# only a comment\n", "clusters: required field is missing"),
        ("a: &x [*x]\n", "nested more than"),
        ("[" * 5000 + "]" * 5000, "not valid YAML: nested too deeply"),
        ('a: "\x1f"', "character #x001f at offset 4 is not allowed"),
        ("a: ${UNDEFINED}", "a: environment variable UNDEFINED is not set"),
    ],
)
def test_unusable_documents(tmp_path: Path, content: str, expected: str) -> None:
    path = tmp_path / "monitor.yaml"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_config(path, environ={})
    assert str(path) in str(info.value)
    assert expected in str(info.value)
    assert "Traceback" not in str(info.value)


def test_alias_bomb_is_refused(tmp_path: Path) -> None:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]" for i in range(1, 9)]
    message = config_error(tmp_path, "\n".join(lines) + "\n")
    assert "too large" in message


def test_unreadable_files(tmp_path: Path) -> None:
    for path, expected in [
        (tmp_path / "missing.yaml", "cannot read"),
        (tmp_path, "cannot read"),
        ("bad\0path.yaml", "cannot read"),
    ]:
        with pytest.raises(ConfigError) as info:
            load_config(path, environ={})
        assert expected in str(info.value)
    binary = tmp_path / "binary.yaml"
    binary.write_bytes(b"clusters: \xff\xfe\x00")
    with pytest.raises(ConfigError, match="not UTF-8"):
        load_config(binary, environ={})
    huge = tmp_path / "huge.yaml"
    huge.write_bytes(b"#" * (2 << 20))
    with pytest.raises(ConfigError, match="larger than"):
        load_config(huge, environ={})


def test_config_error_is_a_value_error_with_problem_list(tmp_path: Path) -> None:
    with pytest.raises(ValueError) as info:
        load_text(tmp_path, MINIMAL + "poll_interval_s: 0\nexporter: {port: 0}\n")
    assert isinstance(info.value, ConfigError)
    assert len(info.value.problems) == 2


# --------------------------------------------------------------------------- ${VAR} substitution


def test_variable_substitution(tmp_path: Path) -> None:
    config = load_text(tmp_path, """
        clusters:
          - name: ${CLUSTER_NAME}-${REGION:-eu}
            bootstrap_servers: ${BROKERS}
            kafka:
              security.protocol: SASL_SSL
              sasl.mechanism: PLAIN
              sasl.username: ${USER_EMPTY:-fallback}
              sasl.password: "pre$${literal}$x-${PW}"
        poll_interval_s: ${POLL:-15}
        exporter:
          port: ${PORT}
          host: "${HOST:-}0.0.0.0"
        """, {"CLUSTER_NAME": "prod", "BROKERS": "b1:9092,b2:9092", "USER_EMPTY": "", "PW": SECRET, "PORT": "9400"})
    c = config.clusters[0]
    assert c.name == "prod-eu"
    assert c.bootstrap_servers == ["b1:9092", "b2:9092"]
    assert c.kafka["sasl.username"] == "fallback"  # :- also applies to empty, as in the shell
    assert c.kafka["sasl.password"] == f"pre${{literal}}$x-{SECRET}"
    assert config.poll_interval_s == 15
    assert config.exporter.port == 9400
    assert config.exporter.host == "0.0.0.0"


def test_substitution_only_in_values_not_keys(tmp_path: Path) -> None:
    message = config_error(tmp_path, MINIMAL + "${KEY}: 1\n", {"KEY": "poll_interval_s"})
    assert "${KEY}" in message and "unknown key" in message


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("${NOPE}", "exporter.host: environment variable NOPE is not set"),
        ("${1BAD}", "not a valid variable reference"),
        ("${}", "not a valid variable reference"),
        ("${OPEN", "without a matching '}'"),
        ("${A:-${B}}", "without a matching '}'"),
    ],
)
def test_substitution_errors_name_field(tmp_path: Path, value: str, expected: str) -> None:
    message = config_error(tmp_path, MINIMAL + f"exporter: {{host: '{value}'}}\n")
    assert expected in message


def test_all_missing_variables_reported_together(tmp_path: Path) -> None:
    message = config_error(tmp_path, "clusters: [{name: '${A}', bootstrap_servers: '${B}'}]\n")
    assert "clusters[0].name: environment variable A" in message
    assert "clusters[0].bootstrap_servers: environment variable B" in message


def test_default_environment_is_os_environ(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KMON_TEST_BROKERS", "from-env:9092")
    monkeypatch.setenv("KMON__POLL_INTERVAL_S", "7")
    config = load_config(write(tmp_path, "clusters: [{name: a, bootstrap_servers: '${KMON_TEST_BROKERS}'}]"))
    assert config.clusters[0].bootstrap_servers == ["from-env:9092"]
    assert config.poll_interval_s == 7


# --------------------------------------------------------------------------- KMON__ overrides


def test_environment_overrides(tmp_path: Path) -> None:
    env = {
        "KMON__POLL_INTERVAL_S": "10",
        "KMON__THRESHOLDS__LAG_SECONDS_SLO": "600",
        "KMON__CLUSTERS__0__BOOTSTRAP_SERVERS": "h:9092",
        "KMON__EXPORTER__PORT": "9400",
        "KMON__EXPORTER__PARTITION_SERIES": "false",
        "KMON__HISTORY__ROOT": "/var/lib/kmon/history",
        "KMON__LOG_LEVEL": "debug",
        "KMON__CLUSTERS__0__KAFKA__SECURITY_PROTOCOL": "SASL_SSL",
        "KMON__CLUSTERS__0__KAFKA__SASL__MECHANISM": "SCRAM-SHA-256",
        "KMON__CLUSTERS__0__KAFKA__SASL_USERNAME": "monitor",
        "KMON__CLUSTERS__0__KAFKA__SASL_PASSWORD": "'12345'",
        "KMON__CLUSTERS__0__ZOOKEEPER__CONNECT": "zk:2181",
        "KMON__CLUSTERS__0__NAME": "'2024'",
        "UNRELATED": "x",
        "kmon__poll_interval_s": "99",  # the prefix is case-sensitive, like environment variables
    }
    config = load_text(tmp_path, MINIMAL, env)
    c = config.clusters[0]
    assert config.poll_interval_s == 10
    assert config.thresholds.lag_seconds_slo == 600
    assert c.bootstrap_servers == ["h:9092"]
    assert config.exporter.port == 9400 and config.exporter.partition_series is False
    assert config.exporter.granularity == "topic"  # the deprecated switch still means what it meant
    assert config.history.root == Path("/var/lib/kmon/history")
    assert config.log_level == "DEBUG"
    assert c.kafka == {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-256",
                       "sasl.username": "monitor", "sasl.password": "12345"}
    assert c.zookeeper is not None and c.zookeeper.connect == "zk:2181"
    assert c.name == "2024"


def test_override_can_remove_a_block_and_values_are_yaml_scalars(tmp_path: Path) -> None:
    text = MINIMAL + "    zookeeper: {connect: 'zk:1'}\n    kraft: false\n"
    config = load_text(tmp_path, text, {"KMON__CLUSTERS__0__ZOOKEEPER": "null", "KMON__CLUSTERS__0__KRAFT": "~",
                                        "KMON__THRESHOLDS__PREFERRED_LEADER_IMBALANCE_RATIO": "0.5"})
    assert config.clusters[0].zookeeper is None and config.clusters[0].kraft is None
    assert config.thresholds.preferred_leader_imbalance_ratio == 0.5


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({"KMON__CLUSTERS__1__BOOTSTRAP_SERVERS": "h:1"}, "KMON__CLUSTERS__1__BOOTSTRAP_SERVERS: clusters[1] does "
                                                          "not exist"),
        ({"KMON__CLUSTERS__X__NAME": "a"}, "expected an item index"),
        ({"KMON__CLUSTERS__-1__NAME": "a"}, "expected an item index"),
        ({"KMON__POLL_INTERVAL_S__X": "1"}, "poll_interval_s is integer 30, not a mapping"),
        ({"KMON__THRESHOLDS____LAG": "1"}, "empty path segment"),
        ({"KMON__": "1"}, "empty path segment"),
        ({"KMON__HISTORY__NEW__0": "1"}, "history.new is not a list"),
    ],
)
def test_override_errors(tmp_path: Path, env: dict[str, str], expected: str) -> None:
    message = config_error(tmp_path, MINIMAL + "poll_interval_s: 30\n", env)
    assert "environment override" in message
    assert expected in message


def test_overridden_value_errors_name_the_variable(tmp_path: Path) -> None:
    message = config_error(tmp_path, MINIMAL, {"KMON__EXPORTER__PORT": "99999", "KMON__THRESHOLDS__LAG_SLO": "1"})
    assert "exporter.port: " in message and "(from environment variable KMON__EXPORTER__PORT)" in message
    assert "thresholds.lag_slo: unknown key" in message and "KMON__THRESHOLDS__LAG_SLO" in message


def test_override_with_secret_is_not_echoed(tmp_path: Path) -> None:
    env = {"KMON__CLUSTERS__0__KAFKA__SASL_PASSWORD": SECRET}  # sasl.* without SASL protocol: an error
    message = config_error(tmp_path, MINIMAL, env)
    assert "sasl.password" in message and SECRET not in message


# --------------------------------------------------------------------------- secrets


SECRET_SETTINGS = {
    "security.protocol": "SASL_SSL",
    "sasl.mechanism": "OAUTHBEARER",
    "sasl.oauthbearer.method": "oidc",
    "sasl.oauthbearer.client.id": "kmon",
    "sasl.oauthbearer.token.endpoint.url": "https://idp.example.com/token",
    "sasl.username": "monitor",
    "sasl.password": SECRET + "-1",
    "sasl.jaas.config": SECRET + "-2",
    "sasl.oauthbearer.client.secret": SECRET + "-3",
    "ssl.key.password": SECRET + "-4",
    "ssl.key.pem": SECRET + "-5",
    "ssl.keystore.password": SECRET + "-6",
    "ssl.ca.location": "/ca.pem",
}


@pytest.fixture
def secret_config(tmp_path: Path) -> MonitorConfig:
    data = {"clusters": [{"name": "prod", "bootstrap_servers": "k:9093", "kafka": SECRET_SETTINGS,
                          "zookeeper": {"connect": "zk:2181", "auth_scheme": "digest", "username": "zkuser",
                                        "password": SECRET + "-zk"}}]}
    return load_config(write(tmp_path, yaml.safe_dump(data)), environ={})


def test_secrets_never_in_repr_or_str(secret_config: MonitorConfig) -> None:
    c = secret_config.clusters[0]
    assert c.kafka["sasl.password"] == SECRET + "-1"  # the real value is there for the client
    for text in (repr(secret_config), str(secret_config), repr(c), str(c), repr(c.kafka), str(c.kafka),
                 f"{c.kafka}", repr(c.zookeeper), str(c.zookeeper)):
        assert SECRET not in text
    assert "monitor" in repr(c)  # non-secret settings stay visible


def test_redacted_replaces_every_secret(secret_config: MonitorConfig) -> None:
    data = redacted(secret_config)
    text = json.dumps(data)
    assert SECRET not in text
    kafka = data["clusters"][0]["kafka"]
    for key in SECRET_SETTINGS:
        assert kafka[key] == (REDACTED if is_secret_key(key) else SECRET_SETTINGS[key])
    assert data["clusters"][0]["zookeeper"]["password"] == REDACTED
    assert data["clusters"][0]["zookeeper"]["username"] == "zkuser"
    assert data["exporter"]["port"] == 9308 and data["state_dir"] == "data/state"


def test_redacted_keeps_absent_secrets_absent(tmp_path: Path) -> None:
    text = MINIMAL + "    zookeeper: {connect: 'zk:1'}\n"
    assert redacted(load_text(tmp_path, text))["clusters"][0]["zookeeper"]["password"] is None


def test_secret_key_detection() -> None:
    for key in ("sasl.password", "SSL.KEY.PASSWORD", "sasl.jaas.config", "sasl.oauthbearer.config",
                "sasl.oauthbearer.client.secret", "ssl.key.pem", "password", "plugin.api.token", "access_token",
                "cloud.credentials", "schema.registry.api_key", "apiKey"):
        assert is_secret_key(key)
    for key in ("sasl.username", "ssl.ca.location", "ssl.certificate.pem", "security.protocol"):
        assert not is_secret_key(key)


# --------------------------------------------------------------------------- translators


TLS_SASL = {
    "security.protocol": "sasl_ssl",
    "sasl.mechanism": "SCRAM-SHA-512",
    "sasl.username": "monitor",
    "sasl.password": SECRET,
    "ssl.ca.location": "/etc/kmon/ca.pem",
    "ssl.certificate.location": "/etc/kmon/client.pem",
    "ssl.key.location": "/etc/kmon/client.key",
    "ssl.key.password": "keypass",
    "ssl.endpoint.identification.algorithm": "https",
    "enable.ssl.certificate.verification": True,
    "statistics.interval.ms": 0,
}


def test_confluent_settings() -> None:
    c = cluster(bootstrap_servers=["k1:9093", "[::1]:9093"], kafka=TLS_SASL)
    settings = confluent_settings(c, 12.5)
    assert type(settings) is dict
    assert settings["bootstrap.servers"] == "k1:9093,[::1]:9093"
    assert settings["socket.timeout.ms"] == 12500
    assert settings["socket.connection.setup.timeout.ms"] == 12500
    assert settings["client.id"] == CLIENT_ID
    for key, value in TLS_SASL.items():
        assert settings[key] == value  # passed through unchanged, secrets included
    explicit = confluent_settings(cluster(kafka={"socket.timeout.ms": 1234, "client.id": "mine"}), 10)
    assert explicit["socket.timeout.ms"] == 1234 and explicit["client.id"] == "mine"
    assert confluent_settings(cluster(), 1000)["socket.timeout.ms"] == 300_000  # librdkafka's maximum


def test_confluent_settings_accepted_by_librdkafka() -> None:
    admin = pytest.importorskip("confluent_kafka.admin")
    c = cluster(bootstrap_servers="127.0.0.1:1", kafka={"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN",
                                                         "sasl.username": "u", "sasl.password": "p",
                                                         "ssl.endpoint.identification.algorithm": "none",
                                                         "log_level": 0})
    admin.AdminClient(confluent_settings(c, 5))  # raises KafkaException on an unknown or invalid property


def test_kafka_python_settings_map_tls_and_sasl() -> None:
    c = cluster(bootstrap_servers="k1:9093,k2:9093", kafka=TLS_SASL)
    settings = kafka_python_settings(c, 7)
    assert settings == {
        "bootstrap_servers": ["k1:9093", "k2:9093"],
        "client_id": CLIENT_ID,
        "request_timeout_ms": 7000,
        "security_protocol": "SASL_SSL",
        "sasl_mechanism": "SCRAM-SHA-512",
        "sasl_plain_username": "monitor",
        "sasl_plain_password": SECRET,
        "ssl_cafile": "/etc/kmon/ca.pem",
        "ssl_certfile": "/etc/kmon/client.pem",
        "ssl_keyfile": "/etc/kmon/client.key",
        "ssl_password": "keypass",
        "ssl_check_hostname": True,
    }
    assert kafka_python_unsupported(c) == ["enable.ssl.certificate.verification", "statistics.interval.ms"]


@pytest.mark.parametrize(("algorithm", "expected"), [("https", True), ("HTTPS", True), ("none", False)])
def test_kafka_python_hostname_check(algorithm: str, expected: bool) -> None:
    c = cluster(kafka={"security.protocol": "SSL", "ssl.endpoint.identification.algorithm": algorithm})
    assert kafka_python_settings(c, 10)["ssl_check_hostname"] is expected
    assert "ssl_check_hostname" not in kafka_python_settings(cluster(kafka={"security.protocol": "SSL"}), 10)


def test_kafka_python_settings_are_admin_client_keywords() -> None:
    kafka_admin = pytest.importorskip("kafka.admin")
    c = cluster(kafka={**TLS_SASL, "client.id": "x", "ssl.crl.location": "/crl.pem",
                       "sasl.kerberos.service.name": "kafka"})
    assert set(kafka_python_settings(c, 10)) <= set(kafka_admin.KafkaAdminClient.DEFAULT_CONFIG)


def test_kazoo_settings() -> None:
    zk = ZooKeeperConfig(connect="zk1:2181,zk2:2181/kafka", auth_scheme="digest", username="u",
                         password=SECRET, use_tls=True, ca_file="/ca.pem", cert_file="/c.pem",
                         key_file="/k.pem", session_timeout_s=15)
    assert kazoo_settings(zk) == {
        "hosts": "zk1:2181,zk2:2181/kafka",
        "timeout": 15.0,
        "auth_data": [("digest", f"u:{SECRET}")],
        "use_ssl": True,
        "ca": "/ca.pem",
        "certfile": "/c.pem",
        "keyfile": "/k.pem",
        "verify_certs": True,
        "check_hostname": True,  # kazoo's own default is off: any certificate its CA signed, for any host
    }
    plain = kazoo_settings(ZooKeeperConfig(connect="zk:2181"))
    assert plain["auth_data"] == [] and plain["use_ssl"] is False and plain["ca"] is None


def test_kazoo_settings_accepted_by_kazoo() -> None:
    kazoo_client = pytest.importorskip("kazoo.client")
    zk = ZooKeeperConfig(connect="127.0.0.1:1/chroot", auth_scheme="digest", username="u", password="p")
    client = kazoo_client.KazooClient(**kazoo_settings(zk))  # constructing does not connect
    assert client.chroot == "/chroot"


# --------------------------------------------------------------------------- fuzz

FIELD_NAMES = sorted(
    {*MonitorConfig.model_fields, *ClusterConfig.model_fields, *ZooKeeperConfig.model_fields,
     "lag_seconds_slo", "port", "host", "root", "enabled", "retention_days", "lag_min_points", "lag_window_points"}
)
KAFKA_KEYS = ["security.protocol", "sasl.mechanism", "sasl.username", "sasl.password", "ssl.ca.location",
              "ssl.endpoint.identification.algorithm", "bootstrap.servers", "client.id", "linger.ms"]
INTERESTING_TEXT = ["${X}", "${UNSET}", "${X:-d}", "$${X}", "${", "h:9092", "[::1]:9092", "a:b:c", "h:0",
                    "h:1,h:2", "INFO", "debug", "digest", "SASL_SSL", "PLAIN", "SCRAM-SHA-512", "https", "none",
                    "/", "..", ".", "", " ", "zk:2181/kafka", "0.0.0.0", "true", "null", "1e999", "-0", "∞",
                    "名前", "\u202e", "\x00", "a\nb", "\u2028"]

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.sampled_from([0, 1, -1, 65535, 65536, 2**31, 2**63, -(2**63) - 1, 10**30, 10**400]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=30),
    st.sampled_from(INTERESTING_TEXT),
)
keys = st.one_of(st.sampled_from(FIELD_NAMES + KAFKA_KEYS), st.text(max_size=12))
anything = st.recursive(
    scalars, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(keys, inner, max_size=5), max_leaves=20
)
hostports = st.one_of(st.sampled_from(["h:9092", "[::1]:9092", "10.0.0.1:1", "h", "h:99999", "::1:9092", ":1"]),
                      st.text(max_size=20))


def maybe(strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """Usually the plausible value, sometimes anything at all."""
    return st.one_of(strategy, strategy, strategy, anything)


zookeepers = st.fixed_dictionaries({}, optional={
    "connect": maybe(st.sampled_from(["zk:2181", "zk1:1,zk2:2/kafka", "zk:2181/", "[::1]:2181", "zk:x"])),
    "auth_scheme": maybe(st.sampled_from([None, "digest", "sasl"])),
    "username": maybe(st.text(max_size=8)),
    "password": maybe(st.text(max_size=8)),
    "use_tls": maybe(st.booleans()),
    "ca_file": maybe(st.text(max_size=8)),
    "cert_file": maybe(st.text(max_size=8)),
    "key_file": maybe(st.text(max_size=8)),
    "four_letter_words": maybe(st.booleans()),
    "session_timeout_s": maybe(st.floats(min_value=-10, max_value=1000)),
    "bogus": anything,
})
clusters = st.fixed_dictionaries({}, optional={
    "name": maybe(st.text(max_size=110)),
    "bootstrap_servers": maybe(st.one_of(hostports, st.lists(hostports, max_size=3))),
    "zookeeper": maybe(st.one_of(st.none(), zookeepers)),
    "kafka": maybe(st.dictionaries(st.sampled_from(KAFKA_KEYS), maybe(st.sampled_from(INTERESTING_TEXT)),
                                   max_size=6)),
    "kraft": maybe(st.sampled_from([None, True, False])),
    "extra": anything,
})
numbers = st.one_of(st.integers(min_value=-5, max_value=10**6), st.floats(min_value=-5, max_value=1e7),
                    st.sampled_from([10**400, 2**63]))
sections = st.dictionaries(keys, maybe(numbers), max_size=6)
documents = st.fixed_dictionaries({}, optional={
    "clusters": maybe(st.lists(clusters, max_size=3)),
    "poll_interval_s": maybe(numbers),
    "request_timeout_s": maybe(numbers),
    "max_concurrent_requests": maybe(numbers),
    "thresholds": maybe(sections),
    "exporter": maybe(sections),
    "history": maybe(sections),
    "state_dir": maybe(st.text(max_size=10)),
    "log_level": maybe(st.sampled_from(["INFO", "debug", "LOUD"])),
    "unknown": anything,
})
env_names = st.sampled_from([
    "KMON__POLL_INTERVAL_S", "KMON__CLUSTERS__0__NAME", "KMON__CLUSTERS__2__BOOTSTRAP_SERVERS",
    "KMON__CLUSTERS__0__KAFKA__SASL_PASSWORD", "KMON__CLUSTERS__0__ZOOKEEPER__CONNECT", "KMON__EXPORTER__PORT",
    "KMON__THRESHOLDS", "KMON__THRESHOLDS__LAG_SECONDS_SLO", "KMON__", "KMON____X", "KMON__CLUSTERS__X",
    "KMON__CLUSTERS", "KMON__HISTORY__ROOT__DEEP", "X", "UNSET",
])
environments = st.dictionaries(env_names, st.one_of(st.text(max_size=15), st.sampled_from(INTERESTING_TEXT)),
                               max_size=4)

FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def load_or_config_error(path: Path, environ: dict[str, str]) -> MonitorConfig | None:
    """The property: a file either loads into a usable config or fails with a ConfigError; nothing else."""
    try:
        config = load_config(path, environ=environ)
    except ConfigError as e:
        assert e.problems and all(p.strip() for p in e.problems)
        assert "Traceback" not in str(e)
        return None
    json.dumps(redacted(config))
    repr(config)
    for c in config.clusters:
        confluent_settings(c, config.request_timeout_s)
        kafka_python_settings(c, config.request_timeout_s)
        if c.zookeeper is not None:
            kazoo_settings(c.zookeeper)
    return config


@pytest.fixture(scope="module")
def fuzz_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("config-fuzz")


@FUZZ
@given(doc=st.one_of(documents, anything), environ=environments)
def test_fuzz_structures_load_or_raise_config_error(fuzz_dir: Path, doc: Any, environ: dict[str, str]) -> None:
    path = fuzz_dir / "fuzz.yaml"
    path.write_text(yaml.safe_dump(doc, allow_unicode=True), encoding="utf-8")
    load_or_config_error(path, {"X": "x", **environ})


@FUZZ
@given(doc=documents)
def test_fuzz_valid_clusters_with_random_rest(fuzz_dir: Path, doc: dict[str, Any]) -> None:
    """Keep a valid cluster list so validation reaches the deeper sections, not just 'clusters'."""
    doc = {**doc, "clusters": [{"name": "a", "bootstrap_servers": "h:9092"}]}
    path = fuzz_dir / "valid-clusters.yaml"
    path.write_text(yaml.safe_dump(doc, allow_unicode=True), encoding="utf-8")
    load_or_config_error(path, {})


@FUZZ
@given(content=st.one_of(st.text(max_size=300), st.binary(max_size=300).map(lambda b: b.decode("latin-1"))))
def test_fuzz_raw_text_loads_or_raises_config_error(fuzz_dir: Path, content: str) -> None:
    path = fuzz_dir / "raw.yaml"
    path.write_bytes(content.encode("utf-8", "surrogatepass"))
    load_or_config_error(path, {})


@FUZZ
@given(name=st.text(min_size=1, max_size=100))
def test_fuzz_unicode_cluster_names(fuzz_dir: Path, name: str) -> None:
    path = fuzz_dir / "names.yaml"
    path.write_text(yaml.safe_dump({"clusters": [{"name": name, "bootstrap_servers": "h:1"}]}, allow_unicode=True),
                    encoding="utf-8")
    config = load_or_config_error(path, {})
    if config is not None:
        loaded = config.clusters[0].name
        assert loaded and "/" not in loaded and len(loaded) <= 100 and loaded not in (".", "..")
        # normalisation is idempotent; the loaded name is written back escaped, since a literal ${ in a file is $${
        again = {"clusters": [{"name": loaded.replace("${", "$${"), "bootstrap_servers": "h:1"}]}
        assert parse_config(yaml.safe_dump(again), environ={}).clusters[0].name == loaded


def _name_key(name: str) -> str:
    return unicodedata.normalize("NFC", name.strip()).casefold()


valid_hostports = st.builds("{}:{}".format, st.sampled_from(["k", "10.0.0.1", "kafka-1.example.com", "[::1]",
                                                             "[2001:db8::1]", "kafka_0.svc."]),
                            st.integers(1, 65535))
valid_names = st.text(
    alphabet=st.characters(blacklist_categories=("Cc", "Cs", "Zl", "Zp"), blacklist_characters="/"),
    min_size=1, max_size=100,
).filter(lambda s: "${" not in s  # would be substituted: not a valid literal name
         and unicodedata.normalize("NFC", s.strip()) not in ("", ".", "..")
         and len(unicodedata.normalize("NFC", s.strip())) <= 100)
valid_clusters = st.fixed_dictionaries(
    {
        "name": valid_names,
        "bootstrap_servers": st.one_of(st.lists(valid_hostports, min_size=1, max_size=3),
                                       st.lists(valid_hostports, min_size=1, max_size=3).map(",".join)),
    },
    optional={
        "zookeeper": st.one_of(st.none(), st.builds(
            lambda hosts, chroot: {"connect": ",".join(hosts) + chroot},
            st.lists(valid_hostports, min_size=1, max_size=3), st.sampled_from(["", "/kafka", "/a/b"]))),
        "kafka": st.sampled_from([
            {},
            {"security.protocol": "SSL", "ssl.ca.location": "/ca.pem"},
            {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "u",
             "sasl.password": "p"},
            {"linger.ms": 5, "enable.auto.commit": False},
        ]),
        "kraft": st.sampled_from([None, True, False]),
    },
)
valid_documents = st.fixed_dictionaries(
    {"clusters": st.lists(valid_clusters, min_size=1, max_size=3, unique_by=lambda c: _name_key(c["name"]))},
    optional={
        "poll_interval_s": st.floats(min_value=0.001, max_value=3600),
        "log_level": st.sampled_from(["debug", "INFO", "Warning", "ERROR"]),
        "exporter": st.fixed_dictionaries({}, optional={"port": st.integers(1, 65535),
                                                        "host": st.sampled_from(["0.0.0.0", "::", "localhost"])}),
        "thresholds": st.fixed_dictionaries({}, optional={"lag_seconds_slo": st.floats(0, 86_400),
                                                          "lso_gap_messages": st.integers(0, 2**63 - 1)}),
    },
)


@FUZZ
@given(doc=valid_documents)
def test_fuzz_valid_documents_load_and_round_trip(fuzz_dir: Path, doc: dict[str, Any]) -> None:
    """The other half of the property: everything the spec allows loads, and a dump of it loads back equal."""
    path = fuzz_dir / "valid.yaml"
    path.write_text(yaml.safe_dump(doc, allow_unicode=True), encoding="utf-8")
    config = load_or_config_error(path, {})
    assert config is not None
    assert [c.name for c in config.clusters] == [unicodedata.normalize("NFC", c["name"].strip())
                                                 for c in doc["clusters"]]
    again = parse_config(yaml.safe_dump(config.model_dump(mode="json"), allow_unicode=True), environ={})
    assert again == config


@pytest.mark.parametrize(("exporter", "granularity"), [
    ({}, "exceptions"),
    ({"partition_series": True}, "partition"),  # an older config that asked for every series keeps them
    ({"partition_series": False}, "topic"),
    ({"partition_series": True, "granularity": "exceptions"}, "exceptions"),  # the new key wins
    ({"granularity": "partition"}, "partition"),
])
def test_exporter_granularity_and_the_deprecated_partition_series(exporter: dict, granularity: str) -> None:
    cfg = MonitorConfig.model_validate({"clusters": [{"name": "x", "bootstrap_servers": "h:1"}], "exporter": exporter})
    assert cfg.exporter.granularity == granularity


def test_a_bad_granularity_names_the_field() -> None:
    with pytest.raises(ValueError, match="granularity"):
        MonitorConfig.model_validate({"clusters": [{"name": "x", "bootstrap_servers": "h:1"}],
                                      "exporter": {"granularity": "everything"}})
