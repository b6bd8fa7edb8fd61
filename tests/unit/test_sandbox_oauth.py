"""The sandbox's SASL/OAUTHBEARER server side (RFC 7628) and its scenario settings."""

from __future__ import annotations

import time
from collections.abc import Callable
from types import SimpleNamespace

import pytest
from pydantic import ValidationError

from sandbox.auth import (
    SASL_AUTHENTICATION_FAILED,
    AuthenticationFailed,
    OAuthBearerServer,
    SaslConfig,
    issue_jwt,
    verify_jwt,
)
from sandbox.spec import Scenario

KEY = b"sandbox-oauth-key"


def token(key: bytes = KEY, **claims: object) -> str:
    base: dict[str, object] = {"iss": "https://issuer.test", "sub": "monitor", "exp": int(time.time()) + 60}
    base.update(claims)
    return issue_jwt(key, {k: v for k, v in base.items() if v is not None})


def initial(tok: str, extensions: str = "") -> bytes:
    return f"n,,\x01auth=Bearer {tok}\x01{extensions}\x01".encode()


def test_valid_token_authenticates_as_its_subject_with_extensions() -> None:
    server = OAuthBearerServer(KEY, issuer="https://issuer.test")
    assert server.step(initial(token(), "logicalCluster=lkc-1\x01")) == b""
    assert server.complete and server.username == "monitor"
    assert server.extensions == {"logicalCluster": "lkc-1"}
    with pytest.raises(AuthenticationFailed, match="already complete"):
        server.step(b"\x01")


@pytest.mark.parametrize(("make", "reason"), [
    (lambda: token(b"another-key"), "invalid JWT signature"),
    (lambda: token(exp=int(time.time()) - 1), "expired"),
    (lambda: token(exp=None), "no exp"),
    (lambda: token(sub=None), "no sub"),
    (lambda: token(iss="https://elsewhere"), "another issuer"),
    (lambda: "not-a-jwt", "not a JWT"),
], ids=["signature", "expired", "no exp", "no sub", "issuer", "not a JWT"])
def test_bad_tokens_get_the_error_challenge_then_fail(make: Callable[[], str], reason: str) -> None:
    """Each token is made when its case runs: made at collection, a token valid for 60 s had expired by the time a
    loaded run reached it, and failed for that reason instead."""
    tok = make()
    server = OAuthBearerServer(KEY, issuer="https://issuer.test")
    assert server.step(initial(tok)) == OAuthBearerServer.ERROR_CHALLENGE  # RFC 7628 section 3.2.2
    assert not server.complete
    with pytest.raises(AuthenticationFailed, match=f"invalid_token \\(.*{reason}") as info:
        server.step(b"\x01")
    assert tok not in str(info.value)


@pytest.mark.parametrize("message", [
    b"n,,auth=Bearer x\x01\x01", b"n,,\x01auth=Bearer x\x01", b"p=tls,,\x01auth=Bearer x\x01\x01",
    b"n,,\x01auth=Basic x\x01\x01", b"n,,\x01bad key=1\x01auth=Bearer x\x01\x01", b"\xff",
])
def test_malformed_messages_fail_at_once(message: bytes) -> None:
    with pytest.raises(AuthenticationFailed, match="Invalid OAUTHBEARER message"):
        OAuthBearerServer(KEY).step(message)


def test_connection_state_machine_counts_a_rejected_token_as_failed() -> None:
    conn = SaslConfig(["OAUTHBEARER"], {}, oauth_key=KEY).connection()
    assert conn.handle(17, 1, SimpleNamespace(mechanism="OAUTHBEARER")).fields == {
        "error_code": 0, "mechanisms": ["OAUTHBEARER"]}
    challenge = conn.handle(36, 2, SimpleNamespace(auth_bytes=initial(token(b"x"))))
    assert challenge.fields is not None and challenge.fields["error_code"] == 0 and not challenge.close
    assert challenge.fields["auth_bytes"] == OAuthBearerServer.ERROR_CHALLENGE
    failed = conn.handle(36, 2, SimpleNamespace(auth_bytes=b"\x01"))
    assert failed.close and failed.fields is not None
    assert failed.fields["error_code"] == SASL_AUTHENTICATION_FAILED and not conn.authenticated
    ok = SaslConfig(["OAUTHBEARER"], {}, oauth_key=KEY).connection()
    ok.handle(17, 1, SimpleNamespace(mechanism="OAUTHBEARER"))
    ok.handle(36, 2, SimpleNamespace(auth_bytes=initial(token())))
    assert ok.authenticated and ok.username == "monitor"


def test_verify_jwt_defaults_to_the_wall_clock() -> None:
    assert verify_jwt(KEY, token())["sub"] == "monitor"
    with pytest.raises(ValueError, match="OAUTHBEARER needs the key"):
        SaslConfig(["OAUTHBEARER"], {})


@pytest.mark.parametrize(("security", "message"), [
    ({"protocol": "SASL_PLAINTEXT", "sasl_mechanisms": ["OAUTHBEARER"]}, "needs oauth_key"),
    ({"protocol": "SASL_PLAINTEXT", "users": {"a": "b"}, "oauth_key": "k"}, "only used with OAUTHBEARER"),
    ({"protocol": "SASL_PLAINTEXT", "sasl_mechanisms": ["OAUTHBEARER", "PLAIN"], "oauth_key": "k"},
     "needs at least one entry in users"),
])
def test_security_oauth_settings_are_checked(security: dict[str, object], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        Scenario.model_validate({"cluster": {"security": security}})


def test_oauth_only_scenario_needs_no_users_and_hides_its_key() -> None:
    sc = Scenario.model_validate({"cluster": {"security": {
        "protocol": "SASL_PLAINTEXT", "sasl_mechanisms": ["OAUTHBEARER"], "oauth_key": "hush-key"}}})
    assert sc.cluster.security.users == {} and "hush-key" not in repr(sc)
