"""The exporter's HTTP server: /metrics, /healthz and the read-only JSON API (`collectors.outputs.api`) on one port.

Apart from what /metrics holds (`collectors.outputs.exporter`), as kminion keeps its exporter apart from collection:
how the port is served (its address family, a thread a connection, how long an idle one may wait, which methods
are answered) is here.
"""

from __future__ import annotations

import contextlib
import ipaddress
import logging
import socket
import threading
from collections.abc import Iterable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any

from collectors.outputs.api import API_PREFIX, JsonApi

if TYPE_CHECKING:
    from collectors.outputs.exporter import MetricsEndpoint

log = logging.getLogger("collectors.outputs.exporter")  # its lines as they were logged before the split


def address_family(host: str) -> socket.AddressFamily:
    """To listen on `host`: an IP literal's family (``::1``, ``::``: IPv6); a name's IPv4 unless it has IPv6 addresses
    only. An empty host, or a name that does not resolve: IPv4 (binding says what is wrong)."""
    with contextlib.suppress(ValueError):
        return socket.AF_INET6 if ipaddress.ip_address(host.partition("%")[0]).version == 6 else socket.AF_INET
    try:
        families = {i[0] for i in socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)} if host else set()
    except (OSError, UnicodeError):
        families = set()
    return socket.AF_INET6 if families == {socket.AF_INET6} else socket.AF_INET


class _HTTPServer(ThreadingHTTPServer):
    """On its host's `address_family`; ``::`` takes IPv4 too (dual stack) where the system allows it."""

    def __init__(self, host: str, port: int, handler: type[BaseHTTPRequestHandler]) -> None:
        self.address_family = address_family(host)
        super().__init__((host, port), handler)

    def server_bind(self) -> None:
        if self.address_family == socket.AF_INET6:
            with contextlib.suppress(AttributeError, OSError):
                self.socket.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        super().server_bind()


class MetricsServer:
    """A small HTTP server for /metrics, /healthz and the read-only JSON API (/api/v1/…, `collectors.outputs.api`);
    binds 127.0.0.1 unless configured otherwise (IPv4 or IPv6: `address_family`)."""

    def __init__(self, endpoint: MetricsEndpoint, host: str = "127.0.0.1", port: int = 9308,
                 api: JsonApi | None = None) -> None:
        self.endpoint = endpoint
        self.api = api
        handler = _make_handler(endpoint, api)
        self.httpd = _HTTPServer(host, port, handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self.host = host
        self._thread = threading.Thread(target=self.httpd.serve_forever, name="metrics-http", daemon=True)

    def start(self) -> MetricsServer:
        self._thread.start()
        where = f"[{self.host}]" if ":" in self.host else self.host  # an IPv6 address in a URL is bracketed
        log.info("serving /metrics on http://%s:%s/metrics%s", where, self.port,
                 f" and the JSON API on http://{where}:{self.port}{API_PREFIX}" if self.api is not None else "")
        return self

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


REQUEST_TIMEOUT_S = 15.0
"""How long a connection may wait on its client (to send its request, to take the answer) before it is closed:
a thread each, and one that sends nothing held its thread for good (a few thousand such exhausted the process).
Above Prometheus's default scrape timeout (10 s)."""


def _make_handler(endpoint: MetricsEndpoint, api: JsonApi | None) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        timeout = REQUEST_TIMEOUT_S

        def version_string(self) -> str:  # the ``Server`` header: not the Python version in every answer
            return "kafka-monitor"

        def __getattr__(self, name: str) -> Any:
            if name.startswith("do_"):  # any other method (OPTIONS, TRACE, ...): `_serve`'s 405, not a 501 page
                return self.do_GET
            raise AttributeError(name)

        def _reply(self, status: int, content_type: str, body: bytes | tuple[bytes, ...],
                   headers: Iterable[tuple[str, str]] = (), head: bool = False) -> None:
            parts = (body,) if isinstance(body, bytes) else body
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            for k, v in headers:
                self.send_header(k, v)
            self.send_header("Content-Length", str(sum(len(p) for p in parts)))
            self.end_headers()
            if not head:
                for p in parts:
                    self.wfile.write(p)

        def _serve(self, method: str) -> None:
            path = self.path.split("?", 1)[0]
            head = method == "HEAD"
            if api is not None and (path == "/api" or path.startswith("/api/")):
                ans = api.handle(method, self.path)
                self._reply(ans.status, "application/json", ans.encode(), ans.headers, head)
            elif method not in ("GET", "HEAD"):
                self._reply(405, "text/plain", b"read-only\n", (("Allow", "GET, HEAD"),), head)
            elif path == "/metrics":
                gz = "gzip" in self.headers.get("Accept-Encoding", "")
                self._reply(200, "text/plain; version=0.0.4; charset=utf-8", endpoint.render_parts(gzipped=gz),
                            (("Content-Encoding", "gzip"),) if gz else (), head)
            elif path in ("/healthz", "/-/healthy"):
                self._reply(200, "text/plain", b"ok\n", (), head)
            else:
                hint = b"see /metrics" + (f" or {API_PREFIX}".encode() if api is not None else b"") + b"\n"
                self._reply(404, "text/plain", hint, (), head)

        def do_GET(self) -> None:  # and every other method below: `_serve` answers each by its name
            self._serve(self.command)

        do_HEAD = do_POST = do_PUT = do_DELETE = do_PATCH = do_GET

        def log_message(self, format: str, *args: Any) -> None:
            log.debug("http %s", format % args)

    return Handler
