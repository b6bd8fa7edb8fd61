"""A checkpoint that fails to decode in any way is refused (`CheckpointError`), and the monitor starts anyway.

Before, only some exceptions were turned into `CheckpointError`: a list where a mapping belongs (AttributeError),
a number too big for an int (OverflowError) or JSON nested too deep (RecursionError) stopped the collector at
start, a crash loop under systemd. And the ZooKeeper fields were restored unchecked: a leader epoch as text was
resumed, and every poll of that cluster raised comparing it with the ensemble's.
"""

from __future__ import annotations

import json
import logging
import zipfile
from pathlib import Path
from typing import Any

import pytest

from collectors.config import MonitorConfig
from collectors.model.state import ClusterState
from collectors.outputs import checkpoint
from collectors.outputs.checkpoint import Checkpoint, CheckpointError, checkpoint_path, load_checkpoint, save_checkpoint
from collectors.runtime.poller import Monitor

T0 = 1_800_000_000.0


def saved(tmp_path: Path, cluster: str = "prod", state: ClusterState | None = None) -> Path:
    return save_checkpoint(tmp_path, Checkpoint(cluster, "cid-1", T0, state or ClusterState()))[0]


def rewrite_meta(path: Path, edit: Any) -> None:
    """Replace meta.json by `edit(text)` of it (the text, so that JSON's odder forms can be written)."""
    with zipfile.ZipFile(path) as z:
        members = {n: z.read(n) for n in z.namelist()}
    members["meta.json"] = edit(members["meta.json"].decode()).encode()
    with zipfile.ZipFile(path, "w") as z:
        for n, data in members.items():
            z.writestr(n, data)


def with_field(name: str, raw: str) -> Any:
    """An edit setting the meta field `name` to the JSON text `raw`."""
    def edit(text: str) -> str:
        meta = json.loads(text)
        meta[name] = "@@"
        return json.dumps(meta).replace('"@@"', raw)
    return edit


def load(tmp_path: Path, cluster: str = "prod") -> Checkpoint | None:
    return load_checkpoint(tmp_path, cluster, lag_points=60, window_size=10, now=T0 + 30, max_age_s=3600)


@pytest.mark.parametrize(("field", "raw", "error"), [  # `error`: once the Python error, now the field named
    ("producer_epochs", "[]", r"producer_epochs is not dict\["),  # was AttributeError: a list where a mapping belongs
    ("txn_state_since", "[[1, 2]]", r"txn_state_since is not dict\["),  # was AttributeError
    ("topic_configs", "[]", r"topic_configs is not dict\["),  # was AttributeError
    ("polls", "1e400", "polls is not a whole number >= 0: inf"),  # was OverflowError: int(inf)
    ("known_brokers", "[[1e400, 5]]", r"known_brokers\[0\]\[0\] is not a whole number: inf"),  # was OverflowError
    ("alerts", "[" * 100_000 + "]" * 100_000, "RecursionError"),  # JSON nested too deep
])
def test_any_decoding_failure_is_a_checkpoint_error(tmp_path: Path, field: str, raw: str, error: str) -> None:
    path = saved(tmp_path)
    rewrite_meta(path, with_field(field, raw))
    with pytest.raises(CheckpointError, match=error) as e:
        load(tmp_path)
    assert str(path) in str(e.value)


@pytest.mark.parametrize(("field", "raw"), [
    ("zk_leader_epoch", '"4"'), ("zk_leader_epoch", "4.0"), ("zk_leader_epoch", "true"),
    ("zk_controller", '"2"'), ("zk_controller", "[2]"), ("zk_controller", "false"),
])
def test_zookeeper_memory_of_the_wrong_type_is_refused(tmp_path: Path, field: str, raw: str) -> None:
    rewrite_meta(saved(tmp_path), with_field(field, raw))
    with pytest.raises(CheckpointError, match=f"{field} is not a whole number"):
        load(tmp_path)


def test_zookeeper_memory_of_the_right_type_is_resumed(tmp_path: Path) -> None:
    st = ClusterState()
    st.zk_controller, st.zk_leader_epoch = 2, 7
    saved(tmp_path, state=st)
    cp = load(tmp_path)
    assert cp is not None and (cp.state.zk_controller, cp.state.zk_leader_epoch) == (2, 7)
    saved(tmp_path)  # never polled ZooKeeper: both None
    cp = load(tmp_path)
    assert cp is not None and (cp.state.zk_controller, cp.state.zk_leader_epoch) == (None, None)


def two_clusters(tmp_path: Path) -> MonitorConfig:
    return MonitorConfig.model_validate({
        "clusters": [{"name": "prod", "bootstrap_servers": "127.0.0.1:1"},
                     {"name": "staging", "bootstrap_servers": "127.0.0.1:1"}],
        "state_dir": str(tmp_path)})


def test_one_clusters_undecodable_checkpoint_leaves_the_others_resumed(tmp_path: Path) -> None:
    st = ClusterState()
    st.polls = 5
    saved(tmp_path, "prod", st)
    saved(tmp_path, "staging", st)
    rewrite_meta(checkpoint_path(tmp_path, "prod"), with_field("producer_epochs", "[]"))
    m = Monitor(two_clusters(tmp_path))
    try:
        lines = m.resume(tmp_path, now=T0 + 30)
        assert lines[0].startswith("prod: starting fresh, checkpoint not used:") and "producer_epochs is" in lines[0]
        assert lines[1].startswith("staging: resumed from checkpoint")
        assert [p.state.polls for p in m.pollers] == [0, 5]
    finally:
        m.close()


def test_a_bug_resuming_one_cluster_starts_it_fresh_and_the_others_resume(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """Whatever the resume raises, not only a `CheckpointError`: the monitor must start."""
    st = ClusterState()
    st.polls = 5
    saved(tmp_path, "prod", st)
    saved(tmp_path, "staging", st)
    real = checkpoint.load_checkpoint

    def buggy(state_dir: Path, cluster: str, **kw: Any) -> Checkpoint | None:
        if cluster == "prod":
            raise RuntimeError("a bug of ours")
        return real(state_dir, cluster, **kw)

    monkeypatch.setattr(checkpoint, "load_checkpoint", buggy)
    m = Monitor(two_clusters(tmp_path))
    try:
        with caplog.at_level(logging.ERROR):
            lines = m.resume(tmp_path, now=T0 + 30)
        assert lines[0] == "prod: starting fresh, checkpoint not used: RuntimeError: a bug of ours"
        assert lines[1].startswith("staging: resumed from checkpoint")
        assert [p.state.polls for p in m.pollers] == [0, 5]
        assert any(r.exc_info is not None and "prod" in r.getMessage() for r in caplog.records)
    finally:
        m.close()


def test_a_resume_failing_half_way_leaves_no_half_memory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    st = ClusterState()
    st.polls = 5
    saved(tmp_path, "prod", st)
    m = Monitor(MonitorConfig.model_validate({"clusters": [{"name": "prod", "bootstrap_servers": "127.0.0.1:1"}],
                                              "state_dir": str(tmp_path)}))
    p = m.pollers[0]

    def restore(*args: Any) -> None:
        raise ValueError("incidents that do not fit")

    monkeypatch.setattr(p.incidents, "restore", restore)  # after the state was taken over
    try:
        (line,) = m.resume(tmp_path, now=T0 + 30)
        assert line.startswith("prod: starting fresh") and "ValueError" in line
        assert p.state.polls == 0 and p.checkpoint(T0 + 40).cluster_id is None
    finally:
        m.close()
