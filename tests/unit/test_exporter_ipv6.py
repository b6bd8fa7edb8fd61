"""An IPv6 ``exporter.host`` (``::1``, ``::``) binds and serves /metrics and the JSON API: the server listens on
the address family of its host (it was always IPv4, and ``::1`` failed to start with "Address family for hostname
not supported")."""

from __future__ import annotations

import json
import socket
import urllib.request

import pytest

from collectors.alerting.catalogue import RISK_RULES
from collectors.model.records import ClusterSnapshot
from collectors.outputs.api import API_PREFIX, JsonApi
from collectors.outputs.exporter import MetricsEndpoint, MetricsServer, address_family


def has_ipv6_loopback() -> bool:
    if not socket.has_ipv6:
        return False
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as s:
            s.bind(("::1", 0))
    except OSError:
        return False
    return True


needs_ipv6 = pytest.mark.skipif(not has_ipv6_loopback(), reason="no IPv6 loopback here")


@pytest.mark.parametrize(("host", "family"), [
    ("127.0.0.1", socket.AF_INET), ("0.0.0.0", socket.AF_INET), ("", socket.AF_INET),
    ("::1", socket.AF_INET6), ("::", socket.AF_INET6), ("fe80::1%lo", socket.AF_INET6),
    ("localhost", socket.AF_INET),  # a name with an IPv4 address binds IPv4, as it always did
])
def test_the_address_family_is_the_hosts(host: str, family: socket.AddressFamily) -> None:
    assert address_family(host) == family


def test_a_name_with_ipv6_addresses_only_binds_ipv6(monkeypatch: pytest.MonkeyPatch) -> None:
    def v6_only(host: str, port: object, *args: object, **kwargs: object) -> list[tuple]:  # type: ignore[type-arg]
        return [(socket.AF_INET6, socket.SOCK_STREAM, 6, "", ("::1", 0, 0, 0))]

    monkeypatch.setattr(socket, "getaddrinfo", v6_only)
    assert address_family("metrics6.example") == socket.AF_INET6


def test_a_name_that_does_not_resolve_binds_ipv4_and_binding_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    def unknown(*args: object, **kwargs: object) -> list[tuple]:  # type: ignore[type-arg]
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    monkeypatch.setattr(socket, "getaddrinfo", unknown)
    assert address_family("no-such-host.invalid") == socket.AF_INET


@needs_ipv6
@pytest.mark.parametrize("host", ["::1", "::"])
def test_serves_metrics_and_the_api_on_ipv6(host: str) -> None:
    ep, api = MetricsEndpoint(), JsonApi(RISK_RULES)
    snap = ClusterSnapshot(cluster="c", time=1000.0)
    ep.update([snap])
    api.update([snap])
    srv = MetricsServer(ep, host=host, port=0, api=api).start()  # raised socket.gaierror before
    try:
        assert srv.httpd.socket.family == socket.AF_INET6
        with urllib.request.urlopen(f"http://[::1]:{srv.port}/metrics", timeout=5) as r:
            assert b'kafka_monitor_cluster_reachable{cluster="c"} 1' in r.read()
        with urllib.request.urlopen(f"http://[::1]:{srv.port}{API_PREFIX}/clusters", timeout=5) as r:
            assert [c["cluster"] for c in json.loads(r.read())["clusters"]] == ["c"]
    finally:
        srv.close()
