"""A cluster taken out of the configuration leaves the dashboard: `latest_state.retire`, and the collector's sinks
that decide which clusters those are (the ones its history root holds and nobody writing it polls any more), on
real files, a real history root and its lease."""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path

import pytest

from collectors.config import MonitorConfig
from collectors.model.poll import PollResult
from collectors.model.records import ClusterSnapshot, snapshot_to_dict
from collectors.outputs.history import HistoryWriter
from collectors.outputs.latest_state import RETIRE_AFTER_S, RETIRED_DIR, read_latest, retire, retired, write_latest
from collectors.outputs.paths import name_of, safe_name
from collectors.runtime.poller import Monitor
from collectors.runtime.sinks import HistorySink, LatestStateSink, build_sinks
from tests.unit.test_history import small_snapshot

NOW = 1_790_000_000.0
OLD = NOW - RETIRE_AFTER_S - 60  # written before the retiring wait
RECENT = NOW - RETIRE_AFTER_S + 60


def state(state_dir: Path, cluster: str, written: float) -> Path:
    """A cluster's latest-state file, its mtime `written` (the wall clock the retiring wait is measured on)."""
    path = write_latest(state_dir, snapshot_to_dict(ClusterSnapshot(cluster=cluster, time=written)), now=written)
    os.utime(path, (written, written))
    return path


def test_old_files_of_the_clusters_named_are_moved_and_nothing_else(tmp_path: Path) -> None:
    gone = state(tmp_path, "prod eu/old", OLD)
    state(tmp_path, "recent", RECENT)  # removed too, but an HA peer on the old configuration may still poll it
    state(tmp_path, "other", OLD)  # not named: another collector's, maybe down; it must stay STALE
    assert retire(tmp_path, ["prod eu/old", "recent", "never-written"], now=NOW) == ["prod eu/old"]
    assert sorted(read_latest(tmp_path)) == ["other", "recent"]  # what the dashboard reads
    assert not gone.exists()
    assert read_latest(tmp_path / RETIRED_DIR)["prod eu/old"]["time"] == OLD  # the last state, kept whole
    assert retire(tmp_path, ["prod eu/old"], now=NOW) == []  # once


def test_the_retired_clusters_are_named_from_their_files_newest_first(tmp_path: Path) -> None:
    assert retired(tmp_path) == []  # nothing retired yet: no directory
    state(tmp_path, "prod eu/old", OLD - 3_600)
    state(tmp_path, "ümlaut~1", OLD)
    state(tmp_path, "kept", OLD)  # not removed: stays where the dashboard reads it
    retire(tmp_path, ["prod eu/old", "ümlaut~1"], now=NOW)
    (tmp_path / RETIRED_DIR / ".hidden.json").write_text("{}")  # a hidden file is not a cluster
    assert retired(tmp_path) == [("ümlaut~1", OLD), ("prod eu/old", OLD - 3_600)]


@pytest.mark.parametrize("name", ["prod", "prod eu/old", ".hidden", "", "a%b", "ü~x", "a..b"])
def test_a_file_stem_gives_back_its_cluster_name(name: str) -> None:
    assert name_of(safe_name(name)) == name


def test_a_cut_name_stays_recognisable() -> None:
    name = "c" * 300
    shown = name_of(safe_name(name))
    assert shown.startswith("c" * 100) and "~~" in shown and shown != name


def test_a_newer_retired_copy_replaces_the_older(tmp_path: Path) -> None:
    state(tmp_path, "gone", OLD - 86_400)
    assert retire(tmp_path, ["gone"], now=NOW) == ["gone"]
    state(tmp_path, "gone", OLD)  # polled again for a while, then removed again
    assert retire(tmp_path, ["gone"], now=NOW) == ["gone"]
    assert read_latest(tmp_path / RETIRED_DIR)["gone"]["time"] == OLD
    assert read_latest(tmp_path) == {}


