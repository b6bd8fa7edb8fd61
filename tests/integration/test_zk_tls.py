"""The collector against a real ZooKeeper (Debian's 3.8) on a TLS secure client port, mutual TLS.

ZooKeeper with the Netty connection factory answers four-letter words on its secure client port after the
handshake; sent in plaintext, a probe got no answer at all (the server's TLS layer waits for the rest of a TLS
record that never comes), so a healthy TLS ensemble raised ``zk_quorum_lost`` and ``zk_node_not_serving``
("timeout") at every poll. And kazoo, left to its default, accepted a
certificate for any host, then sent the digest password.

One standalone server, its keystore a PEM file (ZooKeeper 3.6+: ``ssl.keyStore.type=PEM``) whose certificate
names 127.0.0.1 only, so ``localhost`` is the host it does not name. The server keeps its plaintext client port
for the harness's own ``srvr`` waits (`sandbox.zookeeper`); the monitor is pointed at the secure port alone.
Both listen on 127.0.0.1. Kafka is a closed port: the cluster is unreachable, and the ZooKeeper rules are
judged all the same (`collectors.alerting.rules.UNREACHABLE_FAMILIES`).
"""

from __future__ import annotations

import logging
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from collectors.config import MonitorConfig
from collectors.runtime.poller import ClusterPoller
from collectors.sources.client_settings import kazoo_settings
from collectors.sources.settings import ZooKeeperConfig
from collectors.sources.zk_adapter import ZkAdapter
from collectors.sources.zk_fourletter import FourLetterError, send_four_letter, tls_context
from sandbox.zookeeper import ZooKeeperEnsemble, ZooKeeperNotInstalled
from tests.support.zk_tls import TestCA

pytestmark = pytest.mark.integration

PASSWORD = "zk-tls-digest-password"
ZK_ALERTS = {"zk_quorum_lost", "zk_node_not_serving", "zk_no_leader"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _srvr_over_tls(port: int, ca: Path, cert: Path, key: Path, timeout: float = 30.0) -> str:
    """The server's ``srvr`` answer on its secure port, by the collector's own probe, retried until `timeout`: the
    JVM's first TLS handshakes, on a loaded machine, can outlast the tests' 2 s request timeout (a bound the Kafka
    side of the poll waits out in full). The harness's own start waits on the plaintext port only."""
    tls = tls_context(ca=str(ca), certfile=str(cert), keyfile=str(key))
    deadline = time.monotonic() + timeout
    while True:
        try:
            answer = send_four_letter("127.0.0.1", port, "srvr", timeout=5.0, tls=tls)
            if "Mode:" in answer:
                return answer
        except FourLetterError:
            pass
        if time.monotonic() >= deadline:
            raise TimeoutError(f"no srvr answer on the secure port {port} within {timeout:g}s")
        time.sleep(0.2)


@pytest.fixture(scope="module")
def tls_zk(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    base = tmp_path_factory.mktemp("zk-tls")
    ca = TestCA(base / "pki")
    server = ca.issue("zookeeper", ("127.0.0.1",))
    client = ca.issue("monitor", client=True)
    secure_port = _free_port()
    try:
        ensemble = ZooKeeperEnsemble(size=1, base_dir=base / "zookeeper", extra_config={
            "serverCnxnFactory": "org.apache.zookeeper.server.NettyServerCnxnFactory",
            "secureClientPort": str(secure_port),
            "secureClientPortAddress": "127.0.0.1",
            "ssl.keyStore.location": str(server.pem),
            "ssl.keyStore.type": "PEM",
            "ssl.trustStore.location": str(ca.ca_file),
            "ssl.trustStore.type": "PEM",
        })
    except ZooKeeperNotInstalled as e:
        pytest.skip(str(e))
    try:
        ensemble.start(timeout=30)
        _srvr_over_tls(secure_port, ca.ca_file, client.cert, client.key)
        yield {"port": secure_port, "ca": ca.ca_file, "client": client}
    finally:
        ensemble.stop()


def zk_section(tls_zk: dict[str, Any], host: str = "127.0.0.1", **extra: Any) -> dict[str, Any]:
    return {"connect": f"{host}:{tls_zk['port']}", "auth_scheme": "digest", "username": "kmon",
            "password": PASSWORD, "use_tls": True, "ca_file": str(tls_zk["ca"]),
            "cert_file": str(tls_zk["client"].cert), "key_file": str(tls_zk["client"].key), **extra}


def test_collector_polls_a_tls_zookeeper_without_false_alerts(tls_zk: dict[str, Any], tmp_path: Path) -> None:
    cfg = MonitorConfig.model_validate({
        "clusters": [{"name": "tls", "bootstrap_servers": f"127.0.0.1:{_free_port()}", "kraft": False,
                      "zookeeper": zk_section(tls_zk)}],
        "request_timeout_s": 2, "state_dir": str(tmp_path / "state")})
    poller = ClusterPoller(cfg.clusters[0], cfg)
    try:
        s = poller.poll().snapshot
    finally:
        poller.close()
    assert not ZK_ALERTS & {a.rule for a in s.alerts}, [(a.rule, a.summary) for a in s.alerts]
    assert [(z.server, z.serving, z.mode, z.error) for z in s.zookeeper] == [
        (f"127.0.0.1:{tls_zk['port']}", True, "standalone", None)]
    assert s.zookeeper[0].connections is not None and s.zookeeper[0].znode_count is not None  # srvr and mntr
    assert "zookeeper" not in s.stale_sections
    assert not [e for e in s.errors if e.startswith("zookeeper")], s.errors
    assert not [e for e in s.errors if "session" in e or "cannot start" in e], s.errors  # kazoo got a session too


def test_a_host_the_certificate_does_not_name_is_refused(tls_zk: dict[str, Any],
                                                         caplog: pytest.LogCaptureFixture) -> None:
    wrong = ZooKeeperConfig.model_validate(zk_section(tls_zk, host="localhost"))  # the certificate: 127.0.0.1
    with caplog.at_level(logging.WARNING, logger="kazoo.client"), \
            ZkAdapter("tls", wrong.connect, kazoo_settings(wrong), timeout_s=1.0) as adapter:
        obs = adapter.observe()
    (server,) = obs.servers
    assert not server.serving and server.error == "TLS failed: srvr"
    assert any("mismatch" in e for e in obs.errors if e.startswith("zookeeper")), obs.errors
    # kazoo refused the session too (before sending the password), and logged why
    assert any("no ZooKeeper session" in e for e in obs.errors), obs.errors
    assert any("mismatch" in r.getMessage() for r in caplog.records), [r.getMessage() for r in caplog.records]

    on_purpose = ZooKeeperConfig.model_validate(
        zk_section(tls_zk, host="localhost", endpoint_identification_algorithm="none"))
    with ZkAdapter("tls", on_purpose.connect, kazoo_settings(on_purpose), timeout_s=2.0) as adapter:
        obs = adapter.observe()
    assert [(z.serving, z.mode) for z in obs.servers] == [(True, "standalone")]
    # the session came up (this ZooKeeper has no Kafka's znodes to read): only the host name was wrong
    assert not [e for e in obs.errors if "session" in e or e.startswith("zookeeper")], obs.errors
