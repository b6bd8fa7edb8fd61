"""Monitor configuration: typed models, a YAML loader with environment overrides, and client-setting translators.

Why it is built this way:

* Every model forbids unknown keys. A misspelt threshold (``lag_secods_slo``)
  that silently falls back to its default is worse than a start-up error,
  because the monitor would then look healthy while alerting on the wrong
  numbers.
* Every problem is reported as ``file:line: field.path: what was expected``,
  one line each, all at once, and never as a traceback: the person reading it
  is editing YAML at 3 a.m., not debugging Python.
* Secrets stay out of the file (``${VAR}`` substitution) and out of logs
  (``redacted()``, and ``repr()``/``str()`` of the models never show them).
* The Kafka client settings are librdkafka's own names passed through
  unchanged, so the documentation operators already know applies; a small
  translator maps the subset kafka-python understands.

Load order: read file -> parse YAML -> substitute ``${VAR}`` in string values
-> apply ``KMON__...`` environment overrides -> validate.

``python -m collectors.config FILE`` checks a file and prints it, redacted, as JSON.
"""

from __future__ import annotations

import difflib
import ipaddress
import json
import os
import re
import sys
import types
import unicodedata
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Annotated, Any, Literal, Union, get_args, get_origin

import yaml
from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    ValidationInfo,
    field_validator,
)

__all__ = [
    "CLIENT_ID",
    "ENV_PREFIX",
    "REDACTED",
    "ClusterConfig",
    "ConfigError",
    "ExporterConfig",
    "HistoryConfig",
    "KafkaSettings",
    "MonitorConfig",
    "Thresholds",
    "ZooKeeperConfig",
    "confluent_settings",
    "is_secret_key",
    "kafka_python_settings",
    "kafka_python_unsupported",
    "kazoo_settings",
    "load_config",
    "parse_config",
    "redacted",
]

ENV_PREFIX = "KMON__"
"""Environment variables starting with this override file values (see `load_config`)."""
ENV_SEPARATOR = "__"
REDACTED = "***"
CLIENT_ID = "kafka-reliability-monitor"
"""Default client.id, so broker logs and quotas can tell the monitor's connections apart."""

SECRET_KEY_MARKERS = ("password", "secret", "sasl.jaas.config", "sasl.oauthbearer", "ssl.key.pem")

MAX_CONFIG_BYTES = 1 << 20  # a configuration is a few KiB; anything bigger is the wrong file
MAX_NESTING = 64  # deeper than any valid config; stops recursive YAML aliases (&a [*a])
MAX_NODES = 200_000  # stops alias "billion laughs" expansion during ${VAR} substitution
MAX_REPORTED_PROBLEMS = 50

_DAY = 86_400.0
_MAX_DURATION_S = 30 * _DAY  # keeps time arithmetic downstream (timedelta, timestamps) far from overflow
_MAX_OFFSET_DELTA = 2**63 - 1  # Kafka offsets are int64


def is_secret_key(key: str) -> bool:
    """True for setting names whose values must never reach a log (case-insensitive substring match)."""
    lowered = key.lower()
    return any(marker in lowered for marker in SECRET_KEY_MARKERS)


class ConfigError(ValueError):
    """A configuration that cannot be used. One line per problem, written for the person editing the file.

    ``problems`` holds the same lines as a list, for callers that want to count or show them separately.
    """

    def __init__(self, problems: str | list[str]) -> None:
        self.problems = [problems] if isinstance(problems, str) else list(problems)
        super().__init__("\n".join(self.problems))


# --------------------------------------------------------------------------- field types


def _number(value: Any) -> Any:
    """Reject booleans and binary before pydantic's lax mode turns ``port: true`` into port 1."""
    if isinstance(value, bool):
        raise ValueError("expected a number, got true/false")
    if isinstance(value, bytes | bytearray):
        raise ValueError("expected a number, got binary data")
    return value


def _path(value: Any) -> Any:
    """Paths must be non-empty text: ``Path("")`` is the current directory, a NUL byte fails later on open()."""
    if isinstance(value, Path):
        value = str(value)
    if not isinstance(value, str):
        raise ValueError(f"expected a path, got {_describe(value)}")
    if not value.strip():
        raise ValueError("expected a path, got an empty string")
    if "\x00" in value:
        raise ValueError("a path cannot contain a NUL character")
    return value


Number = Annotated[float, BeforeValidator(_number)]
Seconds = Number
Count = Annotated[int, BeforeValidator(_number)]
ConfigPath = Annotated[Path, BeforeValidator(_path)]

_LABEL = r"[A-Za-z0-9_](?:[A-Za-z0-9_-]*[A-Za-z0-9_])?"
_HOSTNAME = re.compile(rf"{_LABEL}(?:\.{_LABEL})*\.?")
_PORT = re.compile(r"[0-9]{1,5}")


def _split_host_port(entry: str, *, port_required: bool, example: str) -> tuple[str, int | None]:
    """Parse ``host:port`` / ``[ipv6]:port``; the ValueError message is shown to the user as is."""
    if entry.startswith("["):
        close = entry.find("]")
        if close < 0:
            raise ValueError(f"{entry!r}: missing ']' after the IPv6 address (expected e.g. {example})")
        host, rest = entry[1:close], entry[close + 1 :]
        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            raise ValueError(f"{entry!r}: {host!r} is not an IPv6 address") from None
        if rest and not rest.startswith(":"):
            raise ValueError(f"{entry!r}: expected ':port' after ']' (e.g. {example})")
        port_text: str | None = rest[1:] if rest else None
    else:
        if entry.count(":") > 1:
            raise ValueError(f"{entry!r}: IPv6 addresses must be in brackets, e.g. [::1]:9092")
        host, sep, port_text_raw = entry.partition(":")
        port_text = port_text_raw if sep else None
        if not host:
            raise ValueError(f"{entry!r} has no host (expected e.g. {example})")
        if len(host) > 253 or not _HOSTNAME.fullmatch(host):
            raise ValueError(f"{entry!r}: {host!r} is not a valid host name or IP address")
    if port_text is None:
        if port_required:
            raise ValueError(f"{entry!r} has no port (expected host:port, e.g. {example})")
        return host, None
    if not _PORT.fullmatch(port_text) or not 1 <= int(port_text) <= 65535:
        raise ValueError(f"{entry!r}: port must be a number from 1 to 65535")
    return host, int(port_text)


