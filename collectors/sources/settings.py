"""The ``clusters:`` section of the configuration: how to reach each Kafka cluster and its ZooKeeper ensemble.

It lives beside the adapters that use it. The Kafka client settings are librdkafka's own names passed through
unchanged, so the documentation operators already know applies (`collectors.sources.client_settings` maps the
subset kafka-python understands). What librdkafka would only warn about and then ignore (SASL settings under a
plaintext protocol, TLS files without TLS) is an error here, because the monitor would otherwise connect
without the security asked for and nobody would read the warning.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr, ValidationInfo, field_validator

from collectors.model.patterns import NameFilter, Pattern, TopicFilter
from collectors.model.secrets import REDACTED, is_secret_key
from collectors.model.settings import ConfigPath, Seconds, StrictModel, describe_value, has_control, shorten
from collectors.sources.endpoints import split_host_port
from collectors.sources.oauth import parse_extensions

__all__ = ["ClusterConfig", "FiltersConfig", "KafkaSettings", "NameFilterConfig", "ZooKeeperConfig"]


class _Unknown:
    """Marker for "the field this check depends on failed its own validation": skip the cross-check."""


_UNKNOWN = _Unknown()


class ZooKeeperConfig(StrictModel):
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
    endpoint_identification_algorithm: Literal["https", "none"] = "https"
    """With use_tls: "https" checks that each server's certificate names the host of the connect string, for the
    session and the four-letter words alike; "none" accepts any certificate the CA (or a system root) signed, for
    any host, so a man in the middle holding one gets the digest password. As Kafka's own
    ``zookeeper.ssl.endpoint.identification.algorithm`` (case-insensitive); "none" only deliberately."""
    four_letter_words: bool = True
    """Poll ``mntr``/``srvr`` on each server for per-server health; off when the ensemble does not whitelist them."""
    session_timeout_s: Seconds = Field(10.0, ge=1, le=300)
    """kazoo session timeout; the server clamps it to its own min/max session timeout."""

    @field_validator("connect")
    @classmethod
    def _check_connect(cls, value: str) -> str:
        """Stricter than the adapter's `split_connect_string`: empty entries and chroot parts are typos here."""
        text = value.strip()
        hosts, slash, chroot = text.partition("/")
        entries = [e.strip() for e in hosts.split(",")]
        if not hosts.strip() or any(not e for e in entries):
            raise ValueError("expected 'host:port,host:port[/chroot]', e.g. zk1:2181,zk2:2181/kafka")
        for entry in entries:
            split_host_port(entry, port_required=False, example="zk1:2181")
        if slash:
            segments = chroot.split("/")
            if any(not s or s in (".", "..") or has_control(s) or s.strip() != s for s in segments):
                raise ValueError(f"chroot '/{shorten(chroot)}' must be a ZooKeeper path like /kafka "
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

    @field_validator("endpoint_identification_algorithm", mode="before")
    @classmethod
    def _lower_algorithm(cls, value: object) -> object:
        """HTTPS as Kafka writes it (its default for ZooKeeper) is https; anything else is left to the type check."""
        return value.lower() if isinstance(value, str) else value

    @field_validator("endpoint_identification_algorithm")
    @classmethod
    def _check_algorithm(cls, value: str, info: ValidationInfo) -> str:
        if value == "none" and info.data.get("use_tls") is False:
            raise ValueError("only used with use_tls: true (without it the connection is plaintext)")
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
_OIDC_REQUIRED = ("sasl.oauthbearer.client.id", "sasl.oauthbearer.client.secret", "sasl.oauthbearer.token.endpoint.url")
_OIDC_KEYS = frozenset({"sasl.oauthbearer.method", *_OIDC_REQUIRED, "sasl.oauthbearer.scope",
                        "sasl.oauthbearer.extensions", "sasl.oauthbearer.grant.type"})
_OIDC_HOW = ("OAUTHBEARER is supported with sasl.oauthbearer.method: oidc (the client-credentials grant: "
             "sasl.oauthbearer.client.id, sasl.oauthbearer.client.secret, sasl.oauthbearer.token.endpoint.url, "
             "optional sasl.oauthbearer.scope and sasl.oauthbearer.extensions)")
_NOT_IN_KAFKA = {
    "bootstrap.servers": "use the cluster's bootstrap_servers field",
    "metadata.broker.list": "use the cluster's bootstrap_servers field",
}


def _check_oauthbearer(value: Mapping[str, str | int | bool], mechanism: object) -> None:
    """OAUTHBEARER only as OIDC client credentials: the one flavour both clients can do (kafka-python through
    `collectors.sources.oauth`). librdkafka's default method (an unsecured JWT built from sasl.oauthbearer.config,
    for development) has no kafka-python equivalent, and every poll would fail; so it is refused here."""
    oauth_keys = sorted(k for k in value if k.startswith("sasl.oauthbearer."))
    if mechanism != "OAUTHBEARER":
        if oauth_keys:
            raise ValueError(f"{', '.join(oauth_keys)} set but sasl.mechanism is {mechanism or 'not set'}: "
                             "they are only used with sasl.mechanism OAUTHBEARER")
        return
    method = str(value.get("sasl.oauthbearer.method", "default")).lower()
    if method != "oidc":
        said = "not set" if "sasl.oauthbearer.method" not in value else "not oidc"
        raise ValueError(f"sasl.mechanism OAUTHBEARER with sasl.oauthbearer.method {said}: {_OIDC_HOW}; "
                         "librdkafka's default method (an unsecured JWT from sasl.oauthbearer.config, for development) "
                         "has no equivalent in kafka-python, which the monitor also uses")
    unsupported = [k for k in oauth_keys if k not in _OIDC_KEYS]
    if unsupported:
        raise ValueError(f"{', '.join(unsupported)}: not supported by the monitor; {_OIDC_HOW}")
    grant = str(value.get("sasl.oauthbearer.grant.type", "client_credentials"))
    if grant != "client_credentials":
        raise ValueError(f"sasl.oauthbearer.grant.type: only client_credentials is supported; {_OIDC_HOW}")
    missing = [k for k in _OIDC_REQUIRED if not str(value.get(k, "")).strip()]
    if missing:
        raise ValueError(f"sasl.oauthbearer.method oidc needs {' and '.join(missing)}")
    url = str(value["sasl.oauthbearer.token.endpoint.url"]).strip()
    scheme, sep, rest = url.partition("://")
    if scheme.lower() not in ("http", "https") or not sep or not rest.split("/", 1)[0]:
        raise ValueError("sasl.oauthbearer.token.endpoint.url must be an https:// (or http://) URL")
    if "sasl.oauthbearer.extensions" in value:
        try:
            parse_extensions(str(value["sasl.oauthbearer.extensions"]))
        except ValueError as e:
            raise ValueError(f"sasl.oauthbearer.extensions: {e}") from None


class NameFilterConfig(StrictModel):
    """Which names to watch: allow patterns (none: every name) minus deny patterns (deny wins)."""

    allow: list[Pattern] = Field(default_factory=list)
    """Regular expressions (Python ``re``, unanchored like the peers': ``^payments$`` for a whole name); a name
    must match one of them. Empty: every name."""
    deny: list[Pattern] = Field(default_factory=list)
    """Regular expressions of names left out, even when allowed."""

    def build(self) -> NameFilter:
        return NameFilter(self.allow, self.deny)


class FiltersConfig(StrictModel):
    """What the monitor watches on a cluster, applied before requests are made: a denied group's offsets are
    never fetched, a denied topic is never described nor its offsets listed.

    The peers' equivalents: Burrow ``group-allowlist`` / ``group-denylist`` (and ``topic-denylist``),
    kafka-lag-exporter ``group-whitelist`` / ``group-blacklist`` / ``topic-whitelist`` / ``topic-blacklist``,
    kafka_exporter ``--group.filter`` / ``--group.exclude`` / ``--topic.filter`` / ``--topic.exclude``, kminion
    ``minion.consumerGroups.allowedGroups`` / ``ignoredGroups`` and ``minion.topics.allowedTopics`` /
    ``ignoredTopics``.
    """

    topics: NameFilterConfig = Field(default_factory=NameFilterConfig)
    """Topics: a denied topic's partitions, configs and offsets are not read, and groups' offsets on it are
    dropped. Internal topics follow `internal_topics`, not the allow list."""
    groups: NameFilterConfig = Field(default_factory=NameFilterConfig)
    """Consumer groups: a denied group is listed (ListGroups answers with every group) but never described nor
    its offsets fetched."""
    internal_topics: bool = True
    """Watch Kafka's internal topics (``__consumer_offsets``, ``__transaction_state``) whatever the topic allow
    list says: every group and transaction depends on them, so their replication is always worth watching.
    A deny pattern still leaves them out; False leaves them out altogether."""


    def topic_filter(self) -> TopicFilter | None:
        """The filter the adapter applies (None: every topic is watched, nothing to check)."""
        f = self.topics.build()
        if f.passes_everything and self.internal_topics:
            return None
        internal = self.internal_topics

        def watch(name: str, is_internal: bool) -> bool:
            return (internal and not f.denies(name)) if is_internal else f(name)

        return watch

    def group_filter(self) -> NameFilter | None:
        f = self.groups.build()
        return None if f.passes_everything else f


class ClusterConfig(StrictModel):
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
    filters: FiltersConfig = Field(default_factory=FiltersConfig)
    """Which topics and groups to watch (default: all); see FiltersConfig."""

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
        if has_control(name):
            raise ValueError("must not contain control characters or line breaks")
        return name

    @field_validator("bootstrap_servers", mode="before")
    @classmethod
    def _check_bootstrap(cls, value: object) -> list[str]:
        expected = "expected 'host:port,host:port' or a list of 'host:port' strings"
        if isinstance(value, str):
            entries = [e.strip() for e in value.split(",") if e.strip()]
        elif isinstance(value, list | tuple):
            entries = []
            for i, item in enumerate(value):
                if not isinstance(item, str):
                    raise ValueError(f"item {i}: {expected}, got {describe_value(item)}")
                if "," in item:
                    raise ValueError(f"item {i}: one host:port per list item, got {item.strip()!r}")
                if not item.strip():
                    raise ValueError(f"item {i} is empty; {expected}")
                entries.append(item.strip())
        else:
            raise ValueError(f"{expected}, got {describe_value(value)}")
        if not entries:
            raise ValueError(f"at least one broker is required; {expected}")
        for entry in entries:
            split_host_port(entry, port_required=True, example="kafka1:9092")
        return entries

    @field_validator("kafka", mode="before")
    @classmethod
    def _check_kafka_values(cls, value: object) -> object:
        """Type-check each setting here so the message names the key (never the value: it may be a secret)."""
        if value is None:
            return {}
        if not isinstance(value, Mapping):
            raise ValueError(f"expected a mapping of librdkafka settings, got {describe_value(value)}")
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
        _check_oauthbearer(value, mechanism)
        algorithm = value.get("ssl.endpoint.identification.algorithm")
        if algorithm is not None and str(algorithm).lower() not in ("none", "https"):
            raise ValueError("ssl.endpoint.identification.algorithm must be 'https' (verify host names) or 'none'")
        return KafkaSettings(value)

    def __repr_args__(self) -> Iterator[tuple[str | None, object]]:
        """Belt and braces next to KafkaSettings.__repr__: kafka may have been replaced by a plain dict."""
        for name, value in super().__repr_args__():
            if name == "kafka" and isinstance(value, Mapping):
                value = KafkaSettings(value)
            yield name, value
