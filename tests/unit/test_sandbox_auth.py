"""The sandbox's SASL server side (PLAIN, SCRAM-SHA-256/512), its per-connection state machine, the security
section of a scenario, and the throwaway TLS material."""

from __future__ import annotations

import base64
import subprocess
from types import SimpleNamespace

import pytest
from kafka.net.sasl.scram import ScramClient
from pydantic import ValidationError

from sandbox import tls
from sandbox.auth import (
    ILLEGAL_SASL_STATE,
    SASL_AUTHENTICATION_FAILED,
    UNSUPPORTED_SASL_MECHANISM,
    UNSUPPORTED_VERSION,
    AuthenticationFailed,
    PlainServer,
    SaslConfig,
    ScramServer,
    scram_credential,
)
from sandbox.spec import ClusterSpec, Scenario, SecuritySpec

# RFC 7677 section 3: SCRAM-SHA-256 exchange for user "user", password "pencil".
RFC7677 = {
    "salt": "W22ZaJ0SNY7soEsUEjb6gQ==",
    "client_first": "n,,n=user,r=rOprNGfwEbeRWgbNEkqO",
    "server_nonce": "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0",
    "server_first": "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096",
    "client_final": "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                    "p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=",
    "server_final": "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=",
}


def rfc7677_server() -> ScramServer:
    cred = scram_credential("SCRAM-SHA-256", "pencil", salt=base64.b64decode(RFC7677["salt"]), iterations=4096)
    return ScramServer("SCRAM-SHA-256", {"user": cred}, nonce=lambda: RFC7677["server_nonce"])


# --------------------------------------------------------------------------- SCRAM
def test_scram_sha256_matches_the_rfc7677_test_vector() -> None:
    server = rfc7677_server()
    assert server.step(RFC7677["client_first"].encode()).decode() == RFC7677["server_first"]
    assert not server.complete
    assert server.step(RFC7677["client_final"].encode()).decode() == RFC7677["server_final"]
    assert server.complete and server.username == "user"


def test_scram_wrong_proof_is_rejected_like_an_unknown_user() -> None:
    server = rfc7677_server()
    server.step(RFC7677["client_first"].encode())
    proof = bytearray(base64.b64decode(RFC7677["client_final"].rsplit(",p=", 1)[1]))
    proof[0] ^= 1
    tampered = RFC7677["client_final"].rsplit(",p=", 1)[0] + ",p=" + base64.b64encode(bytes(proof)).decode()
    with pytest.raises(AuthenticationFailed) as wrong:
        server.step(tampered.encode())
    assert not server.complete
    with pytest.raises(AuthenticationFailed) as unknown:
        rfc7677_server().step(b"n,,n=nobody,r=abc")
    assert str(wrong.value) == str(unknown.value)
    assert "invalid credentials with SASL mechanism SCRAM-SHA-256" in str(wrong.value)


def test_scram_wrong_password_is_rejected() -> None:
    client = ScramClient("user", "not-pencil", "SCRAM-SHA-256")
    server = rfc7677_server()
    client.process_server_first_message(server.step(client.first_message()))
    with pytest.raises(AuthenticationFailed):
        server.step(client.final_message())


@pytest.mark.parametrize("final", [
    # the server's part of the nonce changed
    "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k1,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=",
    # only the client's nonce sent back
    "c=biws,r=rOprNGfwEbeRWgbNEkqO,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=",
])
def test_scram_nonce_mismatch_is_rejected(final: str) -> None:
    server = rfc7677_server()
    server.step(RFC7677["client_first"].encode())
    with pytest.raises(AuthenticationFailed, match="nonce does not match"):
        server.step(final.encode())
    assert not server.complete


def test_scram_channel_binding_must_repeat_the_gs2_header() -> None:
    server = rfc7677_server()
    server.step(RFC7677["client_first"].encode())
    other = base64.b64encode(b"y,,").decode()
    with pytest.raises(AuthenticationFailed, match="channel binding"):
        server.step(RFC7677["client_final"].replace("c=biws", f"c={other}").encode())


@pytest.mark.parametrize("first", [
    b"", b"n,,", b"n,,r=abc", b"n,,n=user", b"p=tls-unique,,n=user,r=abc", b"x,,n=user,r=abc",
    b"n,,n=us=3Xer,r=abc", b"n,,n=user,r=abc,m=ext", b"n,a=other,n=user,r=abc", b"\xff\xfe",
])
def test_scram_malformed_client_first_is_rejected(first: bytes) -> None:
    with pytest.raises(AuthenticationFailed):
        rfc7677_server().step(first)


