"""`HistoryWriter`: buffer a poll's rows, flush them as whole files, one collector at a root (the lease); past days'
compaction and retention are its `DayMaintenance` (`collectors.outputs.history.maintenance`).

See the package docstring (`collectors.outputs.history`) for the layout and the guarantees.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from collectors.model.poll import IncidentEvent, PollResult
from collectors.model.records import AlertRecord, ClusterSnapshot
from collectors.model.wording import plural
from collectors.outputs.history.files import ensure_dir, new_name, publish_file
from collectors.outputs.history.lease import Holder, WriterLease, read_holder
from collectors.outputs.history.loss_rows import (
    KEPT_KINDS,
    LOSS_TABLE,
    Kept,
    Looks,
    read_recorded,
    unrecorded_error,
    warn_unrecorded,
)
from collectors.outputs.history.maintenance import CompactionError, DayMaintenance
from collectors.outputs.history.rows import event_columns, snapshot_columns, split_by_date, to_batch
from collectors.outputs.history.schema import (
    COMPRESSION,
    DATE_PREFIX,
    DEFAULT_MAX_BUFFER_ROWS,
    HISTORY_SCHEMA_VERSION,
    TABLES,
)

log = logging.getLogger(__name__)

__all__ = ["CompactionError", "HistoryWriter"]  # CompactionError: its home before `maintenance`

WRITE, STANDBY, WAIT = "write", "standby", "wait"
"""What a flush may do (`HistoryWriter._lease_state`)."""


@dataclass(slots=True)
class _Chunk:
    table: str
    date: str
    batch: pa.RecordBatch
    polled: float
    """The time of the poll the rows came from (`ClusterSnapshot.time`)."""


NEVER_DROPPED = (LOSS_TABLE, KEPT_KINDS)
"""Buffered rows the memory bound never drops: the loss ledger's of `KEPT_KINDS` (a row or two a leader
change, and one for each group that had read past its truncation; the only record of the loss once the
checkpoint moved past it, which waits for them: `collectors.runtime.sinks.HistorySink.unwritten_losses`). A
poll's chunk of that table holding one is kept whole. Every other row, retention skips among them (one each time a
group-partition's loss grows), is dropped oldest first."""


FLUSH_FAILED = "history flush failed: "


def _flush_error(errors: list[str]) -> str:
    """`last_error` of a flush whose writes of `errors` (one a table and day) failed."""
    return f"{FLUSH_FAILED}{errors[0]}" + (f" (and {len(errors) - 1} more)" if len(errors) > 1 else "")


def _never_dropped(chunk: _Chunk) -> bool:
    table, kinds = NEVER_DROPPED
    return chunk.table == table and any(k in kinds for k in chunk.batch.column("kind").to_pylist())


def _kept_row(r: dict[str, Any]) -> bool:
    return r["kind"] in NEVER_DROPPED[1]


def _kept(chunk: _Chunk) -> Kept:
    return chunk.batch.column("cluster")[0].as_py(), chunk.polled


TakeoverHook = Callable[["HistoryWriter", Holder, bool], None]
"""`on_takeover(writer, last_holder, watched)`: see `HistoryWriter`."""


