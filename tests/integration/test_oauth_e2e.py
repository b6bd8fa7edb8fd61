"""SASL/OAUTHBEARER with OIDC client credentials, end to end, through both real clients.

A loopback token endpoint issues HMAC-signed JWTs for the client-credentials grant; the sandbox's listeners
demand SASL_PLAINTEXT (and, once, SASL_SSL) with OAUTHBEARER and verify each token's signature and expiry.
librdkafka fetches its tokens itself (``sasl.oauthbearer.method: oidc``); kafka-python through the monitor's
`OidcTokenProvider`. A poll with the right secret sees the whole cluster (DescribeConfigs proves librdkafka got
in, the listener's login records name both clients); a wrong secret is a `cluster_unreachable` alert that says
why, and neither the secret nor a token shows anywhere.
"""

from __future__ import annotations

import logging
import shutil
import time
from collections.abc import Iterator
from typing import Any

import pytest
from kafka.errors import SaslAuthenticationFailedError
from kafka.net.sasl.oauth import AbstractTokenProvider

from collectors.config import MonitorConfig
from collectors.runtime.poller import ClusterPoller
from collectors.sources.kafka_transport import KafkaTransport
from sandbox.auth import issue_jwt
from sandbox.runner import Sandbox
from sandbox.tls import OPENSSL_MISSING
from tests.integration.test_security_e2e import KAFKA_PYTHON, LIBRDKAFKA, assert_full_snapshot
from tests.support.leaks import assert_nowhere
from tests.support.monitor import FAST_THRESHOLDS, assert_unreachable, poll, poll_once
from tests.support.sandbox import running_sandbox, scenario
from tests.support.token_endpoint import TokenEndpoint, token_endpoint

pytestmark = pytest.mark.integration

KEY = "issuer-signing-key-for-the-test"
ISSUER = "https://issuer.test"
SECRET = "0idc-Client-S3cret-must-not-leak"
WRONG_SECRET = "Wr0ng-0idc-S3cret-must-not-leak-either"


@pytest.fixture(scope="module")
def oauth() -> Iterator[tuple[Sandbox, TokenEndpoint]]:
    sc = scenario(security={"protocol": "SASL_PLAINTEXT", "sasl_mechanisms": ["OAUTHBEARER"],
                            "oauth_key": KEY, "oauth_issuer": ISSUER})
    with token_endpoint({"monitor": SECRET}, KEY.encode(), issuer=ISSUER) as ep, \
            running_sandbox(sc, speed=10.0) as sb:
        sb.advance_to(sb.cluster.start + 20)  # commits made and a transaction cycle under way
        yield sb, ep


def oauth_poller(sb: Sandbox, kafka: dict[str, Any]) -> ClusterPoller:
    cfg = MonitorConfig.model_validate({
        "clusters": [{"name": "oauth", "bootstrap_servers": sb.bootstrap_servers, "kafka": kafka}],
        "poll_interval_s": 5, "request_timeout_s": 3, "thresholds": FAST_THRESHOLDS})
    return ClusterPoller(cfg.clusters[0], cfg)


def test_oidc_poll_sees_the_cluster_through_both_clients(oauth: tuple[Sandbox, TokenEndpoint],
                                                         caplog: pytest.LogCaptureFixture) -> None:
    sb, ep = oauth
    caplog.set_level(logging.DEBUG)  # kafka-python's and librdkafka's logs too (the "librdkafka" logger)
    settings = {**sb.client_settings(), **ep.settings("monitor", **{"sasl.oauthbearer.scope": "kafka"})}
    before = sb.authentications()
    p = oauth_poller(sb, settings)
    try:
        r = poll(p, sb)
        r2 = poll(p, sb)  # the second poll reuses kafka-python's cached token
    finally:
        p.close()
    assert_full_snapshot(r, sb)
    assert r2.snapshot.reachable, r2.snapshot.errors
    new = {k: n - before.get(k, 0) for k, n in sb.authentications().items() if n > before.get(k, 0)}
    assert {software for software, mech, user in new if mech == "OAUTHBEARER" and user == "monitor"} == {
        KAFKA_PYTHON, LIBRDKAFKA}, new
    assert not sb.authentications(failed=True)
    assert ep.requests and all(r == {"client_id": "monitor", "grant_type": "client_credentials", "scope": "kafka"}
                               for r in ep.requests), ep.requests
    # one token for kafka-python's connections over both polls, and librdkafka's own
    assert len(ep.requests) <= 3, ep.requests
    assert ep.issued and all(token not in caplog.text for token in ep.issued)
    assert SECRET not in caplog.text and all(SECRET not in str(rec.args) for rec in caplog.records)


