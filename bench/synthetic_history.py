"""A synthetic week of monitor history at scale, written straight into the Parquet history layout.

    .venv/bin/python -m bench.synthetic_history DIR [--week 2026-W40] [--interval 30] [--seed 7] [--partitions 5000]

Shape (defaults): one cluster of 12 brokers, 200 topics x 25 partitions (5,000 partitions, RF 3, min ISR 2),
500 groups reading 2 topics each (1,000 group-topics), 20 transactional producers, a 3-node ZooKeeper
ensemble, polled every 30 s for a whole ISO week (20,160 polls):

    topic_health  200 rows per poll    ~4.0 M rows      group_lag   1,000 rows per poll  ~20.2 M rows
    brokers        12 rows per poll    ~0.24 M          cluster         1 row per poll   ~20 k
    transactions  ~12 per poll         ~0.24 M          producers / lso_gap ~24 per poll ~0.5 M each
    consensus       3 per poll         ~60 k            partition_changes / alert_events: a few thousand

Incidents with known figures: broker 7 down 25 min (Tue 10:00), brokers 2 and 5 down together 12 min
(Fri 03:00: partitions on both go under min ISR), broker 3 down 8 min (Thu 14:00), a controller failover
(Thu 14:00), ZooKeeper leader elections (Wed 12:00, Sat 18:00; the new leader's followers report zxid 0 at
the first poll), three groups stalled for 2 h (lag seconds past any SLO, WARN then ERR), one group behind
retention for 1 h, a stuck transaction (open 30 min with a 60 s timeout), a hanging transaction (2 h), ten
producer epoch bumps. The collector's view of them as incidents (``incident_events``, one per cause: the outage
of brokers 2 and 5 together is one incident; group-0017's stall resolves and comes back within the hold-down:
reopened, same id; a topic incident is still open at the week's end; another one was lost by its collector,
``lost`` an hour after it opened; the monitor's own history write failure, 20 min, which the headline leaves
out) and the thresholds it ran with
(``cluster.thresholds``: `THRESHOLDS`, a lag SLO of 10 min instead of the default 5) are written as history
version 2 does.

Written directly with pyarrow using `collectors.outputs.history.TABLES` (not through the collectors, for speed):
one zstd file per table and day named ``compact-*`` as a compacted day would be, row groups of 128 k rows,
rows in poll order, times as TIMESTAMP (schema version 4). ``--old-days N`` writes the first N days as a collector
before version 4 did (float64 epoch seconds, names without a version), for a history upgraded mid-week.
Numpy-vectorised, a day at a time, and `group_lag` and `topic_health` a slice of polls at a time (`CHUNK_ROWS`):
on 2 cores ~14 s and ~0.45 GB peak RSS for the defaults (~110 MB on disk), ~32 s and ~0.5 GB for 25,000 partitions
polled every 60 s (~61 M rows), ~4 min and ~0.6 GB for 100,000 partitions polled every 30 s (~486 M rows, ~2.2 GB
on disk). Built a whole day at a time, that last week took ~17 GB (docs/performance-log.md, "Step 21").

``--partitions N`` (`Shape.scaled`) scales the topics (25 partitions each) and the groups with N: 25,000 partitions
are 1,000 topics and 2,500 groups (5,000 group-topics), 5x the rows of topic_health and group_lag; brokers,
ZooKeeper, producers and the incidents stay as they are, and the first 1,000 group-topics draw the same lags as in
the default shape (the groups' incidents have the same figures at any scale).
"""

from __future__ import annotations

import argparse
import json
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from collectors.alerting.incidents import incident_id
from collectors.alerting.thresholds import Thresholds
from collectors.model.vocabulary import LOST
from collectors.outputs.history import (
    COMPACT_ROW_GROUP,
    HISTORY_SCHEMA_VERSION,
    REPLACES_KEY,
    TABLES,
    in_row_group_order,
)
from collectors.outputs.history.files import new_name
from collectors.outputs.history.schema import seconds_to_timestamps, to_seconds

DAY = 86400.0
CLUSTER = "prod-eu-1"
FIRST_WEEK = "2020-W01"
"""Weeks from this one on continue the state of the week before (ZooKeeper's epochs, producer epochs)."""
ZK_WRITES_PER_POLL = (40, 80)
"""ZooKeeper writes between two polls: drawn from ``[low, high)``."""
ZK_COUNTER_AFTER_ELECTION = (1, 10)
"""The zxid counter at the first poll after an election: drawn from ``[low, high)``."""
THRESHOLDS = Thresholds(lag_seconds_slo=600.0)


