"""SASL/OAUTHBEARER for kafka-python: OIDC client-credentials tokens, as librdkafka gets them itself.

librdkafka fetches tokens on its own with ``sasl.oauthbearer.method: oidc``; kafka-python only asks a
``sasl_oauth_token_provider`` for one. `OidcTokenProvider` is that provider: it POSTs the client-credentials grant
(RFC 6749 section 4.4) to ``sasl.oauthbearer.token.endpoint.url`` with the client id and secret as HTTP Basic
credentials, as librdkafka does, and keeps the token until 80% of its lifetime has passed (librdkafka's refresh
point too). TLS to the endpoint is always verified (host name included); the CA is ``https.ca.location``, else
``ssl.ca.location``, else the system's.

Neither the client secret nor a token is ever logged or put in an exception message: a failure says what
happened (HTTP status, the OAuth ``error`` code, a network error's kind), never what was sent or received.
"""

from __future__ import annotations

import base64
import json
import logging
import re
import ssl
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from typing import Final

from kafka.errors import SaslAuthenticationFailedError
from kafka.net.sasl.oauth import AbstractTokenProvider

__all__ = ["OAuthTokenError", "OidcTokenProvider", "parse_extensions"]

log = logging.getLogger(__name__)

REFRESH_AT: Final = 0.8
"""Fraction of a token's lifetime after which a new one is fetched (librdkafka refreshes at 80% too)."""
MAX_RESPONSE_BYTES: Final = 1 << 20
_ERROR_CODE = re.compile(r"[A-Za-z0-9_.\-]{1,64}")
_EXTENSION_KEY = re.compile(r"[A-Za-z]+")  # RFC 7628 section 3.1: key = 1*(ALPHA)
_EXTENSION_VALUE = re.compile(r"[\x21-\x7e \t\r\n]*")  # value = *(VCHAR / SP / HTAB / CR / LF)


class OAuthTokenError(SaslAuthenticationFailedError):
    """No token could be had from the OIDC token endpoint; str() is safe to log (no secret, no token).

    A SaslAuthenticationFailedError, so the transport treats it as it treats a wrong password: reported at once
    as the reason the cluster is unreachable, instead of being retried into an anonymous bootstrap timeout.
    """

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message


def parse_extensions(text: str) -> dict[str, str]:
    """librdkafka's ``sasl.oauthbearer.extensions``: comma-separated ``key=value`` pairs (RFC 7628 extensions).

    Raises ValueError naming the problem (never the value) for a malformed list, a key that is not letters
    only, or the reserved key ``auth``.
    """
    out: dict[str, str] = {}
    for item in (i.strip() for i in text.split(",")):
        if not item:
            continue
        key, eq, value = item.partition("=")
        if not eq or not _EXTENSION_KEY.fullmatch(key):
            raise ValueError("expected comma-separated key=value pairs with letter-only keys")
        if key == "auth":
            raise ValueError("the key 'auth' is reserved for the token itself")
        if not _EXTENSION_VALUE.fullmatch(value):
            raise ValueError(f"extension {key!r}: the value holds characters RFC 7628 does not allow")
        out[key] = value
    return out


def _jwt_expiry(token: str) -> float | None:
    """The ``exp`` claim of a JWT-shaped token (seconds since the epoch), or None; the signature is not checked
    (the broker does that): this only tells how long the token is worth keeping."""
    parts = token.split(".")
    if len(parts) != 3:
        return None
    try:
        payload = json.loads(base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4)))
    except (ValueError, UnicodeDecodeError):
        return None
    exp = payload.get("exp") if isinstance(payload, dict) else None
    return float(exp) if isinstance(exp, int | float) and not isinstance(exp, bool) else None