# --------------------------------------------------------------------------- models


class _Model(BaseModel):
    """Shared settings: unknown keys are errors, NaN/inf are not numbers, assignments are re-validated."""

    model_config = ConfigDict(
        extra="forbid",
        allow_inf_nan=False,
        validate_assignment=True,
        use_attribute_docstrings=True,
    )


class _Unknown:
    """Marker for "the field this check depends on failed its own validation": skip the cross-check."""


_UNKNOWN = _Unknown()


class ZooKeeperConfig(_Model):
    """How to reach a cluster's ZooKeeper ensemble (ZooKeeper-mode clusters only)."""

    connect: str
    """kazoo/ZooKeeper connect string ``host[:port],host[:port][/chroot]``; port defaults to 2181 as in kazoo."""
    auth_scheme: Literal["digest"] | None = None
    """None for no authentication; "digest" sends ``username:password`` (ZooKeeper's digest ACL scheme)."""
    username: str | None = Field(None, validate_default=True)
    """Digest user name; required with auth_scheme digest and rejected without it, so a typo cannot disable auth."""
    password: SecretStr | None = Field(None, validate_default=True)
    """Digest password; a SecretStr so it never shows in repr(). Prefer ``${ZK_PASSWORD}``."""
    use_tls: bool = False
    """Connect over TLS (ZooKeeper's secure client port)."""
    ca_file: ConfigPath | None = Field(None, validate_default=True)
    """CA bundle to verify the servers; only with use_tls."""
    cert_file: ConfigPath | None = Field(None, validate_default=True)
    """Client certificate for mutual TLS; only with use_tls, needs key_file."""
    key_file: ConfigPath | None = Field(None, validate_default=True)
    """Private key of cert_file; only with use_tls."""
    four_letter_words: bool = True
    """Poll ``mntr``/``srvr`` on each server for per-server health; off when the ensemble does not whitelist them."""
    session_timeout_s: Seconds = Field(10.0, ge=1, le=300)
    """kazoo session timeout; the server clamps it to its own min/max session timeout."""

    @field_validator("connect")
    @classmethod
    def _check_connect(cls, value: str) -> str:
        text = value.strip()
        hosts, slash, chroot = text.partition("/")
        entries = [e.strip() for e in hosts.split(",")]
        if not hosts.strip() or any(not e for e in entries):
            raise ValueError("expected 'host:port,host:port[/chroot]', e.g. zk1:2181,zk2:2181/kafka")
        for entry in entries:
            _split_host_port(entry, port_required=False, example="zk1:2181")
        if slash:
            segments = chroot.split("/")
            if any(not s or s in (".", "..") or _has_control(s) or s.strip() != s for s in segments):
                raise ValueError(f"chroot '/{_shorten(chroot)}' must be a ZooKeeper path like /kafka "
                                 "(no empty, '.' or '..' parts)")
        return ",".join(entries) + (f"/{chroot}" if slash else "")

    @field_validator("username")
    @classmethod
    def _check_username(cls, value: str | None, info: ValidationInfo) -> str | None:
        scheme = info.data.get("auth_scheme", _UNKNOWN)
        if scheme == "digest" and not value:
            raise ValueError("required when auth_scheme is digest")
        if scheme is None and value is not None:
            raise ValueError("only used with auth_scheme: digest (set auth_scheme, or remove username)")
        if value is not None and ":" in value:
            raise ValueError("a digest user name cannot contain ':'")
        return value

    @field_validator("password")
    @classmethod
    def _check_password(cls, value: SecretStr | None, info: ValidationInfo) -> SecretStr | None:
        scheme = info.data.get("auth_scheme", _UNKNOWN)
        if scheme == "digest" and value is None:
            raise ValueError("required when auth_scheme is digest")
        if scheme is None and value is not None:
            raise ValueError("only used with auth_scheme: digest (set auth_scheme, or remove password)")
        return value

    @field_validator("ca_file", "cert_file", "key_file")
    @classmethod
    def _check_tls_files(cls, value: Path | None, info: ValidationInfo) -> Path | None:
        if value is not None and info.data.get("use_tls") is False:
            raise ValueError("only used with use_tls: true (without it the connection is plaintext)")
        if info.field_name == "key_file" and "cert_file" in info.data:
            if info.data["cert_file"] is not None and value is None:
                raise ValueError("required when cert_file is set")
            if info.data["cert_file"] is None and value is not None:
                raise ValueError("only used together with cert_file")
        return value


class KafkaSettings(dict[str, str | int | bool]):
    """The librdkafka settings of a cluster: a plain dict whose repr() hides secret values.

    So that ``log.info("settings %s", cluster.kafka)`` cannot leak a password.
    `confluent_settings()` returns an ordinary dict with the real values for the client.
    """

    def __repr__(self) -> str:
        return repr({k: (REDACTED if is_secret_key(k) else v) for k, v in self.items()})

    __str__ = __repr__


_SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
_SASL_MECHANISMS = ("GSSAPI", "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")
_NOT_IN_KAFKA = {
    "bootstrap.servers": "use the cluster's bootstrap_servers field",
    "metadata.broker.list": "use the cluster's bootstrap_servers field",
}


