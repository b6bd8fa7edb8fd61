"""The kafka-python OIDC token provider, against a real loopback token endpoint; and its configuration.

The provider must do the client-credentials grant as librdkafka does (Basic credentials, grant_type, scope),
cache the token until 80% of its lifetime, refresh it then, keep a still-valid token when a refresh fails, and
fail with messages that name the cause but never the secret or a token. The configuration must wire it for
``sasl.oauthbearer.method: oidc`` and refuse OAUTHBEARER flavours kafka-python cannot do, at load time.
"""

from __future__ import annotations

import json
import logging
import socket
from pathlib import Path
from typing import Any

import pytest
import yaml
from kafka.errors import SaslAuthenticationFailedError
from kafka.net.sasl.oauth import AbstractTokenProvider, SaslMechanismOAuth

from collectors.config import ConfigError, load_config, redacted
from collectors.sources.client_settings import kafka_python_settings, kafka_python_unsupported
from collectors.sources.kafka_transport import is_fatal_connect_error
from collectors.sources.oauth import OAuthTokenError, OidcTokenProvider, parse_extensions
from collectors.sources.settings import ClusterConfig
from sandbox.auth import issue_jwt, verify_jwt
from tests.support.token_endpoint import TokenEndpoint, token_endpoint

KEY = b"unit-test-signing-key"
SECRET = "Un1t-Client-S3cret-must-not-leak"


