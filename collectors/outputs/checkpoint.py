"""What a poller remembers, saved across restarts: lag windows, offset histories, flap counters, open alerts.

Without it a restarted collector is blind for a while and noisy in history: lag in seconds has no log-end
history to interpolate in, a stalled group needs ``consumer_stop_after_s`` again before it is called
stalled, ISR flapping counts restart from zero, the under-replication grace starts over, and every alert
still open is "opened" a second time (the weekly report would count one incident twice).

One file per cluster, ``<state_dir>/checkpoints/<safe cluster name>.zip``, published atomically
(`collectors.outputs.atomic.publish`), so a kill leaves the previous checkpoint or the new one. Inside:

* ``meta.json`` -- version, cluster, cluster id, save time, the small state (condition timers, producer
  epochs, transaction states, ZooKeeper/KRaft election memory, the KRaft voter set last seen and its last change,
  known brokers, the zxid last seen per ZooKeeper server and the transactions' aborts recorded) and the open
  alerts;
* ``partitions.arrow`` -- one row per partition: log-end history, leader/ISR view, ISR change times;
* ``windows.arrow`` -- one row per group-partition: the commit window;
* ``epochs.arrow`` -- one row per partition: the leader epoch, leader, ISR and highest high watermark last
  known (`collectors.model.loss`), so a leader change during the downtime is still checked for truncation
  (absent from older checkpoints: those partitions start being watched at the first poll), and the topic id it
  was seen under, so a topic deleted and created again meanwhile is not read as truncated (older checkpoints
  have no ``topic_id`` column: those watches learn the id at the first poll).
* ``groups.arrow`` -- one row per group: first seen and last seen active (`collectors.model.activity`), so a
  restart neither forgets a group it saw consuming nor restarts the abandoned clock (absent from older
  checkpoints: those groups are first seen again).
* ``marks.arrow`` -- one row per group-partition: the loss ledger's marks (`collectors.model.loss.GroupMark`: what
  retention skipped under the group, recorded; what it read past a truncation; its last commit), so a restart
  still records the retention deletions and the reads past a truncation of its downtime, counted once (absent
  from older checkpoints: those group-partitions are first seen again).

Arrow IPC with list columns keeps 100k partitions to one vectorised write, and unlike pickle a damaged or
planted file cannot run code: loading validates and refuses (`CheckpointError`), and the caller starts
fresh with a warning. A checkpoint older than ``max_age_s``, or of another cluster id, is not used.
"""

from __future__ import annotations

import functools
import itertools
import json
import logging
import math
import time
import typing
import uuid
import zipfile
from array import array
from collections import deque
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, is_dataclass
from pathlib import Path
from types import UnionType
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.ipc as ipc

from collectors.model.activity import GroupLife
from collectors.model.lag import CommitWindow, OffsetHistory
from collectors.model.loss import EpochWatch, GroupMark, TxnWatch
from collectors.model.metadata_lag import EpochMemory
from collectors.model.records import AlertRecord, IncidentRecord, LossRecord
from collectors.model.state import ClusterState
from collectors.model.txn_clients import PROOF_STARTS, EpochSeen
from collectors.model.wording import plural
from collectors.outputs.atomic import publish, remove_stale_temps
from collectors.outputs.paths import safe_name

log = logging.getLogger(__name__)

CHECKPOINT_VERSION = 1
SUBDIR = "checkpoints"
SUFFIX = ".zip"
FUTURE_SLACK_S = 60.0
"""A memory saved this far ahead of our clock is not resumed: the clock stepped back (or it was written on a
sandbox's faster clock)."""

_MAX_META_BYTES = 256 * 1024 * 1024  # refuse absurd members instead of allocating them