def test_a_file_that_cannot_be_moved_stays_with_a_warning(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = state(tmp_path, "gone", OLD)
    (tmp_path / RETIRED_DIR).write_text("a file where the directory should be")
    with caplog.at_level(logging.WARNING):
        assert retire(tmp_path, ["gone"], now=NOW) == []
    assert path.exists()
    assert "not retired" in caplog.text
    assert retire(tmp_path / "missing", ["gone"], now=NOW) == []  # no directory yet: nothing to do


def config(tmp_path: Path, clusters: list[str], history: bool = True) -> MonitorConfig:
    return MonitorConfig.model_validate({
        "clusters": [{"name": c, "bootstrap_servers": "127.0.0.1:1"} for c in clusters],
        "state_dir": str(tmp_path / "state"), "request_timeout_s": 1, "exporter": {"enabled": False},
        "history": {"root": str(tmp_path / "history"), "enabled": history}})


def written_before(tmp_path: Path, clusters: list[str], last_poll: float) -> None:
    """The collector before this one polled `clusters` into the history root up to `last_poll`, and stopped."""
    old = HistoryWriter(tmp_path / "history", exclusive=True, clusters=clusters)
    for c in clusters:
        old.add(PollResult(small_snapshot(last_poll, cluster=c)))
    old.close()


def test_the_collector_retires_what_its_history_held_and_its_configuration_dropped(tmp_path: Path) -> None:
    """The collector before polled prod and decommissioned; this one polls prod only. decommissioned's file goes to
    retired/ at the first poll. other-shard's file, as old, stays: its cluster is not in this collector's history
    (another collector's, sharing the state directory, and down: STALE is the news)."""
    now = time.time()
    written_before(tmp_path, ["prod", "decommissioned"], now - 60)
    cfg = config(tmp_path, ["prod"])
    removed = state(tmp_path / "state", "decommissioned", now - RETIRE_AFTER_S - 5)
    other = state(tmp_path / "state", "other-shard", now - 10 * RETIRE_AFTER_S)
    monitor = Monitor(cfg)
    sinks = build_sinks(cfg, monitor)
    try:
        history = next(s for s in sinks if isinstance(s, HistorySink))
        assert history.removed == {"decommissioned"}
        latest = next(s for s in sinks if isinstance(s, LatestStateSink))
        latest([PollResult(ClusterSnapshot(cluster="prod", time=now))], now)
        assert sorted(read_latest(tmp_path / "state")) == ["other-shard", "prod"]
        assert (tmp_path / "state" / RETIRED_DIR / removed.name).exists() and other.exists()
    finally:
        for s in sinks:
            close = getattr(s, "close", None)
            if close is not None:
                close()
        monitor.close()


def test_recent_files_wait_for_the_next_check(tmp_path: Path) -> None:
    """decommissioned's file was written a minute ago (an HA peer still on the old configuration): it stays until
    a check finds it 15 minutes old; the checks come a minute apart, not every poll."""
    sink = LatestStateSink(tmp_path, lambda: {"decommissioned"})
    path = state(tmp_path, "decommissioned", time.time() - 60)
    sink([PollResult(ClusterSnapshot(cluster="prod", time=time.time()))], time.time())
    assert path.exists()
    os.utime(path, (time.time() - RETIRE_AFTER_S - 5,) * 2)  # the peer stopped long ago
    sink([PollResult(ClusterSnapshot(cluster="prod", time=time.time()))], time.time())
    assert path.exists()  # within the minute
    sink._next_check = 0.0  # the minute has passed
    sink([PollResult(ClusterSnapshot(cluster="prod", time=time.time()))], time.time())
    assert not path.exists() and sorted(read_latest(tmp_path)) == ["prod"]


def test_without_a_history_no_file_is_retired(tmp_path: Path) -> None:
    cfg = config(tmp_path, ["prod"], history=False)
    old = state(tmp_path / "state", "gone", time.time() - 10 * RETIRE_AFTER_S)
    sinks = build_sinks(cfg, None)
    (latest,) = [s for s in sinks if isinstance(s, LatestStateSink)]
    latest([PollResult(ClusterSnapshot(cluster="prod", time=time.time()))], time.time())
    assert old.exists() and not (tmp_path / "state" / RETIRED_DIR).exists()
