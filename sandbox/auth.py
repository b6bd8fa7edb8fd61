"""SASL on the sandbox's listeners: PLAIN (RFC 4616), SCRAM-SHA-256/512 (RFC 5802, RFC 7677) and
OAUTHBEARER (RFC 7628, KIP-255) with HMAC-signed JWTs.

The state machine follows Kafka's `SaslServerAuthenticator` (KIP-43, KIP-152):

* before a mechanism is chosen a connection may send only ApiVersions and
  SaslHandshake (v1); anything else closes it without an answer;
* after the handshake it may send only SaslAuthenticate; anything else gets an
  ILLEGAL_SASL_STATE answer and the connection closes;
* a failed authentication gets SASL_AUTHENTICATION_FAILED (58) with a message
  naming neither the password nor whether the user exists, then the connection
  closes (Kafka does the same after `connection.failed.authentication.delay.ms`);
* once authenticated, SaslHandshake and SaslAuthenticate get ILLEGAL_SASL_STATE
  as Kafka's request handler answers them (no re-authentication: the session
  lifetime sent is 0, so clients never try, as with Kafka's default
  `connections.max.reauth.ms=0`).

SaslHandshake v0 (raw, unframed SASL tokens afterwards) is not implemented and
therefore not advertised: librdkafka and kafka-python both use v1 when offered.
SCRAM credentials are kept as Kafka keeps them (salt, iterations, StoredKey,
ServerKey), derived once when the listener starts; PLAIN compares the password.
Channel binding is not offered (gs2 header ``n`` or ``y`` only), like Kafka.

OAUTHBEARER accepts the JWTs of one issuer: HS256-signed with the listener's key (the key a test's token
endpoint signs with, see `issue_jwt`), unexpired by the wall clock (tokens are real-world things, unlike the
simulated cluster time), with a ``sub`` claim, which becomes the user name. A rejected token is answered as
Kafka's `OAuthBearerSaslServer` does (RFC 7628 section 3.2.2): an error challenge ``{"status":"invalid_token"}``,
and after the client's ``%x01`` acknowledgement SASL_AUTHENTICATION_FAILED.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import logging
import os
import re
import secrets
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

log = logging.getLogger(__name__)

UNSUPPORTED_VERSION = 35
UNSUPPORTED_SASL_MECHANISM = 33
ILLEGAL_SASL_STATE = 34
SASL_AUTHENTICATION_FAILED = 58

API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE = 18, 17, 36
SASL_API_RANGES = {SASL_HANDSHAKE: (1, 1), SASL_AUTHENTICATE: (0, 2)}
"""What ApiVersions advertises for the SASL APIs when SASL is on (v0 handshake = raw tokens, not implemented)."""

SCRAM_HASHES: dict[str, Callable[..., Any]] = {"SCRAM-SHA-256": hashlib.sha256, "SCRAM-SHA-512": hashlib.sha512}
MECHANISMS = ("PLAIN", *SCRAM_HASHES, "OAUTHBEARER")
SCRAM_MIN_ITERATIONS = 4096  # RFC 7677 section 4 and Kafka's minimum


class AuthenticationFailed(Exception):
    """A client's credentials or SASL messages were rejected; str() is safe to send back and to log."""


# --------------------------------------------------------------------------- mechanisms
class MechanismServer(Protocol):
    """One authentication exchange: feed client tokens, get server tokens, until `complete`."""

    complete: bool
    username: str | None  # the user the client named (set before its credentials are checked)

    def step(self, token: bytes) -> bytes: ...


class PlainServer:
    """RFC 4616: one message ``[authzid] NUL authcid NUL passwd``, answered with empty bytes."""

    def __init__(self, passwords: Mapping[str, str]) -> None:
        self._passwords = passwords
        self.complete = False
        self.username: str | None = None

    def step(self, token: bytes) -> bytes:
        if self.complete:
            raise AuthenticationFailed("PLAIN authentication already complete")
        parts = token.split(b"\x00")
        if len(parts) != 3:
            raise AuthenticationFailed("Invalid SASL/PLAIN message: expected 3 NUL-separated fields")
        try:
            authzid, user, password = (p.decode("utf-8") for p in parts)
        except UnicodeDecodeError:
            raise AuthenticationFailed("Invalid SASL/PLAIN message: not UTF-8") from None
        if not user:
            raise AuthenticationFailed("Authentication failed: username not specified")
        if authzid and authzid != user:
            raise AuthenticationFailed("Authentication failed: Client requested an authorization id that is "
                                       "different from username")
        self.username = user
        expected = self._passwords.get(user)
        # compare even for an unknown user, so the answer takes the same path either way
        ok = hmac.compare_digest((expected or "\x00unknown").encode("utf-8"), password.encode("utf-8"))
        if expected is None or not ok:
            raise AuthenticationFailed("Authentication failed: Invalid username or password")
        self.complete = True
        return b""