def test_scram_decodes_escaped_user_names() -> None:
    cred = scram_credential("SCRAM-SHA-256", "pw", iterations=4096)
    server = ScramServer("SCRAM-SHA-256", {"a,b=c": cred})
    server.step(b"n,a=a=2Cb=3Dc,n=a=2Cb=3Dc,r=abc")
    assert server.username == "a,b=c"


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_server_and_kafka_python_client_agree(mechanism: str) -> None:
    """An independent client implementation (kafka-python's) authenticates, and verifies the server's signature."""
    server = ScramServer(mechanism, {"monitor": scram_credential(mechanism, "s3cret", iterations=4096)})
    client = ScramClient("monitor", "s3cret", mechanism)
    client.process_server_first_message(server.step(client.first_message()))
    client.process_server_final_message(server.step(client.final_message()))  # raises on a wrong signature
    assert server.complete and server.username == "monitor"
    with pytest.raises(AuthenticationFailed):
        server.step(b"c=biws")  # nothing after completion


def test_scram_credential_keeps_no_password() -> None:
    cred = scram_credential("SCRAM-SHA-512", "s3cret-value", iterations=4096)
    assert len(cred.salt) >= 16 and cred.iterations == 4096
    assert len(cred.stored_key) == len(cred.server_key) == 64
    assert b"s3cret-value" not in repr(cred).encode()


# --------------------------------------------------------------------------- PLAIN
@pytest.mark.parametrize("token", [b"\x00monitor\x00pw", b"monitor\x00monitor\x00pw"])
def test_plain_accepts_the_password_with_or_without_authzid(token: bytes) -> None:
    server = PlainServer({"monitor": "pw"})
    assert server.step(token) == b""
    assert server.complete and server.username == "monitor"


@pytest.mark.parametrize("token", [b"\x00monitor\x00wrong", b"\x00nobody\x00pw", b"\x00monitor\x00"])
def test_plain_rejects_wrong_password_and_unknown_user_alike(token: bytes) -> None:
    with pytest.raises(AuthenticationFailed, match=r"^Authentication failed: Invalid username or password$"):
        PlainServer({"monitor": "pw"}).step(token)


@pytest.mark.parametrize("token", [b"monitor\x00pw", b"\x00\x00pw", b"other\x00monitor\x00pw", b"a\x00b\x00c\x00d"])
def test_plain_rejects_malformed_messages(token: bytes) -> None:
    server = PlainServer({"monitor": "pw"})
    with pytest.raises(AuthenticationFailed):
        server.step(token)
    assert not server.complete


# --------------------------------------------------------------------------- the connection state machine
def req(**fields: object) -> SimpleNamespace:
    return SimpleNamespace(**fields)


def test_connection_allows_only_api_versions_and_handshake_first() -> None:
    conn = SaslConfig(["PLAIN"], {"monitor": "pw"}).connection()
    assert conn.handle(18, 3, req()).passthrough
    v = conn.handle(3, 12, req(topics=None))  # Metadata before the handshake: dropped, as Kafka does
    assert v.close and v.fields is None and v.error_code is None and not v.passthrough
    v = SaslConfig(["PLAIN"], {"monitor": "pw"}).connection().handle(36, 2, req(auth_bytes=b"\x00monitor\x00pw"))
    assert v.close and not v.passthrough  # SaslAuthenticate before SaslHandshake


def test_connection_handshake_refuses_unknown_mechanism_and_v0() -> None:
    config = SaslConfig(["SCRAM-SHA-512"], {"monitor": "pw"})
    v = config.connection().handle(17, 1, req(mechanism="PLAIN"))
    assert v.close and v.fields == {"error_code": UNSUPPORTED_SASL_MECHANISM, "mechanisms": ["SCRAM-SHA-512"]}
    v = config.connection().handle(17, 0, req(mechanism="SCRAM-SHA-512"))
    assert v.close and v.fields is not None and v.fields["error_code"] == UNSUPPORTED_VERSION


def test_connection_wrong_password_fails_with_code_58_and_closes() -> None:
    conn = SaslConfig(["PLAIN", "SCRAM-SHA-256"], {"monitor": "right-pw"}).connection()
    assert conn.handle(17, 1, req(mechanism="PLAIN")).fields == {"error_code": 0,
                                                                "mechanisms": ["PLAIN", "SCRAM-SHA-256"]}
    v = conn.handle(36, 2, req(auth_bytes=b"\x00monitor\x00wrong-pw"))
    assert v.close and v.fields is not None
    assert v.fields["error_code"] == SASL_AUTHENTICATION_FAILED
    assert "wrong-pw" not in v.fields["error_message"] and "right-pw" not in v.fields["error_message"]
    assert not conn.authenticated


def test_connection_during_authentication_accepts_only_sasl_authenticate() -> None:
    conn = SaslConfig(["PLAIN"], {"monitor": "pw"}).connection()
    conn.handle(17, 1, req(mechanism="PLAIN"))
    v = conn.handle(3, 12, req(topics=None))
    assert v.close and v.error_code == ILLEGAL_SASL_STATE