class Clock:
    def __init__(self, now: float = 1_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def endpoint() -> Any:
    with token_endpoint({"monitor": SECRET}, KEY, lifetime_s=100) as ep:
        yield ep


def provider(ep: TokenEndpoint, secret: str = SECRET, **kwargs: Any) -> OidcTokenProvider:
    return OidcTokenProvider(ep.url, "monitor", secret, **kwargs)


def test_fetches_a_verifiable_token_with_client_credentials(endpoint: TokenEndpoint) -> None:
    p = provider(endpoint, scope="kafka openid", extensions={"logicalCluster": "lkc-1"})
    assert isinstance(p, AbstractTokenProvider)
    token = p.token()
    claims = verify_jwt(KEY, token)
    assert claims["sub"] == "monitor" and claims["scope"] == "kafka openid"
    assert endpoint.requests == [{"client_id": "monitor", "grant_type": "client_credentials",
                                  "scope": "kafka openid"}]
    # what kafka-python sends the broker: RFC 7628's initial response, with the extension
    sasl = SaslMechanismOAuth(sasl_oauth_token_provider=p)
    assert sasl.auth_bytes() == f"n,,\x01auth=Bearer {token}\x01logicalCluster=lkc-1\x01\x01".encode()
    assert SECRET not in repr(p) and token not in repr(p)


def test_token_is_cached_until_80_percent_of_its_lifetime(endpoint: TokenEndpoint) -> None:
    clock = Clock()
    p = provider(endpoint, clock=clock)
    first = p.token()
    clock.now += 79  # lifetime 100 s
    assert p.token() == first and p.token() == first
    assert p.fetches == 1 and len(endpoint.requests) == 1
    clock.now += 2  # past 80 s: refreshed
    endpoint.lifetime_s = 200  # a new token (the iat/exp differ)
    second = p.token()
    assert second != first and p.fetches == 2
    clock.now += 159
    assert p.token() == second and p.fetches == 2
    clock.now += 2
    p.token()
    assert p.fetches == 3


def test_lifetime_from_the_jwt_when_expires_in_is_missing(endpoint: TokenEndpoint) -> None:
    endpoint.expires_in = "omit"
    p = provider(endpoint)  # real clock: the JWT's exp is wall-clock time, 100 s ahead
    token = p.token()
    assert p.token() == token and p.fetches == 1


def test_without_any_lifetime_the_token_is_not_kept() -> None:
    with token_endpoint({"monitor": SECRET}, KEY) as ep:
        ep.expires_in = "omit"
        ep.lifetime_s = -5  # an exp in the past: the JWT says nothing usable either
        p = provider(ep)
        p.token()
        p.token()
        assert p.fetches == 2


def test_failed_refresh_keeps_the_still_valid_token(endpoint: TokenEndpoint,
                                                     caplog: pytest.LogCaptureFixture) -> None:
    clock = Clock()
    p = provider(endpoint, clock=clock)
    token = p.token()
    clock.now += 85
    endpoint.fail_with = (503, b'{"error": "temporarily_unavailable"}')
    caplog.set_level(logging.DEBUG)
    assert p.token() == token  # 15 s of validity left: keep using it
    assert "503" in caplog.text
    clock.now += 15  # expired now: the failure is the answer
    with pytest.raises(OAuthTokenError, match="HTTP 503 temporarily_unavailable"):
        p.token()
    endpoint.fail_with = None
    endpoint.lifetime_s = 50  # so the new token differs even within the same second
    assert p.token() != token and p.fetches == 4  # the endpoint's recovery is picked up at once
    assert SECRET not in caplog.text and token not in caplog.text


def test_wrong_secret_is_named_but_never_shown(endpoint: TokenEndpoint, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    wrong = "Wr0ng-Un1t-S3cret"
    p = provider(endpoint, secret=wrong)
    with pytest.raises(OAuthTokenError) as info:
        p.token()
    message = str(info.value)
    assert "HTTP 401 invalid_client" in message and "sasl.oauthbearer.client.secret" in message, message
    assert isinstance(info.value, SaslAuthenticationFailedError) and is_fatal_connect_error(info.value)
    assert info.value.__cause__ is None and info.value.__suppress_context__
    for text in (message, repr(info.value), caplog.text):
        assert wrong not in text and SECRET not in text


def test_error_description_echoing_the_secret_is_not_passed_on(endpoint: TokenEndpoint) -> None:
    endpoint.fail_with = (400, json.dumps({"error": SECRET, "error_description": SECRET}).encode())
    with pytest.raises(OAuthTokenError) as info:
        provider(endpoint).token()
    assert SECRET not in str(info.value) and "HTTP 400" in str(info.value)


@pytest.mark.parametrize(("answer", "expected"), [
    ((200, b"{}"), "no access_token"),
    ((200, b'{"access_token": ""}'), "no access_token"),
    ((200, b'{"access_token": "a b"}'), "characters"),
    ((500, b""), "HTTP 500"),
])
def test_bad_answers(endpoint: TokenEndpoint, answer: tuple[int, bytes], expected: str) -> None:
    endpoint.fail_with = answer
    with pytest.raises(OAuthTokenError, match=expected):
        provider(endpoint).token()


def test_not_json(endpoint: TokenEndpoint, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(endpoint, "_answer", lambda headers, body: (200, "<html>"))  # json.dumps: a JSON string
    with pytest.raises(OAuthTokenError, match="no access_token"):
        provider(endpoint).token()


def test_unreachable_and_slow_endpoints_fail_within_the_timeout() -> None:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    p = OidcTokenProvider(f"http://127.0.0.1:{port}/token", "monitor", SECRET, timeout_s=1)
    with pytest.raises(OAuthTokenError, match="connection refused"):
        p.token()
    with token_endpoint({"monitor": SECRET}, KEY) as ep:
        ep.delay_s = 1.0
        with pytest.raises(OAuthTokenError, match="timed out"):
            provider(ep, timeout_s=0.3).token()


def test_https_endpoint_is_verified(tmp_path: Path) -> None:
    """TLS verification is on: a self-signed endpoint without its CA is refused (and names why)."""
    import ssl
    import subprocess
    import threading
    from http.server import BaseHTTPRequestHandler, HTTPServer

    key, cert = tmp_path / "k.pem", tmp_path / "c.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", cert,
                    "-days", "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
                   check=True, capture_output=True)

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers["Content-Length"]))
            data = json.dumps({"access_token": "t.o.k", "expires_in": 60}).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: Any) -> None:
            pass

    server = HTTPServer(("127.0.0.1", 0), Handler)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    server.socket = ctx.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"https://127.0.0.1:{server.server_address[1]}/token"
        with pytest.raises(OAuthTokenError, match="TLS verification failed"):
            OidcTokenProvider(url, "monitor", SECRET, timeout_s=3).token()
        assert OidcTokenProvider(url, "monitor", SECRET, ca_file=str(cert), timeout_s=3).token() == "t.o.k"
    finally:
        server.shutdown()
        server.server_close()


def test_parse_extensions() -> None:
    assert parse_extensions("") == {}
    assert parse_extensions("logicalCluster=lkc-1, identityPoolId=pool-2") == {
        "logicalCluster": "lkc-1", "identityPoolId": "pool-2"}
    for bad, expected in (("novalue", "key=value"), ("bad-key=1", "letter-only"), ("auth=x", "reserved")):
        with pytest.raises(ValueError, match=expected):
            parse_extensions(bad)


# --------------------------------------------------------------------------- configuration


OIDC = {"security.protocol": "SASL_SSL", "sasl.mechanism": "OAUTHBEARER", "sasl.oauthbearer.method": "oidc",
        "sasl.oauthbearer.client.id": "monitor", "sasl.oauthbearer.client.secret": SECRET,
        "sasl.oauthbearer.token.endpoint.url": "https://idp.example/oauth2/token",
        "sasl.oauthbearer.scope": "kafka", "sasl.oauthbearer.extensions": "logicalCluster=lkc-1",
        "ssl.ca.location": "/etc/ca.pem"}


def load(tmp_path: Path, kafka: dict[str, Any]) -> Any:
    path = tmp_path / "monitor.yaml"
    path.write_text(yaml.safe_dump({"clusters": [{"name": "a", "bootstrap_servers": "h:1", "kafka": kafka}]}))
    return load_config(path, environ={})


