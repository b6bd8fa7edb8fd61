"""TLS and SASL end to end: the monitor's security settings, through both real clients, into a secured sandbox.

The sandbox listeners speak TLS with a throwaway CA (`Sandbox.ca_file`) and demand SASL (PLAIN, SCRAM-SHA-256,
SCRAM-SHA-512) before any other request. A poll goes through kafka-python (metadata, offsets, groups,
transactions) and confluent-kafka / librdkafka (DescribeConfigs), so a snapshot with topic configs and
transactions proves both clients got in; the listeners' own login records say which client used which mechanism.
"""

from __future__ import annotations

import logging
import socket
import ssl
import struct
from collections.abc import Iterator
from typing import Any

import pytest
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse, MetadataRequest, MetadataResponse
from kafka.protocol.sasl import (
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
)

from collectors.config import MonitorConfig
from collectors.runtime.poller import ClusterPoller, PollResult
from sandbox.runner import Sandbox
from sandbox.tls import OPENSSL_MISSING
from tests.support.leaks import assert_nowhere
from tests.support.monitor import FAST_THRESHOLDS, assert_unreachable, poll_once, rules_of
from tests.support.sandbox import TEST_CLUSTER, running_sandbox, scenario

pytestmark = pytest.mark.integration

PASSWORD = "Sandbox-Pa55w0rd-must-not-leak"
WRONG_PASSWORD = "Wr0ng-Pa55w0rd-must-not-leak-either"
USERS = {"monitor": PASSWORD, "admin": "another-secret"}
MECHANISMS = ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]
KAFKA_PYTHON = "kafka-python"  # client_software_name each client sends in ApiVersions (KIP-511)
LIBRDKAFKA = "confluent-kafka-python"


def _openssl_present() -> None:
    import shutil

    if shutil.which("openssl") is None:
        pytest.fail(OPENSSL_MISSING)  # a missing tool is a broken machine, not a reason to skip


def secured_scenario(protocol: str) -> Any:
    security: dict[str, Any] = {"protocol": protocol}
    if protocol.startswith("SASL_"):
        security.update(users=USERS, sasl_mechanisms=MECHANISMS)
    return scenario(security=security)


@pytest.fixture(scope="module")
def sasl_ssl() -> Iterator[Sandbox]:
    _openssl_present()
    with running_sandbox(secured_scenario("SASL_SSL"), speed=10.0) as sb:
        sb.advance_to(sb.cluster.start + 20)  # commits made and a transaction cycle under way
        yield sb


def secured_poller(sb: Sandbox, kafka: dict[str, Any]) -> ClusterPoller:
    cfg = MonitorConfig.model_validate({
        "clusters": [{"name": "secured", "bootstrap_servers": sb.bootstrap_servers, "kafka": kafka}],
        "poll_interval_s": 5, "request_timeout_s": 3, "thresholds": FAST_THRESHOLDS})
    return ClusterPoller(cfg.clusters[0], cfg)


