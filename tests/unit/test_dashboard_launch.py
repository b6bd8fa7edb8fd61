"""`kafka-monitor-dashboard` (dashboard/launch.py): the `streamlit run` command it builds."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

import dashboard
from dashboard.launch import command


def _opt(cmd: list[str], name: str) -> str:
    """The value of a `streamlit run` option: its last occurrence before the app's arguments (the one that wins)."""
    before = cmd[:cmd.index("--")] if "--" in cmd else cmd
    return before[max(i for i, arg in enumerate(before) if arg == name) + 1]


def test_defaults_bind_loopback_and_run_the_packages_own_app() -> None:
    cmd = command([])
    assert cmd[:4] == [sys.executable, "-m", "streamlit", "run"]
    assert Path(cmd[4]) == Path(dashboard.__file__).resolve().parent / "app.py" and Path(cmd[4]).is_file()
    assert _opt(cmd, "--server.address") == "127.0.0.1" and _opt(cmd, "--server.port") == "8501"
    assert _opt(cmd, "--server.headless") == "true" and _opt(cmd, "--browser.gatherUsageStats") == "false"
    assert "--" not in cmd  # no app option given: the app keeps its KMON_* environment fallbacks


def test_app_options_go_after_the_separator_and_streamlit_options_before() -> None:
    cmd = command(["--address", "0.0.0.0", "--port", "9000", "--state-dir", "/s", "--history", "/h",
                   "--refresh", "0", "--server.maxUploadSize", "1", "--theme.base=dark"])
    sep = cmd.index("--")
    assert cmd[sep + 1:] == ["--state-dir", "/s", "--history", "/h", "--refresh", "0"]
    assert _opt(cmd, "--server.address") == "0.0.0.0" and _opt(cmd, "--server.port") == "9000"
    assert cmd.index("--server.maxUploadSize") < sep and "--theme.base=dark" in cmd[:sep]


def test_unknown_plain_options_are_rejected(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        command(["--statedir", "/s"])
    assert e.value.code == 2 and "--statedir" in capsys.readouterr().err
