"""Every field a checkpoint's meta.json brings back is checked, not converted: a damaged one is refused by name.

Before, many were converted with float()/int()/str(): a time given as the text "5" was resumed as 5.0, a NaN or
infinite time as such (a NaN timer never fires, an infinite one never expires), an epoch of 7.5 as 7, a count of
``true`` as 1, a negative poll count as it was. Others failed with a Python error naming no field. Now each is
refused with a `CheckpointError` naming the field, and the monitor starts that cluster fresh.
"""

from __future__ import annotations

import re
import zipfile
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.ipc as ipc
import pytest

from collectors.model.loss import EpochWatch
from collectors.model.records import AlertRecord, IncidentRecord, LossRecord
from collectors.model.state import ClusterState
from collectors.outputs.checkpoint import Checkpoint, CheckpointError, load_checkpoint, save_checkpoint
from tests.unit.test_checkpoint import edit_meta, rewrite_member

T0 = 1_800_000_000.0
NAN, INF = float("nan"), float("inf")


def full_state() -> ClusterState:
    st = ClusterState()
    st.condition_since[("under_replicated", "t-0")] = T0 - 10
    st.producer_epochs["tx-a"] = deque([(T0 - 20, 4), (T0 - 10, 5)], maxlen=64)
    st.txn_state_since["tx-a"] = ("Ongoing", T0 - 5)
    st.unknown_open_txns[("t", 1, 9001)] = 2
    st.zk_controller, st.zk_leader_epoch, st.zk_election_at = 2, 7, T0 - 50
    st.kraft_leader, st.kraft_election_at = (3, 11), T0 - 40
    st.known_brokers = {1: T0 - 100, 2: T0 - 1}
    st.polls, st.last_good = 5, T0 - 1
    st.epoch_watch[("t", 0)] = EpochWatch(5, 1, (1, 2), 100, T0 - 1, "tid-1")
    st.recent_losses = [LossRecord("prod", T0 - 30, "truncation", "t", 0, 12, "epoch 5 ends at 88", 1, 2, 5, 6, True,
                                   offset=88)]
    return st


def saved(tmp_path: Path) -> Path:
    alerts = [AlertRecord("under_replicated", "warning", "prod", "t-0", "t-0 is under-replicated", T0 - 10, T0, 1.0)]
    incidents = [IncidentRecord("prod", "inc-1", "topic", "t", "warning", "t is under-replicated", T0 - 10, T0,
                                alerts=1, members={"under_replicated": 1}, sample=["t-0"], brokers=[3], partitions=1)]
    return save_checkpoint(tmp_path, Checkpoint("prod", "cid-1", T0, full_state(), alerts, incidents))[0]


def load(tmp_path: Path) -> Checkpoint | None:
    return load_checkpoint(tmp_path, "prod", lag_points=60, window_size=10, now=T0 + 30, max_age_s=3600)


def put(*path: Any) -> Callable[[dict[str, Any]], None]:
    """An edit setting meta[path[0]][path[1]]... to the last argument."""
    def edit(meta: dict[str, Any]) -> None:
        node = meta
        for k in path[:-2]:
            node = node[k]
        node[path[-2]] = path[-1]
    return edit


