"""Server addresses: ``host:port`` / ``[ipv6]:port`` entries, and ZooKeeper connect strings made of them.

One parser for every address the monitor is given, so a broker list and a ZooKeeper connect string accept and
reject the same spellings, with the same messages. The configuration validates with it at start-up (where a
bad address must become a ``file:line`` message, not a resolver error in a client log, poll after poll), and
the ZooKeeper adapter splits its connect string with it to know which servers to probe.

What it accepts, and why:

* A host is a DNS name (letters, digits, '-', '_', dot-separated) or an IPv4 address; an IPv6 address only in
  brackets, because ``::1:2181`` is ambiguous (is 2181 the port or the last group?). The bracketed text must
  be a real IPv6 address (a zone such as ``%eth0`` included).
* A port is 1 to 65535 written in ASCII digits; ``host:`` with nothing after the colon is a mistake, not a
  request for the default port.
* The error messages quote the entry and give an example of the right form, because they are shown to the
  person editing the file as they are.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Sequence
from typing import Final

from collectors.model.settings import is_host_name

__all__ = [
    "DEFAULT_ZK_PORT",
    "format_server",
    "join_connect_string",
    "split_connect_string",
    "split_host_port",
]

DEFAULT_ZK_PORT: Final = 2181
"""The port a ZooKeeper connect string entry without one means (as in ZooKeeper, Kafka and kazoo)."""

_PORT = re.compile(r"[0-9]{1,5}")


def split_host_port(entry: str, *, port_required: bool, example: str) -> tuple[str, int | None]:
    """Parse ``host:port`` / ``[ipv6]:port`` (``host`` / ``[ipv6]`` too unless ``port_required``).

    Returns the host (without brackets) and the port, None when absent. ``example`` is the right form quoted in
    the messages. The ValueError message is shown to the user as is.
    """
    if entry.startswith("["):
        close = entry.find("]")
        if close < 0:
            raise ValueError(f"{entry!r}: missing ']' after the IPv6 address (expected e.g. {example})")
        host, rest = entry[1:close], entry[close + 1 :]
        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            raise ValueError(f"{entry!r}: {host!r} is not an IPv6 address") from None
        if rest and not rest.startswith(":"):
            raise ValueError(f"{entry!r}: expected ':port' after ']' (e.g. {example})")
        port_text: str | None = rest[1:] if rest else None
    else:
        if entry.count(":") > 1:
            raise ValueError(f"{entry!r}: IPv6 addresses must be in brackets, e.g. [::1]:9092")
        host, sep, port_text_raw = entry.partition(":")
        port_text = port_text_raw if sep else None
        if not host:
            raise ValueError(f"{entry!r} has no host (expected e.g. {example})")
        if not is_host_name(host):
            raise ValueError(f"{entry!r}: {host!r} is not a valid host name or IP address")
    if port_text is None:
        if port_required:
            raise ValueError(f"{entry!r} has no port (expected host:port, e.g. {example})")
        return host, None
    if not _PORT.fullmatch(port_text) or not 1 <= int(port_text) <= 65535:
        raise ValueError(f"{entry!r}: port must be a number from 1 to 65535")
    return host, int(port_text)


def format_server(host: str, port: int) -> str:
    """``host:port``, bracketing IPv6 literals so the result parses back unambiguously."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


# --------------------------------------------------------------------------- ZooKeeper connect strings


def split_connect_string(connect: str) -> tuple[list[tuple[str, int]], str | None]:
    """Split a ZooKeeper connect string into ``[(host, port)]`` and a chroot.

    Accepts what ZooKeeper's and Kafka's ``zookeeper.connect`` accept:
    ``host``, ``host:port``, ``[ipv6]:port``, comma separated, then an optional
    chroot (``/kafka``) after the last host.  The chroot is normalised (a bare
    ``/`` is no chroot, a trailing slash is dropped) because kazoo prefixes it
    verbatim and ``/kafka/`` + ``/brokers`` is an invalid path.  Duplicates are
    dropped so one server is not probed (and counted) twice.

    More lenient than the configuration's check of ``zookeeper.connect`` (which rejects empty entries and
    chroot parts, to catch typos): this is what the adapter can work with, whoever built the string.
    """
    text = connect.strip()
    hosts_part, slash, chroot_part = text.partition("/")
    chroot: str | None = None
    if slash:
        chroot = "/" + chroot_part.strip().rstrip("/")
        if chroot == "/":
            chroot = None
        elif "//" in chroot:
            raise ValueError(f"bad chroot in ZooKeeper connect string {connect!r}")
    servers: list[tuple[str, int]] = []
    for raw in hosts_part.split(","):
        entry = raw.strip()
        if not entry:
            continue
        try:
            host, port = split_host_port(entry, port_required=False, example="zk1:2181")
        except ValueError as e:
            raise ValueError(f"ZooKeeper connect string {connect!r}: {e}") from None
        server = (host, DEFAULT_ZK_PORT if port is None else port)
        if server not in servers:
            servers.append(server)
    if not servers:
        raise ValueError(f"no ZooKeeper servers in connect string {connect!r}")
    return servers, chroot


def join_connect_string(servers: Sequence[tuple[str, int]], chroot: str | None) -> str:
    """The inverse of split_connect_string (normalised), e.g. for kazoo's ``hosts``."""
    return ",".join(format_server(h, p) for h, p in servers) + (chroot or "")