def test_oidc_wrong_secret_is_reported_unreachable_without_leaking(
        oauth: tuple[Sandbox, TokenEndpoint], caplog: pytest.LogCaptureFixture) -> None:
    sb, ep = oauth
    caplog.set_level(logging.DEBUG)
    p = oauth_poller(sb, {**sb.client_settings(), **ep.settings("monitor", WRONG_SECRET)})
    r = poll_once(p, sb)
    assert_unreachable(r)
    s = r.snapshot
    text = " ".join(s.errors)
    assert "token endpoint" in text and "401 invalid_client" in text, s.errors  # the cause, named
    assert not s.brokers and not s.topics and not s.groups

    metrics = assert_nowhere(s, caplog, WRONG_SECRET, SECRET)
    assert "kafka_" in metrics


def test_forged_and_expired_tokens_are_refused(oauth: tuple[Sandbox, TokenEndpoint]) -> None:
    """A token signed with another key, or expired, gets the RFC 7628 error challenge and then
    SASL_AUTHENTICATION_FAILED (kafka-python's own exchange, straight against the listeners)."""
    sb, _ = oauth
    now = int(time.time())
    forged = issue_jwt(b"some-other-key", {"iss": ISSUER, "sub": "monitor", "exp": now + 300})
    expired = issue_jwt(KEY.encode(), {"iss": ISSUER, "sub": "monitor", "exp": now - 1})
    for bad in (forged, expired):
        class Fixed(AbstractTokenProvider):
            def token(self, fixed: str = bad) -> str:
                return fixed

        before = sum(sb.authentications(failed=True).values())
        with pytest.raises(SaslAuthenticationFailedError, match="invalid_token"):
            KafkaTransport({"bootstrap_servers": sb.bootstrap_servers.split(","),
                            "security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "OAUTHBEARER",
                            "sasl_oauth_token_provider": Fixed()}, 3)
        assert sum(sb.authentications(failed=True).values()) > before


def test_oidc_over_sasl_ssl_sees_the_cluster_through_both_clients() -> None:
    """The same over TLS listeners (throwaway CA): OAUTHBEARER composes with ssl.ca.location."""
    if shutil.which("openssl") is None:
        pytest.fail(OPENSSL_MISSING)  # a missing tool is a broken machine, not a reason to skip
    sc = scenario(security={"protocol": "SASL_SSL", "sasl_mechanisms": ["OAUTHBEARER"], "oauth_key": KEY})
    with token_endpoint({"monitor": SECRET}, KEY.encode()) as ep, running_sandbox(sc, speed=10.0) as sb:
        sb.advance_to(sb.cluster.start + 20)
        settings = {**sb.client_settings(), **ep.settings("monitor")}
        assert settings["security.protocol"] == "SASL_SSL" and settings["ssl.ca.location"] == str(sb.ca_file)
        p = oauth_poller(sb, settings)
        r = poll_once(p, sb)
        assert_full_snapshot(r, sb)
        assert {software for software, mech, user in sb.authentications() if mech == "OAUTHBEARER"} == {
            KAFKA_PYTHON, LIBRDKAFKA}