class ClusterConfig(_Model):
    """One Kafka cluster to watch."""

    name: str
    """Label on every metric, alert and history row, and a directory name under state_dir/history root:
    hence no '/', no control characters, not '.' or '..'; any other unicode is fine."""
    bootstrap_servers: list[str]
    """``"host:port,host:port"`` or a list of ``host:port``; IPv6 as ``[addr]:port``. Normalised to a list."""
    zookeeper: ZooKeeperConfig | None = None
    """ZooKeeper ensemble to watch alongside the brokers; None for KRaft clusters or when ZooKeeper is off limits."""
    kafka: dict[str, str | int | bool] = Field(default_factory=dict, validate_default=True)
    """librdkafka client settings passed unchanged to confluent-kafka (security.protocol, sasl.*, ssl.*, ...)."""
    kraft: bool | None = None
    """True for a KRaft cluster, False for ZooKeeper mode, None to detect from the brokers' metadata."""

    @field_validator("name")
    @classmethod
    def _check_name(cls, value: str) -> str:
        name = unicodedata.normalize("NFC", value.strip())
        if not name:
            raise ValueError("must not be empty")
        if len(name) > 100:
            raise ValueError(f"must be at most 100 characters (has {len(name)})")
        if "/" in name:
            raise ValueError("must not contain '/' (the name becomes a directory name)")
        if name in (".", ".."):
            raise ValueError("must not be '.' or '..' (the name becomes a directory name)")
        if _has_control(name):
            raise ValueError("must not contain control characters or line breaks")
        return name

    @field_validator("bootstrap_servers", mode="before")
    @classmethod
    def _check_bootstrap(cls, value: Any) -> list[str]:
        expected = "expected 'host:port,host:port' or a list of 'host:port' strings"
        if isinstance(value, str):
            entries = [e.strip() for e in value.split(",") if e.strip()]
        elif isinstance(value, list | tuple):
            entries = []
            for i, item in enumerate(value):
                if not isinstance(item, str):
                    raise ValueError(f"item {i}: {expected}, got {_describe(item)}")
                if "," in item:
                    raise ValueError(f"item {i}: one host:port per list item, got {item.strip()!r}")
                if not item.strip():
                    raise ValueError(f"item {i} is empty; {expected}")
                entries.append(item.strip())
        else:
            raise ValueError(f"{expected}, got {_describe(value)}")
        if not entries:
            raise ValueError(f"at least one broker is required; {expected}")
        for entry in entries:
            _split_host_port(entry, port_required=True, example="kafka1:9092")
        return entries

    @field_validator("kafka", mode="before")
    @classmethod
    def _check_kafka_values(cls, value: Any) -> Any:
        """Type-check each setting here so the message names the key (never the value: it may be a secret)."""
        if value is None:
            return {}
        if not isinstance(value, Mapping):
            raise ValueError(f"expected a mapping of librdkafka settings, got {_describe(value)}")
        for key, item in value.items():
            if not isinstance(key, str) or not key.strip() or key != key.strip():
                raise ValueError(f"setting names must be non-empty strings without surrounding spaces, got {key!r}")
            if key in _NOT_IN_KAFKA:
                raise ValueError(f"{key!r}: {_NOT_IN_KAFKA[key]}")
            if not isinstance(item, str | int | bool):  # bool is an int, listed for the reader
                raise ValueError(f"{key!r}: expected a string, integer or true/false, got {type(item).__name__}")
        return value

    @field_validator("kafka")
    @classmethod
    def _check_kafka_security(cls, value: dict[str, str | int | bool]) -> KafkaSettings:
        """Catch the combinations librdkafka only warns about and then connects without the security asked for."""
        protocol = str(value.get("security.protocol", "PLAINTEXT")).upper()
        if protocol not in _SECURITY_PROTOCOLS:
            raise ValueError(f"security.protocol must be one of {', '.join(_SECURITY_PROTOCOLS)}")
        if "sasl.mechanism" in value and "sasl.mechanisms" in value:
            raise ValueError("set only one of sasl.mechanism and sasl.mechanisms (they are aliases)")
        mechanism = value.get("sasl.mechanism", value.get("sasl.mechanisms"))
        if mechanism is not None and mechanism not in _SASL_MECHANISMS:
            raise ValueError(f"sasl.mechanism must be one of {', '.join(_SASL_MECHANISMS)}")
        sasl_keys = sorted(k for k in value if k.startswith("sasl."))
        if sasl_keys and not protocol.startswith("SASL_"):
            raise ValueError(
                f"{', '.join(sasl_keys)} set but security.protocol is {protocol}: librdkafka would ignore them and "
                "connect without authentication; set security.protocol to SASL_SSL or SASL_PLAINTEXT"
            )
        ssl_keys = sorted(k for k in value if k.startswith("ssl."))
        if ssl_keys and protocol not in ("SSL", "SASL_SSL"):
            raise ValueError(
                f"{', '.join(ssl_keys)} set but security.protocol is {protocol}: the connection would not use TLS; "
                "set security.protocol to SSL or SASL_SSL"
            )
        if mechanism in ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"):
            missing = [k for k in ("sasl.username", "sasl.password") if k not in value]
            if missing:
                raise ValueError(f"sasl.mechanism {mechanism} needs {' and '.join(missing)}")
        algorithm = value.get("ssl.endpoint.identification.algorithm")
        if algorithm is not None and str(algorithm).lower() not in ("none", "https"):
            raise ValueError("ssl.endpoint.identification.algorithm must be 'https' (verify host names) or 'none'")
        return KafkaSettings(value)

    def __repr_args__(self) -> Iterator[tuple[str | None, Any]]:
        """Belt and braces next to KafkaSettings.__repr__: kafka may have been replaced by a plain dict."""
        for name, value in super().__repr_args__():
            if name == "kafka" and isinstance(value, Mapping):
                value = KafkaSettings(value)
            yield name, value


