"""Client settings: one cluster's configuration translated into what each client library takes.

The configuration speaks librdkafka (the names operators already know from confluent-kafka and the Kafka
documentation); confluent-kafka takes them unchanged, kafka-python gets the subset it has an equivalent for,
and kazoo gets its own keyword arguments. Every result holds the real secrets: hand it to the client, never to
a logger.
"""

from __future__ import annotations

from typing import Final, TypedDict

from collectors.sources.oauth import OidcTokenProvider, parse_extensions
from collectors.sources.settings import ClusterConfig, ZooKeeperConfig

__all__ = [
    "CLIENT_ID",
    "KAFKA_PYTHON_NAMES",
    "KazooSettings",
    "confluent_settings",
    "kafka_python_settings",
    "kafka_python_unsupported",
    "kazoo_settings",
    "oidc_token_provider",
]

CLIENT_ID: Final = "kafka-reliability-monitor"
"""Default client.id, so broker logs and quotas can tell the monitor's connections apart."""


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


KAFKA_PYTHON_NAMES: Final = {
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
_KAFKA_PYTHON_SPECIAL = ("ssl.endpoint.identification.algorithm", "https.ca.location")
_OIDC_SETTINGS = ("sasl.oauthbearer.method", "sasl.oauthbearer.client.id", "sasl.oauthbearer.client.secret",
                  "sasl.oauthbearer.token.endpoint.url", "sasl.oauthbearer.scope", "sasl.oauthbearer.extensions",
                  "sasl.oauthbearer.grant.type")
"""Settings `oidc_token_provider` reads (the config check refuses OAUTHBEARER without method oidc)."""


def oidc_token_provider(cluster: ClusterConfig, request_timeout_s: float) -> OidcTokenProvider | None:
    """The kafka-python token provider for a cluster with sasl.mechanism OAUTHBEARER and method oidc, else None.

    The token endpoint's CA is https.ca.location (librdkafka's setting for it), else ssl.ca.location; each token
    request may take request_timeout_s. The provider holds the real client secret (never in its repr).
    """
    kafka = cluster.kafka
    mechanism = kafka.get("sasl.mechanism", kafka.get("sasl.mechanisms"))
    if mechanism != "OAUTHBEARER" or _as_text(kafka.get("sasl.oauthbearer.method", "")).lower() != "oidc":
        return None
    scope = kafka.get("sasl.oauthbearer.scope")
    ca = kafka.get("https.ca.location", kafka.get("ssl.ca.location"))
    return OidcTokenProvider(
        _as_text(kafka["sasl.oauthbearer.token.endpoint.url"]).strip(),
        _as_text(kafka["sasl.oauthbearer.client.id"]),
        _as_text(kafka["sasl.oauthbearer.client.secret"]),
        scope=_as_text(scope) if scope is not None and _as_text(scope).strip() else None,
        extensions=parse_extensions(_as_text(kafka.get("sasl.oauthbearer.extensions", ""))),
        ca_file=_as_text(ca) if ca is not None else None,
        timeout_s=request_timeout_s)


def kafka_python_settings(cluster: ClusterConfig, request_timeout_s: float) -> dict[str, object]:
    """Keyword arguments for kafka-python's KafkaAdminClient, translated from the librdkafka names.

    Mapped: the names in KAFKA_PYTHON_NAMES, and ssl.endpoint.identification.algorithm ("https" ->
    ssl_check_hostname=True, "none" -> False). SASL/OAUTHBEARER with method oidc becomes
    ``sasl_oauth_token_provider`` (`oidc_token_provider`; one per call, so one token cache per cluster client).
    Every other librdkafka setting has no kafka-python equivalent and is skipped (use `kafka_python_unsupported`
    to log which). security.protocol is upper-cased because kafka-python, unlike librdkafka, compares it
    case-sensitively. The result holds real secrets.
    """
    settings: dict[str, object] = {
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
    provider = oidc_token_provider(cluster, request_timeout_s)
    if provider is not None:
        settings["sasl_oauth_token_provider"] = provider
    return settings


def kafka_python_unsupported(cluster: ClusterConfig) -> list[str]:
    """The cluster's librdkafka settings that `kafka_python_settings` drops, so callers can log them once."""
    return sorted(k for k in cluster.kafka
                  if k not in KAFKA_PYTHON_NAMES and k not in _KAFKA_PYTHON_SPECIAL and k not in _OIDC_SETTINGS)


class KazooSettings(TypedDict, total=False):
    """Keyword arguments of kazoo's KazooClient that the monitor sets; all optional, so a caller (or a test) may
    pass only some, e.g. just ``hosts``."""

    hosts: str
    timeout: float
    auth_data: list[tuple[str, str]]
    use_ssl: bool
    ca: str | None
    certfile: str | None
    keyfile: str | None
    verify_certs: bool
    check_hostname: bool


def kazoo_settings(zk: ZooKeeperConfig) -> KazooSettings:
    """Keyword arguments for kazoo's KazooClient: hosts (chroot included), timeout, auth_data and TLS settings.

    auth_data is ``[("digest", "user:password")]`` with digest auth and an empty list otherwise. The result holds
    the real password. verify_certs and check_hostname are always given, because kazoo's own default for
    check_hostname is False: any certificate its CA (or a system root) signed would do for any host, and kazoo
    sends auth_data right after the handshake. check_hostname is off only with
    ``endpoint_identification_algorithm: none``. `collectors.sources.zk_adapter` gives its four-letter-word probes
    the same TLS settings.
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
        "verify_certs": True,
        "check_hostname": zk.endpoint_identification_algorithm == "https",
    }