@dataclass
class Shape:
    brokers: int = 12
    topics: int = 200
    partitions_per_topic: int = 25
    groups: int = 500
    topics_per_group: int = 2
    txn_producers: int = 20
    zk_servers: int = 3
    interval_s: float = 30.0
    seed: int = 7

    @classmethod
    def scaled(cls, partitions: int, **fields: Any) -> Shape:
        """The default shape with `partitions` partitions: topics of `partitions_per_topic` and groups scaled with
        it (25,000 -> 1,000 topics, 2,500 groups). Other fields (`interval_s`, `seed`, ...) as keywords.
        ``Shape.scaled(5000) == Shape()``. At least the default's topics: the incidents name topic-199 and
        group-0411."""
        if "topics" in fields or "groups" in fields:
            raise TypeError("Shape.scaled() sets topics and groups from the partition count")
        ref, shape = cls(), cls(**fields)
        pp = shape.partitions_per_topic
        if isinstance(partitions, bool) or not isinstance(partitions, int) or partitions <= 0 or partitions % pp:
            raise ValueError(f"partitions must be a positive multiple of {pp} (partitions per topic), "
                             f"not {partitions!r}")
        topics = partitions // pp
        if topics < ref.topics:
            raise ValueError(f"partitions must be at least {ref.topics * pp:,} ({ref.topics} topics of {pp}): "
                             f"the scripted incidents refer to topic-{ref.topics - 1:03d} and "
                             f"group-{max(g for g, _, _ in Week.STALLS):04d}; not {partitions:,}")
        shape.topics = topics
        shape.groups = ref.groups * topics // ref.topics
        return shape


@dataclass
class Written:
    rows: dict[str, int] = field(default_factory=dict)
    files: int = 0
    bytes: int = 0
    seconds: float = 0.0
    old_before: str = ""  # days (YYYY-MM-DD) before this one are written as schema version 3 did


def week_start(label: str) -> float:
    y, w = label.split("-W")
    d = datetime.fromisocalendar(int(y), int(w), 1).replace(tzinfo=UTC)
    return d.timestamp()


# ----------------------------------------------------------------------------------------------- writing


def _array(values: Any, t: pa.DataType, n: int) -> pa.Array:
    if values is None:
        return pa.nulls(n, t)
    if pa.types.is_timestamp(t):  # epoch seconds, as the model computes them
        return seconds_to_timestamps(_array(values, pa.float64(), n)).cast(t)
    if isinstance(values, pa.Array | pa.ChunkedArray):
        return values if values.type == t else values.cast(t)
    if isinstance(values, tuple) and len(values) == 2:  # (codes, dictionary): strings without Python objects
        codes, dictionary = values
        return pa.DictionaryArray.from_arrays(pa.array(codes, pa.int32()), pa.array(dictionary, pa.string())).cast(t)
    if isinstance(values, str):
        return pa.DictionaryArray.from_arrays(pa.array(np.zeros(n, np.int32)), pa.array([values])).cast(t)
    if isinstance(values, bool | int | float):
        return pa.array(np.full(n, values), t)
    if isinstance(values, np.ndarray) and values.dtype == object:
        return pa.array(values.tolist(), t)
    if isinstance(values, list):
        return pa.array(values, t)
    return pa.array(values, t, from_pandas=True)


def table(name: str, n: int, cols: dict[str, Any]) -> pa.Table:
    schema = TABLES[name]
    cols = {"cluster": CLUSTER, "schema_version": HISTORY_SCHEMA_VERSION, **cols}
    unknown = set(cols) - set(schema.names)
    if unknown:
        raise KeyError(f"{name}: unknown columns {unknown}")
    return pa.Table.from_arrays([_array(cols.get(f.name), f.type, n) for f in schema], schema=schema)


CHUNK_ROWS = 4 * COMPACT_ROW_GROUP
"""Rows of `group_lag` and `topic_health` built in memory at once: a day of them is written a slice of polls at a
time (`write` takes the slices). Built whole, a day of 100,000 partitions polled every 30 s (~58 M `group_lag`
rows) took ~17 GB."""


def write(root: Path, name: str, day: str, tables: pa.Table | Iterable[pa.Table], out: Written) -> None:
    """`tables` (one, or the slices of one in order) as one compacted file of `name` for `day`: row groups of
    `COMPACT_ROW_GROUP` rows each, as a compaction writes them, in the table's row-group order; a slice's rows
    that do not fill a row group are carried into the next."""
    d = root / name / f"date={day}"
    d.mkdir(parents=True, exist_ok=True)
    version, file_name = HISTORY_SCHEMA_VERSION, new_name("compact")
    old = day < out.old_before
    if old:  # as a collector before version 4 wrote it
        version, file_name = 3, f"compact-{time.time_ns()}-{uuid.uuid4().hex[:8]}.parquet"
    meta = {"kmon.table": name, "kmon.history_schema_version": str(version),
            REPLACES_KEY.decode(): json.dumps([f"part-synthetic-{uuid.uuid4().hex[:8]}.parquet"])}
    path = d / file_name
    rows = 0
    writer: pq.ParquetWriter | None = None

    def put(t: pa.Table) -> None:
        nonlocal writer, rows
        if old:
            t = to_seconds(t).set_column(t.schema.get_field_index("schema_version"), "schema_version",
                                         pa.array(np.full(t.num_rows, version, np.int32)))
        t = in_row_group_order(name, t).replace_schema_metadata(meta)
        if writer is None:
            writer = pq.ParquetWriter(path, t.schema, compression="zstd")
        writer.write_table(t, row_group_size=COMPACT_ROW_GROUP)
        rows += t.num_rows

    carried: list[pa.Table] = []
    try:
        for t in [tables] if isinstance(tables, pa.Table) else tables:
            carried.append(t)
            if sum(c.num_rows for c in carried) < COMPACT_ROW_GROUP:
                continue
            whole = pa.concat_tables(carried)
            full = whole.num_rows - whole.num_rows % COMPACT_ROW_GROUP
            for i in range(0, full, COMPACT_ROW_GROUP):
                put(whole.slice(i, COMPACT_ROW_GROUP))
            carried = [whole.slice(full)]
        last = pa.concat_tables(carried) if carried else None
        if last is not None and (last.num_rows or writer is None):  # an empty table too: a file with its schema
            put(last)
    finally:
        if writer is not None:
            writer.close()
    out.rows[name] = out.rows.get(name, 0) + rows
    out.files += 1
    out.bytes += path.stat().st_size