class Thresholds(_Model):
    """When a symptom becomes an alert. Durations in seconds; counts are occurrences, messages or records."""

    under_replicated_grace_s: Seconds = Field(60.0, ge=0, le=_MAX_DURATION_S)
    """A partition must stay under-replicated this long before alerting; rolling restarts cause short dips."""
    isr_flap_changes: Count = Field(4, ge=1, le=1_000_000)
    """ISR shrink/expand events within isr_flap_window_s that count as flapping (a sick or overloaded follower)."""
    isr_flap_window_s: Seconds = Field(600.0, gt=0, le=_MAX_DURATION_S)
    """Sliding window for isr_flap_changes."""
    preferred_leader_imbalance_ratio: Number = Field(0.2, ge=0, le=1)
    """Alert when more than this share of a cluster's partitions is led by a broker other than the preferred one:
    leadership has piled up on some brokers (typically after a restart without preferred-leader election)."""
    lag_window_points: Count = Field(10, ge=2, le=10_000)
    """Lag samples kept per partition for Burrow-style evaluation (a trend needs at least two)."""
    lag_allowed_messages: Count = Field(0, ge=0, le=_MAX_OFFSET_DELTA)
    """Lag at or below this is OK whatever its trend (e.g. a consumer that commits every N messages)."""
    lag_min_points: Count = Field(3, ge=1, le=10_000)
    """Samples needed before a lag status is judged at all; at most lag_window_points."""
    consumer_stop_after_s: Seconds = Field(300.0, ge=0, le=_MAX_DURATION_S)
    """No commit for this long while lag is non-zero means the consumer stopped (STOP), not just slow."""
    lag_seconds_slo: Seconds = Field(300.0, ge=0, le=_MAX_DURATION_S)
    """Time lag (age of the oldest unconsumed message) above this breaches the consumer SLO."""
    retention_risk_s: Seconds = Field(3600.0, ge=0, le=_MAX_DURATION_S)
    """Alert when a consumer's position will fall off the log start within this long: data loss ahead."""
    txn_prepare_stuck_s: Seconds = Field(60.0, ge=0, le=_MAX_DURATION_S)
    """A transaction in PrepareCommit/PrepareAbort longer than this is stuck (markers not written)."""
    txn_timeout_grace_s: Seconds = Field(30.0, ge=0, le=_MAX_DURATION_S)
    """Extra time past a transaction's own timeout before calling it hanging (the coordinator aborts lazily)."""
    lso_gap_messages: Count = Field(10_000, ge=0, le=_MAX_OFFSET_DELTA)
    """High watermark minus last stable offset above this means read_committed consumers are blocked."""
    producer_epoch_bumps: Count = Field(3, ge=1, le=1_000_000)
    """Producer epoch increases within producer_epoch_window_s that indicate a crash-looping or fenced producer."""
    producer_epoch_window_s: Seconds = Field(3600.0, gt=0, le=_MAX_DURATION_S)
    """Sliding window for producer_epoch_bumps."""
    zk_follower_behind_s: Seconds = Field(30.0, ge=0, le=_MAX_DURATION_S)
    """A ZooKeeper follower out of sync for this long is an alert (one more failure away from losing quorum)."""
    kraft_voter_lag_records: Count = Field(1000, ge=0, le=_MAX_OFFSET_DELTA)
    """A KRaft voter this many metadata records behind the leader is lagging."""
    stale_after_polls: Count = Field(2, ge=1, le=1000)
    """Data not refreshed for this many polls is marked stale instead of being reported as current."""

    @field_validator("lag_min_points")
    @classmethod
    def _check_min_points(cls, value: int, info: ValidationInfo) -> int:
        window = info.data.get("lag_window_points")
        if isinstance(window, int) and value > window:
            raise ValueError(f"must not exceed lag_window_points ({window}); more points than are kept never arrive")
        return value


class ExporterConfig(_Model):
    """The Prometheus /metrics endpoint."""

    enabled: bool = True
    """Serve /metrics; off for --once runs or when only history is wanted."""
    host: str = "127.0.0.1"
    """Listen address; loopback by default so metrics are not exposed by accident. "0.0.0.0" or "::" for all."""
    port: Count = Field(9308, ge=1, le=65535)
    """Listen port (9308 is the port registered for Kafka exporters)."""
    partition_series: bool = True
    """Per-partition series; False keeps only per-topic / per-group roll-ups for clusters with many partitions."""

    @field_validator("host")
    @classmethod
    def _check_host(cls, value: str) -> str:
        try:
            ipaddress.ip_address(value)
        except ValueError:
            if len(value) > 253 or not _HOSTNAME.fullmatch(value):
                raise ValueError("expected an IP address (e.g. 0.0.0.0, ::) or a host name, without brackets") from None
        return value


class HistoryConfig(_Model):
    """Snapshot history written as Parquet for the Spark report and the dashboard."""

    enabled: bool = True
    """Write history at all."""
    root: ConfigPath = Path("data/history")
    """Directory of the Parquet dataset (relative paths are relative to the working directory)."""
    flush_interval_s: Seconds = Field(60.0, gt=0, le=_DAY)
    """Buffered rows are written at least this often; lower means less lost on a crash, more small files."""
    partition_detail: bool = False
    """Also store per-partition rows (large); by default only topic, group and cluster roll-ups."""
    retention_days: Count = Field(30, ge=1, le=3650)
    """Days of history kept; older files are deleted."""
    compact_min_files: Count = Field(10, ge=2, le=1_000_000)
    """Merge a day's small files once there are at least this many."""


