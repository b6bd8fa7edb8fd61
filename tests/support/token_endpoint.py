"""A loopback OIDC token endpoint (RFC 6749 client-credentials grant) issuing HMAC-signed JWTs.

What Keycloak or Confluent Cloud's identity provider do for the monitor, in a thread: POST
``grant_type=client_credentials`` with the client's id and secret as HTTP Basic credentials (or as form fields,
``client_secret_post``), get ``{"access_token": <JWT>, "token_type": "Bearer", "expires_in": N}``. A wrong
secret gets 401 ``{"error": "invalid_client"}``. The JWTs are signed with `key` (`sandbox.auth.issue_jwt`), the
key a sandbox with OAUTHBEARER verifies them with. Binds 127.0.0.1 only.
"""

from __future__ import annotations

import base64
import contextlib
import json
import threading
import time
import urllib.parse
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from sandbox.auth import issue_jwt


class TokenEndpoint:
    """`clients` maps client id -> secret; every token lives `lifetime_s` seconds and has ``sub`` = client id."""

    def __init__(self, clients: dict[str, str], key: bytes, issuer: str = "https://issuer.test",
                 lifetime_s: int = 300) -> None:
        self.clients = dict(clients)
        self.key = key
        self.issuer = issuer
        self.lifetime_s = lifetime_s
        self.expires_in: Any = None  # override the expires_in field (None: lifetime_s; "omit": leave it out)
        self.fail_with: tuple[int, bytes] | None = None  # answer every request with this status and body
        self.delay_s = 0.0
        self.requests: list[dict[str, Any]] = []  # what each request asked for (form fields, client id), no secret
        self.issued: list[str] = []  # every access token handed out, to check none reaches a log
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="token-endpoint", daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/oauth2/token"

    def start(self) -> TokenEndpoint:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)

    def settings(self, client_id: str, secret: str | None = None, **extra: str) -> dict[str, str]:
        """The librdkafka sasl.oauthbearer.* settings for this endpoint (secret defaults to the right one)."""
        return {"sasl.mechanism": "OAUTHBEARER", "sasl.oauthbearer.method": "oidc",
                "sasl.oauthbearer.client.id": client_id,
                "sasl.oauthbearer.client.secret": self.clients[client_id] if secret is None else secret,
                "sasl.oauthbearer.token.endpoint.url": self.url, **extra}

    def _answer(self, headers: Any, body: bytes) -> tuple[int, dict[str, Any]]:
        form = {k: v[0] for k, v in urllib.parse.parse_qs(body.decode("ascii", "replace")).items()}
        client_id, secret = form.pop("client_id", None), form.pop("client_secret", None)
        auth = headers.get("Authorization", "")
        if auth.startswith("Basic "):
            try:
                client_id, _, secret = base64.b64decode(auth[6:]).decode().partition(":")
            except ValueError:
                return 401, {"error": "invalid_client"}
        with self._lock:
            self.requests.append({"client_id": client_id, **form})
        if self.fail_with is not None:
            return self.fail_with[0], json.loads(self.fail_with[1] or b"{}")
        if form.get("grant_type") != "client_credentials":
            return 400, {"error": "unsupported_grant_type"}
        if client_id not in self.clients or secret != self.clients[client_id]:
            return 401, {"error": "invalid_client", "error_description": "Invalid client credentials"}
        now = int(time.time())
        claims = {"iss": self.issuer, "sub": client_id, "iat": now, "exp": now + self.lifetime_s}
        if "scope" in form:
            claims["scope"] = form["scope"]
        answer: dict[str, Any] = {"access_token": issue_jwt(self.key, claims), "token_type": "Bearer"}
        with self._lock:
            self.issued.append(answer["access_token"])
        if self.expires_in != "omit":
            answer["expires_in"] = self.lifetime_s if self.expires_in is None else self.expires_in
        return 200, answer

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length)
                if endpoint.delay_s:
                    time.sleep(endpoint.delay_s)
                status, answer = endpoint._answer(self.headers, body)
                data = json.dumps(answer).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):  # a client that timed out
                    self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        return Handler


@contextlib.contextmanager
def token_endpoint(clients: dict[str, str], key: bytes, **kwargs: Any) -> Iterator[TokenEndpoint]:
    ep = TokenEndpoint(clients, key, **kwargs).start()
    try:
        yield ep
    finally:
        ep.stop()