class OidcTokenProvider(AbstractTokenProvider):
    """kafka-python token provider doing the OIDC client-credentials grant, token cached until near expiry.

    `token()` runs on kafka-python's IO thread once per new connection, so a cached token costs nothing and a
    fetch is bounded by `timeout_s`. Thread-safe: one fetch at a time, the others wait for its token.
    """

    def __init__(self, token_url: str, client_id: str, client_secret: str, *, scope: str | None = None,
                 extensions: Mapping[str, str] | None = None, ca_file: str | None = None, timeout_s: float = 10.0,
                 clock: Callable[[], float] = time.time) -> None:
        super().__init__()
        scheme = urllib.parse.urlsplit(token_url).scheme.lower()
        if scheme not in ("http", "https"):
            raise ValueError("the token endpoint URL must be http:// or https://")
        self._url = token_url
        self._client_id = client_id
        self._secret = client_secret
        self._scope = scope
        self._extensions = dict(extensions or {})
        self._timeout_s = timeout_s
        self._clock = clock
        self._https = scheme == "https"
        self._ca_file = ca_file
        self._context: ssl.SSLContext | None = None  # made at the first fetch: a missing CA file is a poll error
        self._lock = threading.Lock()
        self._token: str | None = None
        self._refresh_at = 0.0
        self._expires_at = 0.0
        self.fetches = 0
        """How many token requests were made (successful or not): for tests and diagnostics."""

    def __repr__(self) -> str:  # no setting values: the project redacts every sasl.oauthbearer.* value by name
        return f"OidcTokenProvider(https={self._https}, fetches={self.fetches})"

    def extensions(self) -> dict[str, str]:
        return dict(self._extensions)

    def token(self) -> str:
        with self._lock:
            now = self._clock()
            if self._token is not None and now < self._refresh_at:
                return self._token
            try:
                token, lifetime = self._fetch()
            except OAuthTokenError as e:
                if self._token is not None and now < self._expires_at - 1:
                    log.warning("%s; the current token stays in use until it expires", e)
                    return self._token
                self._token = None
                raise
            if lifetime is not None and lifetime > 0:
                self._token = token
                self._refresh_at = now + REFRESH_AT * lifetime
                self._expires_at = now + lifetime
            else:
                self._token = None  # lifetime unknown: fetch anew for every connection rather than keep it
            return token

    def _request(self) -> urllib.request.Request:
        form = {"grant_type": "client_credentials"}
        if self._scope:
            form["scope"] = self._scope
        basic = base64.b64encode(f"{self._client_id}:{self._secret}".encode()).decode("ascii")
        return urllib.request.Request(
            self._url, data=urllib.parse.urlencode(form).encode("ascii"), method="POST",
            headers={"Authorization": f"Basic {basic}", "Accept": "application/json",
                     "Content-Type": "application/x-www-form-urlencoded"})

    def _fail(self, what: str) -> OAuthTokenError:
        message = f"OAUTHBEARER: could not get a token from the OIDC token endpoint: {what}"
        if self._secret and self._secret in message:  # a server echoing the secret back: never pass it on
            message = message.replace(self._secret, "***")
        return OAuthTokenError(message)

    def _fetch(self) -> tuple[str, float | None]:
        """(access_token, lifetime in seconds or None). Raises OAuthTokenError."""
        self.fetches += 1
        started = self._clock()
        if self._https and self._context is None:
            try:
                self._context = ssl.create_default_context(cafile=self._ca_file)
            except (OSError, ssl.SSLError) as e:
                raise self._fail(f"cannot load the CA file (https.ca.location or ssl.ca.location): "
                                 f"{_describe_os_error(e)}") from None
        try:
            with urllib.request.urlopen(self._request(), timeout=self._timeout_s, context=self._context) as resp:
                body = resp.read(MAX_RESPONSE_BYTES + 1)
        except urllib.error.HTTPError as e:
            code = self._error_code(e)
            raise self._fail(f"HTTP {e.code}" + (f" {code}" if code else "")
                             + (" (check sasl.oauthbearer.client.id and sasl.oauthbearer.client.secret)"
                                if e.code in (400, 401) and code in (None, "invalid_client", "unauthorized_client")
                                else "")) from None
        except urllib.error.URLError as e:
            reason = e.reason
            kind = (f"TLS verification failed ({reason.verify_message})"
                    if isinstance(reason, ssl.SSLCertVerificationError) else _describe_os_error(reason))
            raise self._fail(kind) from None
        except (OSError, ValueError) as e:  # timeouts, resets, malformed URL parts
            raise self._fail(_describe_os_error(e)) from None
        if len(body) > MAX_RESPONSE_BYTES:
            raise self._fail("response larger than 1 MiB")
        try:
            answer = json.loads(body)
        except (ValueError, UnicodeDecodeError):
            raise self._fail("the response is not JSON") from None
        token = answer.get("access_token") if isinstance(answer, dict) else None
        if not isinstance(token, str) or not token:
            raise self._fail("the response has no access_token")
        if any(c in token for c in "\x01\r\n "):
            raise self._fail("the access_token holds characters a SASL/OAUTHBEARER message cannot carry")
        expires_in = answer.get("expires_in")
        lifetime: float | None = None
        if isinstance(expires_in, int | float | str) and not isinstance(expires_in, bool):
            try:
                lifetime = float(expires_in)
            except ValueError:
                lifetime = None
        if lifetime is None:
            exp = _jwt_expiry(token)
            lifetime = exp - started if exp is not None else None
        log.debug("OAUTHBEARER: got a token from the OIDC token endpoint (lifetime %s s)",
                  "unknown" if lifetime is None else round(lifetime))
        return token, lifetime

    @staticmethod
    def _error_code(e: urllib.error.HTTPError) -> str | None:
        """The OAuth ``error`` code of an error answer (RFC 6749 section 5.2), if it looks like one; not the
        description, which is free text the server wrote."""
        try:
            answer = json.loads(e.read(64 * 1024))
        except Exception:
            return None
        code = answer.get("error") if isinstance(answer, dict) else None
        return code if isinstance(code, str) and _ERROR_CODE.fullmatch(code) else None


def _describe_os_error(e: object) -> str:
    if isinstance(e, str):
        return "the request could not be made (check sasl.oauthbearer.token.endpoint.url)"
    if isinstance(e, TimeoutError) or "timed out" in str(e):
        return "timed out"
    if isinstance(e, ConnectionRefusedError):
        return "connection refused"
    if isinstance(e, ssl.SSLError):
        return f"TLS error ({e.reason or type(e).__name__})"
    if isinstance(e, OSError) and e.strerror:
        return e.strerror
    return type(e).__name__
