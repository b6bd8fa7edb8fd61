"""One cluster's poll that raises is that cluster's result only: the others' latest state, alerts and history go on.

Against the sandbox cluster (the real protocol over TCP) and its real ZooKeeper ensemble. The failure is the one a
checkpoint written before its ZooKeeper fields were type-checked brought back: a leader epoch as text, which every
poll of a ZooKeeper-mode cluster compared with the ensemble's (``TypeError`` in the snapshot builder).
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Any

import pytest

from collectors.config import MonitorConfig
from collectors.model.poll import PollResult
from collectors.outputs.checkpoint import CheckpointError, load_checkpoint
from collectors.outputs.history import read_table
from collectors.outputs.latest_state import read_latest
from collectors.runtime.loop import run_loop
from collectors.runtime.poller import Monitor
from collectors.runtime.sinks import build_sinks
from sandbox.runner import Sandbox
from tests.support.monitor import FAST_THRESHOLDS

pytestmark = pytest.mark.integration


def config(sb: Sandbox, tmp_path: Path) -> MonitorConfig:
    return MonitorConfig.model_validate({
        "clusters": [{"name": "good", "bootstrap_servers": sb.bootstrap_servers},
                     {"name": "bad", "bootstrap_servers": sb.bootstrap_servers,
                      "zookeeper": {"connect": sb.zk_connect}}],
        "poll_interval_s": 1, "request_timeout_s": 3, "state_dir": str(tmp_path / "state"),
        "exporter": {"enabled": False},
        "history": {"root": str(tmp_path / "history"), "flush_interval_s": 3600},  # flushed when the loop ends
        "thresholds": FAST_THRESHOLDS})


def by_cluster(results: list[PollResult]) -> dict[str, PollResult]:
    return {r.snapshot.cluster: r for r in results}


def test_a_cluster_whose_poll_raises_is_alerted_alone_and_its_bad_memory_is_not_resumed(
        sbz: Sandbox, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    cfg = config(sbz, tmp_path)
    state, history = Path(cfg.state_dir), Path(cfg.history.root)
    polls: list[dict[str, PollResult]] = []
    stop = threading.Event()

    def two_polls(results: list[PollResult], now: float) -> None:
        polls.append(by_cluster(results))
        if len(polls) == 2:
            stop.set()

    m = Monitor(cfg, clock=sbz.clock.now)
    m.pollers[1].state.zk_leader_epoch = "4"  # as the restore before its type check left it
    # something for the good cluster to alert on at its first poll: a partition without a leader is in the first
    # Metadata answer (a crashed broker was not: whether a poll asks it anything depends on what it leads then)
    sbz.call(lambda c: c.fail_partition("single", 0))
    try:
        sinks: list[Any] = [*build_sinks(cfg, m, sbz.clock.now), two_polls]
        with caplog.at_level(logging.ERROR, "collectors.runtime.poller"):
            run_loop(m, cfg.poll_interval_s, sinks, stop, clock=sbz.clock.now)  # its end saves checkpoints
    finally:
        sbz.call(lambda c: c.recover_partition("single", 0))
        m.close()

    assert len(polls) == 2 and all(set(p) == {"good", "bad"} for p in polls)
    good, bad = polls[0]["good"], polls[0]["bad"]
    assert good.snapshot.reachable and good.snapshot.partitions
    assert ("offline_partition", "single-0") in {(a.rule, a.subject) for a in good.opened}
    assert not bad.snapshot.reachable and bad.snapshot.stale_sections == ["cluster"]
    assert [(a.rule, a.subject) for a in bad.opened] == [("cluster_unreachable", "bad")]
    assert "poll failed: TypeError" in bad.opened[0].summary
    assert [a.rule for a in polls[1]["bad"].snapshot.alerts] == ["cluster_unreachable"]  # open, not reopened
    assert not polls[1]["bad"].opened

    latest = read_latest(state)
    assert latest["good"]["reachable"] is True and latest["good"]["partitions"]
    assert latest["bad"]["reachable"] is False
    assert [a["rule"] for a in latest["bad"]["alerts"]] == ["cluster_unreachable"]

    events = read_table(history, "alert_events")
    opened = {(e.cluster, e.rule, e.subject) for e in events.itertuples() if e.event == "open"}
    assert {a.key for a in good.opened} | {("bad", "cluster_unreachable", "bad")} <= opened

    failures = [r for r in caplog.records if "cluster bad: poll failed: TypeError" in r.getMessage()]
    assert len(failures) == 2 and [r.exc_info is not None for r in failures] == [True, False]  # traceback once

    # The memory saved at the end holds the bad value again: a restart refuses it and starts that cluster fresh.
    with pytest.raises(CheckpointError, match="zk_leader_epoch"):
        load_checkpoint(state, "bad", lag_points=60, window_size=10, now=sbz.clock.now(), max_age_s=3600)
    again = Monitor(cfg, clock=sbz.clock.now)
    try:
        lines = again.resume(state, sbz.clock.now())
        assert lines[0].startswith("good: resumed from checkpoint")
        assert lines[1].startswith("bad: starting fresh, checkpoint not used:") and "zk_leader_epoch" in lines[1]
        after = by_cluster(again.poll_once())
    finally:
        again.close()
    assert after["good"].snapshot.reachable and after["bad"].snapshot.reachable
    assert after["bad"].snapshot.zookeeper and isinstance(again.pollers[1].state.zk_leader_epoch, int)