def test_oidc_settings_give_kafka_python_a_token_provider(tmp_path: Path) -> None:
    cfg = load(tmp_path, OIDC)
    c = cfg.clusters[0]
    kp = kafka_python_settings(c, 5)
    p = kp["sasl_oauth_token_provider"]
    assert isinstance(p, OidcTokenProvider) and p.extensions() == {"logicalCluster": "lkc-1"}
    assert p._url == OIDC["sasl.oauthbearer.token.endpoint.url"] and p._scope == "kafka" and p._timeout_s == 5
    assert kp["sasl_mechanism"] == "OAUTHBEARER" and kp["security_protocol"] == "SASL_SSL"
    assert kafka_python_unsupported(c) == []  # the oidc settings are used, not dropped
    # the secret stays hidden wherever a setting is shown
    assert SECRET not in json.dumps(redacted(cfg)) and SECRET not in repr(c) and SECRET not in str(kp)


@pytest.mark.parametrize(("change", "expected"), [
    ({"sasl.oauthbearer.method": None}, "sasl.oauthbearer.method not set: OAUTHBEARER is supported with "
                                        "sasl.oauthbearer.method: oidc"),
    ({"sasl.oauthbearer.method": "default", "sasl.oauthbearer.config": "principal=x"}, "unsecured JWT"),
    ({"sasl.oauthbearer.config": "principal=x"}, "sasl.oauthbearer.config: not supported"),
    ({"sasl.oauthbearer.client.secret": None}, "oidc needs sasl.oauthbearer.client.secret"),
    ({"sasl.oauthbearer.token.endpoint.url": "ftp://idp/token"}, "must be an https://"),
    ({"sasl.oauthbearer.grant.type": "urn:ietf:params:oauth:grant-type:jwt-bearer"}, "only client_credentials"),
    ({"sasl.oauthbearer.extensions": "a-b=1"}, "sasl.oauthbearer.extensions: expected comma-separated"),
    ({"sasl.mechanism": "PLAIN", "sasl.username": "u", "sasl.password": "p"},
     "only used with sasl.mechanism OAUTHBEARER"),
])
def test_oauthbearer_flavours_kafka_python_cannot_do_are_refused_at_load(
        tmp_path: Path, change: dict[str, Any], expected: str) -> None:
    kafka = {k: v for k, v in {**OIDC, **change}.items() if v is not None}
    with pytest.raises(ConfigError) as info:
        load(tmp_path, kafka)
    message = str(info.value)
    assert ": clusters[0].kafka: " in message and expected in message, message
    assert SECRET not in message


def test_sandbox_jwt_round_trip() -> None:
    token = issue_jwt(KEY, {"sub": "monitor", "exp": 2_000_000_000})
    assert verify_jwt(KEY, token, now=1_999_999_999)["sub"] == "monitor"
    for key, now, expected in ((b"other", 0, "signature"), (KEY, 2_000_000_000, "expired")):
        with pytest.raises(Exception, match=expected):
            verify_jwt(key, token, now=now)


def test_cluster_config_without_oidc_has_no_provider() -> None:
    c = ClusterConfig.model_validate({"name": "c", "bootstrap_servers": "k:1", "kafka": {
        "security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN", "sasl.username": "u", "sasl.password": "p"}})
    assert "sasl_oauth_token_provider" not in kafka_python_settings(c, 5)


def test_kafka_python_debug_logs_of_sasl_requests_are_redacted(caplog: pytest.LogCaptureFixture) -> None:
    """kafka-python logs each request at DEBUG, object and raw frame: SaslAuthenticate's are redacted (they carry
    the OAuth token, or a PLAIN password), other requests stay as they are."""
    from kafka.protocol.metadata import MetadataRequest
    from kafka.protocol.sasl import SaslAuthenticateRequest

    caplog.set_level(logging.DEBUG)
    request = SaslAuthenticateRequest(version=2, auth_bytes=b"n,,\x01auth=Bearer " + SECRET.encode() + b"\x01\x01")
    request.with_header(correlation_id=3, client_id="t")
    frame = bytearray(request.encode(header=True, framed=True))
    logging.getLogger("kafka.net.connection").debug("%s Request %d: %s", "conn", 3, request)
    logging.getLogger("kafka.protocol.parser").debug("%s Send: %r", "node=1", frame)
    other = MetadataRequest(version=12, topics=None, allow_auto_topic_creation=False,
                            include_topic_authorized_operations=False)
    logging.getLogger("kafka.protocol.parser").debug("%s Sending request %d %s", "node=1", 4, other)
    assert SECRET not in caplog.text and "redacted: SASL credentials" in caplog.text
    assert "MetadataRequest" in caplog.text