# ----------------------------------------------------------------------------------------------- the model


class Week:
    """Deterministic state of the synthetic cluster as functions of time (vectorised over poll times)."""

    STALLS = ((17, 2 * DAY + 9 * 3600.0, 2 * 3600.0), (230, 4 * DAY + 20 * 3600.0, 2 * 3600.0),
              (411, 6 * DAY + 2 * 3600.0, 2 * 3600.0))  # (group, from the week's start, duration)
    BASE_GROUP_TOPICS = 1_000  # Shape()'s: drawn from `rng` as ever; the ones a scaled shape adds from `rng_more`

    def __init__(self, start: float, shape: Shape) -> None:
        self.s = shape
        self.start = start
        self.rng = np.random.default_rng(shape.seed)
        nb, nt, pp = shape.brokers, shape.topics, shape.partitions_per_topic
        self.n_partitions = nt * pp
        p = np.arange(self.n_partitions)
        step = 1 + (p // nb) % 5  # 2 x step is never a multiple of 12 brokers: three distinct replicas
        self.replicas = np.stack([(p + k * step) % nb + 1 for k in range(3)], axis=1)
        self.topic_of = p // pp
        self.topic_names = np.array([f"topic-{t:03d}" for t in range(nt)])
        # broker outages: (broker, crash time, restart time); the controller fences after 18 s
        h = 3600.0
        self.outages = [(7, start + 1 * DAY + 10 * h, start + 1 * DAY + 10 * h + 25 * 60),
                        (3, start + 3 * DAY + 14 * h, start + 3 * DAY + 14 * h + 8 * 60),
                        (2, start + 4 * DAY + 3 * h, start + 4 * DAY + 3 * h + 12 * 60),
                        (5, start + 4 * DAY + 3 * h, start + 4 * DAY + 3 * h + 12 * 60)]
        self.controller_failover = start + 3 * DAY + 14 * h
        self.zk_elections = [start + 2 * DAY + 12 * h, start + 5 * DAY + 18 * h]
        # groups: g reads topics (2g, 2g+1) mod topics
        ng = shape.groups * shape.topics_per_group
        self.gt_group = np.repeat(np.arange(shape.groups), shape.topics_per_group)
        self.gt_topic = (self.gt_group * shape.topics_per_group + np.tile(np.arange(shape.topics_per_group),
                                                                        shape.groups)) % nt
        # group-topics past the default shape's 1,000 draw from another generator: the first 1,000 (and so the
        # stalled groups' figures) are the same at any scale, and Shape() draws exactly as it always has
        self.ng_base = min(ng, self.BASE_GROUP_TOPICS)
        self.rng_more = np.random.default_rng([shape.seed, 1])
        self.gt_base_lag = np.concatenate([self.rng.lognormal(3.5, 1.0, self.ng_base),
                                           self.rng_more.lognormal(3.5, 1.0, ng - self.ng_base)])  # messages
        self.gt_rate = np.concatenate([self.rng.uniform(20, 200, self.ng_base),
                                       self.rng_more.uniform(20, 200, ng - self.ng_base)])  # messages/s consumed
        self.stalls = [(g, start + s0, dur) for g, s0, dur in self.STALLS]  # (group, start, duration)
        self.retention_loss = (88, start + 2 * DAY + 15 * h, 1 * h)
        self.stuck = (3, start + 5 * DAY + 1 * h, 30 * 60)  # (producer, start, duration)
        self.hanging = (start + 6 * DAY + 8 * h, 2 * h)
        self.bumps = [start + (i + 0.5) * DAY * 0.7 for i in range(10)]  # producer 5's epoch bumps

    def week_index(self) -> int:
        """The week's index from `FIRST_WEEK` on (0 before it): what each week continues from."""
        return max(0, round((self.start - week_start(FIRST_WEEK)) / (7 * DAY)))

    def zk_start(self) -> tuple[int, int, int]:
        """ZooKeeper's zxid epoch, zxid counter and leader (server index) at the week's start: where the week
        before left them, so that weeks generated one by one read as one history (an election is an epoch above every
        earlier one; before, each week started again at epoch 5, and a month's report saw no election at all). One
        epoch a week's election; the counter starts above any the week before reached after its last election (its
        polls from then to the week's end, each at most `ZK_WRITES_PER_POLL` writes, from at most
        `ZK_COUNTER_AFTER_ELECTION`), so it never goes back within an epoch."""
        k = self.week_index()
        polls_after_last = int(np.ceil((self.start + 7 * DAY - max(self.zk_elections)) / self.s.interval_s))
        counter = 1000 + ZK_WRITES_PER_POLL[1] * polls_after_last + ZK_COUNTER_AFTER_ELECTION[1]  # 1,000 to spare
        return 5 + len(self.zk_elections) * k, counter, (len(self.zk_elections) * k) % self.s.zk_servers

    def producer_epoch_start(self) -> int:
        """Producer 5's epoch at the week's start: ten bumps a week, continued from the week before."""
        return len(self.bumps) * self.week_index()

    def incidents(self) -> list[dict[str, Any]]:
        """The incidents (one per cause) with their events: (time, event, severity), in time order."""
        iv, h = self.s.interval_s, 3600.0
        out: list[dict[str, Any]] = []

        def add(kind: str, subject: str, events: list[tuple[float, str, str]], **extra: Any) -> None:
            # as the collector names them (one id per occurrence): the same cause in next week's history is another
            out.append({"id": incident_id(CLUSTER, kind, subject, events[0][0]), "kind": kind, "subject": subject,
                        "events": events, **extra})

        for crash, back, brokers in ((self.outages[0][1], self.outages[0][2], [7]),
                                     (self.outages[1][1], self.outages[1][2], [3]),
                                     (self.outages[2][1], self.outages[2][2], [2, 5])):
            subject = ("broker " if len(brokers) == 1 else "brokers ") + ", ".join(map(str, brokers))
            add("broker", subject, [(crash + 30, "opened", "critical"), (back + iv, "resolved", "critical")],
                brokers=brokers, alerts=1 + 2 * len(brokers), partitions=40 * len(brokers))
        for e in self.zk_elections:
            add("consensus", "zookeeper", [(e + iv, "opened", "info"), (e + 600 + iv, "resolved", "info")])
        for g, s0, dur in self.stalls:
            ev = [(s0 + 300, "opened", "warning"), (s0 + 900, "updated", "critical")]
            if g == 17:  # resolves for a moment and comes back within the hold-down: the same incident
                ev += [(s0 + h, "resolved", "critical"), (s0 + h + 120, "reopened", "critical")]
            add("group", f"group-{g:04d}", [*ev, (s0 + dur + iv, "resolved", "critical")])
        g, s0, dur = self.retention_loss
        add("group", f"group-{g:04d}", [(s0 + iv, "opened", "critical"), (s0 + dur + iv, "resolved", "critical")])
        p, s0, dur = self.stuck
        add("transaction", f"txn-{p:02d}", [(s0 + 90, "opened", "critical"), (s0 + dur + iv, "resolved", "critical")])
        h0, hdur = self.hanging
        add("transaction", "txn-topic-0-3", [(h0 + 2 * iv, "opened", "critical"),
                                             (h0 + hdur + iv, "resolved", "critical")])
        add("topic", "topic-199", [(self.start + 6 * DAY + 23 * h, "opened", "warning")])  # open at the week end
        # its collector stopped; the next did not carry it on (started too late): ended unseen at the last poll
        add("topic", "topic-150", [(self.start + 4 * DAY + 8 * h, "opened", "warning"),
                                   (self.start + 4 * DAY + 9 * h, LOST, "warning")])
        add("monitor", "monitor", [(self.start + 2 * DAY + 10 * h, "opened", "warning"),
                                   (self.start + 2 * DAY + 10 * h + 1200, "resolved", "warning")])
        return out

    def incidents_open(self, t: np.ndarray) -> np.ndarray:
        """Open incidents at each poll time (what ``cluster.incidents_open`` records)."""
        n = np.zeros(len(t), np.int32)
        for inc in self.incidents():
            state = np.zeros(len(t), bool)
            for time_, event, _ in inc["events"]:
                state = np.where(t >= time_, event not in ("resolved", LOST), state)
            n += state
        return n

    def poll_times(self, day: int) -> np.ndarray:
        s = self.s
        per_day = int(DAY // s.interval_s)
        k = np.arange(per_day)
        jitter = np.random.default_rng(s.seed + day).uniform(-0.4, 0.4, per_day)
        return self.start + day * DAY + 15.0 + k * s.interval_s + jitter

    def fenced(self, t: np.ndarray) -> np.ndarray:
        """(polls, brokers) bool: broker not registered (crash + 18 s session timeout .. restart)."""
        out = np.zeros((len(t), self.s.brokers), bool)
        for b, crash, back in self.outages:
            out[:, b - 1] |= (t >= crash + 18) & (t < back)
        return out

    def down(self, t: np.ndarray) -> np.ndarray:
        out = np.zeros((len(t), self.s.brokers), bool)
        for b, crash, back in self.outages:
            out[:, b - 1] |= (t >= crash) & (t < back)
        return out


def _events(times: np.ndarray, t0: float, t1: float) -> np.ndarray:
    return (times >= t0) & (times < t1)


def _poll_slices(n: int, rows_per_poll: int) -> Iterator[slice]:
    """The day's `n` polls in slices of about `CHUNK_ROWS` rows (at least one poll each)."""
    step = max(1, CHUNK_ROWS // max(1, rows_per_poll))
    return (slice(i, i + step) for i in range(0, n, step)) if n else iter([slice(0, 0)])


def _topic_health(m: Week, t: np.ndarray, ur: np.ndarray, umi: np.ndarray, off: np.ndarray) -> pa.Table:
    """`topic_health`'s rows of the polls at `t`, with each poll's per-topic counts (polls x topics)."""
    nt, k = m.s.topics, len(t) * m.s.topics
    return table("topic_health", k, {
        "time": np.repeat(t, nt), "topic": (np.tile(np.arange(nt), len(t)), m.topic_names.tolist()),
        "internal": False, "partitions": np.full(k, m.s.partitions_per_topic, np.int32),
        "replication_factor": np.full(k, 3, np.int32), "min_insync_replicas": np.full(k, 2, np.int32),
        "unclean_leader_election": False, "retention_ms": np.full(k, 604_800_000, np.int64),
        "cleanup_policy": "delete", "under_replicated": ur.ravel(), "under_min_isr": umi.ravel(),
        "offline": off.ravel(), "preferred_leader_imbalance": np.zeros(k, np.int32),
        "failures_before_write_stop": np.ones(k, np.int32), "failures_before_data_loss": np.full(k, 2, np.int32)})


def _group_lag(m: Week, t: np.ndarray) -> pa.Table:
    """`group_lag`'s rows of the polls at `t`. The lags are drawn from the week's generators in poll order, so a
    day drawn a slice of polls at a time draws what it drew whole."""
    n, shape = len(t), m.s
    ng = len(m.gt_group)
    lag = np.empty((n, ng))
    lag[:, :m.ng_base] = m.rng.uniform(0.2, 1.8, (n, m.ng_base))
    lag[:, m.ng_base:] = m.rng_more.uniform(0.2, 1.8, (n, ng - m.ng_base))
    lag *= m.gt_base_lag[None, :]
    lag_s = lag / m.gt_rate[None, :]
    status = np.zeros((n, ng), np.int8)  # 0 OK 1 WARN 2 ERR
    below = np.zeros((n, ng), np.int32)
    for g, s0, dur in m.stalls:
        cols = np.nonzero(m.gt_group == g)[0]
        inside = _events(t, s0, s0 + dur)
        age = np.clip(t - s0, 0, None)[:, None]
        lag[np.ix_(inside, cols)] = (m.gt_base_lag[cols] + age[inside] * m.gt_rate[cols])
        lag_s[np.ix_(inside, cols)] = age[inside] + 1.0
        status[np.ix_(inside, cols)] = np.where(age[inside] > 300, 2, 1)
    g, s0, dur = m.retention_loss
    cols = np.nonzero(m.gt_group == g)[0]
    inside = _events(t, s0, s0 + dur)
    below[np.ix_(inside, cols)] = 3
    status[np.ix_(inside, cols)] = 1
    gl_status = (status.ravel(), ["OK", "WARN", "ERR"])
    return table("group_lag", n * ng, {
        "time": np.repeat(t, ng),
        "group_id": (np.tile(m.gt_group, n), [f"group-{i:04d}" for i in range(shape.groups)]),
        "topic": (np.tile(m.gt_topic, n), m.topic_names.tolist()),
        "state": "Stable", "members": np.full(n * ng, 3, np.int32), "status": gl_status,
        "worst_partition_status": (status.ravel(), ["OK", "WARN", "STALL"]),
        "lag_sum": (lag.ravel() * 4).astype(np.int64), "lag_max": lag.ravel().astype(np.int64),
        "lag_seconds_max": np.round(lag_s.ravel(), 3),
        "partitions": np.full(n * ng, shape.partitions_per_topic, np.int32), "below_log_start": below.ravel(),
        "min_seconds_to_retention": None,
        "last_commit_time": np.repeat(t, ng) - np.round(lag_s.ravel(), 0)})


def generate(root: Path, week: str = "2026-W40", shape: Shape | None = None,
             progress: Callable[[str], None] | None = None, old_days: int = 0) -> Written:
    """`old_days`: the first days written with float64 epoch seconds, as before schema version 4."""
    shape = shape or Shape()
    started = time.monotonic()
    m = Week(week_start(week), shape)
    out = Written(old_before=datetime.fromtimestamp(m.start + old_days * DAY, UTC).date().isoformat()
                  if old_days > 0 else "")
    days = 7
    # ISR membership missing per partition for each distinct fenced set (few of them)
    state_cache: dict[bytes, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
    rep = m.replicas

    def topic_counts(fenced_row: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        key = fenced_row.tobytes()
        if key not in state_cache:
            out_of_isr = fenced_row[rep - 1]  # (partitions, 3)
            n_out = out_of_isr.sum(axis=1)
            isr = 3 - n_out
            nt = shape.topics
            ur = np.bincount(m.topic_of, weights=(n_out > 0), minlength=nt).astype(np.int32)
            umi = np.bincount(m.topic_of, weights=(isr < 2) & (isr > 0), minlength=nt).astype(np.int32)
            off = np.bincount(m.topic_of, weights=(isr == 0), minlength=nt).astype(np.int32)
            state_cache[key] = (ur, umi, off)
        return state_cache[key]

    last_isr: dict[int, np.ndarray] = {}
    zk_epoch, zk_counter, leader = m.zk_start()
    prev_fenced = np.zeros(shape.brokers, bool)
    for day in range(days):
        t = m.poll_times(day)
        n = len(t)
        label = datetime.fromtimestamp(m.start + day * DAY, UTC).date().isoformat()
        fenced = m.fenced(t)
        down = m.down(t)
        # --- topic_health + cluster
        counts = [topic_counts(fenced[i]) for i in range(n)]
        ur = np.stack([c[0] for c in counts])
        umi = np.stack([c[1] for c in counts])
        off = np.stack([c[2] for c in counts])
        nt = shape.topics
        write(root, "topic_health", label, (_topic_health(m, t[sl], ur[sl], umi[sl], off[sl])
                                            for sl in _poll_slices(n, nt)), out)
        controller = np.where(t >= m.controller_failover, 4, 1).astype(np.int32)
        write(root, "cluster", label, table("cluster", n, {
            "time": t, "cluster_id": "synthetic-0001", "reachable": True, "stale": False, "stale_sections": "",
            "mode": "zookeeper", "controller_id": controller, "poll_duration_s": np.full(n, 1.5),
            "requests": np.full(n, 420, np.int64), "errors": np.zeros(n, np.int32),
            "brokers": np.full(n, shape.brokers, np.int32), "topics": np.full(n, nt, np.int32),
            "partitions": np.full(n, m.n_partitions, np.int32), "under_replicated": ur.sum(axis=1).astype(np.int32),
            "under_min_isr": umi.sum(axis=1).astype(np.int32), "at_min_isr": np.zeros(n, np.int32),
            "offline": off.sum(axis=1).astype(np.int32), "groups": np.full(n, shape.groups, np.int32),
            "alerts_open": (ur.sum(axis=1) > 0).astype(np.int32) * 3,
            "alerts_critical": (umi.sum(axis=1) > 0).astype(np.int32),
            "incidents_open": m.incidents_open(t), "thresholds": THRESHOLDS.model_dump_json()}), out)
        # --- brokers
        nb = shape.brokers
        write(root, "brokers", label, table("brokers", n * nb, {
            "time": np.repeat(t, nb), "broker_id": np.tile(np.arange(1, nb + 1, dtype=np.int32), n),
            "host": (np.tile(np.arange(nb), n), [f"broker-{b}.example" for b in range(1, nb + 1)]),
            "port": np.full(n * nb, 9092, np.int32),
            "rack": (np.tile(np.arange(nb) % 3, n), ["rack-a", "rack-b", "rack-c"]),
            "alive": ~fenced.ravel(), "in_zookeeper": ~fenced.ravel(),
            "is_controller": (np.tile(np.arange(1, nb + 1), n) == np.repeat(controller, nb)),
            "reachable": ~down.ravel()}), out)
        # --- partition_changes: a shrink when the controller fences a broker, an expand when it is back
        pc: dict[str, list[Any]] = {k: [] for k in ("time", "topic", "partition", "kind", "leader_before",
                                                     "leader_after", "isr_before", "isr_after")}
        for i in range(n):
            f = fenced[i]
            if (f == prev_fenced).all():
                continue
            for p in range(m.n_partitions):
                r = rep[p]
                before = last_isr.get(p, r)
                after = r[~f[r - 1]] if (~f[r - 1]).any() else r[:1]
                if len(before) == len(after) and (before == after).all():
                    continue
                pc["time"].append(float(t[i]))
                pc["topic"].append(str(m.topic_names[m.topic_of[p]]))
                pc["partition"].append(int(p % shape.partitions_per_topic))
                pc["kind"].append("isr_shrink" if len(after) < len(before) else "isr_expand")
                pc["leader_before"].append(int(before[0]))
                pc["leader_after"].append(int(after[0]))
                pc["isr_before"].append([int(x) for x in before])
                pc["isr_after"].append([int(x) for x in after])
                last_isr[p] = after
            prev_fenced = f.copy()
        if pc["time"]:
            write(root, "partition_changes", label, table("partition_changes", len(pc["time"]), pc), out)
        # --- group_lag
        write(root, "group_lag", label, (_group_lag(m, t[sl]) for sl in _poll_slices(n, len(m.gt_group))), out)
        # --- transactions, producers, lso_gap
        npd = shape.txn_producers
        rng = np.random.default_rng(shape.seed * 1000 + day)
        is_open = rng.random((n, npd)) < 0.6
        start = t[:, None] - rng.uniform(0.1, 5.0, (n, npd))
        state = np.zeros((n, npd), np.int8)  # 0 Ongoing 1 PrepareCommit 2 PrepareAbort
        state[rng.random((n, npd)) < 0.05] = 1
        sp, s0, dur = m.stuck
        inside = _events(t, s0, s0 + dur)
        is_open[inside, sp] = True
        start[inside, sp] = s0
        state[inside, sp] = np.where(t[inside] - s0 > 60, 2, 0)
        epoch = np.zeros((n, npd), np.int32)
        epoch[:, 5] = m.producer_epoch_start() + np.searchsorted(np.array(m.bumps), t)
        rows_i, rows_p = np.nonzero(is_open)
        k = len(rows_i)
        write(root, "transactions", label, table("transactions", k, {
            "time": t[rows_i], "transactional_id": (rows_p, [f"txn-{i:02d}" for i in range(npd)]),
            "coordinator": (rows_p % nb + 1).astype(np.int32),
            "state": (state[rows_i, rows_p], ["Ongoing", "PrepareCommit", "PrepareAbort"]),
            "producer_id": (5000 + rows_p).astype(np.int64), "producer_epoch": epoch[rows_i, rows_p],
            "timeout_ms": np.full(k, 60_000, np.int64), "start_time": np.round(start[rows_i, rows_p], 3),
            "age_seconds": t[rows_i] - np.round(start[rows_i, rows_p], 3),
            "partitions": pa.array([[f"txn-topic-{p % 4}-{p % 8}", f"txn-topic-{p % 4}-{(p + 1) % 8}"]
                                    for p in rows_p.tolist()], pa.list_(pa.string()))}), out)
        h0, hdur = m.hanging
        hang = _events(t, h0, h0 + hdur)
        pr_i = np.concatenate([np.repeat(rows_i, 2), np.nonzero(hang)[0]])
        pr_p = np.concatenate([np.repeat(rows_p, 2), np.full(hang.sum(), -1)])
        pr_part = np.concatenate([np.stack([rows_p % 8, (rows_p + 1) % 8], axis=1).ravel(), np.full(hang.sum(), 3)])
        order = np.argsort(pr_i, kind="stable")
        pr_i, pr_p, pr_part = pr_i[order], pr_p[order], pr_part[order]
        kp = len(pr_i)
        hanging = pr_p < 0
        topic_idx = np.where(hanging, 0, pr_p % 4)
        write(root, "producers", label, table("producers", kp, {
            "time": t[pr_i], "topic": (topic_idx, [f"txn-topic-{i}" for i in range(4)]),
            "partition": pr_part.astype(np.int32),
            "producer_id": np.where(hanging, 99_999, 5000 + pr_p).astype(np.int64),
            "producer_epoch": np.where(hanging, 0, epoch[pr_i, np.maximum(pr_p, 0)]).astype(np.int32),
            "txn_start_offset": rng.integers(1_000_000, 2_000_000, kp), "last_timestamp": t[pr_i] - 1,
            "transactional_id": pa.array([None if p < 0 else f"txn-{p:02d}" for p in pr_p.tolist()], pa.string()),
            "hanging": hanging}), out)
        gap = np.where(hanging, (t[pr_i] - h0) * 50, rng.integers(1, 500, kp)).astype(np.int64)
        hw = rng.integers(5_000_000, 6_000_000, kp)
        write(root, "lso_gap", label, table("lso_gap", kp, {
            "time": t[pr_i], "topic": (topic_idx, [f"txn-topic-{i}" for i in range(4)]),
            "partition": pr_part.astype(np.int32), "lso_gap": gap, "high_watermark": hw,
            "last_stable_offset": hw - gap}), out)
        # --- consensus (ZooKeeper): elections bump the epoch; followers report zxid 0 at the first poll after
        nz = shape.zk_servers
        cs: dict[str, list[Any]] = {k: [] for k in ("time", "kind", "server", "serving", "mode", "zxid",
                                                     "zxid_epoch", "zxid_counter", "lag_behind_leader",
                                                     "latency_avg_ms", "latency_max_ms", "outstanding_requests",
                                                     "connections", "znode_count", "learners", "synced_followers")}
        pending = [e for e in m.zk_elections if m.start + day * DAY <= e < m.start + (day + 1) * DAY]
        first_after = False
        for i in range(n):
            ti = float(t[i])
            zk_counter += int(rng.integers(*ZK_WRITES_PER_POLL))  # ~2 writes/s at a 30 s poll
            if pending and ti >= pending[0]:
                pending.pop(0)
                zk_epoch += 1
                zk_counter = int(rng.integers(*ZK_COUNTER_AFTER_ELECTION))
                leader = (leader + 1) % nz
                first_after = True
            for z in range(nz):
                is_leader = z == leader
                zero = first_after and not is_leader
                behind = 0 if (is_leader or zero or rng.random() > 0.01) else int(rng.integers(1, 20))
                c = 0 if zero else max(0, zk_counter - behind)
                e = 0 if zero else zk_epoch
                cs["time"].append(ti)
                cs["kind"].append("zookeeper")
                cs["server"].append(f"zk-{z + 1}.example:2181")
                cs["serving"].append(True)
                cs["mode"].append("leader" if is_leader else "follower")
                cs["zxid"].append((e << 32) | c)
                cs["zxid_epoch"].append(e)
                cs["zxid_counter"].append(c)
                cs["lag_behind_leader"].append(None if (is_leader or zero) else behind)
                cs["latency_avg_ms"].append(0.4)
                cs["latency_max_ms"].append(float(rng.integers(1, 30)))
                cs["outstanding_requests"].append(0)
                cs["connections"].append(40)
                cs["znode_count"].append(20_000)
                cs["learners"].append(nz - 1 if is_leader else None)
                cs["synced_followers"].append(nz - 1 if is_leader else None)
            first_after = False
        write(root, "consensus", label, table("consensus", len(cs["time"]), cs), out)
        if progress:
            progress(f"day {day + 1}/7 ({label}) written, {time.monotonic() - started:.0f}s")
    _alerts(root, m, out)
    _incident_events(root, m, out)
    out.seconds = time.monotonic() - started
    return out


def _alerts(root: Path, m: Week, out: Written) -> None:
    """Open/resolve events of the incidents above (the rules' view), written per day of the event."""
    ev: list[tuple[float, str, str, str, str, float, float | None]] = []  # time, event, rule, sev, subject, first, res

    def pair(rule: str, sev: str, subject: str, first: float, resolved: float) -> None:
        ev.append((first, "open", rule, sev, subject, first, None))
        ev.append((resolved, "resolve", rule, sev, subject, first, resolved))

    iv = m.s.interval_s
    for b, crash, back in m.outages:
        pair("broker_down", "critical", f"broker-{b}", crash + 30, back + iv)
    pair("under_min_isr", "critical", "topic-000-3", m.outages[2][1] + 30, m.outages[2][2] + iv)
    for g, s0, dur in m.stalls:
        pair("consumer_lag_status", "critical", f"group-{g:04d}", s0 + 300, s0 + dur + iv)
    g, s0, dur = m.retention_loss
    pair("retention_data_loss", "critical", f"group-{g:04d}", s0 + iv, s0 + dur + iv)
    p, s0, dur = m.stuck
    pair("stuck_transaction", "critical", f"txn-{p:02d}", s0 + 90, s0 + dur + iv)
    h0, hdur = m.hanging
    pair("hanging_transaction", "critical", "txn-topic-0-3", h0 + 2 * iv, h0 + hdur + iv)
    for e in m.zk_elections:
        pair("zk_leader_election", "info", CLUSTER, e + iv, e + 600 + iv)
    ev.sort()
    by_day: dict[str, list[Any]] = {}
    for row in ev:
        by_day.setdefault(datetime.fromtimestamp(row[0], UTC).date().isoformat(), []).append(row)
    for day, rows in by_day.items():
        write(root, "alert_events", day, table("alert_events", len(rows), {
            "time": [r[0] for r in rows], "event": [r[1] for r in rows], "rule": [r[2] for r in rows],
            "severity": [r[3] for r in rows], "subject": [r[4] for r in rows],
            "summary": [f"{r[2]} {r[4]}" for r in rows],
            "first_seen": [r[5] for r in rows], "last_seen": [r[6] or r[0] for r in rows],
            "resolved_at": [r[6] for r in rows], "value": [None] * len(rows)}), out)


def _incident_events(root: Path, m: Week, out: Written) -> None:
    """The incidents' events, as `collectors.outputs.history` writes them (the incident's state after each)."""
    rows: list[dict[str, Any]] = []
    for inc in m.incidents():
        opened = inc["events"][0][0]
        for time_, event, sev in inc["events"]:
            rows.append({"time": time_, "event": event, "id": inc["id"], "kind": inc["kind"],
                         "subject": inc["subject"], "severity": sev, "summary": f"{inc['kind']} {inc['subject']}",
                         "opened": opened, "resolved_at": time_ if event == "resolved" else None,
                         "alerts": inc.get("alerts", 1), "members": json.dumps({inc["kind"]: inc.get("alerts", 1)}),
                         "brokers": inc.get("brokers", []), "partitions": inc.get("partitions"),
                         "consequences": []})
    rows.sort(key=lambda r: r["time"])
    by_day: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        by_day.setdefault(datetime.fromtimestamp(r["time"], UTC).date().isoformat(), []).append(r)
    names = [f.name for f in TABLES["incident_events"] if f.name not in ("cluster", "schema_version")]
    for day, rs in by_day.items():
        write(root, "incident_events", day, table("incident_events", len(rs),
                                                  {n: [r.get(n) for r in rs] for n in names}), out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dir", type=Path)
    ap.add_argument("--week", default="2026-W40")
    ap.add_argument("--interval", type=float, default=30.0)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--partitions", type=int, default=5000,
                    help="partitions in the cluster, a multiple of 25 and at least 5000 (the default): "
                         "topics and groups scale with it")
    ap.add_argument("--old-days", type=int, default=0,
                    help="write the first N days as before schema version 4 (float64 epoch seconds)")
    a = ap.parse_args()
    try:
        shape = Shape.scaled(a.partitions, interval_s=a.interval, seed=a.seed)
    except ValueError as e:
        ap.error(f"--partitions: {e}")
    w = generate(a.dir, a.week, shape, progress=print, old_days=a.old_days)
    print(f"{sum(w.rows.values()):,} rows in {w.files} files, {w.bytes / 1e6:.0f} MB, {w.seconds:.0f}s")
    for k, v in sorted(w.rows.items()):
        print(f"  {k:18s} {v:>12,}")


if __name__ == "__main__":
    main()