def test_connection_scram_success_then_serves_everything_but_sasl() -> None:
    conn = SaslConfig(["SCRAM-SHA-256"], {"monitor": "pw"}).connection()
    conn.handle(18, 3, req())
    assert conn.handle(17, 1, req(mechanism="SCRAM-SHA-256")).fields["error_code"] == 0
    client = ScramClient("monitor", "pw", "SCRAM-SHA-256")
    first = conn.handle(36, 2, req(auth_bytes=client.first_message()))
    assert first.fields["error_code"] == 0 and not conn.authenticated and not first.close
    client.process_server_first_message(first.fields["auth_bytes"])
    final = conn.handle(36, 2, req(auth_bytes=client.final_message()))
    assert final.fields["error_code"] == 0 and final.fields["session_lifetime_ms"] == 0
    client.process_server_final_message(final.fields["auth_bytes"])
    assert conn.authenticated and conn.username == "monitor" and conn.mechanism == "SCRAM-SHA-256"
    assert conn.handle(3, 12, req(topics=None)).passthrough
    again = conn.handle(17, 1, req(mechanism="SCRAM-SHA-256"))  # no re-authentication: Kafka's KafkaApis answer
    assert again.fields["error_code"] == ILLEGAL_SASL_STATE and not again.close


def test_sasl_config_repr_hides_passwords() -> None:
    config = SaslConfig(["PLAIN", "SCRAM-SHA-512"], {"monitor": "hush-hush"})
    assert "hush-hush" not in repr(config) and "monitor" in repr(config)
    with pytest.raises(ValueError, match="unsupported SASL mechanisms"):
        SaslConfig(["GSSAPI"], {"monitor": "pw"})


# --------------------------------------------------------------------------- the scenario's security section
def test_security_defaults_to_plaintext() -> None:
    sec = ClusterSpec().security
    assert sec.protocol == "PLAINTEXT" and not sec.tls and not sec.sasl and sec.users == {}


@pytest.mark.parametrize(("security", "message"), [
    ({"protocol": "SASL_SSL"}, "needs at least one entry in users"),
    ({"protocol": "SSL", "users": {"a": "b"}}, "only used with SASL_PLAINTEXT or SASL_SSL"),
    ({"protocol": "SASL_PLAINTEXT", "users": {"a": "b"}, "sasl_mechanisms": ["PLAIN", "PLAIN"]}, "more than once"),
    ({"protocol": "SASL_PLAINTEXT", "users": {"a": "b"}, "sasl_mechanisms": ["GSSAPI"]}, "SCRAM-SHA-512"),
    ({"protocol": "SASL_PLAINTEXT", "users": {"a": ""}}, "empty password"),
    ({"protocol": "TLS"}, "PLAINTEXT"),
    ({"protocol": "SSL", "verify": True}, "Extra inputs"),
])
def test_security_rejects_inconsistent_settings(security: dict[str, object], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        Scenario.model_validate({"cluster": {"security": security}})


def test_security_round_trips_and_keeps_passwords_out_of_repr() -> None:
    sc = Scenario.model_validate({"cluster": {"security": {
        "protocol": "SASL_SSL", "users": {"monitor": "hush-hush"}, "sasl_mechanisms": ["SCRAM-SHA-256"]}}})
    sec = sc.cluster.security
    assert sec.tls and sec.sasl
    assert "hush-hush" not in repr(sc)
    again = Scenario.model_validate(sc.model_dump())  # what `python -m sandbox` does with command-line overrides
    assert again.cluster.security == sec
    assert isinstance(SecuritySpec.model_validate(sec.model_dump()), SecuritySpec)


# --------------------------------------------------------------------------- TLS material
def test_tls_material_is_a_ca_and_a_server_certificate_for_loopback() -> None:
    material = tls.make_tls_material("127.0.0.1")
    try:
        names = {p.name for p in material.directory.iterdir()}
        assert {"ca.pem", "server.pem", "server.key"} <= names
        assert "ca.key" not in names  # nothing can be signed with this CA after the run started
        assert material.directory.stat().st_mode & 0o077 == 0  # a private directory: the server key is inside
        verify = subprocess.run(["openssl", "verify", "-CAfile", str(material.ca_file), str(material.cert_file)],
                                capture_output=True, text=True, check=False)
        assert verify.returncode == 0, verify.stderr
        san = subprocess.run(["openssl", "x509", "-in", str(material.cert_file), "-noout", "-ext", "subjectAltName"],
                             capture_output=True, text=True, check=True).stdout
        assert "IP Address:127.0.0.1" in san and "DNS:localhost" in san
        material.server_context()  # key and certificate belong together
    finally:
        material.remove()
    assert not material.directory.exists()


def test_tls_without_openssl_fails_with_the_fix_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tls.shutil, "which", lambda name: None)
    with pytest.raises(tls.TlsSetupError, match="install the Debian package `openssl`"):
        tls.make_tls_material()