@dataclass(frozen=True)
class ScramCredential:
    """What a SCRAM server stores per user (RFC 5802 section 3): never the password itself."""

    salt: bytes
    iterations: int
    stored_key: bytes
    server_key: bytes


def scram_credential(mechanism: str, password: str, salt: bytes | None = None,
                     iterations: int = SCRAM_MIN_ITERATIONS) -> ScramCredential:
    """SaltedPassword = PBKDF2(password, salt, i); StoredKey = H(HMAC(SP, "Client Key")); ServerKey = HMAC(SP, ...).

    The password is used as UTF-8 without SASLprep, as Kafka and its clients do.
    """
    h = SCRAM_HASHES[mechanism]
    salt = os.urandom(32) if salt is None else salt
    salted = hashlib.pbkdf2_hmac(h().name, password.encode("utf-8"), salt, iterations)
    client_key = hmac.new(salted, b"Client Key", h).digest()
    return ScramCredential(salt, iterations, h(client_key).digest(), hmac.new(salted, b"Server Key", h).digest())


def _parse_attributes(text: str, what: str) -> list[tuple[str, str]]:
    out = []
    for item in text.split(","):
        if len(item) < 2 or item[1] != "=" or not item[0].isalpha():
            raise AuthenticationFailed(f"Invalid SCRAM {what}: malformed attribute")
        out.append((item[0], item[2:]))
    return out


def _saslname(value: str) -> str:
    """RFC 5802 saslname: ``=2C`` is ',' and ``=3D`` is '='; any other '=' is malformed."""
    out, i = [], 0
    while i < len(value):
        if value[i] == "=":
            code = value[i + 1:i + 3]
            if code not in ("2C", "3D"):
                raise AuthenticationFailed("Invalid SCRAM client first message: bad username encoding")
            out.append("," if code == "2C" else "=")
            i += 3
        else:
            out.append(value[i])
            i += 1
    return "".join(out)