class HistoryWriter(DayMaintenance):
    """Buffers poll results as Arrow batches and writes them as Parquet files atomically (see module doc).

    Never raises from `add`, `flush`, `maybe_flush` or `close` on I/O trouble: the error is kept in
    `last_error` (None again after the next fully successful flush) for the caller to turn into an alert.
    """

    def __init__(self, root: Path, flush_interval_s: float = 60, partition_detail: bool = False,
                 retention_days: int | None = 30, compact_min_files: int = 10,
                 clock: Callable[[], float] = time.time, max_buffer_rows: int = DEFAULT_MAX_BUFFER_ROWS,
                 maintenance_interval_s: float = 3600, thresholds: str | None = None, exclusive: bool = False,
                 clusters: Sequence[str] = (), on_takeover: TakeoverHook | None = None,
                 background_maintenance: bool = False) -> None:
        """`background_maintenance`: run the hourly retention and compaction (`maintain`) on a thread of its own,
        as the collector does. Compacting yesterday takes seconds to minutes on a big fleet (every table's day of
        minute flushes merged), and run inside `maybe_flush` it held up the poll that called it, and /metrics with
        it. Past days never share a file with today's flushes, and a late file flushed into a day being compacted
        is not among the files it merges, so it stays live.

        `thresholds`: the alert thresholds in force, as JSON text, recorded with every poll's cluster row so
        that the weekly report judges history by what the collector used, not by defaults of its own.

        `exclusive`: write only while holding the root's lease (`lease.WriterLease`), as the collector does; a
        writer that finds it held stands by (`standby_of`), drops its rows (the holder writes the same polls)
        and takes over when the holder stops. It keeps its ledger rows of `KEPT_KINDS` until the history holds
        the same loss (`loss_rows.covers`), and writes those it still keeps at a takeover. `clusters` are the
        clusters this writer's rows are of: when the holder does not write them all, the standby reports it in
        `last_error` (their rows are written by nobody).
        `on_takeover(writer, last_holder, watched)` is called whenever this writer takes a lease another collector
        held before (the lease file names it), before any buffered row is written (so at the start, too: the
        constructor takes a free lease). `watched`: this one stood by while it wrote (an HA pair, a deploy's
        overlap); False: it had stopped before (a restart). The collector carries on the incidents and alerts the
        history leaves open there (`drop_buffered`)."""
        self.root = Path(root)
        self.clusters = tuple(clusters)
        self._lease = WriterLease(self.root, self.clusters) if exclusive else None
        self.standby_of: Holder | None = None
        """While another collector holds the root's lease: who, as its lease file says."""
        self.on_takeover = on_takeover
        self.thresholds = thresholds
        self.flush_interval_s = float(flush_interval_s)
        self.partition_detail = partition_detail
        self.retention_days = retention_days
        self.compact_min_files = max(2, int(compact_min_files))
        self.clock = clock
        self.max_buffer_rows = max(1, int(max_buffer_rows))
        self.maintenance_interval_s = maintenance_interval_s
        self.last_error: str | None = None
        self.last_error_at: float | None = None
        self.last_maintenance_error: str | None = None
        self.dropped_rows = 0
        self.flush_failures = 0
        self.rows_written = 0
        self.files_written = 0
        self.bytes_written = 0
        self._chunks: list[_Chunk] = []
        self._looks = Looks()  # a standby's looks at the history for the losses it keeps (`_forget_recorded`)
        self._buffered = 0
        self._failing = False
        self._failed: dict[tuple[str, str], str] = {}  # (table, day) -> why its last write failed (`_write_chunks`)
        self._lock = threading.RLock()
        self._last_flush = clock()
        self._last_maintenance = -math.inf
        self.background_maintenance = background_maintenance
        self._maintenance: threading.Thread | None = None
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            if self._lease is None:
                self.recover()
        except OSError as e:
            self._record_error(f"history root {self.root}: {e}")
        if self._lease is not None:
            self._lease_state()  # take it now (and recover) if free; else stand by from the start

    # ----- buffering

    @property
    def sole_writer(self) -> bool:
        """This writer holds the root's lease by its lock: no other collector writes the root meanwhile, so a
        cluster of the history it does not poll is polled by nobody writing here."""
        return self._lease is not None and self._lease.locked

    @property
    def buffered_rows(self) -> int:
        return self._buffered

    def add(self, result: PollResult) -> None:
        """Buffer one `PollResult` (snapshot + newly opened + newly resolved alerts + incident events)."""
        self.add_snapshot(result.snapshot, result.opened, result.resolved, result.incident_events, result.restated,
                          result.lost)

    def add_snapshot(self, snapshot: ClusterSnapshot, opened: Sequence[AlertRecord] = (),
                     resolved: Sequence[AlertRecord] = (), incident_events: Sequence[IncidentEvent] = (),
                     restated: Sequence[AlertRecord] = (), lost: Sequence[AlertRecord] = ()) -> None:
        self._buffer(lambda: snapshot_columns(snapshot, opened, resolved, self.partition_detail, incident_events,
                                              self.thresholds, restated, lost),
                     getattr(snapshot, "cluster", "?"), snapshot.time, "snapshot")

    def add_events(self, cluster: str, incident_events: Sequence[IncidentEvent] = (),
                   lost: Sequence[AlertRecord] = ()) -> None:
        """Buffer events of `cluster` that no poll of ours brings: the ``lost`` ends of what the history left open
        of a cluster this collector does not poll (each row at its own time)."""
        if incident_events or lost:
            now = self.clock()
            self._buffer(lambda: event_columns(now, incident_events=incident_events, lost=lost), cluster, now,
                         "events")

    def _buffer(self, columns: Callable[[], dict[str, dict[str, list[Any]]]], cluster: str, t: float,
                what: str) -> None:
        """Buffer the rows of one poll at `t` (or of events of `cluster` at their own times), split by date."""
        try:
            chunks = []
            for table, cols in columns().items():
                batch = to_batch(table, cols, cluster, t)
                chunks.extend(_Chunk(table, d, b, t) for d, b in split_by_date(batch))
        except Exception as e:  # a record the schema cannot hold is a bug; it must not stop the poll loop
            log.exception("history: cannot convert the %s of %s", what, cluster)
            self._record_error(f"cannot convert {what}: {type(e).__name__}: {e}")
            return
        with self._lock:
            self._chunks.extend(chunks)
            self._buffered += sum(c.batch.num_rows for c in chunks)
            if self._buffered > self.max_buffer_rows:
                if not self._failing:
                    self.flush()
                self._enforce_bound()

    def _enforce_bound(self) -> None:
        """Drop the oldest rows past `max_buffer_rows`, except `NEVER_DROPPED`."""
        i = 0
        while self._buffered > self.max_buffer_rows and i < len(self._chunks):
            if _never_dropped(self._chunks[i]):
                i += 1
                continue
            oldest = self._chunks.pop(i)
            self._buffered -= oldest.batch.num_rows
            self.dropped_rows += oldest.batch.num_rows
            log.warning("history: buffer full after failed flushes; dropped %d %s rows of %s",
                        oldest.batch.num_rows, oldest.table, oldest.date)

    def buffered_never_dropped(self) -> bool:
        """Whether rows of `NEVER_DROPPED` wait for a flush (`unwritten_loss_clusters`, of any cluster)."""
        return bool(self.unwritten_loss_clusters())

    def _record_error(self, message: str) -> None:
        self.last_error = message
        self.last_error_at = self.clock()

    # ----- flushing

    def maybe_flush(self, now: float | None = None) -> bool:
        """Flush when `flush_interval_s` has passed since the last flush; also runs maintenance hourly.

        Returns False only when a flush was due and failed.
        """
        now = self.clock() if now is None else now
        ok = True
        if now - self._last_flush >= self.flush_interval_s:
            ok = self.flush()
        if now - self._last_maintenance >= self.maintenance_interval_s and not self.maintaining:
            self._last_maintenance = now
            if self.background_maintenance:
                self._maintenance = threading.Thread(target=self.maintain, args=(now,), daemon=True,
                                                     name="history-maintenance")
                self._maintenance.start()
            else:
                self.maintain(now)
        return ok

    @property
    def maintaining(self) -> bool:
        """A background `maintain` is running."""
        return self._maintenance is not None and self._maintenance.is_alive()

    def wait_maintenance(self, timeout: float | None = None) -> bool:
        """Wait for a background `maintain` to end; True when none runs (any more)."""
        if self._maintenance is not None:
            self._maintenance.join(timeout)
        return not self.maintaining

    def _lease_state(self) -> str:
        """WRITE (no lease asked for, or held: taken now if it was free), STANDBY (another collector holds it) or
        WAIT (the lease file cannot be opened: rows stay buffered, as for a failed flush)."""
        lease = self._lease
        if lease is None or lease.held:
            return WRITE
        before = read_holder(self.root)  # the last holder's account, before taking the lease rewrites it
        try:
            taken = lease.acquire()
        except OSError as e:
            self._record_error(f"history root {self.root}: cannot take the writer lease: {e}")
            return WAIT
        if not taken:
            self._stand_by(before)
            return STANDBY
        before = lease.previous if lease.locked else before  # what it recorded as it stopped, too
        watched, self.standby_of = self.standby_of is not None, None
        if watched:
            log.info("history: the collector writing %s (%s) stopped; this one writes it from now on", self.root,
                     before.describe())
            self.last_error = None
        if before.writes(self.clusters):  # rows of clusters it did not write are nobody's but ours: keep them
            self._skip_written(before)
        self._forget_recorded()
        if before.pid is not None and self.on_takeover is not None:
            try:
                self.on_takeover(self, before, watched)
            except Exception:  # a failing hand-over must not stop the history
                log.exception("history: taking over %s: the hand-over failed", self.root)
        try:  # only the holder may delete temp files: a live writer's are not leftovers
            self.recover()
        except OSError as e:
            log.warning("history: cleaning up %s after taking its lease failed: %s", self.root, e)
        return WRITE

    def _skip_written(self, before: Holder) -> None:
        """Taking over: drop the buffered rows of polls the last holder's files already cover.

        The standby kept the polls since its last flush; the holder wrote its own polls of the same clusters up
        to `flushed_until` (its final flush, when it stopped cleanly). Without this the takeover wrote up to one
        flush interval of polls twice. Our ledger rows of `KEPT_KINDS` of those polls stay, for
        `_forget_recorded` to judge: having written a poll is not having recorded the loss (its leader may not
        have answered yet, or it began watching the partition after the leader change)."""
        until = before.flushed_until
        if until is None:
            return  # an older writer's, or none recorded: keep them all
        dropped = self._filter(LOSS_TABLE, _kept_row, only=lambda c: c.polled <= until)
        dropped += self._keep(lambda c: c.polled > until or _never_dropped(c))
        if dropped:
            log.info("history: %d buffered rows of polls up to %s were written by the last holder; not again",
                     dropped, datetime.fromtimestamp(until, UTC).isoformat(timespec="seconds"))

    def _forget_recorded(self, holder: Holder | None = None) -> int | None:
        """Drop our buffered ledger rows of `KEPT_KINDS` whose loss the history holds (`loss_rows.covers`);
        returns how many, None when the history could not be read (they are kept: a loss twice rather than none).

        A standby (`holder`: the one it stands by) keeps them until the holder records the same loss
        (`_stand_by`); taking over (None), those it still keeps were written by nobody, unless the holder wrote its
        own and stopped before our last look: written again, the weekly report counted the loss twice."""
        if holder is None:
            self._looks.forget()
        kept = [_kept(c) for c in self._loss_chunks()]
        if not kept:
            return 0
        until = None if holder is None else holder.flushed_until
        try:
            recorded = read_recorded(self.root, [k[0] for k in kept], self._looks.start(kept))
        except Exception as e:  # a damaged file, say
            log.warning("history: could not read the losses %s holds, to leave out those recorded already: %s",
                        self.root, e)
            return None
        self._looks.done(kept, until)
        dropped = self._filter(LOSS_TABLE, lambda r: not recorded(r))
        if dropped and holder is None:
            log.info("history: %s the last holder recorded already; not again", plural(dropped, "buffered loss"))
        return dropped

    def drop_buffered(self, table: str, drop: Callable[[dict[str, Any]], bool]) -> int:
        """Drop the buffered rows of `table` that `drop` says yes to, each given as a dict (time columns as
        datetimes); returns how many. For rows no longer true: at a takeover, our own events of incidents and
        alert episodes given up for the ones the history holds. Meant for the small event tables."""
        with self._lock:
            return self._filter(table, lambda r: not drop(r))

    def _filter(self, table: str, keep: Callable[[dict[str, Any]], bool],
                only: Callable[[_Chunk], bool] = lambda c: True) -> int:
        """Keep the buffered rows of `table` (of the chunks `only` says yes to) that `keep` says yes to, each given
        as a dict; returns the rows dropped. Call with the lock held."""
        for i, c in enumerate(self._chunks):
            if c.table == table and only(c):
                mask = pa.array([keep(r) for r in c.batch.to_pylist()], pa.bool_())
                self._chunks[i] = _Chunk(c.table, c.date, c.batch.filter(mask), c.polled)
        return self._keep(lambda c: c.batch.num_rows > 0)  # counts the rows filtered out above too

    def _keep(self, keep: Callable[[_Chunk], bool]) -> int:
        """Keep the buffered chunks `keep` says yes to; returns the rows dropped. Call with the lock held."""
        kept = [c for c in self._chunks if keep(c)]
        dropped = self._buffered - sum(c.batch.num_rows for c in kept)
        self._chunks, self._buffered = kept, self._buffered - dropped
        return dropped

    def _stand_by(self, holder: Holder) -> None:
        """Another collector writes the root: drop the buffered rows (it polled the same clusters) and say so.

        Except our ledger rows of `KEPT_KINDS` whose loss the history does not hold yet (`_forget_recorded`):
        should the holder's write of it fail and the holder stop, or should it not record the loss at all (it
        began watching the partition after the leader change, had not seen a group's commit past the cut, or does
        not poll the cluster), the loss would be
        recorded by nobody, and our checkpoint, which waits for those rows
        (`collectors.runtime.sinks.HistorySink.unwritten_losses`), would move past it. A row or two a leader
        change; written if this one takes over first."""
        if holder != self.standby_of:
            log.info("history: %s is written by another collector (%s; clusters %s); this one stands by and takes "
                     "over when it stops", self.root, holder.describe(),
                     ", ".join(holder.clusters) if holder.clusters is not None else "unknown")
            self._looks.forget()
        self.standby_of = holder
        self._failing = False  # nothing of ours fails to be written: past the bound, `_buffer` drops as a standby
        self._keep(_never_dropped)
        overdue: list[Kept] = []
        looked = True
        if self._chunks:
            self._filter(LOSS_TABLE, _kept_row)  # the rest of those polls: the holder's to write
            if looked := self._forget_recorded(holder) is not None:  # those the holder is late with, said once
                kept = {_kept(c): c.batch.column("evidence").to_pylist() for c in self._loss_chunks()}
                overdue = warn_unrecorded(self.root, holder, self._looks, kept)
        if holder.writes(self.clusters):
            if looked:  # else the history could not be read: the last verdict stands
                self.last_error = None
            if overdue:  # the only record of those losses is ours: the monitor says so (`history_write_failed`)
                self._record_error(unrecorded_error(self.root, holder, overdue))
            return
        missing = [c for c in self.clusters if holder.clusters is None or c not in holder.clusters]
        self._record_error(
            f"history root {self.root} is written by another collector ({holder.describe()}) whose clusters "
            f"({', '.join(holder.clusters) if holder.clusters is not None else 'unknown'}) do not include "
            f"{', '.join(missing) or 'these'}: their rows are not written. Give each collector a history root "
            "of its own, or poll those clusters from the one that writes it")

    def unwritten_loss_clusters(self) -> set[str]:
        """The clusters whose buffered rows hold `NEVER_DROPPED` rows (not written yet, or kept by a standby)."""
        with self._lock:
            return {_kept(c)[0] for c in self._loss_chunks()}

    def _loss_chunks(self) -> list[_Chunk]:
        """The buffered chunks of `NEVER_DROPPED`. Call with the lock held."""
        return [c for c in self._chunks if _never_dropped(c)]

    def flush(self) -> bool:
        """Write every buffered row: one new file per table and date. True when all were written.

        A standby (another collector holds the root's lease) drops the rows instead, but for its record of losses
        the history does not hold yet (`_stand_by`), and returns True."""
        with self._lock:
            self._last_flush = self.clock()
            state = self._lease_state()
            if state == STANDBY:
                return True
            if state == WAIT:
                self.flush_failures += 1
                self._failing = True
                self._enforce_bound()
                return False
            return self._write_chunks(self._chunks)

    def flush_losses(self) -> bool:
        """Write the buffered rows of `NEVER_DROPPED` alone: a few rows, retried every poll while a checkpoint waits
        for them (`collectors.runtime.sinks.HistorySink.unwritten_losses`) and the full flush for its interval.
        True when none waits. A standby's wait for the history to hold them (`_stand_by`) is not shortened."""
        with self._lock:
            losses = self._loss_chunks()
            if not losses or (self._lease is not None and not self._lease.held):
                return not losses
            return self._write_chunks(losses, logging.DEBUG)  # the flushes log, at their interval

    def _write_chunks(self, chunks: list[_Chunk], level: int = logging.ERROR) -> bool:
        """Write `chunks` of the buffer, one new file per table and date; True when all were written. Call with the
        lock held. A failure is logged at `level`. `last_error` names the tables and days whose rows still wait
        after a failed write (`_failed`), and is gone when none do: the buffer written empty, or a part of it
        written (`flush_losses`) leaving only rows whose write has not failed."""
        groups: dict[tuple[str, str], list[_Chunk]] = defaultdict(list)
        for c in chunks:
            groups[(c.table, c.date)].append(c)
        errors: list[str] = []  # as logged, with the files named
        failed: dict[tuple[str, str], str] = {}
        written: set[int] = set()
        for (table, day), group in groups.items():
            try:
                self._write(table, day, [c.batch for c in group])
            except Exception as e:  # OSError above all (disk full, read-only); never crash the poll loop
                if not isinstance(e, OSError):
                    log.exception("history: unexpected error writing %s/%s", table, day)
                errors.append(f"{table}/{DATE_PREFIX}{day}: {type(e).__name__}: {e}")
                # the same text at every retry (a temp file's name is new each time): logged once a change
                why = e.strerror if isinstance(e, OSError) and e.strerror else e
                failed[(table, day)] = f"{table}/{DATE_PREFIX}{day}: {type(e).__name__}: {why}"
                continue
            written.update(id(c) for c in group)
        if written:
            if self._lease is not None:  # what a standby taking over need not write again
                self._record_flushed(written)
            self._keep(lambda c: id(c) not in written)
        if errors:
            self.flush_failures += 1
            self._failing = True
            log.log(level, "history: flush failed for %d of %d files; %d rows kept: %s", len(errors), len(groups),
                    self._buffered, "; ".join(errors[:3]))
            self._enforce_bound()
        # every table and day whose last write failed, in the order they first failed (the text stays the same
        # whichever of `flush` and `flush_losses` failed last), but those written whole since: one written in part
        # (the ledger's rows of a loss without an earlier poll's loss rows) stays failed, and so does one whose rows
        # the memory bound dropped, until a write of it succeeds or the buffer is written empty
        waiting = {(c.table, c.date) for c in self._chunks}
        for k in groups:
            if k not in failed and k not in waiting:
                self._failed.pop(k, None)
        self._failed.update(failed)
        if errors:
            self._record_error(_flush_error(list(self._failed.values())))
        elif not self._chunks:  # all written: nothing fails any more, dropped rows' tables included
            self._failed.clear()
            self._failing = False
            self.last_error = None
        else:  # a part written (`flush_losses`): failing while a table and day whose write failed still waits
            self._failing = bool(self._failed)
            if self.last_error is not None and self.last_error.startswith(FLUSH_FAILED):
                self.last_error = _flush_error(list(self._failed.values())) if self._failed else None
        return not errors

    def _record_flushed(self, written: set[int]) -> None:
        """Record in the lease file the latest poll every buffered row up to which is written now. Not one of a
        poll some table of which failed: a standby taking over skips its own rows of the polls recorded, and would
        leave that table's rows of it out (the chunks of `written` are given by id)."""
        assert self._lease is not None
        left = min((c.polled for c in self._chunks if id(c) not in written), default=math.inf)
        done = [c.polled for c in self._chunks if id(c) in written and c.polled < left]
        if done:
            self._lease.record_flushed(max(done))

    def _write(self, table: str, day: str, batches: list[pa.RecordBatch]) -> None:
        directory = self.root / table / f"{DATE_PREFIX}{day}"
        ensure_dir(directory)
        data = pa.Table.from_batches(batches, schema=TABLES[table]).replace_schema_metadata(
            {"kmon.table": table, "kmon.history_schema_version": str(HISTORY_SCHEMA_VERSION)})
        size = publish_file(directory, new_name("part"),
                        lambda f: pq.write_table(data, f, compression=COMPRESSION))
        self.rows_written += data.num_rows
        self.files_written += 1
        self.bytes_written += size

    def close(self) -> bool:
        """Flush, then give up the root's lease (a standby takes over at its next flush), once a background
        compaction has ended: the next holder must not compact the same day beside it."""
        if self.maintaining:
            log.info("history: waiting for the maintenance under way to end before giving up the root")
            self.wait_maintenance()
        ok = self.flush()
        if self._lease is not None:
            self._lease.release()
        if unwritten := self.unwritten_loss_clusters():
            log.warning("history: stopping with the record of a loss in %s not in %s; the checkpoint of %s was held "
                        "back, so the next run finds it again (from a checkpoint up to a week old)",
                        ", ".join(sorted(unwritten)), self.root, ", ".join(sorted(unwritten)))
        return ok

    def maintain(self, now: float | None = None) -> None:
        """Retention, then compaction of finished days; errors are logged and kept in last_maintenance_error.

        Only the lease's holder maintains the root (a standby's compaction would race the holder's)."""
        if self._lease is not None and not self._lease.held:
            return
        try:
            self.apply_retention(now)
            self.maybe_compact(now)
            self.last_maintenance_error = None
        except Exception as e:
            log.exception("history: maintenance failed")
            self.last_maintenance_error = f"{type(e).__name__}: {e}"