def assert_full_snapshot(r: PollResult, sb: Sandbox) -> None:
    """The poll saw what the scenario holds: brokers, topics with their configs, groups, the transaction."""
    s = r.snapshot
    assert s.reachable, s.errors
    assert not s.stale_sections, s.errors
    assert "cluster_unreachable" not in rules_of(r)
    assert s.cluster_id == sb.scenario.cluster.cluster_id
    assert {b.broker_id for b in s.brokers} == {1, 2, 3}
    assert all(b.reachable is not False for b in s.brokers)
    topics = {t.topic: t for t in s.topics if not t.internal}
    assert {n: t.partitions for n, t in topics.items()} == {t["name"]: t["partitions"] for t in TEST_CLUSTER["topics"]}
    # min.insync.replicas comes from DescribeConfigs, i.e. through confluent-kafka: broker default 2, topic override 1
    assert topics["orders"].min_insync_replicas == 2
    assert topics["single"].min_insync_replicas == 1
    model_hw = sb.call(lambda c: {(p.topic, p.index): p.hwm for p in c.all_partitions() if p.topic == "orders"})
    polled_hw = {(p.topic, p.partition): p.high_watermark for p in s.partitions if p.topic == "orders"}
    assert set(polled_hw) == set(model_hw) and all(v is not None and v > 0 for v in polled_hw.values())
    groups = {g.group_id: g for g in s.groups}
    assert set(groups) == {g["group_id"] for g in TEST_CLUSTER["groups"]}
    assert groups["billing"].members == 2 and groups["reporting"].members == 1
    assert {gp.group_id for gp in s.group_partitions if gp.committed_offset is not None} == set(groups)
    assert [t.transactional_id for t in s.transactions] == ["tx"]
    assert s.transactions[0].producer_id >= 0


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_sasl_ssl_poll_sees_the_cluster_through_both_clients(sasl_ssl: Sandbox, mechanism: str) -> None:
    sb = sasl_ssl
    settings = sb.client_settings(user="monitor", mechanism=mechanism)
    assert settings["security.protocol"] == "SASL_SSL" and settings["ssl.ca.location"] == str(sb.ca_file)
    before = sb.authentications()
    p = secured_poller(sb, settings)
    r = poll_once(p, sb)
    assert_full_snapshot(r, sb)
    new = {k: n - before.get(k, 0) for k, n in sb.authentications().items() if n > before.get(k, 0)}
    clients = {software for software, mech, user in new if mech == mechanism and user == "monitor"}
    assert clients == {KAFKA_PYTHON, LIBRDKAFKA}, new
    assert {mech for _, mech, _ in new} == {mechanism}
    assert not sb.authentications(failed=True)


def test_sasl_ssl_wrong_password_is_reported_unreachable_without_leaking(
        sasl_ssl: Sandbox, caplog: pytest.LogCaptureFixture) -> None:
    sb = sasl_ssl
    caplog.set_level(logging.DEBUG)
    settings = {**sb.client_settings(user="monitor", mechanism="SCRAM-SHA-512"), "sasl.password": WRONG_PASSWORD}
    p = secured_poller(sb, settings)
    r = poll_once(p, sb)
    assert_unreachable(r)
    assert r.node_unreachable
    s = r.snapshot
    text = " ".join(s.errors)
    assert "Authentication" in text, s.errors  # the on-call engineer is told it is the credentials
    assert not s.brokers and not s.topics and not s.groups
    failed = sb.authentications(failed=True)
    assert failed.get((KAFKA_PYTHON, "SCRAM-SHA-512", "monitor"), 0) >= 1, failed

    metrics = assert_nowhere(s, caplog, WRONG_PASSWORD, PASSWORD)
    assert "kafka_" in metrics  # the exporter did render the unreachable cluster


def test_sasl_unknown_mechanism_user_and_plaintext_client_are_refused(sasl_ssl: Sandbox) -> None:
    """An unknown user fails like a wrong password; a TLS-less client never gets a Kafka answer."""
    sb = sasl_ssl
    p = secured_poller(sb, {**sb.client_settings(user="monitor", mechanism="PLAIN"), "sasl.username": "nobody"})
    r = poll_once(p, sb)
    assert_unreachable(r)
    p = secured_poller(sb, {})  # PLAINTEXT against a SASL_SSL listener
    r = poll_once(p, sb)
    assert_unreachable(r)


def test_ssl_poll_sees_the_cluster_through_both_clients() -> None:
    _openssl_present()
    with running_sandbox(secured_scenario("SSL"), speed=10.0) as sb:
        sb.advance_to(sb.cluster.start + 20)
        ca = sb.ca_file
        assert ca is not None and ca.read_text().startswith("-----BEGIN CERTIFICATE-----")
        settings = sb.client_settings()
        assert settings == {"security.protocol": "SSL", "ssl.ca.location": str(ca)}
        sb.reset_request_counts()
        p = secured_poller(sb, settings)
        r = poll_once(p, sb)
        assert_full_snapshot(r, sb)
        sent = {api for counts in sb.request_counts().values() for api in counts}
        assert "SaslHandshake" not in sent and "DescribeConfigs" in sent
        # host name verification is on in both clients (librdkafka's default, ssl_check_hostname in kafka-python):
        # the certificate is for 127.0.0.1/localhost, and a CA the client does not trust is refused
        p = secured_poller(sb, {"security.protocol": "SSL"})  # system CAs only
        r = poll_once(p, sb)
        assert_unreachable(r)
        assert any("CERTIFICATE_VERIFY_FAILED" in e for e in r.snapshot.errors), r.snapshot.errors
    assert not ca.exists(), "the throwaway certificates outlived the sandbox"