_PARTITIONS = pa.schema([
    ("topic", pa.string()), ("partition", pa.int32()),
    ("hw_offsets", pa.list_(pa.int64())), ("hw_times", pa.list_(pa.float64())),
    ("leader", pa.int32()), ("isr", pa.list_(pa.int32())), ("isr_changes", pa.list_(pa.float64())),
])
_EPOCHS_V1 = pa.schema([  # optional member (checkpoints from before the loss ledger have none)
    ("topic", pa.string()), ("partition", pa.int32()), ("epoch", pa.int32()), ("leader", pa.int32()),
    ("isr", pa.list_(pa.int32())), ("hw_max", pa.int64()), ("seen_at", pa.float64()),
])
_EPOCHS = _EPOCHS_V1.append(pa.field("topic_id", pa.string()))  # since the ledger tells recreated topics apart
_MARKS = pa.schema([  # optional member (checkpoints from before the thirty-seventh session have none)
    ("group_id", pa.string()), ("topic", pa.string()), ("partition", pa.int32()), ("skipped", pa.int64()),
    ("beyond", pa.int64()), ("committed", pa.int64()),
])
_GROUPS = pa.schema([  # optional member (checkpoints from before group activity have none)
    ("group_id", pa.string()), ("first_seen", pa.float64()), ("last_active", pa.float64()),
])
_WINDOWS = pa.schema([
    ("group_id", pa.string()), ("topic", pa.string()), ("partition", pa.int32()),
    ("offsets", pa.list_(pa.int64())), ("times", pa.list_(pa.float64())),
    ("lags", pa.list_(pa.int64())), ("lags_at_commit", pa.list_(pa.int64())),
    ("last_change_time", pa.float64()), ("previous_high_watermark", pa.int64()),
])


def unusable_age(age_s: float, max_age_s: float) -> str | None:
    """Why a memory saved `age_s` seconds ago is not to be resumed: ``"never"`` when `max_age_s` is 0 (as
    documented), ``"old"`` past `max_age_s` (its alerts and incidents would span the whole time nobody watched),
    ``"ahead"`` more than `FUTURE_SLACK_S` in the future; None when it may be. One rule for a checkpoint and for
    what a history's last collector left open (`collectors.runtime.sinks.HistorySink`)."""
    if max_age_s <= 0:
        return "never"
    if age_s > max_age_s:
        return "old"
    if age_s < -FUTURE_SLACK_S:
        return "ahead"
    return None


class CheckpointError(ValueError):
    """A checkpoint file that cannot be used (damaged, foreign, another version or cluster). Whatever fails while one
    is read and decoded is raised as this (`load_checkpoint`): a checkpoint never stops the monitor."""


@dataclass
class Checkpoint:
    cluster: str
    cluster_id: str | None
    saved_at: float
    state: ClusterState
    alerts: list[AlertRecord] = field(default_factory=list)
    incidents: list[IncidentRecord] = field(default_factory=list)  # open, and resolved within the hold-down
    evidence_only: bool = False
    """Older than ``checkpoint_max_age_s``: only the loss evidence is resumed (`evidence_of`)."""


EVIDENCE_MAX_AGE_S = 7 * 24 * 3600.0
"""How old a checkpoint's loss evidence may be and still be resumed (Kafka's default retention, a week: past it the
old leader epoch's messages are gone anyway and the question about them reads nothing)."""


def evidence_of(st: ClusterState) -> ClusterState:
    """What of a checkpoint older than ``checkpoint_max_age_s`` is still true whatever happened meanwhile: each
    partition's leader epoch and highest high watermark seen (`EpochWatch`), each ZooKeeper server's zxid, and the
    KRaft voter set. Where the old epoch ends in the current leader's log, whether a zxid went back within its
    epoch, and whether the voter set is another, are proof across any gap, so a truncation, an unclean election, a
    ZooKeeper restore or a controller added or removed while the monitor was down for hours is still claimed. The
    rest starts fresh: open alerts and timers would span the whole time nobody watched, lag windows and transaction
    counts need consecutive polls, and what retention deleted meanwhile is not reported as seen happening."""
    out = ClusterState(lag_points=st.lag_points, window_size=st.window_size)
    out.epoch_watch, out.zk_zxids = st.epoch_watch, st.zk_zxids
    # the KRaft voter set last read, and when: a controller added or removed meanwhile is `kraft_voters_changed`
    out.kraft_quorum, out.kraft_quorum_seen_at = st.kraft_quorum, st.kraft_quorum_seen_at
    return out


def checkpoint_path(state_dir: Path, cluster: str) -> Path:
    return Path(state_dir) / SUBDIR / f"{safe_name(cluster)}{SUFFIX}"


# --------------------------------------------------------------------------- saving


