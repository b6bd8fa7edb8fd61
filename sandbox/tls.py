"""Throwaway TLS material for the sandbox's listeners, made with the `openssl` command line.

A fresh CA and a server certificate signed by it are generated per sandbox run
(P-256 keys: instant to make), valid for ``localhost``, ``127.0.0.1``, ``::1``
and the sandbox's own host, so clients verify both the chain (they trust
`TlsMaterial.ca_file`) and the host name, as librdkafka does by default
(``ssl.endpoint.identification.algorithm=https``) and kafka-python does with
``ssl_check_hostname``. The `cryptography` package is deliberately not a
dependency; the `openssl` CLI ships with every Debian (package ``openssl``).
"""

from __future__ import annotations

import ipaddress
import shutil
import ssl
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

OPENSSL_MISSING = ("the `openssl` command is required for a sandbox with TLS (security.protocol SSL or SASL_SSL) "
                   "and was not found on PATH; install the Debian package `openssl` (scripts/setup.sh does)")


class TlsSetupError(RuntimeError):
    """The certificates could not be made (openssl missing or failing)."""


@dataclass(frozen=True)
class TlsMaterial:
    directory: Path
    ca_file: Path
    cert_file: Path
    key_file: Path

    def server_context(self) -> ssl.SSLContext:
        ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        ctx.load_cert_chain(self.cert_file, self.key_file)
        return ctx

    def remove(self) -> None:
        shutil.rmtree(self.directory, ignore_errors=True)


def _openssl(*args: str, cwd: Path) -> None:
    exe = shutil.which("openssl")
    if exe is None:
        raise TlsSetupError(OPENSSL_MISSING)
    r = subprocess.run([exe, *args], cwd=cwd, capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        raise TlsSetupError(f"openssl {args[0]} failed ({r.returncode}): {r.stderr.strip()[-500:]}")


def _san(hosts: list[str]) -> str:
    entries = []
    for h in dict.fromkeys(hosts):
        try:
            entries.append(f"IP:{ipaddress.ip_address(h)}")
        except ValueError:
            entries.append(f"DNS:{h}")
    return ",".join(entries)


def make_tls_material(host: str = "127.0.0.1", days: int = 7) -> TlsMaterial:
    """Generate ca.pem, server.pem and server.key in a new private temp dir (0700); the caller removes it."""
    if shutil.which("openssl") is None:
        raise TlsSetupError(OPENSSL_MISSING)
    d = Path(tempfile.mkdtemp(prefix="sandbox-tls-"))
    try:
        key = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes")
        _openssl("req", "-x509", *key, "-keyout", "ca.key", "-out", "ca.pem", "-days", str(days), "-sha256",
                 "-subj", "/CN=kafka-sandbox test CA", "-addext", "basicConstraints=critical,CA:TRUE",
                 "-addext", "keyUsage=critical,keyCertSign,cRLSign", cwd=d)
        _openssl("req", "-new", *key, "-keyout", "server.key", "-out", "server.csr", "-subj", "/CN=localhost",
                 cwd=d)
        (d / "server.ext").write_text(
            "basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\n"
            f"extendedKeyUsage=serverAuth\nsubjectAltName={_san(['localhost', '127.0.0.1', '::1', host])}\n")
        _openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
                 "-out", "server.pem", "-days", str(days), "-sha256", "-extfile", "server.ext", cwd=d)
    except BaseException:
        shutil.rmtree(d, ignore_errors=True)
        raise
    (d / "ca.key").unlink()  # nothing is ever signed again: the CA key need not outlive this call
    return TlsMaterial(d, d / "ca.pem", d / "server.pem", d / "server.key")