class ScramServer:
    """RFC 5802 server side: client-first -> server-first, client-final -> server-final."""

    def __init__(self, mechanism: str, credentials: Mapping[str, ScramCredential],
                 nonce: Callable[[], str] | None = None) -> None:
        self.mechanism = mechanism
        self._hash = SCRAM_HASHES[mechanism]
        self._credentials = credentials
        self._nonce = nonce or (lambda: secrets.token_urlsafe(24))
        self.complete = False
        self.username: str | None = None
        self._state = 0
        self._gs2_header = ""
        self._client_first_bare = ""
        self._server_first = ""
        self._full_nonce = ""
        self._cred: ScramCredential | None = None

    def _failed(self) -> AuthenticationFailed:
        return AuthenticationFailed("Authentication failed during authentication due to invalid credentials "
                                    f"with SASL mechanism {self.mechanism}")

    def step(self, token: bytes) -> bytes:
        try:
            text = token.decode("utf-8")
        except UnicodeDecodeError:
            raise AuthenticationFailed("Invalid SCRAM message: not UTF-8") from None
        if self._state == 0:
            return self._client_first(text)
        if self._state == 1:
            return self._client_final(text)
        raise AuthenticationFailed("SCRAM authentication already complete")

    def _client_first(self, text: str) -> bytes:
        # gs2-header = gs2-cbind-flag "," [ authzid ] "," ; then client-first-message-bare
        parts = text.split(",", 2)
        if len(parts) != 3:
            raise AuthenticationFailed("Invalid SCRAM client first message")
        cbind, authzid, bare = parts
        if cbind.startswith("p="):
            raise AuthenticationFailed("Invalid SCRAM client first message: channel binding is not supported")
        if cbind not in ("n", "y"):
            raise AuthenticationFailed("Invalid SCRAM client first message: bad gs2 header")
        if authzid and not authzid.startswith("a="):
            raise AuthenticationFailed("Invalid SCRAM client first message: bad authzid")
        attrs = _parse_attributes(bare, "client first message")
        if len(attrs) < 2 or attrs[0][0] != "n" or attrs[1][0] != "r":
            raise AuthenticationFailed("Invalid SCRAM client first message: expected n=...,r=...")
        if any(k == "m" for k, _ in attrs):
            raise AuthenticationFailed("Invalid SCRAM client first message: unsupported mandatory extension")
        user = _saslname(attrs[0][1])
        client_nonce = attrs[1][1]
        if not user or not client_nonce:
            raise AuthenticationFailed("Invalid SCRAM client first message: empty username or nonce")
        if authzid and _saslname(authzid[2:]) != user:
            raise AuthenticationFailed("Authentication failed: Client requested an authorization id that is "
                                       "different from username")
        self.username = user
        cred = self._credentials.get(user)
        if cred is None:
            raise self._failed()  # same message as a wrong password: do not reveal which users exist
        self._gs2_header = f"{cbind},{authzid},"
        self._client_first_bare = bare
        self._full_nonce = client_nonce + self._nonce()
        self._server_first = (f"r={self._full_nonce},s={base64.b64encode(cred.salt).decode()},"
                              f"i={cred.iterations}")
        self._cred = cred
        self._state = 1
        return self._server_first.encode()

    def _client_final(self, text: str) -> bytes:
        assert self._cred is not None
        without_proof, sep, proof_b64 = text.rpartition(",p=")
        if not sep:
            raise AuthenticationFailed("Invalid SCRAM client final message: no proof")
        attrs = _parse_attributes(without_proof, "client final message")
        if len(attrs) < 2 or attrs[0][0] != "c" or attrs[1][0] != "r":
            raise AuthenticationFailed("Invalid SCRAM client final message: expected c=...,r=...")
        try:
            binding = base64.b64decode(attrs[0][1], validate=True).decode("utf-8")
            proof = base64.b64decode(proof_b64, validate=True)
        except (ValueError, UnicodeDecodeError):
            raise AuthenticationFailed("Invalid SCRAM client final message: bad base64") from None
        if binding != self._gs2_header:
            raise AuthenticationFailed("Invalid SCRAM client final message: channel binding does not match")
        if not hmac.compare_digest(attrs[1][1].encode(), self._full_nonce.encode()):
            raise AuthenticationFailed("Invalid SCRAM client final message: nonce does not match")
        auth_message = f"{self._client_first_bare},{self._server_first},{without_proof}".encode()
        client_signature = hmac.new(self._cred.stored_key, auth_message, self._hash).digest()
        if len(proof) != len(client_signature):
            raise self._failed()
        client_key = bytes(a ^ b for a, b in zip(proof, client_signature, strict=True))
        if not hmac.compare_digest(self._hash(client_key).digest(), self._cred.stored_key):
            raise self._failed()
        server_signature = hmac.new(self._cred.server_key, auth_message, self._hash).digest()
        self._state = 2
        self.complete = True
        return b"v=" + base64.b64encode(server_signature)