class MonitorConfig(_Model):
    """The whole monitor configuration (the top level of the YAML file)."""

    clusters: list[ClusterConfig] = Field(min_length=1)
    """Clusters to watch; names must be unique (ignoring case, since they become directory names)."""
    poll_interval_s: Seconds = Field(30.0, gt=0, le=3600)
    """Seconds between polls of each cluster."""
    request_timeout_s: Seconds = Field(10.0, ge=1, le=300)
    """Timeout of a single Kafka/ZooKeeper request; librdkafka accepts at most 300 s."""
    max_concurrent_requests: Count = Field(16, ge=1, le=1024)
    """Requests in flight at once across clusters, so a poll cannot swamp a struggling cluster."""
    thresholds: Thresholds = Field(default_factory=Thresholds)
    """Alert thresholds; every one has a default."""
    exporter: ExporterConfig = Field(default_factory=ExporterConfig)
    """Prometheus endpoint."""
    history: HistoryConfig = Field(default_factory=HistoryConfig)
    """Parquet history."""
    state_dir: ConfigPath = Path("data/state")
    """Where state that must survive restarts lives (lag windows, flap counters); relative to the working directory."""
    checkpoint_interval_s: Seconds = Field(60.0, gt=0, le=_DAY)
    """How often the pollers' memory (lag windows, offset histories, open alerts) is saved under state_dir;
    a restart resumes from it. Also saved on a clean stop."""
    checkpoint_max_age_s: Seconds = Field(3600.0, ge=0, le=30 * _DAY)
    """A checkpoint older than this is not resumed (alerts open then would span the whole outage); 0 never resumes."""
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    """Logging level (case-insensitive in the file)."""

    @field_validator("log_level", mode="before")
    @classmethod
    def _upper_level(cls, value: Any) -> Any:
        return value.upper() if isinstance(value, str) else value

    @field_validator("clusters")
    @classmethod
    def _unique_names(cls, value: list[ClusterConfig]) -> list[ClusterConfig]:
        seen: dict[str, int] = {}
        for i, cluster in enumerate(value):
            key = cluster.name.casefold()
            if key in seen:
                raise ValueError(f"clusters[{i}] and clusters[{seen[key]}] are both named {cluster.name!r}")
            seen[key] = i
        return value


# --------------------------------------------------------------------------- redaction


def redacted(config: BaseModel) -> dict[str, Any]:
    """The whole config as a JSON-able dict with every secret value replaced by "***", for logs and --dump.

    Redacts by key name (see `is_secret_key`) anywhere in the tree, so the ZooKeeper password and any Kafka
    setting like sasl.password or sasl.jaas.config are covered, and so is any secret-named field added later.
    """
    return _redact(config.model_dump(mode="json"))


def _redact(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: (REDACTED if is_secret_key(str(k)) and v is not None else _redact(v)) for k, v in value.items()}
    if isinstance(value, list):
        return [_redact(v) for v in value]
    return value


# --------------------------------------------------------------------------- client settings


def _timeout_ms(request_timeout_s: float) -> int:
    return round(request_timeout_s * 1000)


def _as_text(value: str | int | bool) -> str:
    """Render a setting the way librdkafka would read it (booleans as true/false)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def confluent_settings(cluster: ClusterConfig, request_timeout_s: float) -> dict[str, str | int | bool]:
    """Configuration dict for confluent-kafka clients (AdminClient, Consumer) of one cluster.

    bootstrap.servers joined with commas, a default client.id, socket.timeout.ms (librdkafka's per-request
    timeout, also used by admin requests) and socket.connection.setup.timeout.ms from request_timeout_s,
    clamped to librdkafka's accepted ranges. The cluster's own ``kafka`` settings are applied last, so an explicit
    setting there wins. request.timeout.ms is not set: it is a producer-only property that consumers warn about.
    The result holds real secrets: hand it to the client, never to a logger.
    """
    ms = _timeout_ms(request_timeout_s)
    settings: dict[str, str | int | bool] = {
        "bootstrap.servers": ",".join(cluster.bootstrap_servers),
        "client.id": CLIENT_ID,
        "socket.timeout.ms": min(max(ms, 10), 300_000),
        "socket.connection.setup.timeout.ms": max(ms, 1000),
    }
    settings.update(dict(cluster.kafka))
    return settings


KAFKA_PYTHON_NAMES = {
    "client.id": "client_id",
    "security.protocol": "security_protocol",
    "sasl.mechanism": "sasl_mechanism",
    "sasl.mechanisms": "sasl_mechanism",
    "sasl.username": "sasl_plain_username",
    "sasl.password": "sasl_plain_password",
    "sasl.kerberos.service.name": "sasl_kerberos_service_name",
    "ssl.ca.location": "ssl_cafile",
    "ssl.certificate.location": "ssl_certfile",
    "ssl.key.location": "ssl_keyfile",
    "ssl.key.password": "ssl_password",
    "ssl.crl.location": "ssl_crlfile",
}
"""librdkafka setting -> kafka-python KafkaAdminClient keyword (plus ssl.endpoint.identification.algorithm)."""
_KAFKA_PYTHON_SPECIAL = ("ssl.endpoint.identification.algorithm",)


def kafka_python_settings(cluster: ClusterConfig, request_timeout_s: float) -> dict[str, Any]:
    """Keyword arguments for kafka-python's KafkaAdminClient, translated from the librdkafka names.

    Mapped: the names in KAFKA_PYTHON_NAMES, and ssl.endpoint.identification.algorithm ("https" ->
    ssl_check_hostname=True, "none" -> False). Every other librdkafka setting has no kafka-python equivalent
    and is skipped (use `kafka_python_unsupported` to log which). security.protocol is upper-cased because
    kafka-python, unlike librdkafka, compares it case-sensitively. The result holds real secrets.
    """
    settings: dict[str, Any] = {
        "bootstrap_servers": list(cluster.bootstrap_servers),
        "client_id": CLIENT_ID,
        "request_timeout_ms": _timeout_ms(request_timeout_s),
    }
    for key, value in cluster.kafka.items():
        if key == "ssl.endpoint.identification.algorithm":
            settings["ssl_check_hostname"] = _as_text(value).lower() == "https"
        elif key in KAFKA_PYTHON_NAMES:
            text = _as_text(value)
            settings[KAFKA_PYTHON_NAMES[key]] = text.upper() if key == "security.protocol" else text
    return settings


def kafka_python_unsupported(cluster: ClusterConfig) -> list[str]:
    """The cluster's librdkafka settings that `kafka_python_settings` drops, so callers can log them once."""
    return sorted(k for k in cluster.kafka if k not in KAFKA_PYTHON_NAMES and k not in _KAFKA_PYTHON_SPECIAL)