class WireClient:
    """One TLS connection speaking raw Kafka frames, to watch the listener's SASL gate request by request."""

    def __init__(self, sb: Sandbox, node: int = 1) -> None:
        assert sb.ca_file is not None
        ctx = ssl.create_default_context(cafile=str(sb.ca_file))
        raw = socket.create_connection(("127.0.0.1", sb.listeners[node].port), timeout=5)
        self.sock = ctx.wrap_socket(raw, server_hostname="127.0.0.1")
        self.correlation = 0

    def close(self) -> None:
        self.sock.close()

    def send(self, request: Any) -> None:
        self.correlation += 1
        request.with_header(correlation_id=self.correlation, client_id="wire-test")
        self.sock.sendall(bytes(request.encode(header=True, framed=True)))

    def receive(self, response_cls: Any, version: int) -> Any:
        head = self._read(4)
        if not head:
            return None
        (size,) = struct.unpack(">i", head)
        resp = response_cls.decode(self._read(size), version=version, header=True)
        assert resp.header.correlation_id == self.correlation
        return resp

    def closed_by_server(self) -> bool:
        return self._read(1) == b""

    def _read(self, n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = self.sock.recv(n - len(data))
            if not chunk:
                return data
            data += chunk
        return data

    def handshake(self, mechanism: str) -> Any:
        self.send(SaslHandshakeRequest(version=1, mechanism=mechanism))
        return self.receive(SaslHandshakeResponse, 1)

    def authenticate(self, token: bytes) -> Any:
        self.send(SaslAuthenticateRequest(version=2, auth_bytes=token))
        return self.receive(SaslAuthenticateResponse, 2)

    def metadata(self) -> Any:
        self.send(MetadataRequest(version=12, topics=None, allow_auto_topic_creation=False,
                                  include_topic_authorized_operations=False))
        return self.receive(MetadataResponse, 12)


def test_listener_serves_nothing_but_sasl_before_authentication(sasl_ssl: Sandbox) -> None:
    sb = sasl_ssl
    c = WireClient(sb)
    try:
        c.send(ApiVersionsRequest(version=3, client_software_name="wire-test", client_software_version="1"))
        versions = {k.api_key: (k.min_version, k.max_version) for k in c.receive(ApiVersionsResponse, 3).api_keys}
        assert versions[17] == (1, 1) and versions[36] == (0, 2) and 3 in versions
        c.send(MetadataRequest(version=12, topics=None, allow_auto_topic_creation=False,
                               include_topic_authorized_operations=False))
        assert c.closed_by_server()  # Kafka drops a non-SASL request before the handshake, unanswered
    finally:
        c.close()

    c = WireClient(sb)
    try:
        r = c.handshake("GSSAPI")
        assert r.error_code == 33 and sorted(r.mechanisms) == sorted(MECHANISMS)
        assert c.closed_by_server()
    finally:
        c.close()

    c = WireClient(sb)
    try:
        assert c.handshake("PLAIN").error_code == 0
        r = c.authenticate(b"\x00monitor\x00" + WRONG_PASSWORD.encode())
        assert r.error_code == 58 and r.error_message and WRONG_PASSWORD not in r.error_message
        assert c.closed_by_server()
    finally:
        c.close()

    c = WireClient(sb)
    try:
        assert c.handshake("PLAIN").error_code == 0
        r = c.authenticate(b"\x00monitor\x00" + PASSWORD.encode())
        assert r.error_code == 0 and r.session_lifetime_ms == 0
        md = c.metadata()
        assert {b.node_id for b in md.brokers} == {1, 2, 3}
        assert {t.name for t in md.topics} >= {"orders", "single"}
        assert c.handshake("PLAIN").error_code == 34  # ILLEGAL_SASL_STATE: no second login on a connection
        assert c.metadata() is not None  # ... and the connection stays usable
    finally:
        c.close()