def _list_column(chunks: list[array], typecode: str) -> pa.Array:
    """A list<…> Arrow column from one Python array per row, with one copy of the values."""
    lengths = np.fromiter((len(c) for c in chunks), dtype=np.int32, count=len(chunks))
    offsets = np.zeros(len(chunks) + 1, dtype=np.int32)
    np.cumsum(lengths, out=offsets[1:])
    flat = array(typecode)
    for c in chunks:
        flat.extend(c)
    dtype = np.int64 if typecode == "q" else np.float64 if typecode == "d" else np.int32
    return pa.ListArray.from_arrays(pa.array(offsets), pa.array(np.frombuffer(flat, dtype=dtype)))


def _partitions_table(state: ClusterState) -> pa.Table:
    keys = sorted(set(state.hw_history) | set(state.partition_view) | set(state.isr_changes))
    empty_q, empty_d = array("q"), array("d")
    hw_off, hw_t, isr, changes, leaders = [], [], [], [], []
    for key in keys:
        h = state.hw_history.get(key)
        offsets, times = h.raw() if h is not None else (empty_q, empty_d)
        hw_off.append(offsets)
        hw_t.append(times)
        view = state.partition_view.get(key)
        leaders.append(view[0] if view is not None else None)
        isr.append(array("i", view[1]) if view is not None else array("i"))
        changes.append(array("d", state.isr_changes.get(key, ())))
    return pa.Table.from_arrays([
        pa.array([k[0] for k in keys], pa.string()), pa.array([k[1] for k in keys], pa.int32()),
        _list_column(hw_off, "q"), _list_column(hw_t, "d"), pa.array(leaders, pa.int32()),
        _list_column(isr, "i"), _list_column(changes, "d"),
    ], schema=_PARTITIONS)


def _epochs_table(state: ClusterState) -> pa.Table:
    keys = sorted(state.epoch_watch)
    ws = [state.epoch_watch[k] for k in keys]
    return pa.Table.from_arrays([
        pa.array([k[0] for k in keys], pa.string()), pa.array([k[1] for k in keys], pa.int32()),
        pa.array([w.epoch for w in ws], pa.int32()), pa.array([w.leader for w in ws], pa.int32()),
        _list_column([array("i", w.isr) for w in ws], "i"), pa.array([w.hw_max for w in ws], pa.int64()),
        pa.array([w.seen_at for w in ws], pa.float64()), pa.array([w.topic_id for w in ws], pa.string()),
    ], schema=_EPOCHS)


def _groups_table(state: ClusterState) -> pa.Table:
    keys = sorted(state.group_life)
    lives = [state.group_life[k] for k in keys]
    return pa.Table.from_arrays([
        pa.array(keys, pa.string()), pa.array([x.first_seen for x in lives], pa.float64()),
        pa.array([x.last_active for x in lives], pa.float64()),
    ], schema=_GROUPS)


def _restore_groups(st: ClusterState, groups: pa.Table) -> None:
    cols = [groups.column(n).to_pylist() for n in ("group_id", "first_seen", "last_active")]
    for gid, first, last in zip(*cols, strict=True):
        if gid is None or first is None:  # (times are finite: `_read_ipc`)
            raise CheckpointError("groups.arrow has a row with missing fields")
        st.group_life[gid] = GroupLife(float(first), None if last is None else float(last))


def _marks_table(state: ClusterState) -> pa.Table:
    keys = sorted(state.group_marks)
    marks = [state.group_marks[k] for k in keys]
    return pa.Table.from_arrays([
        pa.array([k[0] for k in keys], pa.string()), pa.array([k[1] for k in keys], pa.string()),
        pa.array([k[2] for k in keys], pa.int32()), pa.array([m.skipped for m in marks], pa.int64()),
        pa.array([m.beyond for m in marks], pa.int64()), pa.array([m.committed for m in marks], pa.int64()),
    ], schema=_MARKS)


def _restore_marks(st: ClusterState, marks: pa.Table) -> None:
    cols = [marks.column(n).to_pylist() for n in _MARKS.names]
    for gid, topic, part, skipped, beyond, committed in zip(*cols, strict=True):
        if None in (gid, topic, part, skipped, beyond, committed) or min(skipped, beyond) < 0:
            raise CheckpointError("marks.arrow has a row with missing or negative fields")
        st.group_marks[(gid, topic, part)] = GroupMark(int(skipped), int(beyond), int(committed))