def kazoo_settings(zk: ZooKeeperConfig) -> dict[str, Any]:
    """Keyword arguments for kazoo's KazooClient: hosts (chroot included), timeout, auth_data and TLS files.

    auth_data is ``[("digest", "user:password")]`` with digest auth and an empty list otherwise. The result holds
    the real password.
    """
    auth: list[tuple[str, str]] = []
    if zk.auth_scheme == "digest" and zk.username is not None and zk.password is not None:
        auth.append(("digest", f"{zk.username}:{zk.password.get_secret_value()}"))
    return {
        "hosts": zk.connect,
        "timeout": zk.session_timeout_s,
        "auth_data": auth,
        "use_ssl": zk.use_tls,
        "ca": str(zk.ca_file) if zk.ca_file else None,
        "certfile": str(zk.cert_file) if zk.cert_file else None,
        "keyfile": str(zk.key_file) if zk.key_file else None,
    }


# --------------------------------------------------------------------------- loading


class _Loader(yaml.SafeLoader):
    """SafeLoader that rejects duplicate keys: PyYAML keeps the last one silently, hiding half a block."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        if isinstance(node, yaml.MappingNode):
            seen: set[Any] = set()
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge" or not isinstance(key_node, yaml.ScalarNode):
                    continue
                key = self.construct_object(key_node, deep=True)
                try:
                    duplicate = key in seen
                    seen.add(key)
                except TypeError:  # unhashable: SafeConstructor reports it below
                    continue
                if duplicate:
                    raise yaml.constructor.ConstructorError(
                        "while constructing a mapping", node.start_mark, f"found duplicate key {key!r}",
                        key_node.start_mark,
                    )
        return super().construct_mapping(node, deep=deep)


def load_config(path: str | Path, environ: Mapping[str, str] | None = None) -> MonitorConfig:
    """Read, substitute, override and validate a YAML configuration file.

    ``environ`` (default ``os.environ``) supplies both ``${VAR}`` / ``${VAR:-default}`` values inside strings
    and ``KMON__`` overrides: ``KMON__POLL_INTERVAL_S=10``, ``KMON__THRESHOLDS__LAG_SECONDS_SLO=600``,
    ``KMON__CLUSTERS__0__BOOTSTRAP_SERVERS=h:9092``, ``KMON__CLUSTERS__1__KAFKA__SASL_USERNAME=monitor``
    (path segments separated by ``__`` and lower-cased; list items by index; under ``kafka`` the rest of the
    name is one setting with ``_`` and ``__`` read as ``.``; values parsed as YAML scalars, quote to force text).

    Raises ConfigError for every kind of bad input, with one ``file[:line]: field.path: problem`` line each.
    """
    source = str(path)
    try:
        with Path(path).open("rb") as fh:
            raw = fh.read(MAX_CONFIG_BYTES + 1)
    except OSError as e:
        raise ConfigError(f"{source}: cannot read configuration file: {e.strerror or e}") from None
    except ValueError as e:  # e.g. a NUL byte in the path
        raise ConfigError(f"{source}: cannot read configuration file: {e}") from None
    if len(raw) > MAX_CONFIG_BYTES:
        raise ConfigError(f"{source}: larger than {MAX_CONFIG_BYTES} bytes; is this the configuration file?")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise ConfigError(f"{source}: not UTF-8 text (invalid byte at offset {e.start})") from None
    return parse_config(text, source, environ)


def parse_config(text: str, source: str = "<config>", environ: Mapping[str, str] | None = None) -> MonitorConfig:
    """`load_config` for text already in memory; ``source`` names it in error messages."""
    env = os.environ if environ is None else environ
    data, root = _parse_yaml(text, source)
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: the top level must be a mapping of settings (with 'clusters'), "
                          f"got {_describe(data)}")
    data = _substitute_all(data, env, source)
    overridden = _apply_overrides(data, env, source)
    try:
        return MonitorConfig.model_validate(data)
    except ValidationError as e:
        raise ConfigError(_problems(e, root, overridden, source)) from None


def _parse_yaml(text: str, source: str) -> tuple[Any, yaml.Node | None]:
    loader: _Loader | None = None
    try:
        loader = _Loader(text)  # the reader already rejects some characters here
        root = loader.get_single_node()
        data = loader.construct_document(root) if root is not None else None
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        where = f":{mark.line + 1}" if mark else ""
        what = " ".join(x for x in (e.context, e.problem) if x)
        raise ConfigError(f"{source}{where}: not valid YAML: {_one_line(what)}") from None
    except yaml.reader.ReaderError as e:
        raise ConfigError(f"{source}: not valid YAML: character #x{e.character:04x} at offset {e.position} "
                          "is not allowed (control characters must be escaped in a double-quoted string)") from None
    except RecursionError:
        raise ConfigError(f"{source}: not valid YAML: nested too deeply") from None
    except Exception as e:  # PyYAML raises bare ValueError etc. on e.g. `2020-13-45`; all of it is bad input
        raise ConfigError(f"{source}: not valid YAML: {_one_line(str(e)) or type(e).__name__}") from None
    finally:
        if loader is not None:
            loader.dispose()
    return data, root


# ----- ${VAR} substitution

_VAR_TOKEN = re.compile(r"\$\$\{|\$\{([^{}]*)\}|\$\{")
_VAR_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _substitute_all(data: dict[Any, Any], env: Mapping[str, str], source: str) -> dict[Any, Any]:
    """Replace ``${VAR}``, ``${VAR:-default}`` in every string value (not in keys); ``$${`` is a literal ``${``.

    As in the shell, the default is used when VAR is unset or empty. Collects every problem before raising.
    Also the place that bounds nesting and size, because YAML aliases can make both unbounded.
    """
    problems: list[str] = []
    budget = [MAX_NODES]

    def walk(value: Any, path: tuple[Any, ...]) -> Any:
        budget[0] -= 1
        if budget[0] < 0:
            raise ConfigError(f"{source}: too large after expanding YAML aliases")
        if len(path) > MAX_NESTING:
            raise ConfigError(f"{source}: {_fmt_loc(path[:8])}...: nested more than {MAX_NESTING} levels deep")
        if isinstance(value, dict):
            return {k: walk(v, (*path, k)) for k, v in value.items()}
        if isinstance(value, list):
            return [walk(v, (*path, i)) for i, v in enumerate(value)]
        if isinstance(value, str) and "${" in value:
            return _substitute(value, env, lambda msg: problems.append(f"{source}: {_fmt_loc(path)}: {msg}"))
        return value

    result = walk(data, ())
    if problems:
        raise ConfigError(problems)
    return result


def _substitute(text: str, env: Mapping[str, str], report: Callable[[str], None]) -> str:
    def replace(match: re.Match[str]) -> str:
        token = match.group(0)
        if token == "$${":
            return "${"
        body = match.group(1)
        if body is None:
            report("'${' without a matching '}' (nested ${...} is not supported; write $${ for a literal ${)")
            return token
        name, sep, default = body.partition(":-")
        if not _VAR_NAME.fullmatch(name):
            report(f"'${{{_shorten(name)}}}' is not a valid variable reference; "
                   "expected ${NAME} or ${NAME:-default}")
            return token
        value = env.get(name)
        if sep:
            return value if value else default
        if value is None:
            report(f"environment variable {name} is not set (write ${{{name}:-default}} to make it optional)")
            return token
        return value

    return _VAR_TOKEN.sub(replace, text)


# ----- KMON__ overrides


def _apply_overrides(data: dict[Any, Any], env: Mapping[str, str], source: str) -> dict[tuple[Any, ...], str]:
    """Apply ``KMON__A__B__0__C=value`` overrides in place; returns {path: variable} to name them in errors.

    Shorter paths are applied first, so ``KMON__CLUSTERS__0__ZOOKEEPER=null`` cannot undo a deeper override.
    Overrides change existing list items but never add any: a new cluster needs its name, so it belongs
    in the file.
    """
    names = sorted((k for k in env if k.startswith(ENV_PREFIX)), key=lambda k: (k.count(ENV_SEPARATOR), k))
    problems: list[str] = []
    applied: dict[tuple[Any, ...], str] = {}
    for var in names:
        segments = [s.lower() for s in var[len(ENV_PREFIX) :].split(ENV_SEPARATOR)]
        if not segments or any(not s for s in segments):
            problems.append(f"{var}: empty path segment; expected e.g. {ENV_PREFIX}THRESHOLDS__LAG_SECONDS_SLO")
            continue
        try:
            path = _set_path(data, segments, _parse_scalar(env[var]))
        except ValueError as e:
            problems.append(f"{var}: {e}")
            continue
        applied[path] = var
    if problems:
        raise ConfigError([f"{source}: environment override {p}" for p in problems])
    return applied


def _set_path(data: dict[Any, Any], segments: list[str], value: Any) -> tuple[Any, ...]:
    keys: list[Any] = []
    container: Any = data
    i = 0
    while i < len(segments):
        seg = segments[i]
        last = i == len(segments) - 1
        if isinstance(container, dict):
            if seg == "kafka" and len(keys) == 2 and keys[0] == "clusters" and not last:
                # librdkafka names contain dots, which environment variable names cannot: SASL_USERNAME and
                # SASL__USERNAME both mean sasl.username (no librdkafka setting contains an underscore).
                rest = ".".join(s.replace("_", ".") for s in segments[i + 1 :])
                settings = container.get(seg)
                if settings is None:
                    settings = container[seg] = {}
                if not isinstance(settings, dict):
                    raise ValueError(f"{_fmt_loc((*keys, seg))} is {_describe(settings)}, not a mapping")
                settings[rest] = value
                return (*keys, seg, rest)
            if last:
                container[seg] = value
                return (*keys, seg)
            child = container.get(seg)
            if child is None:
                if segments[i + 1].isdigit():
                    raise ValueError(f"{_fmt_loc((*keys, seg))} is not a list in the file; overrides change list "
                                     "items, they cannot add them")
                child = container[seg] = {}
            keys.append(seg)
            container = child
        elif isinstance(container, list):
            if not (seg.isascii() and seg.isdigit()):
                raise ValueError(f"{_fmt_loc(keys)} is a list: expected an item index, got {seg!r}")
            index = int(seg)
            if index >= len(container):
                raise ValueError(f"{_fmt_loc((*keys, index))} does not exist ({_fmt_loc(keys)} has "
                                 f"{len(container)} item(s)); overrides change list items, they cannot add them")
            if last:
                container[index] = value
                return (*keys, index)
            keys.append(index)
            container = container[index]
        else:
            raise ValueError(f"{_fmt_loc(keys)} is {_describe(container)}, not a mapping or list")
        i += 1
    raise AssertionError("unreachable")  # pragma: no cover


_NULLS = ("null", "Null", "NULL", "~")
_TRUE = ("true", "yes", "on")  # YAML 1.1 booleans, as PyYAML reads them in the file
_FALSE = ("false", "no", "off")
_INT = re.compile(r"[-+]?[0-9]+")
_FLOAT = re.compile(r"[-+]?(?:[0-9]+\.[0-9]*|\.[0-9]+|[0-9]+)(?:[eE][-+]?[0-9]+)?")


def _parse_scalar(text: str) -> Any:
    """An override value read like a YAML scalar: 10 -> int, 0.5 -> float, true -> bool, null -> None.

    Deliberately narrower than PyYAML: only plain decimal numbers count as numbers (PyYAML would read
    ``12:34`` as 754 and ``0777`` as octal, mangling a password or a port), and anything YAML would turn into
    a list, mapping, date or comment stays the literal text. Quote (``'10'``) to force text.
    """
    s = text.strip()
    if s in _NULLS:
        return None
    if s.lower() in _TRUE:
        return True
    if s.lower() in _FALSE:
        return False
    if len(s) <= 1000 and _INT.fullmatch(s):
        return int(s)
    if len(s) <= 1000 and _FLOAT.fullmatch(s):
        return float(s)
    if len(s) >= 2 and s[0] == s[-1] and s[0] in "'\"":
        try:
            value = yaml.safe_load(s)
        except yaml.YAMLError:
            return text
        if isinstance(value, str):
            return value
    return text


# ----- error messages

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _fmt_loc(loc: tuple[Any, ...] | list[Any]) -> str:
    """``('clusters', 0, 'kafka', 'sasl.password')`` -> ``clusters[0].kafka["sasl.password"]``."""
    out = ""
    for part in loc:
        if isinstance(part, int) and not isinstance(part, bool):
            out += f"[{part}]"
        elif isinstance(part, str) and _IDENT.fullmatch(part):
            out += f".{part}" if out else part
        else:
            out += f"[{json.dumps(_shorten(str(part)), ensure_ascii=False)}]"
    return out or "<top level>"


def _problems(error: ValidationError, root: yaml.Node | None, overridden: dict[tuple[Any, ...], str],
              source: str) -> list[str]:
    lines = []
    for err in error.errors():
        loc = tuple(x for x in err["loc"] if not (isinstance(x, str) and x.startswith("function-")))
        lines.append(_problem_line(err, loc, root, overridden, source))
    if len(lines) > MAX_REPORTED_PROBLEMS:
        more = len(lines) - MAX_REPORTED_PROBLEMS
        lines = [*lines[:MAX_REPORTED_PROBLEMS], f"{source}: ... and {more} more problem(s)"]
    return lines


def _problem_line(err: Any, loc: tuple[Any, ...], root: yaml.Node | None,
                  overridden: dict[tuple[Any, ...], str], source: str) -> str:
    kind = err["type"]
    msg = err["msg"].removeprefix("Value error, ")
    if kind == "missing":
        msg = "required field is missing"
    elif kind == "extra_forbidden":
        msg = _unknown_key_message(loc)
    elif kind not in ("value_error", "assertion_error") and not _is_secret_loc(loc):
        msg = f"{msg} (got {_describe(err.get('input'))})"
    origin = next((var for path, var in overridden.items() if loc[: len(path)] == path), None)
    if origin:
        return f"{source}: {_fmt_loc(loc)}: {msg} (from environment variable {origin})"
    line = yaml_line_of(root, loc)
    return f"{source}{f':{line}' if line else ''}: {_fmt_loc(loc)}: {msg}"


def _is_secret_loc(loc: tuple[Any, ...]) -> bool:
    return any(isinstance(part, str) and is_secret_key(part) for part in loc)


def _unknown_key_message(loc: tuple[Any, ...]) -> str:
    model = _model_at(loc[:-1])
    if model is None or not loc:
        return "unknown key"
    fields = list(model.model_fields)
    close = difflib.get_close_matches(str(loc[-1]), fields, n=1)
    if close:
        return f"unknown key; did you mean {close[0]!r}?"
    return f"unknown key; expected one of: {', '.join(fields)}"


def _model_at(loc: tuple[Any, ...]) -> type[BaseModel] | None:
    """The model class that validates the mapping at ``loc`` (for listing its valid keys)."""
    current: Any = MonitorConfig
    for part in loc:
        if isinstance(part, int):
            continue
        if not (isinstance(current, type) and issubclass(current, BaseModel)) or part not in current.model_fields:
            return None
        current = _unwrap(current.model_fields[part].annotation)
    return current if isinstance(current, type) and issubclass(current, BaseModel) else None


def _unwrap(annotation: Any) -> Any:
    """list[X] -> X, X | None -> X, so the walk reaches the model class inside."""
    origin = get_origin(annotation)
    if origin is list:
        return _unwrap(get_args(annotation)[0])
    if origin in (Union, types.UnionType):
        models = [a for a in get_args(annotation) if isinstance(a, type) and issubclass(a, BaseModel)]
        return models[0] if models else annotation
    return annotation


def yaml_line_of(node: yaml.Node | None, loc: tuple[Any, ...]) -> int | None:
    """1-based line of the deepest YAML node along ``loc`` (best effort: the parent when the key is missing)."""
    line = None
    for part in loc:
        if node is None:
            break
        line = node.start_mark.line + 1
        if isinstance(node, yaml.MappingNode):
            node = next((v for k, v in node.value if getattr(k, "value", None) == part), None)
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and 0 <= part < len(node.value):
            node = node.value[part]
        else:
            node = None
    if node is not None:
        line = node.start_mark.line + 1
    return line


def _describe(value: Any) -> str:
    """Short, safe description of a bad value: containers by type only, long text and huge numbers cut."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict | Mapping):
        return "a mapping"
    if isinstance(value, list | tuple | set):
        return "a list"
    if isinstance(value, int):
        return f"integer {value}" if abs(value) < 10**30 else "a very large integer"
    if isinstance(value, float):
        return f"number {value!r}"
    if isinstance(value, str):
        return f"text {json.dumps(_shorten(value), ensure_ascii=False)}"
    return type(value).__name__


def _shorten(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _has_control(text: str) -> bool:
    """Control characters, surrogates and line/paragraph separators break logs, labels and file names."""
    return any(unicodedata.category(ch) in ("Cc", "Cs", "Zl", "Zp") for ch in text)


def main(argv: list[str] | None = None) -> int:
    """``python -m collectors.config FILE``: validate a configuration and print it, redacted, as JSON."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1 or args[0].startswith("-"):
        print("usage: python -m collectors.config CONFIG_FILE", file=sys.stderr)
        return 2
    try:
        config = load_config(args[0])
    except ConfigError as e:
        print(e, file=sys.stderr)
        return 1
    print(json.dumps(redacted(config), indent=2, ensure_ascii=False))
    return 0

