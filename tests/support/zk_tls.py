"""Throwaway TLS material for the ZooKeeper TLS tests, made with the `openssl` command line.

One CA signs every certificate, so a refused connection is refused for its host name alone, never for an unknown
issuer: the point of the tests is that a certificate the CA signed for *another* host is not good enough. P-256
keys (instant to make); the `cryptography` package is not a dependency of the project, the `openssl` CLI is (see
`sandbox.tls`).
"""

from __future__ import annotations

import ipaddress
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

_KEY = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes")


@dataclass(frozen=True)
class Issued:
    """One certificate and its key; ``pem`` holds both (key first), the single-file keystore ZooKeeper reads."""

    cert: Path
    key: Path
    pem: Path


def _openssl(*args: str, cwd: Path) -> None:
    r = subprocess.run(["openssl", *args], cwd=cwd, capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        raise RuntimeError(f"openssl {args[0]} failed ({r.returncode}): {r.stderr.strip()[-500:]}")


def _san(hosts: tuple[str, ...]) -> str:
    entries = []
    for h in hosts:
        try:
            entries.append(f"IP:{ipaddress.ip_address(h)}")
        except ValueError:
            entries.append(f"DNS:{h}")
    return ",".join(entries)


class TestCA:
    """A CA in `directory` (``ca.pem``) that issues server and client certificates for the names given."""

    __test__ = False  # not a test class, whatever its name

    def __init__(self, directory: Path) -> None:
        if shutil.which("openssl") is None:
            pytest.skip("the openssl command line is needed to make test certificates")
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)
        _openssl("req", "-x509", *_KEY, "-keyout", "ca.key", "-out", "ca.pem", "-days", "2", "-sha256",
                 "-subj", "/CN=kmon zk-tls test CA", "-addext", "basicConstraints=critical,CA:TRUE",
                 "-addext", "keyUsage=critical,keyCertSign,cRLSign", cwd=directory)
        self.ca_file = directory / "ca.pem"

    def issue(self, name: str, hosts: tuple[str, ...] = (), *, client: bool = False) -> Issued:
        """A certificate for `hosts` (subject alternative names; none for a client), signed by this CA."""
        d = self.directory
        _openssl("req", "-new", *_KEY, "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", f"/CN={name}",
                 cwd=d)
        ext = ["basicConstraints=critical,CA:FALSE", "keyUsage=critical,digitalSignature,keyEncipherment",
               f"extendedKeyUsage={'clientAuth' if client else 'serverAuth'}"]
        if hosts:
            ext.append(f"subjectAltName={_san(hosts)}")
        (d / f"{name}.ext").write_text("\n".join(ext) + "\n")
        _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
                 "-out", f"{name}.pem", "-days", "2", "-sha256", "-extfile", f"{name}.ext", cwd=d)
        cert, key = d / f"{name}.pem", d / f"{name}.key"
        both = d / f"{name}-keystore.pem"
        both.write_text(key.read_text() + cert.read_text())
        return Issued(cert, key, both)