def _windows_table(state: ClusterState) -> pa.Table:
    keys = sorted(state.commit_windows)
    raws = [state.commit_windows[k].raw() for k in keys]
    return pa.Table.from_arrays([
        pa.array([k[0] for k in keys], pa.string()), pa.array([k[1] for k in keys], pa.string()),
        pa.array([k[2] for k in keys], pa.int32()),
        _list_column([r[0] for r in raws], "q"), _list_column([r[1] for r in raws], "d"),
        _list_column([r[2] for r in raws], "q"), _list_column([r[3] for r in raws], "q"),
        pa.array([r[4] for r in raws], pa.float64()), pa.array([r[5] for r in raws], pa.int64()),
    ], schema=_WINDOWS)


def _ipc_bytes(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    with ipc.new_file(sink, table.schema, options=ipc.IpcWriteOptions(compression="zstd")) as w:
        w.write_table(table)
    return sink.getvalue().to_pybytes()


def _meta(cp: Checkpoint) -> dict[str, Any]:
    st = cp.state
    return {
        "version": CHECKPOINT_VERSION, "cluster": cp.cluster, "cluster_id": cp.cluster_id, "saved_at": cp.saved_at,
        "lag_points": st.lag_points, "window_size": st.window_size, "polls": st.polls, "last_good": st.last_good,
        "condition_since": [[r, s, t] for (r, s), t in st.condition_since.items()],
        "producer_epochs": {tid: [list(p) for p in d] for tid, d in st.producer_epochs.items()},
        "txn_epochs": {tid: [e.producer_id, e.epoch, list(e.starts), list(e.proven) if e.proven else None]
                       for tid, e in st.txn_epochs.items()},
        "transaction_version": st.transaction_version,
        "txn_state_since": {tid: list(v) for tid, v in st.txn_state_since.items()},
        "unknown_open_txns": [[t, p, pid, n] for (t, p, pid), n in st.unknown_open_txns.items()],
        "zk_controller": st.zk_controller, "zk_leader_epoch": st.zk_leader_epoch, "zk_election_at": st.zk_election_at,
        "kraft_leader": list(st.kraft_leader) if st.kraft_leader is not None else None,
        "kraft_election_at": st.kraft_election_at,
        "kraft_quorum": [list(st.kraft_quorum[0]), st.kraft_quorum[1]] if st.kraft_quorum is not None else None,
        "kraft_voters_changed_at": st.kraft_voters_changed_at,
        "kraft_voters_change": [list(st.kraft_voters_change[0]), list(st.kraft_voters_change[1]),
                                st.kraft_voters_change[2]] if st.kraft_voters_change is not None else None,
        "kraft_quorum_seen_at": st.kraft_quorum_seen_at,
        "known_brokers": [[b, t] for b, t in st.known_brokers.items()],
        "topic_configs": st.topic_configs, "broker_configs": st.broker_configs,
        "alerts": [asdict(a) for a in cp.alerts],
        "incidents": [asdict(i) for i in cp.incidents],
        "recent_losses": [asdict(x) for x in st.recent_losses],
        "zk_zxids": {server: list(v) for server, v in st.zk_zxids.items()},
        # the aborts recorded only: "seen open, then aborted with the epoch bumped" proves a timeout abort across one
        # poll interval, not across a downtime (a commit and a restart bump it too, Transaction V2 every end)
        "txn_watch": {tid: asdict(w) for tid, w in st.txn_watch.items() if w.aborted_at is not None},
        "metadata_lag": st.metadata_lag.saved(),
    }


def save_checkpoint(state_dir: Path, cp: Checkpoint) -> tuple[Path, int]:
    """Publish the cluster's checkpoint atomically; returns (path, bytes). Raises OSError when it cannot be written."""
    target = checkpoint_path(state_dir, cp.cluster)
    target.parent.mkdir(parents=True, exist_ok=True)
    members = [("meta.json", json.dumps(_meta(cp), separators=(",", ":"), allow_nan=False).encode()),
               ("partitions.arrow", _ipc_bytes(_partitions_table(cp.state))),
               ("windows.arrow", _ipc_bytes(_windows_table(cp.state))),
               ("epochs.arrow", _ipc_bytes(_epochs_table(cp.state))),
               ("groups.arrow", _ipc_bytes(_groups_table(cp.state))),
               ("marks.arrow", _ipc_bytes(_marks_table(cp.state)))]

    def write(f: Any) -> None:
        with zipfile.ZipFile(f, "w", compression=zipfile.ZIP_STORED) as z:  # members are compressed already
            for name, data in members:
                z.writestr(name, data)

    size = publish(target, write, target.parent / f".{target.name}.{uuid.uuid4().hex}.tmp")
    remove_stale_temps(target.parent, f".{target.name}.", ".tmp", older_than_s=600.0)
    return target, size


# --------------------------------------------------------------------------- loading


def _read_ipc(z: zipfile.ZipFile, name: str, schema: pa.Schema, *older: pa.Schema) -> pa.Table:
    """The member as a table of `schema`, or of one of the `older` schemas an earlier version wrote."""
    with ipc.open_file(pa.py_buffer(z.read(name))) as r:
        table = r.read_all()
    if not any(table.schema.equals(s) for s in (schema, *older)):
        raise CheckpointError(f"{name} has columns {table.schema.names}, expected {schema.names}")
    for f in table.schema:  # every time (a float column) finite: a NaN timer never fires, an infinite one never ends
        col = pc.list_flatten(table.column(f.name)) if pa.types.is_list(f.type) else table.column(f.name)
        if pa.types.is_floating(col.type) and pc.all(pc.is_finite(col)).as_py() is False:
            raise CheckpointError(f"{name} column {f.name} has a value that is not a finite number")
    return table


def _rows(column: pa.ChunkedArray, typecode: str) -> list[array]:
    """One Python array per row of a list<…> column (no per-element Python objects)."""
    col = column.combine_chunks()
    if col.null_count:
        raise CheckpointError("null list in a checkpoint column")
    offsets = col.offsets.to_numpy().tolist()  # Python ints: numpy scalars in the loop cost 10x
    values = np.ascontiguousarray(col.values.to_numpy(zero_copy_only=False)).tobytes()
    width = array(typecode).itemsize
    out = []
    view = memoryview(values)
    for start, end in itertools.pairwise(offsets):
        a = array(typecode)
        a.frombytes(view[start * width:end * width])
        out.append(a)
    return out


class _Count(int):
    """The kind (`_check`) of a count or a partition number: a whole number, not negative."""


_KIND_NAMES = {float: "a finite number", int: "a whole number", _Count: "a whole number >= 0", str: "text",
               bool: "true or false"}


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _check(value: Any, kind: Any, what: str) -> Any:
    """`value`, as read from a checkpoint, checked to be of `kind`; CheckpointError naming `what` (and the key path
    within it) otherwise. Checked, not converted: ``"5"`` is no number and ``7.5`` no epoch.

    Kinds: ``float`` (a time: a finite int or float, not a bool; returned as float), ``int`` (not a bool nor a
    float), `_Count` (an int >= 0), ``str``, ``bool``, ``X | None``, ``list[X]``, ``tuple[X, Y]`` and
    ``tuple[X, ...]`` (a JSON list, returned as a tuple), ``dict[str, X]``, and a record dataclass (a JSON object of
    its fields, each checked by its annotation)."""
    if kind is float:
        if isinstance(value, int | float) and not isinstance(value, bool):
            try:
                if math.isfinite(value):
                    return float(value)
            except OverflowError:  # an int too big for a float
                pass
    elif kind in _KIND_NAMES:
        if isinstance(value, int if kind is _Count else kind) and (kind is bool or not isinstance(value, bool)) and (
                kind is not _Count or value >= 0):
            return value
    else:
        origin, args = typing.get_origin(kind), typing.get_args(kind)
        if origin in (UnionType, typing.Union):  # X | None
            return None if value is None else _check(value, next(a for a in args if a is not type(None)), what)
        if origin is list and isinstance(value, list):
            return [_check(v, args[0], f"{what}[{i}]") for i, v in enumerate(value)]
        if origin is tuple and isinstance(value, list) and (args[-1] is Ellipsis or len(value) == len(args)):
            kinds = args[:1] * len(value) if args[-1] is Ellipsis else args
            return tuple(_check(v, k, f"{what}[{i}]") for i, (v, k) in enumerate(zip(value, kinds, strict=True)))
        if origin is dict and isinstance(value, dict):
            return {_check(k, args[0], f"{what} key"): _check(v, args[1], f"{what}[{k!r}]") for k, v in value.items()}
        if is_dataclass(kind) and isinstance(value, dict):
            hints = _hints(kind)
            if unknown := set(value) - hints.keys():
                raise CheckpointError(f"{what} has unknown fields {sorted(unknown)!r:.80}")
            try:
                return kind(**{k: _check(v, hints[k], f"{what}.{k}") for k, v in value.items()})
            except TypeError as e:  # a field missing
                raise CheckpointError(f"{what}: {e}") from e
    name = _KIND_NAMES.get(kind) or (f"a {kind.__name__}" if isinstance(kind, type) else str(kind))
    raise CheckpointError(f"{what} is not {name}: {value!r:.80}")


# The small state in meta.json: each field's kind (`_check`) and how the checked value becomes the state's.
_STATE_FIELDS: dict[str, tuple[Any, Callable[[Any], Any] | None]] = {
    "condition_since": (list[tuple[str, str, float]], lambda v: {(r, s): t for r, s, t in v}),
    "producer_epochs": (dict[str, list[tuple[float, int]]], lambda v: {k: deque(p, maxlen=64) for k, p in v.items()}),
    # the finalized transaction.version last read: a restarted collector whose first reads of it fail still knows
    # that epoch rises are transaction ends there (Transaction V2), and pages them or claims timeout aborts only for a
    # producer proven to keep V1's rules (`txn_epochs`)
    "transaction_version": (_Count | None, None),
    # each producer's epoch on a Transaction V2 cluster, the transactions begun at it and the last epoch proven to
    # follow V1's rules; a start time given twice is one transaction
    "txn_epochs": (dict[str, tuple[_Count, _Count, list[float], tuple[_Count, _Count] | None]],
                   lambda v: {k: EpochSeen(pid, e, list(dict.fromkeys(starts))[:PROOF_STARTS], proven)
                              for k, (pid, e, starts, proven) in v.items()}),
    "txn_state_since": (dict[str, tuple[str, float]], None),
    "unknown_open_txns": (list[tuple[str, _Count, int, _Count]], lambda v: {(t, p, pid): n for t, p, pid, n in v}),
    "zk_controller": (int | None, None), "zk_leader_epoch": (int | None, None), "zk_election_at": (float | None, None),
    "kraft_leader": (tuple[int, int] | None, None), "kraft_election_at": (float | None, None),
    # (voter ids, high watermark): a collector restarted while the quorum has no leader still says whose quorum it is
    # (`collectors.model.snapshot`'s voters with leader -1), not only "stale"
    "kraft_quorum": (tuple[tuple[int, ...], int] | None, None),
    # the last change of that set (when; the voters added, removed): `kraft_voters_changed` stays open across a
    # restart as long as it would have without one, saying the same
    "kraft_voters_changed_at": (float | None, None),
    "kraft_voters_change": (tuple[tuple[int, ...], tuple[int, ...], float | None] | None, None),
    "kraft_quorum_seen_at": (float | None, None),
    "known_brokers": (list[tuple[int, float]], dict),
    "topic_configs": (dict[str, dict[str, str | None]], None), "broker_configs": (dict[str, str | None], None),
    "polls": (_Count, None), "last_good": (float | None, None),
    # the losses proven in the last day, which keep their alerts open `loss_alert_hold_s` across a restart
    "recent_losses": (list[LossRecord], None),
    # the loss ledger's memory of ZooKeeper and transactions (`collectors.model.loss`), so a restart still claims
    # what it can: per server (host:port) the (epoch, zxid) last seen, a zxid gone back meanwhile being
    # `zk_zxid_regressed`; per transactional id an abort recorded, its producer's return being `txn_producer_returned`
    "zk_zxids": (dict[str, tuple[_Count, _Count]], None),
    "txn_watch": (dict[str, TxnWatch], None),
    # where a broker's metadata was found behind, with the epoch it did not know and when that was seen
    # (`collectors.model.metadata_lag`): a restart keeps asking those topics, and the lag's bound keeps growing
    "metadata_lag": (list[tuple[str, _Count, _Count, str, float, int, _Count, float]], EpochMemory.restore),
}
# absent from older checkpoints: not known, none
_LATER_FIELDS = {"kraft_quorum", "kraft_voters_changed_at", "kraft_voters_change", "kraft_quorum_seen_at",
                 "recent_losses", "zk_zxids", "txn_watch", "transaction_version", "metadata_lag",
                 "txn_epochs"}


def _restore_state(meta: dict[str, Any], parts: pa.Table, windows: pa.Table, lag_points: int,
                   window_size: int) -> ClusterState:
    st = ClusterState(lag_points=lag_points, window_size=window_size)
    topics, pnums = parts.column("topic").to_pylist(), parts.column("partition").to_pylist()
    leaders = parts.column("leader").to_pylist()
    for key, offsets, times, leader, isr, changes in zip(
            zip(topics, pnums, strict=True), _rows(parts.column("hw_offsets"), "q"),
            _rows(parts.column("hw_times"), "d"), leaders, _rows(parts.column("isr"), "i"),
            _rows(parts.column("isr_changes"), "d"), strict=True):
        if offsets:
            st.hw_history[key] = OffsetHistory.from_raw(lag_points, offsets, times)
        if leader is not None:
            st.partition_view[key] = (leader, tuple(isr))
        if changes:
            st.isr_changes[key] = deque(changes, maxlen=64)
    cols = [windows.column(n).to_pylist() for n in ("group_id", "topic", "partition", "last_change_time",
                                                    "previous_high_watermark")]
    for gid, topic, part, last_change, prev_hw, offs, times, lags, floors in zip(
            *cols, _rows(windows.column("offsets"), "q"), _rows(windows.column("times"), "d"),
            _rows(windows.column("lags"), "q"), _rows(windows.column("lags_at_commit"), "q"), strict=True):
        st.commit_windows[(gid, topic, part)] = CommitWindow.from_raw(window_size, offs, times, lags, floors,
                                                                      last_change, prev_hw)
    for name, (kind, convert) in _STATE_FIELDS.items():
        if name in meta or name not in _LATER_FIELDS:
            value = _check(meta[name], kind, name)
            setattr(st, name, value if convert is None else convert(value))
    change = st.kraft_voters_change
    if (st.kraft_voters_changed_at is None) != (change is None) or (change is not None and not change[0] + change[1]):
        raise CheckpointError(f"kraft_voters_change is no change of the voter set: {change!r:.80} "
                              f"(kraft_voters_changed_at {st.kraft_voters_changed_at!r})")
    return st


def _restore_epochs(st: ClusterState, epochs: pa.Table) -> None:
    cols = [epochs.column(n).to_pylist() for n in ("topic", "partition", "epoch", "leader", "hw_max", "seen_at")]
    ids = (epochs.column("topic_id").to_pylist() if "topic_id" in epochs.schema.names  # older: none
           else [None] * epochs.num_rows)
    for topic, part, epoch, leader, hw_max, seen_at, tid, isr in zip(*cols, ids, _rows(epochs.column("isr"), "i"),
                                                                     strict=True):
        if topic is None or part is None or epoch is None or leader is None or seen_at is None:
            raise CheckpointError("epochs.arrow has a row with missing fields")
        st.epoch_watch[(topic, part)] = EpochWatch(int(epoch), int(leader), tuple(isr), hw_max, float(seen_at), tid)


def load_checkpoint(state_dir: Path, cluster: str, *, lag_points: int, window_size: int, now: float,
                    max_age_s: float) -> Checkpoint | None:
    """The cluster's checkpoint, resized to the current window settings; None when there is none.

    Raises CheckpointError when it exists but must not be used (damaged, other version or cluster, too old,
    saved in the future), whatever the reading or decoding raised (a list where a mapping belongs, a number too big
    for an int, JSON nested too deep); the caller logs that and starts fresh.
    """
    path = checkpoint_path(state_dir, cluster)
    try:
        z = zipfile.ZipFile(path)
    except FileNotFoundError:
        return None
    except Exception as e:  # not a zip, not readable, ...
        raise CheckpointError(f"{path}: not readable: {type(e).__name__}: {e}") from e
    try:
        with z:
            info = z.getinfo("meta.json")
            if info.file_size > _MAX_META_BYTES:
                raise CheckpointError(f"meta.json is {info.file_size} bytes")
            meta = json.loads(z.read("meta.json"))
            if not isinstance(meta, dict) or meta.get("version") != CHECKPOINT_VERSION:
                raise CheckpointError(f"version {meta.get('version') if isinstance(meta, dict) else '?'}, "
                                      f"this collector reads version {CHECKPOINT_VERSION}")
            if meta.get("cluster") != cluster:
                raise CheckpointError(f"holds cluster {meta.get('cluster')!r}, not {cluster!r}")
            saved_at = _check(meta.get("saved_at"), float, "saved_at")
            age = now - saved_at
            verdict = unusable_age(age, max_age_s)
            if verdict == "never":
                raise CheckpointError("checkpoint_max_age_s is 0 (never resumed)")
            if verdict == "old" and age > EVIDENCE_MAX_AGE_S:
                raise CheckpointError(f"saved {age:.0f}s ago, older than checkpoint_max_age_s "
                                      f"({max_age_s:.0f}s) and than a week, its loss evidence too")
            if verdict == "ahead":
                raise CheckpointError(f"saved {-age:.0f}s in the future (clock stepped back?)")
            parts = _read_ipc(z, "partitions.arrow", _PARTITIONS)
            windows = _read_ipc(z, "windows.arrow", _WINDOWS)
            state = _restore_state(meta, parts, windows, lag_points, window_size)
            if "epochs.arrow" in z.namelist():  # so a restart still sees a leader change it slept through
                _restore_epochs(state, _read_ipc(z, "epochs.arrow", _EPOCHS, _EPOCHS_V1))
            if "groups.arrow" in z.namelist():  # so a restart neither forgets who consumed nor restarts the clock
                _restore_groups(state, _read_ipc(z, "groups.arrow", _GROUPS))
            if "marks.arrow" in z.namelist():  # so the ledger counts what retention deleted meanwhile, once
                _restore_marks(state, _read_ipc(z, "marks.arrow", _MARKS))
            alerts = _check(meta["alerts"], list[AlertRecord], "alerts")
            if any(a.cluster != cluster or a.resolved_at is not None for a in alerts):
                raise CheckpointError("alerts of another cluster or already resolved")
            # incidents arrived in a later version: a checkpoint without them resumes with none (the first poll
            # re-opens them from the resumed alerts, under new ids)
            incidents = _check(meta.get("incidents", []), list[IncidentRecord], "incidents")
            if any(i.cluster != cluster for i in incidents):
                raise CheckpointError("incidents of another cluster")
    except CheckpointError as e:
        raise CheckpointError(f"{path}: {e}") from e
    except Exception as e:  # KeyError, TypeError, AttributeError, OverflowError, RecursionError, ArrowException, ...
        raise CheckpointError(f"{path}: damaged: {type(e).__name__}: {e}") from e
    cluster_id = meta.get("cluster_id")
    if verdict == "old":
        return Checkpoint(cluster=cluster, cluster_id=cluster_id if isinstance(cluster_id, str) else None,
                          saved_at=saved_at, state=evidence_of(state), evidence_only=True)
    return Checkpoint(cluster=cluster, cluster_id=cluster_id if isinstance(cluster_id, str) else None,
                      saved_at=saved_at, state=state, alerts=alerts, incidents=incidents)


def describe(cp: Checkpoint, now: float | None = None) -> str:
    """One log line about what a restore brings back."""
    age = (time.time() if now is None else now) - cp.saved_at
    st = cp.state
    if cp.evidence_only:
        return (f"saved {age:.0f}s ago, older than checkpoint_max_age_s: its loss evidence only "
                f"({plural(len(st.epoch_watch), 'leader epoch')}, {plural(len(st.zk_zxids), 'ZooKeeper zxid')}); "
                "alerts, timers and lag windows start fresh")
    return (f"saved {age:.0f}s ago: {len(st.hw_history)} partition histories, {len(st.commit_windows)} commit "
            f"windows, {len(cp.alerts)} open alerts")
