"""TLS to ZooKeeper: the server's host name is checked, for kazoo's session and the four-letter words alike.

Against real TLS listeners on 127.0.0.1 standing in for ZooKeeper's secure client port (mutual TLS, as
ZooKeeper's default ``ssl.clientAuth=need``), with certificates a throwaway CA makes at test time
(`tests.support.zk_tls`): one for 127.0.0.1, and one the same CA signed for another host, which is what a man in
the middle holding any certificate of that CA (or of a system root) presents. The real server is in
tests/integration/test_zk_tls.py.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import ssl
import struct
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from collectors.sources.client_settings import kazoo_settings
from collectors.sources.settings import ZooKeeperConfig
from collectors.sources.zk_adapter import ZkAdapter
from collectors.sources.zk_fourletter import (
    FourLetterTimeout,
    FourLetterTlsError,
    send_four_letter,
    tls_context,
)
from collectors.sources.zk_servers import describe_failure
from tests.support.zk_tls import Issued, TestCA

PASSWORD = "zk-s3cret-password"
SRVR = ("Zookeeper version: 3.8.0-test\nLatency min/avg/max: 0/0.5/3\nReceived: 10\nSent: 9\nConnections: 1\n"
        "Outstanding: 0\nZxid: 0x100000002\nMode: standalone\nNode count: 5\n")
MNTR = "zk_version\t3.8.0-test\nzk_server_state\tstandalone\nzk_num_alive_connections\t1\nzk_znode_count\t5\n"


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    ca = TestCA(tmp_path_factory.mktemp("zk-tls-pki"))
    return {
        "ca": ca.ca_file,
        "good": ca.issue("zk-good", ("127.0.0.1",)),  # the host the connect string names
        "wrong": ca.issue("zk-wrong", ("zk.other.example",)),  # same CA, another host
        "client": ca.issue("monitor", client=True),
    }


class SecurePort:
    """A TLS-only listener on 127.0.0.1 that answers like ZooKeeper's secure client port, as far as the tests go.

    After the handshake: ``srvr`` / ``mntr`` get a canned answer; anything else is taken for kazoo's framed
    Connect request, which gets a ConnectResponse so that kazoo goes on to send its ``auth_data``. Everything a
    client sends after the handshake is kept in ``received``; failed handshakes in ``failures``.
    """

    def __init__(self, cert: Issued, ca_file: Path) -> None:
        self.context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.context.load_cert_chain(cert.cert, cert.key)
        self.context.verify_mode = ssl.CERT_REQUIRED  # mutual TLS, as ZooKeeper's default ssl.clientAuth=need
        self.context.load_verify_locations(ca_file)
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self.listener.getsockname()[1]
        self.received = bytearray()
        self.failures: list[str] = []
        self.connections = 0
        self.changed = threading.Condition()
        self._threads: list[threading.Thread] = []
        self._open: set[socket.socket] = set()
        self._closed = False
        self._accept = threading.Thread(target=self._serve, daemon=True)
        self._accept.start()

    def _serve(self) -> None:
        while True:
            try:
                raw, _ = self.listener.accept()
            except OSError:
                return
            t = threading.Thread(target=self._handle, args=(raw,), daemon=True)
            self._threads.append(t)
            t.start()

    def _note(self, data: bytes = b"", failure: str | None = None) -> None:
        with self.changed:
            self.received += data
            if failure is not None:
                self.failures.append(failure)
            self.changed.notify_all()

    def _handle(self, raw: socket.socket) -> None:
        raw.settimeout(5)
        with self.changed:
            self.connections += 1
        try:
            conn = self.context.wrap_socket(raw, server_side=True)
        except OSError as e:
            self._note(failure=str(e))
            raw.close()
            return
        with self.changed:
            self._open.add(conn)
        with conn, contextlib.suppress(OSError):
            head = _recv_exact(conn, 4)
            self._note(head)
            if head in (b"srvr", b"mntr"):
                conn.sendall((SRVR if head == b"srvr" else MNTR).encode())
                return
            self._note(_recv_exact(conn, struct.unpack("!i", head)[0]))  # kazoo's Connect
            body = struct.pack("!iiqi", 0, 10_000, 0x1234, 16) + bytes(16) + b"\x00"
            conn.sendall(struct.pack("!i", len(body)) + body)
            conn.settimeout(2)
            while not self._closed and (chunk := conn.recv(65536)):
                self._note(chunk)  # the auth packet, pings

    def wait_for(self, predicate: Any, timeout: float = 10.0) -> bool:
        with self.changed:
            return self.changed.wait_for(predicate, timeout)

    def drop(self) -> None:
        """Cut the open connections (kazoo's stop() would wait for them to answer)."""
        with self.changed:
            conns, self._open = list(self._open), set()
        for conn in conns:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        self._closed = True
        self.listener.close()
        self.drop()
        for t in self._threads:
            t.join(timeout=5)


def _recv_exact(conn: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = conn.recv(n - len(data))
        if not chunk:
            raise ConnectionError("closed")
        data += chunk
    return data


@pytest.fixture
def secure_port(pki: dict[str, Any]) -> Iterator[Any]:
    ports: list[SecurePort] = []

    def start(cert: str) -> SecurePort:
        port = SecurePort(pki[cert], pki["ca"])
        ports.append(port)
        return port

    yield start
    for p in ports:
        p.close()


def zk_config(pki: dict[str, Any], port: int, **extra: Any) -> ZooKeeperConfig:
    return ZooKeeperConfig(connect=f"127.0.0.1:{port}", auth_scheme="digest", username="kmon", password=PASSWORD,
                           use_tls=True, ca_file=pki["ca"], cert_file=pki["client"].cert,
                           key_file=pki["client"].key, **extra)


# ----------------------------------------------------------------------------- the configuration


def test_kazoo_settings_check_the_host_name_unless_turned_off(pki: dict[str, Any]) -> None:
    settings = kazoo_settings(zk_config(pki, 2281))
    assert settings["check_hostname"] is True and settings["verify_certs"] is True
    for spelling in ("none", "NONE"):
        off = kazoo_settings(zk_config(pki, 2281, endpoint_identification_algorithm=spelling))
        assert off["check_hostname"] is False and off["verify_certs"] is True  # the chain is still verified
    assert kazoo_settings(zk_config(pki, 2281, endpoint_identification_algorithm="HTTPS"))["check_hostname"] is True


def test_the_opt_out_is_checked_and_older_configs_load() -> None:
    old = ZooKeeperConfig.model_validate({"connect": "zk:2181", "use_tls": True, "ca_file": "/ca.pem"})
    assert old.endpoint_identification_algorithm == "https"
    assert ZooKeeperConfig(connect="zk:2181").endpoint_identification_algorithm == "https"  # plaintext: harmless
    with pytest.raises(ValidationError, match="only used with use_tls"):
        ZooKeeperConfig(connect="zk:2181", endpoint_identification_algorithm="none")
    with pytest.raises(ValidationError, match="endpoint_identification_algorithm"):
        ZooKeeperConfig(connect="zk:2181", use_tls=True, endpoint_identification_algorithm="")


# ----------------------------------------------------------------------------- kazoo


def _kazoo_against(port: SecurePort, zk: ZooKeeperConfig, until: Any) -> None:
    """A KazooClient built from `kazoo_settings` connects to `port` until `until(port)` holds (or 10 s pass)."""
    from kazoo.client import KazooClient

    client = KazooClient(**kazoo_settings(zk), connection_retry={"max_tries": -1, "delay": 0.05, "max_delay": 0.2})
    client.start_async()
    try:
        port.wait_for(lambda: until(port))
    finally:
        port.drop()
        client.stop()
        client.close()


def test_kazoo_refuses_a_certificate_for_another_host_and_keeps_the_password(
        pki: dict[str, Any], secure_port: Any, caplog: pytest.LogCaptureFixture) -> None:
    """The defect: kazoo's own check_hostname default is False, so a certificate the CA signed for any host was
    accepted, and kazoo sent ``digest kmon:password`` to whoever held it."""
    good = secure_port("good")  # first, that the test double gets the password out of kazoo at all
    _kazoo_against(good, zk_config(pki, good.port), lambda p: PASSWORD.encode() in p.received)
    assert PASSWORD.encode() in good.received and not good.failures

    wrong = secure_port("wrong")
    with caplog.at_level(logging.WARNING, logger="kazoo.client"):
        # kazoo logs why it dropped a connection before it tries the next one: two attempts, one logged at least
        _kazoo_against(wrong, zk_config(pki, wrong.port),
                       lambda p: len(p.failures) >= 2 or PASSWORD.encode() in p.received)
    assert PASSWORD.encode() not in wrong.received
    assert len(wrong.failures) >= 2, "no handshake failed"
    refusals = [r.getMessage() for r in caplog.records if "CERTIFICATE_VERIFY_FAILED" in r.getMessage()]
    assert refusals and all("mismatch" in r for r in refusals), refusals  # the host name, not the issuer


def test_kazoo_with_the_check_off_accepts_any_certificate_of_the_ca(pki: dict[str, Any], secure_port: Any) -> None:
    wrong = secure_port("wrong")
    _kazoo_against(wrong, zk_config(pki, wrong.port, endpoint_identification_algorithm="none"),
                   lambda p: PASSWORD.encode() in p.received)
    assert PASSWORD.encode() in wrong.received  # what the operator asked for


# ----------------------------------------------------------------------------- four-letter words


def _context(pki: dict[str, Any], check_hostname: bool = True) -> ssl.SSLContext:
    return tls_context(ca=str(pki["ca"]), certfile=str(pki["client"].cert), keyfile=str(pki["client"].key),
                       check_hostname=check_hostname)


def test_probe_speaks_tls_and_checks_the_host_name(pki: dict[str, Any], secure_port: Any) -> None:
    good = secure_port("good")
    assert send_four_letter("127.0.0.1", good.port, "srvr", 5.0, tls=_context(pki)) == SRVR
    assert bytes(good.received) == b"srvr"
    wrong = secure_port("wrong")
    with pytest.raises(FourLetterTlsError, match="mismatch") as caught:
        send_four_letter("127.0.0.1", wrong.port, "srvr", 5.0, tls=_context(pki))
    assert caught.value.kind == "tls" and describe_failure("srvr", caught.value) == "TLS failed: srvr"
    assert wrong.wait_for(lambda: wrong.failures, 5) and not wrong.received  # the command never left
    assert send_four_letter("127.0.0.1", wrong.port, "mntr", 5.0, tls=_context(pki, check_hostname=False)) == MNTR


def test_probe_tls_failures_say_so(pki: dict[str, Any], secure_port: Any, tmp_path: Path) -> None:
    good = secure_port("good")
    # no client certificate: TLS 1.3 says so after our side of the handshake, in an alert ("certificate required")
    # or, when the server's close overtakes it, as a TLS connection cut short ("EOF occurred in violation of protocol")
    with pytest.raises(FourLetterTlsError, match="TLS error"):
        send_four_letter("127.0.0.1", good.port, "srvr", 5.0, tls=tls_context(ca=str(pki["ca"])))
    other = TestCA(tmp_path / "other-ca")
    untrusted = tls_context(ca=str(other.ca_file), certfile=str(pki["client"].cert), keyfile=str(pki["client"].key),
                            check_hostname=False)
    with pytest.raises(FourLetterTlsError, match="CERTIFICATE_VERIFY_FAILED"):  # the chain is checked regardless
        send_four_letter("127.0.0.1", good.port, "srvr", 5.0, tls=untrusted)


def test_tls_handshake_counts_against_the_probe_deadline(pki: dict[str, Any]) -> None:
    with socket.create_server(("127.0.0.1", 0)) as silent:  # accepts (the kernel does), never handshakes
        started = time.monotonic()
        with pytest.raises(FourLetterTimeout, match="TLS handshake"):
            send_four_letter("127.0.0.1", silent.getsockname()[1], "srvr", 0.5, tls=_context(pki))
        assert time.monotonic() - started < 2.0


def _observe(zk: ZooKeeperConfig) -> Any:
    with ZkAdapter("c", zk.connect, kazoo_settings(zk), timeout_s=3.0) as adapter:
        return adapter.observe(read_znodes=False)


def test_adapter_probes_a_tls_only_server_over_tls(pki: dict[str, Any], secure_port: Any) -> None:
    """The false page: sent in plaintext, a probe got no answer from a TLS-only server (its TLS layer waits for the
    rest of a record): "not serving" ("timeout", and zk_quorum_lost) for a healthy ensemble."""
    good = secure_port("good")
    obs = _observe(zk_config(pki, good.port))
    assert [(s.serving, s.mode, s.error) for s in obs.servers] == [(True, "standalone", None)]
    assert not obs.errors and not obs.stale_sections
    assert not good.failures


def test_adapter_probes_refuse_a_certificate_for_another_host(pki: dict[str, Any], secure_port: Any) -> None:
    wrong = secure_port("wrong")
    obs = _observe(zk_config(pki, wrong.port))
    (server,) = obs.servers
    assert not server.serving and server.error == "TLS failed: srvr"
    assert any("TLS failed: srvr" in e and "mismatch" in e for e in obs.errors), obs.errors
    assert "zookeeper" in obs.stale_sections  # unknown, not "down"
    assert not wrong.received
    on_purpose = _observe(zk_config(pki, wrong.port, endpoint_identification_algorithm="none"))
    assert [(s.serving, s.mode) for s in on_purpose.servers] == [(True, "standalone")]


def test_adapter_defaults_the_host_name_check_on_for_tls(pki: dict[str, Any]) -> None:
    """Settings not built by `kazoo_settings` (kazoo's own default is off) get the check as well."""
    with ZkAdapter("c", "127.0.0.1:1", {"use_ssl": True, "ca": str(pki["ca"])}) as adapter:
        assert adapter.kazoo_settings["check_hostname"] is True and adapter.kazoo_settings["verify_certs"] is True
        assert adapter._new_client().check_hostname is True
        context = adapter._probe_tls()
        assert context is not None and context.check_hostname and context.verify_mode == ssl.CERT_REQUIRED
    with ZkAdapter("c", "127.0.0.1:1", {"use_ssl": True, "check_hostname": False}) as adapter:
        assert adapter._new_client().check_hostname is False
    with ZkAdapter("c", "127.0.0.1:1", {}) as adapter:
        assert "check_hostname" not in adapter.kazoo_settings and adapter._probe_tls() is None


def test_probe_context_is_rebuilt_when_a_file_changes(pki: dict[str, Any], tmp_path: Path) -> None:
    ca = tmp_path / "ca.pem"
    ca.write_bytes(pki["ca"].read_bytes())
    with ZkAdapter("c", "127.0.0.1:1", {"use_ssl": True, "ca": str(ca)}) as adapter:
        first = adapter._probe_tls()
        assert adapter._probe_tls() is first  # kept: building one reads the system's CA store
        os.utime(ca, ns=(time.time_ns(), time.time_ns() + 10**9))
        assert adapter._probe_tls() is not first  # a rotated CA (or certificate) is read again
        ca.unlink()
        probes = adapter._start_probes()
        outcome = probes[("127.0.0.1", 1, "srvr")].result()
        assert isinstance(outcome, FourLetterTlsError) and "cannot set up TLS" in str(outcome)
