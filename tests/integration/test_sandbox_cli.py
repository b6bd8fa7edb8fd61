"""`python -m sandbox` as a person runs it: prints where to connect, stops cleanly on Ctrl-C/SIGTERM."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]


def children_of(pid: int) -> list[int]:
    out = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout.split()
    return [int(x) for x in out]


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_sandbox_cli_prints_endpoints_and_stops_everything(tmp_path: Path, sig: int) -> None:
    info = tmp_path / "info.json"
    p = subprocess.Popen([sys.executable, "-m", "sandbox", "--speed", "5", "--info-file", str(info)], cwd=ROOT,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 40
        while not info.exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        data = json.loads(info.read_text())
        assert data["bootstrap_servers"].count("127.0.0.1:") == 3
        assert data["zookeeper_connect"].count("127.0.0.1:") == 3
        java = children_of(p.pid)
        assert len(java) == 3  # the ZooKeeper ensemble
        time.sleep(2)
        p.send_signal(sig)
        p.send_signal(sig)  # an impatient second Ctrl-C must not deadlock the shutdown
        out, _ = p.communicate(timeout=30)
        assert p.returncode == 0
        assert "bootstrap servers:" in out and "zookeeper connect:" in out
        for pid in java:
            with pytest.raises(ProcessLookupError):
                os.kill(pid, 0)
    finally:
        if p.poll() is None:
            p.kill()
