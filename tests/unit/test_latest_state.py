"""A cluster removed from the configuration leaves the dashboard: `latest_state.retire_unconfigured` and the
`LatestStateSink` that calls it, on real files."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from collectors.config import parse_config
from collectors.model.poll import PollResult
from collectors.model.records import ClusterSnapshot, snapshot_to_dict
from collectors.outputs import latest_state
from collectors.outputs.latest_state import RETIRE_AFTER_S, RETIRED_DIR, read_latest, retire_unconfigured, write_latest
from collectors.runtime.sinks import LatestStateSink, build_sinks

NOW = 1_790_000_000.0
OLD = NOW - RETIRE_AFTER_S - 60  # written before the retiring wait
RECENT = NOW - RETIRE_AFTER_S + 60


def state(state_dir: Path, cluster: str, written: float) -> Path:
    """A cluster's latest-state file, its mtime `written` (the wall clock the retiring wait is measured on)."""
    path = write_latest(state_dir, snapshot_to_dict(ClusterSnapshot(cluster=cluster, time=written)), now=written)
    os.utime(path, (written, written))
    return path


def aged(path: Path, written: float) -> Path:
    os.utime(path, (written, written))
    return path


def test_only_old_files_of_clusters_not_configured_are_moved(tmp_path: Path) -> None:
    state(tmp_path, "kept-configured", OLD)  # configured: stays however old (its collector may be down)
    gone = state(tmp_path, "prod eu/old", OLD)  # removed from the configuration, abandoned
    state(tmp_path, "recent", RECENT)  # not ours, but written lately: another collector may poll it
    foreign = tmp_path / "other-component.json"
    foreign.write_text(json.dumps({"something": "else"}))
    aged(foreign, OLD)
    misnamed = tmp_path / "x.json"  # holds cluster "y": not this file's cluster, left alone
    misnamed.write_bytes(state(tmp_path / "elsewhere", "y", OLD).read_bytes())
    aged(misnamed, OLD)

    assert retire_unconfigured(tmp_path, ["kept-configured"], now=NOW) == ["prod eu/old"]

    assert sorted(read_latest(tmp_path)) == ["kept-configured", "recent"]  # (x.json is skipped as misnamed)
    assert not gone.exists()
    moved = tmp_path / RETIRED_DIR / gone.name
    assert read_latest(tmp_path / RETIRED_DIR)["prod eu/old"]["time"] == OLD  # the last state, kept whole
    assert moved.exists() and foreign.exists() and misnamed.exists()
    # the dashboard reads the top level only
    assert "prod eu/old" not in read_latest(tmp_path)


def test_a_second_pass_moves_nothing_more_and_a_newer_retired_copy_replaces_the_older(tmp_path: Path) -> None:
    state(tmp_path, "gone", OLD - 86_400)
    assert retire_unconfigured(tmp_path, [], now=NOW) == ["gone"]
    assert retire_unconfigured(tmp_path, [], now=NOW) == []
    state(tmp_path, "gone", OLD)  # polled again for a while, then removed again
    assert retire_unconfigured(tmp_path, [], now=NOW) == ["gone"]
    assert read_latest(tmp_path / RETIRED_DIR)["gone"]["time"] == OLD
    assert read_latest(tmp_path) == {}


def test_files_read_and_left_are_not_read_again_until_they_change(tmp_path: Path) -> None:
    foreign = tmp_path / "other.json"
    foreign.write_text("[1, 2]")
    aged(foreign, OLD)
    damaged = tmp_path / "damaged.json"
    damaged.write_bytes(b'{"cluster": "dam')
    aged(damaged, OLD)
    judged: dict[str, float] = {}
    assert retire_unconfigured(tmp_path, [], now=NOW, judged=judged) == []
    assert judged == {"other.json": OLD, "damaged.json": OLD}
    assert damaged.exists()
    # changed into a latest-state document of an unconfigured cluster: read again, and moved
    foreign.write_bytes((state(tmp_path / "src", "other", OLD)).read_bytes())
    aged(foreign, OLD - 1)
    assert retire_unconfigured(tmp_path, [], now=NOW, judged=judged) == ["other"]


def test_a_file_that_cannot_be_moved_stays_with_a_warning(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = state(tmp_path, "gone", OLD)
    (tmp_path / RETIRED_DIR).write_text("a file where the directory should be")
    assert retire_unconfigured(tmp_path, [], now=NOW) == []
    assert path.exists()
    assert "not retired" in caplog.text
    assert retire_unconfigured(tmp_path / "missing", [], now=NOW) == []  # no directory yet: nothing to do


def test_the_collectors_sink_retires_what_its_configuration_no_longer_polls(tmp_path: Path) -> None:
    config = parse_config(f"""
state_dir: {tmp_path}
history: {{enabled: false}}
exporter: {{enabled: false}}
clusters:
  - name: prod
    bootstrap_servers: ["127.0.0.1:9092"]
""", environ={})
    removed = state(tmp_path, "decommissioned", time.time() - RETIRE_AFTER_S - 5)
    sink = next(s for s in build_sinks(config) if isinstance(s, LatestStateSink))
    sink([PollResult(ClusterSnapshot(cluster="prod", time=time.time()))], time.time())
    assert sorted(read_latest(tmp_path)) == ["prod"]
    assert (tmp_path / RETIRED_DIR / removed.name).exists()
    # a file abandoned later is retired at the next check, not at every poll
    later = state(tmp_path, "also-gone", time.time() - RETIRE_AFTER_S - 5)
    sink([PollResult(ClusterSnapshot(cluster="prod", time=time.time()))], time.time())
    assert later.exists()
    sink._next_check = 0.0  # the check's minute has passed
    sink([PollResult(ClusterSnapshot(cluster="prod", time=time.time()))], time.time())
    assert not later.exists() and sorted(read_latest(tmp_path)) == ["prod"]


def test_without_a_configuration_the_sink_retires_nothing(tmp_path: Path) -> None:
    old = state(tmp_path, "gone", time.time() - 10 * RETIRE_AFTER_S)
    LatestStateSink(tmp_path)([PollResult(ClusterSnapshot(cluster="c", time=time.time()))], time.time())
    assert old.exists()
    assert latest_state.RETIRED_DIR not in os.listdir(tmp_path)
