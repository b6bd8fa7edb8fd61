"""Stopping the real components the integration tests start (Streamlit, Chromium, Prometheus, a Spark cluster)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from typing import Any


def stop(proc: subprocess.Popen[Any], timeout: float = 15.0, group: bool = False) -> int:
    """SIGTERM to `proc` (to its process group with `group`: a launcher script and the JVM it started), SIGKILL after
    `timeout` seconds; its exit code. A process gone already is no error."""

    def send(sig: int) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig) if group else os.kill(proc.pid, sig)

    send(signal.SIGTERM)
    try:
        return proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        send(signal.SIGKILL)
        return proc.wait(timeout=5)