CASES = {
    "condition_since time as text": (put("condition_since", 0, 2, "5"), "condition_since"),
    "condition_since time NaN": (put("condition_since", 0, 2, NAN), "condition_since"),
    "condition_since time inf": (put("condition_since", 0, 2, INF), "condition_since"),
    "condition_since time a huge int": (put("condition_since", 0, 2, 10**400), "condition_since"),
    "condition_since rule not text": (put("condition_since", 0, 0, 5), "condition_since"),
    "condition_since row too short": (put("condition_since", 0, ["under_replicated", "t-0"]), "condition_since"),
    "producer epoch 7.5": (put("producer_epochs", "tx-a", 0, 1, 7.5), "producer_epochs"),
    "producer epoch as text": (put("producer_epochs", "tx-a", 0, 1, "7"), "producer_epochs"),
    "producer epoch true": (put("producer_epochs", "tx-a", 0, 1, True), "producer_epochs"),
    "producer epoch time NaN": (put("producer_epochs", "tx-a", 1, 0, NAN), "producer_epochs"),
    "txn state time inf": (put("txn_state_since", "tx-a", 1, INF), "txn_state_since"),
    "txn state not text": (put("txn_state_since", "tx-a", 0, 3), "txn_state_since"),
    "unknown txn count true": (put("unknown_open_txns", 0, 3, True), "unknown_open_txns"),
    "unknown txn count negative": (put("unknown_open_txns", 0, 3, -1), "unknown_open_txns"),
    "unknown txn partition 1.5": (put("unknown_open_txns", 0, 1, 1.5), "unknown_open_txns"),
    "unknown txn producer id text": (put("unknown_open_txns", 0, 2, "9001"), "unknown_open_txns"),
    "known broker time NaN": (put("known_brokers", 0, 1, NAN), "known_brokers"),
    "known broker id as text": (put("known_brokers", 0, 0, "1"), "known_brokers"),
    "known broker id 1.0": (put("known_brokers", 0, 0, 1.0), "known_brokers"),
    "kraft leader id true": (put("kraft_leader", 0, True), "kraft_leader"),
    "kraft leader epoch as text": (put("kraft_leader", 1, "11"), "kraft_leader"),
    "zk election time as text": (put("zk_election_at", "5"), "zk_election_at"),
    "polls negative": (put("polls", -1), "polls"),
    "polls as text": (put("polls", "5"), "polls"),
    "polls 5.0": (put("polls", 5.0), "polls"),
    "polls true": (put("polls", True), "polls"),
    "saved_at a huge int": (put("saved_at", 10**400), "saved_at"),
    "topic config value not text": (put("topic_configs", "t", {"retention.ms": 5}), "topic_configs"),
    "alert first_seen missing": (put("alerts", 0, "first_seen", None), "alerts[0].first_seen"),
    "alert subject not text": (put("alerts", 0, "subject", 5), "alerts[0].subject"),
    "incident alert count as text": (put("incidents", 0, "alerts", "1"), "incidents[0].alerts"),
    "incident partitions 2.5": (put("incidents", 0, "partitions", 2.5), "incidents[0].partitions"),
    "incident brokers as text": (put("incidents", 0, "brokers", ["3"]), "incidents[0].brokers[0]"),
    "incident members as text": (put("incidents", 0, "members", {"under_replicated": "1"}), "incidents[0].members"),
    "loss partition as text": (put("recent_losses", 0, "partition", "0"), "recent_losses[0].partition"),
    "loss messages 12.5": (put("recent_losses", 0, "messages", 12.5), "recent_losses[0].messages"),
    "loss unclean_enabled as text": (put("recent_losses", 0, "unclean_enabled", "yes"),
                                     "recent_losses[0].unclean_enabled"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_damaged_field_is_refused_by_name(tmp_path: Path, case: str) -> None:
    edit, name = CASES[case]
    path = saved(tmp_path)
    edit_meta(path, edit)
    with pytest.raises(CheckpointError, match=re.escape(name)) as e:
        load(tmp_path)
    assert str(path) in str(e.value)


def test_an_epoch_watch_seen_at_nan_is_refused_by_name(tmp_path: Path) -> None:
    path = saved(tmp_path)
    with zipfile.ZipFile(path) as z, ipc.open_file(pa.py_buffer(z.read("epochs.arrow"))) as r:
        t = r.read_all()
    t = t.set_column(t.schema.get_field_index("seen_at"), "seen_at", pa.array([NAN] * t.num_rows, pa.float64()))
    sink = pa.BufferOutputStream()
    with ipc.new_file(sink, t.schema) as w:
        w.write_table(t)
    rewrite_member(path, "epochs.arrow", sink.getvalue().to_pybytes())
    with pytest.raises(CheckpointError, match=r"epochs\.arrow column seen_at"):
        load(tmp_path)


def test_every_field_of_a_valid_checkpoint_is_resumed_as_it_was(tmp_path: Path) -> None:
    saved(tmp_path)
    cp = load(tmp_path)
    assert cp is not None
    st, want = cp.state, full_state()
    for name in ("condition_since", "txn_state_since", "unknown_open_txns", "zk_controller", "zk_leader_epoch",
                 "zk_election_at", "kraft_leader", "kraft_election_at", "known_brokers", "polls", "last_good",
                 "epoch_watch", "recent_losses"):
        assert getattr(st, name) == getattr(want, name), name
    assert {k: list(d) for k, d in st.producer_epochs.items()} == {k: list(d) for k, d in want.producer_epochs.items()}
    (i,) = cp.incidents
    assert (i.alerts, i.members, i.sample, i.brokers, i.partitions) == (1, {"under_replicated": 1}, ["t-0"], [3], 1)


def test_whole_number_times_still_load_as_times(tmp_path: Path) -> None:
    """JSON writes a time that happened to be an int without a fraction: still a valid time, resumed as a float."""
    path = saved(tmp_path)
    edit_meta(path, lambda m: (put("condition_since", 0, 2, int(T0) - 10)(m), put("known_brokers", 0, 1, int(T0))(m)))
    cp = load(tmp_path)
    assert cp is not None
    assert cp.state.condition_since == {("under_replicated", "t-0"): T0 - 10}
    assert cp.state.known_brokers[1] == T0 and isinstance(cp.state.known_brokers[1], float)
