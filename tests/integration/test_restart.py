"""A restarted collector resumes its memory: lag windows, open alerts and their start times, no duplicate events."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import IO, Any

import pytest

from collectors.config import MonitorConfig
from collectors.outputs.checkpoint import load_checkpoint
from collectors.outputs.history import read_table
from collectors.runtime.poller import Monitor, PollResult
from sandbox.runner import Sandbox
from tests.support.monitor import FAST_THRESHOLDS, alert

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]
STALLED = "reporting"


def config(sb: Sandbox, state_dir: Path, **extra: Any) -> MonitorConfig:
    return MonitorConfig.model_validate({
        "clusters": [{"name": "local", "bootstrap_servers": sb.bootstrap_servers}], "poll_interval_s": 1,
        "request_timeout_s": 3, "state_dir": str(state_dir), "thresholds": FAST_THRESHOLDS, **extra})


def poll(m: Monitor, sb: Sandbox) -> PollResult:
    (r,) = m.poll_once(sb.clock.now())
    return r


def statuses(r: PollResult, group: str) -> set[str]:
    return {gp.status for gp in r.snapshot.group_partitions if gp.group_id == group}


def test_resume_keeps_stall_verdicts_and_alert_start_times(sb: Sandbox, tmp_path: Path) -> None:
    cfg = config(sb, tmp_path)
    sb.call(lambda c: c.set_group_mode(STALLED, "stalled"))
    try:
        first = Monitor(cfg)
        try:
            deadline = time.monotonic() + 60
            while True:
                r = poll(first, sb)
                if alert(r, "consumer_lag_status", STALLED) is not None or time.monotonic() > deadline:
                    break
                time.sleep(0.3)
            before = alert(r, "consumer_lag_status", STALLED)
            assert before is not None and statuses(r, STALLED) == {"STALL"}
            first.save_checkpoints(tmp_path, sb.clock.now())
        finally:
            first.close()

        fresh = Monitor(cfg)  # the control: what a restart without the checkpoint sees
        resumed = Monitor(cfg)
        try:
            lines = resumed.resume(tmp_path, sb.clock.now())
            assert len(lines) == 1 and lines[0].startswith("local: resumed from checkpoint")
            r_fresh, r_resumed = poll(fresh, sb), poll(resumed, sb)
            # Without memory, one observation of a stuck offset proves nothing: the stall is not seen.
            assert statuses(r_fresh, STALLED) == {"OK"} and alert(r_fresh, "consumer_lag_status", STALLED) is None
            # With it, the verdict and the alert carry on from before the restart.
            assert statuses(r_resumed, STALLED) == {"STALL"}
            after = alert(r_resumed, "consumer_lag_status", STALLED)
            assert after is not None and after.first_seen == before.first_seen
            assert all(a.rule != "consumer_lag_status" for a in r_resumed.opened)  # not a second incident
            # lag in seconds interpolates in the resumed log-end history instead of starting from zero
            secs = [gp.lag_seconds for gp in r_resumed.snapshot.group_partitions if gp.group_id == STALLED]
            fresh_secs = [gp.lag_seconds for gp in r_fresh.snapshot.group_partitions if gp.group_id == STALLED]
            assert min(secs) > max(fresh_secs)
        finally:
            fresh.close()
            resumed.close()
    finally:
        sb.call(lambda c: c.set_group_mode(STALLED, "running"))


def test_checkpoint_of_another_cluster_id_is_dropped_at_the_first_poll(sb: Sandbox, tmp_path: Path) -> None:
    cfg = config(sb, tmp_path)
    m = Monitor(cfg)
    try:
        poll(m, sb)
        cp = m.pollers[0].checkpoint(sb.clock.now())
        cp.cluster_id = "some-other-cluster"
        cp.state.condition_since[("under_replicated", "orders-0")] = 1.0  # memory that must not survive
        from collectors.outputs.checkpoint import save_checkpoint

        save_checkpoint(tmp_path, cp)
    finally:
        m.close()
    m = Monitor(cfg)
    try:
        assert m.resume(tmp_path, sb.clock.now())[0].startswith("local: resumed")
        assert ("under_replicated", "orders-0") in m.pollers[0].state.condition_since
        r = poll(m, sb)
        assert r.snapshot.cluster_id == "sandbox-cluster-0001"
        assert ("under_replicated", "orders-0") not in m.pollers[0].state.condition_since
        assert m.pollers[0].state.polls == 1  # started over
    finally:
        m.close()


# --------------------------------------------------------------------------- the real process, killed


def _start(cfg: Path) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "collectors", "--config", str(cfg), "--json"], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _documents(out: IO[str], until: Any, timeout: float = 90) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = out.readline()
        if not line:
            break
        doc = json.loads(line)["clusters"][0]
        if until(doc):
            return doc
    raise AssertionError("the collector never printed the expected snapshot")


def _open(doc: dict[str, Any], rule: str, subject: str) -> dict[str, Any] | None:
    return next((a for a in doc["alerts"] if a["rule"] == rule and a["subject"] == subject), None)


def test_sigkilled_collector_restarts_where_it_was(sb: Sandbox, tmp_path: Path) -> None:
    """SIGKILL mid-run (the checkpoint saved every second), restart: same alert, same start, one open event."""
    state, history = tmp_path / "state", tmp_path / "history"
    cfg = tmp_path / "config.yaml"
    cfg.write_text(
        f"clusters:\n  - name: local\n    bootstrap_servers: '{sb.bootstrap_servers}'\n"
        f"poll_interval_s: 1\nrequest_timeout_s: 3\nstate_dir: {state}\ncheckpoint_interval_s: 1\n"
        f"exporter: {{enabled: false}}\nhistory: {{root: {history}, flush_interval_s: 1}}\n"
        "thresholds: {consumer_stop_after_s: 4, under_replicated_grace_s: 20, lag_seconds_slo: 600}\n")
    sb.call(lambda c: c.set_group_mode(STALLED, "stalled"))
    try:
        first = _start(cfg)
        try:
            assert first.stdout is not None
            doc = _documents(first.stdout, lambda d: _open(d, "consumer_lag_status", STALLED) is not None)
            opened = _open(doc, "consumer_lag_status", STALLED)
            assert opened is not None
            deadline = time.monotonic() + 30  # until a checkpoint holds the alert and history holds its event
            while time.monotonic() < deadline:
                cp = load_checkpoint(state, "local", lag_points=60, window_size=10, now=time.time(), max_age_s=3600)
                events = read_table(history, "alert_events")
                if cp is not None and any(a.rule == "consumer_lag_status" for a in cp.alerts) and len(events):
                    break
                time.sleep(0.2)
            os.kill(first.pid, signal.SIGKILL)
            first.wait(timeout=10)
        finally:
            if first.poll() is None:
                first.kill()
        second = _start(cfg)
        try:
            assert second.stdout is not None
            doc = _documents(second.stdout, lambda d: d["reachable"])
            again = _open(doc, "consumer_lag_status", STALLED)
            assert again is not None and again["first_seen"] == opened["first_seen"]
            assert {gp["status"] for gp in doc["group_partitions"] if gp["group_id"] == STALLED} == {"STALL"}
            time.sleep(2.5)  # a flush or two of the second run
            second.send_signal(signal.SIGTERM)
            _, err = second.communicate(timeout=30)
            assert second.returncode == 0, err
            assert "resumed from checkpoint" in err
        finally:
            if second.poll() is None:
                second.kill()
    finally:
        sb.call(lambda c: c.set_group_mode(STALLED, "running"))
    events = read_table(history, "alert_events")
    mine = events[(events["rule"] == "consumer_lag_status") & (events["subject"] == STALLED)]
    assert list(mine["event"]) == ["open"]  # one incident across the restart, not two