# --------------------------------------------------------------------------- OAUTHBEARER
def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _b64url_decode(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def issue_jwt(key: bytes, claims: Mapping[str, Any]) -> str:
    """A compact JWT (RFC 7519) signed with HMAC-SHA256: base64url(header).base64url(payload).base64url(sig)."""
    header = _b64url(json.dumps({"alg": "HS256", "typ": "JWT"}, separators=(",", ":")).encode())
    payload = _b64url(json.dumps(dict(claims), separators=(",", ":")).encode())
    signature = hmac.new(key, f"{header}.{payload}".encode("ascii"), hashlib.sha256).digest()
    return f"{header}.{payload}.{_b64url(signature)}"


def verify_jwt(key: bytes, token: str, now: float | None = None, issuer: str | None = None) -> dict[str, Any]:
    """The claims of an HS256 JWT signed with `key`, unexpired at `now` (default: the wall clock).

    Raises AuthenticationFailed with a reason that quotes nothing of the token.
    """
    parts = token.split(".")
    if len(parts) != 3:
        raise AuthenticationFailed("not a JWT (expected header.payload.signature)")
    try:
        header = json.loads(_b64url_decode(parts[0]))
        signature = _b64url_decode(parts[2])
    except (ValueError, UnicodeDecodeError):
        raise AuthenticationFailed("malformed JWT") from None
    if not isinstance(header, dict) or header.get("alg") != "HS256":
        raise AuthenticationFailed("unsupported JWT algorithm (HS256 expected)")
    expected = hmac.new(key, f"{parts[0]}.{parts[1]}".encode("ascii"), hashlib.sha256).digest()
    if not hmac.compare_digest(expected, signature):
        raise AuthenticationFailed("invalid JWT signature")
    try:
        claims = json.loads(_b64url_decode(parts[1]))
    except (ValueError, UnicodeDecodeError):
        raise AuthenticationFailed("malformed JWT payload") from None
    if not isinstance(claims, dict):
        raise AuthenticationFailed("malformed JWT payload")
    exp = claims.get("exp")
    if not isinstance(exp, int | float) or isinstance(exp, bool):
        raise AuthenticationFailed("the JWT has no exp claim")
    if exp <= (time.time() if now is None else now):
        raise AuthenticationFailed("the JWT has expired")
    if issuer is not None and claims.get("iss") != issuer:
        raise AuthenticationFailed("the JWT is from another issuer")
    if not isinstance(claims.get("sub"), str) or not claims["sub"]:
        raise AuthenticationFailed("the JWT has no sub claim")
    return claims


_OAUTH_KEY = re.compile(r"[A-Za-z]+")


class OAuthBearerServer:
    """RFC 7628 server side: ``gs2-header %x01 auth=Bearer <token> %x01 [key=value %x01]* %x01``.

    A valid token completes the exchange with an empty answer. An invalid one gets the error challenge and
    fails on the client's ``%x01`` (or on anything else it sends), as Kafka's OAuthBearerSaslServer does.
    """

    ERROR_CHALLENGE = b'{"status":"invalid_token"}'

    def __init__(self, key: bytes, issuer: str | None = None) -> None:
        self._key = key
        self._issuer = issuer
        self.complete = False
        self.username: str | None = None
        self.extensions: dict[str, str] = {}
        self._error: str | None = None

    def step(self, token: bytes) -> bytes:
        if self._error is not None:
            raise AuthenticationFailed(f"Authentication failed: invalid_token ({self._error})")
        if self.complete:
            raise AuthenticationFailed("OAUTHBEARER authentication already complete")
        try:
            text = token.decode("utf-8")
        except UnicodeDecodeError:
            raise AuthenticationFailed("Invalid OAUTHBEARER message: not UTF-8") from None
        gs2, sep, rest = text.partition("\x01")
        if not sep or not rest.endswith("\x01\x01") or not re.fullmatch(r"[ny],(a=[^,]*)?,", gs2):
            raise AuthenticationFailed("Invalid OAUTHBEARER message: expected gs2-header %x01 kvpairs %x01")
        pairs: dict[str, str] = {}
        for item in rest[:-2].split("\x01"):
            key, eq, value = item.partition("=")
            if not eq or not _OAUTH_KEY.fullmatch(key) or key in pairs:
                raise AuthenticationFailed("Invalid OAUTHBEARER message: malformed key=value pair")
            pairs[key] = value
        scheme, _, bearer = pairs.pop("auth", "").partition(" ")
        if scheme.lower() != "bearer" or not bearer:
            raise AuthenticationFailed("Invalid OAUTHBEARER message: no auth=Bearer <token>")
        try:
            claims = verify_jwt(self._key, bearer, issuer=self._issuer)
        except AuthenticationFailed as e:
            self._error = str(e)
            return self.ERROR_CHALLENGE
        self.username = claims["sub"]
        self.extensions = pairs
        self.complete = True
        return b""


# --------------------------------------------------------------------------- the listener side
class SaslConfig:
    """The SASL setup of a listener: enabled mechanisms and each user's credentials (derived once)."""

    def __init__(self, mechanisms: Iterable[str], users: Mapping[str, str],
                 scram_iterations: int = SCRAM_MIN_ITERATIONS, oauth_key: bytes | None = None,
                 oauth_issuer: str | None = None) -> None:
        self.mechanisms = list(mechanisms)
        unknown = [m for m in self.mechanisms if m not in MECHANISMS]
        if unknown:
            raise ValueError(f"unsupported SASL mechanisms {unknown}; supported: {', '.join(MECHANISMS)}")
        if "OAUTHBEARER" in self.mechanisms and not oauth_key:
            raise ValueError("OAUTHBEARER needs the key its tokens are signed with (oauth_key)")
        self._oauth_key = oauth_key or b""
        self._oauth_issuer = oauth_issuer
        self._passwords = dict(users)
        self._scram = {m: {u: scram_credential(m, p, iterations=scram_iterations) for u, p in users.items()}
                       for m in self.mechanisms if m in SCRAM_HASHES}

    def __repr__(self) -> str:  # never the passwords
        return f"SaslConfig(mechanisms={self.mechanisms}, users={sorted(self._passwords)})"

    def mechanism_server(self, mechanism: str) -> MechanismServer:
        if mechanism == "PLAIN":
            return PlainServer(self._passwords)
        if mechanism == "OAUTHBEARER":
            return OAuthBearerServer(self._oauth_key, self._oauth_issuer)
        return ScramServer(mechanism, self._scram[mechanism])

    def connection(self) -> SaslConnection:
        return SaslConnection(self)


@dataclass
class Verdict:
    """How the listener treats one request on a SASL connection.

    ``passthrough``: serve it normally. Otherwise answer with ``fields`` (a
    SaslHandshake/SaslAuthenticate response), or with the request's own error
    response carrying ``error_code``, or with nothing; then close if ``close``.
    """

    passthrough: bool = False
    fields: dict[str, Any] | None = None
    error_code: int | None = None
    close: bool = False


@dataclass
class SaslConnection:
    """Per-connection SASL state: handshake -> authenticate -> authenticated."""

    config: SaslConfig
    stage: str = "handshake"
    mechanism: str | None = None
    username: str | None = None
    client_software: str | None = None  # from ApiVersions v3+, for the listener's bookkeeping
    _server: MechanismServer | None = field(default=None, repr=False)

    @property
    def authenticated(self) -> bool:
        return self.stage == "authenticated"

    def handle(self, api_key: int, api_version: int, body: Any, peer: str = "?") -> Verdict:
        if self.stage == "authenticated":
            return self._after_auth(api_key)
        if self.stage == "handshake":
            if api_key == API_VERSIONS:
                return Verdict(passthrough=True)
            if api_key != SASL_HANDSHAKE or body is None:
                log.info("sasl: %s sent api %s before the SASL handshake; closing", peer, api_key)
                return Verdict(close=True)
            return self._handshake(api_version, body.mechanism, peer)
        # stage "authenticate"
        if api_key != SASL_AUTHENTICATE or body is None:
            log.info("sasl: %s sent api %s during SASL authentication; closing", peer, api_key)
            return Verdict(error_code=ILLEGAL_SASL_STATE, close=True)
        return self._authenticate(bytes(body.auth_bytes or b""), peer)

    def _handshake(self, api_version: int, mechanism: str, peer: str) -> Verdict:
        enabled = list(self.config.mechanisms)
        if api_version < 1:
            log.info("sasl: %s sent SaslHandshake v0 (raw tokens, not supported); closing", peer)
            return Verdict(fields={"error_code": UNSUPPORTED_VERSION, "mechanisms": enabled}, close=True)
        if mechanism not in enabled:
            log.info("sasl: %s asked for mechanism %r, enabled: %s; closing", peer, mechanism, enabled)
            return Verdict(fields={"error_code": UNSUPPORTED_SASL_MECHANISM, "mechanisms": enabled}, close=True)
        self.mechanism = mechanism
        self._server = self.config.mechanism_server(mechanism)
        self.stage = "authenticate"
        return Verdict(fields={"error_code": 0, "mechanisms": enabled})

    def _authenticate(self, token: bytes, peer: str) -> Verdict:
        assert self._server is not None
        try:
            reply = self._server.step(token)
        except AuthenticationFailed as e:
            self.username = self._server.username
            log.info("sasl: failed authentication with %s (%s, user %r): %s", peer, self.mechanism,
                     self.username, e)
            return Verdict(fields={"error_code": SASL_AUTHENTICATION_FAILED, "error_message": str(e),
                                   "auth_bytes": b"", "session_lifetime_ms": 0}, close=True)
        if self._server.complete:
            self.stage = "authenticated"
            self.username = self._server.username
            log.debug("sasl: %s authenticated as %r via %s", peer, self.username, self.mechanism)
        return Verdict(fields={"error_code": 0, "error_message": None, "auth_bytes": reply,
                               "session_lifetime_ms": 0})

    @staticmethod
    def _after_auth(api_key: int) -> Verdict:
        if api_key == SASL_HANDSHAKE:
            return Verdict(fields={"error_code": ILLEGAL_SASL_STATE, "mechanisms": []})
        if api_key == SASL_AUTHENTICATE:
            return Verdict(fields={"error_code": ILLEGAL_SASL_STATE, "auth_bytes": b"", "session_lifetime_ms": 0,
                                   "error_message": "SaslAuthenticate request received after successful "
                                                    "authentication"})
        return Verdict(passthrough=True)
