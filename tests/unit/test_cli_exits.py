"""`python -m collectors` ends as documented: a stdout reader that goes away (``| head``) ends the loop cleanly, its
outputs closed (history flushed, checkpoint saved); ``--log-level`` takes any case, and a bad one exits 2.

The processes are the real CLI; the one cluster configured answers nothing (a closed port), which is all these
need: each poll opens `cluster_unreachable`, which the history and the checkpoint then hold.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
import typing
from pathlib import Path

import pytest

from collectors.config import MonitorConfig
from collectors.outputs.checkpoint import load_checkpoint
from collectors.outputs.history import read_table
from collectors.runtime import cli

ROOT = Path(__file__).resolve().parents[2]


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def write_config(tmp_path: Path, **extra: str) -> Path:
    lines = ["clusters:", "  - name: gone", f"    bootstrap_servers: '127.0.0.1:{closed_port()}'",
             "request_timeout_s: 1", f"state_dir: {tmp_path / 'state'}", *(f"{k}: {v}" for k, v in extra.items())]
    cfg = tmp_path / "config.yaml"
    cfg.write_text("\n".join(lines) + "\n")
    return cfg


def collector(cfg: Path, *args: str, stderr: typing.IO[bytes] | None = None) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-m", "collectors", "--config", str(cfg), *args], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=stderr or subprocess.PIPE)


def test_json_reader_going_away_ends_the_loop_with_history_flushed_and_checkpoint_saved(tmp_path: Path) -> None:
    history = tmp_path / "history"
    cfg = write_config(tmp_path, poll_interval_s="1", checkpoint_interval_s="86400", exporter="{enabled: false}",
                       history=f"{{root: {history}, flush_interval_s: 86400}}",  # both only when the loop ends
                       log_level="ERROR")
    with (tmp_path / "stderr").open("w+b") as err:
        p = collector(cfg, "--json", "--log-level", "info", stderr=err)  # lower case, over the config's
        try:
            assert p.stdout is not None
            doc = json.loads(p.stdout.readline())  # `| head -1`: one line read, then the pipe closed
            p.stdout.close()
            rc = p.wait(timeout=30)
        finally:
            if p.poll() is None:
                p.kill()
        err.seek(0)
        stderr = err.read().decode()
    assert [a["rule"] for a in doc["clusters"][0]["alerts"]] == ["cluster_unreachable"]
    assert rc == 0, stderr
    assert "Traceback" not in stderr and "Exception ignored" not in stderr, stderr
    assert "INFO collectors: stdout closed by its reader: stopping" in stderr
    cp = load_checkpoint(tmp_path / "state", "gone", lag_points=60, window_size=10, now=time.time(), max_age_s=3600)
    assert cp is not None and [a.rule for a in cp.alerts] == ["cluster_unreachable"]
    events = read_table(history, "alert_events")
    assert [(e.cluster, e.rule, e.event) for e in events.itertuples()] == [("gone", "cluster_unreachable", "open")]


def test_once_into_a_closed_pipe_exits_with_its_code_and_no_noise(tmp_path: Path) -> None:
    p = collector(write_config(tmp_path), "--once", "--json")
    assert p.stdout is not None
    p.stdout.close()  # the reader gone before the document is written
    _, err = p.communicate(timeout=30)
    assert p.returncode == 1  # the cluster could not be reached, as documented
    assert b"Traceback" not in err and b"Exception ignored" not in err, err.decode()


@pytest.mark.parametrize("level", ["debug", "Warning", "ERROR"])
def test_log_level_takes_any_case(level: str) -> None:
    assert cli.build_parser().parse_args(["--config", "c.yaml", "--log-level", level]).log_level == level.upper()


def test_log_levels_are_the_configs() -> None:
    assert set(cli.LOG_LEVELS) == set(typing.get_args(MonitorConfig.model_fields["log_level"].annotation))


def test_lower_case_log_level_is_no_crash(tmp_path: Path) -> None:
    p = collector(write_config(tmp_path), "--once", "--log-level", "debug")
    out, err = p.communicate(timeout=30)
    assert p.returncode == 1, err.decode()  # the unreachable cluster's code (a crash's was 1 too)
    assert b"Traceback" not in err and out.startswith(b"gone: reachable=False")


@pytest.mark.parametrize("level", ["verbose", "10", ""])
def test_bad_log_level_exits_2_with_usage(tmp_path: Path, level: str) -> None:
    p = collector(write_config(tmp_path), "--once", "--log-level", level)
    out, err = p.communicate(timeout=30)
    assert p.returncode == 2
    text = err.decode()
    assert text.startswith("usage:") and "--log-level" in text and "invalid choice" in text
    assert "Traceback" not in text and out == b""
