"""What the poll loop feeds after every poll: /metrics, the Parquet history, the latest state files.

Each output is a callable `sink(results, now)` with an optional `close()`.
A failing output is logged by the loop and never stops polling; a history
that cannot be written shows up as `kafka_monitor_history_write_errors` and a
`history_write_failed` alert rather than a crash, and failing retention or compaction as a
`history_maintenance_failed` alert.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Collection, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from collectors.alerting.catalogue import RISK_RULES, stale_kinds
from collectors.alerting.rules import Candidate
from collectors.config import HistoryConfig, MonitorConfig, Thresholds
from collectors.model.poll import PollResult
from collectors.model.records import AlertRecord, IncidentRecord, snapshot_to_dict
from collectors.model.vocabulary import EPOCH_LOSSES
from collectors.model.wording import count_of, plural
from collectors.outputs.api import JsonApi
from collectors.outputs.exceptions import DEFAULT_LIMIT
from collectors.outputs.exporter import MetricsEndpoint, MetricsServer

if TYPE_CHECKING:
    from collectors.outputs.history import HistoryWriter
    from collectors.outputs.history.lease import Holder
    from collectors.runtime.poller import Monitor

log = logging.getLogger(__name__)


def _left_open(n: int) -> str:
    """``1 incident or alert``, ``3 incidents and alerts``: what a history left open, counted together."""
    return plural(n, "incident or alert", "incidents and alerts")


class Sink(Protocol):
    """Called after every poll with its results; a sink may also have ``close()``."""

    def __call__(self, results: list[PollResult], now: float) -> None: ...


class ExporterSink:
    """/metrics and the JSON API, both answered from the last poll's snapshots on one port; given the `monitor`, the
    API's ``?all=1`` also lists the incidents its pollers resolved within the hold-down (never /metrics)."""

    def __init__(self, host: str, port: int, granularity: str = "exceptions", owner_labels: bool = False,
                 monitor: Monitor | None = None, exceptions_limit: int = DEFAULT_LIMIT) -> None:
        self.endpoint = MetricsEndpoint(owner_labels=owner_labels, granularity=granularity,
                                        exceptions_limit=exceptions_limit, stale_kinds=stale_kinds())
        self.api = JsonApi(RISK_RULES)
        self.monitor = monitor
        self.server = MetricsServer(self.endpoint, host, port, self.api).start()

    def __call__(self, results: list[PollResult], now: float) -> None:
        snapshots = [r.snapshot for r in results]
        self.endpoint.update(snapshots)
        self.api.update(snapshots, self.monitor.resolved_incidents() if self.monitor is not None else None)

    def close(self) -> None:
        self.server.close()


# `EPOCH_LOSSES` (`collectors.model.vocabulary`): loss the poller proves from its checkpointed epoch watches, with
# the rows of the groups that had read past a truncation, recorded at the same poll. A
# collector killed after writing such a row and before its next checkpoint would resume the watch from before the
# leader change and record the same loss again; one killed before writing it would find it again. So a poll that
# records one flushes its history rows at once and the checkpoint follows it (`proved_epoch_loss`): killed between
# the two, at worst the row is there twice; killed before, the next run records it once. While that flush fails,
# the cluster's checkpoint is held back (`HistorySink.unwritten_losses`), so the next run still finds the loss.


def proved_epoch_loss(results: Sequence[PollResult]) -> set[str]:
    """The clusters whose poll proved a loss of `EPOCH_LOSSES`."""
    return {r.snapshot.cluster for r in results if any(x.kind in EPOCH_LOSSES for x in r.snapshot.losses)}


def counted_epoch_rise(results: Sequence[PollResult]) -> set[str]:
    """The clusters whose poll counted a producer's epoch rise on a Transaction V2 cluster
    (`TransactionRecord.epoch_rise_time` is the poll's time). Resumed from a checkpoint saved before it, the
    collector would count the rise again at its next poll, a new time the Prometheus twin counts as a second rise;
    saved before the exporter shows the rise (`RiseCheckpointSink`), it resumes past it."""
    return {r.snapshot.cluster for r in results if any(t.epoch_rise_time == r.snapshot.time
                                                        for t in r.snapshot.transactions)}


class HistorySink:
    UNPOLLED_RETRY_S = 600.0
    """After the read of what clusters nobody polls left open failed, the wait before the next (`_lose_unpolled`):
    not every poll, each a warning and a read of two days of event files."""

    def __init__(self, cfg: HistoryConfig, exporter: ExporterSink | None, monitor: Monitor | None = None,
                 thresholds: Thresholds | None = None, clusters: Sequence[str] = (),
                 carry_max_age_s: float = 3600.0, clock: Callable[[], float] = time.time) -> None:
        """`clusters`: the names this collector polls; the root's writer lease is taken for them (one collector
        writes a root at a time: `collectors.outputs.history.lease`). `carry_max_age_s`: a collector that starts
        after the last one stopped carries on the incidents it left open only if it wrote this recently (the
        collector passes `checkpoint_max_age_s`, for the same reason: an older incident resolved at our first poll
        would span the whole time nobody watched). `clock`: the clock the collector polls with (the sandbox demo's
        runs fast), against which that age is measured."""
        from collectors.outputs.history import HistoryWriter

        self.exporter = exporter
        self.monitor = monitor
        self.carry_max_age_s = carry_max_age_s
        self.clock = clock
        self._unpolled: dict[str, float] = {}
        """Clusters of the history that no collector writing it polls now -> their last poll (`_lose_unpolled`)."""
        self._unpolled_retry_at = -math.inf  # poll clock: after a read of theirs failed, not before then
        self._said_error: str | None = None  # the writer's error as last logged (`__call__`)
        self.unwritten_losses: set[str] = set()
        """Clusters whose poll proved a loss of `EPOCH_LOSSES` while such rows wait in the writer's buffer (the
        forced flush failed): their checkpoints are held back until none waits (`CheckpointSink.held`). Saved past
        the loss, a collector killed before the rows are written would never record it; held back, it finds it
        again. The memory bound never drops those rows (`history.writer.NEVER_DROPPED`). A standby (another
        collector holds the root's lease) keeps them until the history holds the same loss, so its hold lasts until
        then, or until it takes over and writes them."""
        self.removed: set[str] = set()
        """Clusters of the history that no collector writing it polls now (taken out of the configuration), as found
        when the root was taken over: their latest-state files are retired (`LatestStateSink`). Only this root's:
        collectors of other clusters, whose files may share the state directory, write roots of their own."""
        self.writer = HistoryWriter(Path(cfg.root), flush_interval_s=cfg.flush_interval_s,
                                    partition_detail=cfg.partition_detail, retention_days=cfg.retention_days,
                                    compact_min_files=cfg.compact_min_files,
                                    thresholds=thresholds.model_dump_json() if thresholds is not None else None,
                                    exclusive=True, clusters=clusters, on_takeover=self._take_over,
                                    background_maintenance=True)

    def __call__(self, results: list[PollResult], now: float) -> None:
        proved = proved_epoch_loss(results)
        self.unwritten_losses |= proved  # first: should the sink fail below, the checkpoint does not pass the loss
        for r in results:
            self.writer.add(r)
        if self._unpolled:
            self._lose_unpolled(self.writer, now)
        if proved:
            self.writer.flush()  # its ledger rows durable before the checkpoint that moves past them (EPOCH_LOSSES)
        flushed = self.writer.maybe_flush()  # the writer times flushes on the wall clock; `now` may be simulated
        if self.unwritten_losses and not proved and flushed:  # after a failed forced flush: its ledger rows alone
            self.writer.flush_losses()  # every poll (not again right after a due flush that failed)
        self._release_written()
        error = self.writer.last_error
        if self.exporter is not None:
            self.exporter.endpoint.collector.history_error = error is not None
            self.exporter.endpoint.collector.history_standby = self.writer.standby_of is not None
        if self.monitor is not None:
            conditions = self.monitor.conditions
            conditions.pop("history_write_failed", None)
            if error is not None:
                conditions["history_write_failed"] = Candidate(
                    "history_write_failed", "warning", "history",
                    f"history not written: {error}" if self.writer.standby_of is not None else
                    f"history not written: {error} ({self.writer.buffered_rows} rows waiting, "
                    f"{self.writer.dropped_rows} dropped)")
            # Maintenance runs hourly on its own thread (started by maybe_flush); its error stands until the next run
            # succeeds, and shows from the poll after the run that failed.
            maintenance = self.writer.last_maintenance_error
            conditions.pop("history_maintenance_failed", None)
            if maintenance is not None:
                conditions["history_maintenance_failed"] = Candidate(
                    "history_maintenance_failed", "warning", "history",
                    f"history maintenance failed: {maintenance} (retried hourly; uncompacted days read slower, "
                    "days past the retention stay on disk)")
        said, self._said_error = self._said_error, error
        if error is not None and error != said:  # the same again every poll, possibly for days: said once a change
            if self.writer.standby_of is not None:
                log.error("history not written: %s", error)
            else:  # each failed flush is logged by the writer too, with the rows it keeps (its retries of a
                # proved loss's rows every poll at debug level)
                log.error("history: %s (rows kept in memory, %d dropped)", error, self.writer.dropped_rows)

    def _take_over(self, writer: HistoryWriter, last: Holder, watched: bool) -> None:
        """This collector now writes a history another one wrote: carry on the incidents and alerts left open.

        Decided per cluster (`left_open.carry_verdicts`): what the history left open of a cluster we poll is carried
        on if that cluster was polled within `carry_max_age_s` (any age when we stood by while the holder polled
        it: `watched`), and was the cluster we poll (by id). Our incidents and alerts of the same causes go on
        under the ids and first-seen times the history holds (opened once, resolved once in the weekly report); our
        buffered events of the ones given up are dropped. What is not carried on (polled too long ago, another
        cluster of the name) ends with a ``lost`` event at the last poll that saw it open: else the history kept it
        open for good. So does what is left open of a cluster of the history nobody polls any more (taken out of
        the configuration), when the lease's lock says no other collector writes the root."""
        if self.monitor is None:
            return
        from collectors.outputs.history.left_open import carry_verdicts, last_polls, open_alerts, open_incidents

        now = self.clock()
        # The two days up to the history's last write: a holder that stopped days ago left it open there.
        until = now if last.flushed_until is None else min(now, last.flushed_until)
        polls = last_polls(writer.root, None, until)
        why = carry_verdicts(writer.clusters, polls, last, watched, now, self.carry_max_age_s)
        fresh = [c for c, w in why.items() if w is None]
        same = self.monitor.expect_cluster_ids({c: polls[c] for c in fresh if c in polls})
        for c in fresh:
            if c not in same:
                why[c] = f"its last poll was of another cluster (id {polls[c].cluster_id})"
        for c, w in why.items():
            if w is not None:
                log.info("history: what %s left open of %s is not carried on: %s (the collector that wrote it "
                         "last: %s)", writer.root, c, w, last.describe())
        carried = [c for c, w in why.items() if w is None]
        lost = [c for c, w in why.items() if w is not None]
        if writer.sole_writer:  # else another collector may write them beside us
            ours = set(why) | {p.name for p in self.monitor.pollers}  # the lease's list may be empty (older callers)
            gone = {c: p.time for c, p in polls.items() if c not in ours}
            self._unpolled.update(gone)
            self.removed.update(gone)
        if why:  # one read of the event tables for the clusters carried on and those lost
            # and what the last holder resolved within the hold-down, for a standby that tracked it too
            since = until - max((p.thresholds.incident_hold_down_s for p in self.monitor.pollers), default=0.0)
            incidents = open_incidents(writer.root, list(why), until, resolved_since=since)
            alerts = open_alerts(writer.root, list(why), until, resolved_since=since)

            def of(clusters: list[str], resolved: bool = False) -> tuple[list[IncidentRecord], list[AlertRecord]]:
                return ([i for i in incidents if i.cluster in clusters and (resolved or i.resolved_at is None)],
                        [a for a in alerts if a.cluster in clusters and (resolved or a.resolved_at is None)])

            if carried:
                self._carry_on(writer, last, *of(carried, resolved=True))
                self._recall_losses(writer, carried, until)
            if lost:
                n = self.monitor.lose(*of(lost), {c: p.time for c, p in polls.items()})
                if n:
                    log.info("history: %s left open in %s and not carried on %s recorded as lost (ended unseen "
                             "after the last poll that saw them open)", _left_open(n), writer.root,
                             count_of(n, "is", "are"))
        self._lose_unpolled(writer, now)

    def _recall_losses(self, writer: HistoryWriter, clusters: list[str], until: float) -> None:
        """The losses the history recorded of the clusters carried on, in their pollers' memory: the loss alerts
        (`data_truncated`, `unclean_election`, ...) stay open `loss_alert_hold_s` after a loss, from memory only
        the checkpoint held; without it the first poll resolved them. A read that fails loses only that."""
        from collectors.model.snapshot import LOSS_MEMORY_S
        from collectors.outputs.history.left_open import recent_losses

        assert self.monitor is not None
        try:
            losses = recent_losses(writer.root, clusters, until, LOSS_MEMORY_S)
        except Exception as e:  # a damaged file, say: the takeover goes on; loss alerts may resolve early
            log.warning("history: the losses %s recorded of %s could not be read: %s", writer.root,
                        ", ".join(clusters), e)
            return
        n = self.monitor.recall_losses(losses)
        if n:
            log.info("history: %s recorded in %s carried on (their alerts stay open as after a restart)",
                     plural(n, "loss", "losses"), writer.root)

    def _lose_unpolled(self, writer: HistoryWriter, now: float) -> None:
        """End what the history left open of a cluster no collector writing it polls any more (taken out of the
        configuration; the last holder's, not ours) once its last poll is `carry_max_age_s` old: a collector
        polling it that took the root over before then would have carried it on. Until then it waits here (checked
        after every poll), and a successor decides again if we stop first.

        The clusters due together are read together: each of its own read of two days of event files took 1.1 s
        for 8 clusters and 6.2 s for 32, all in one poll. Each is still ended as of its own last poll
        (`left_open.open_incidents` given a time per cluster). A read that fails (a file that cannot be read, a
        mount gone) marks nothing and is tried again `UNPOLLED_RETRY_S` later; before, each cluster was dropped
        before its read, and one that failed stayed open until the next takeover. A read a cluster isolated little:
        the clusters share the event files (partitioned by day), so a file that failed one read failed them all."""
        from collectors.outputs.checkpoint import unusable_age
        from collectors.outputs.history.left_open import lost_ends, open_alerts, open_incidents

        due = {c: t for c, t in self._unpolled.items() if unusable_age(now - t, self.carry_max_age_s) is not None}
        if not due or not writer.sole_writer or now < self._unpolled_retry_at:
            return
        root = writer.root
        try:
            incidents = open_incidents(root, list(due), due)
            alerts = open_alerts(root, list(due), due)
        except Exception as e:  # a damaged file, say: the history goes on; nothing is marked
            self._unpolled_retry_at = now + self.UNPOLLED_RETRY_S
            log.warning("history: what %s left open of %s (not polled any more) could not be read: %s (tried again "
                        "in %.0fs)", root, ", ".join(sorted(due)), e, self.UNPOLLED_RETRY_S)
            return
        of: dict[str, tuple[list[IncidentRecord], list[AlertRecord]]] = {c: ([], []) for c in due}
        for i in incidents:
            of[i.cluster][0].append(i)
        for a in alerts:
            of[a.cluster][1].append(a)
        for c, last in due.items():
            del self._unpolled[c]
            events, ended = lost_ends(*of[c], last)
            writer.add_events(c, events, ended)
            if events or ended:
                n = len(events) + len(ended)
                log.info("history: %s left open in %s of %s, which no collector writing it polls now, %s recorded "
                         "as lost (ended unseen after its last poll, %s)", _left_open(n), root, c,
                         count_of(n, "is", "are"), datetime.fromtimestamp(last, UTC).isoformat(timespec="seconds"))

    def _carry_on(self, writer: HistoryWriter, last: Holder, incidents: list[IncidentRecord],
                  alerts: list[AlertRecord]) -> None:
        """Adopt what the history left open of the clusters carried on, and what it resolved within the hold-down
        (``resolved_at`` set: a standby tracked those under ids and first-seen times of its own, and its events of
        them after the holder's last write, a resolution say, were one cause's second incident and one alert's
        second episode in the weekly report); drop our buffered events they replace."""
        from collectors.alerting.lifecycle import SAME_TIME_S

        assert self.monitor is not None
        adopted = self.monitor.adopt_incidents(incidents, [a for a in alerts if a.resolved_at is None])
        given_up = {ours for ours in adopted.values() if ours}
        dropped = writer.drop_buffered("incident_events", lambda r: r["id"] in given_up) if given_up else 0
        adopted_alerts = self.monitor.adopt_alerts(alerts)
        replaced = {k: ours for k, ours in adopted_alerts.items() if ours is not None}
        ended = {a.key: a.resolved_at for a in alerts if a.resolved_at is not None}
        if replaced or ended:
            def ours_dropped(r: dict[str, Any]) -> bool:
                key = (r["cluster"], r["rule"], r["subject"])
                if r["first_seen"] is None:
                    return False
                first = r["first_seen"].timestamp()
                end = ended.get(key)
                if end is not None:  # every event of ours of an episode the history holds ended
                    return first <= end + SAME_TIME_S
                ours = replaced.get(key)
                return r["event"] == "open" and ours is not None and abs(first - ours) < SAME_TIME_S

            dropped += writer.drop_buffered("alert_events", ours_dropped)
        still = sum(i.resolved_at is None for i in incidents)
        log.info("history: carrying on %s and %s of the collector that wrote %s before (%s; %s resolved within "
                 "the hold-down; %s dropped)", plural(still, "open incident"),
                 plural(sum(a.resolved_at is None for a in alerts), "open alert"), writer.root, last.describe(),
                 plural(len(incidents) - still, "incident"), plural(dropped, "own event row"))

    def _release_written(self) -> None:
        """End a cluster's hold once no ledger row of a loss it proved waits (`history.writer.NEVER_DROPPED`): after
        a failed forced flush those rows alone are retried every poll (`HistoryWriter.flush_losses`), the rest at
        the writer's own pace, and a standby keeps its rows until the history holds the loss. Per cluster: one loss
        the holder never records holds back only its cluster's saves."""
        if self.unwritten_losses:
            self.unwritten_losses &= self.writer.unwritten_loss_clusters()

    def close(self) -> None:
        self.writer.close()
        self._release_written()


class LatestStateSink:
    """Writes each polled cluster's latest-state file. Given `removed` (the history sink's: clusters its root holds
    that no collector writing it polls any more), it retires their files (`latest_state.retire`) at its first call
    and every `RETIRE_CHECK_S` seconds after, so that a cluster taken out of the configuration leaves the dashboard.
    Without a history nothing says which files were this configuration's, and none is touched: another collector's
    clusters may share the directory, and their files going STALE is how on-call sees that collector down."""

    RETIRE_CHECK_S = 60.0

    def __init__(self, state_dir: Path, removed: Callable[[], Collection[str]] | None = None) -> None:
        self.state_dir = state_dir
        self.removed = removed
        self._next_check = 0.0  # monotonic

    def __call__(self, results: list[PollResult], now: float) -> None:
        from collectors.outputs.latest_state import retire, write_latest

        for r in results:
            try:
                write_latest(self.state_dir, snapshot_to_dict(r.snapshot), now=r.snapshot.time)
            except OSError as e:  # one cluster's file failing must not starve the others
                log.error("latest state for %s not written: %s", r.snapshot.cluster, e)
        if self.removed is not None and time.monotonic() >= self._next_check:
            self._next_check = time.monotonic() + self.RETIRE_CHECK_S
            if gone := self.removed():  # none of them configured: the history sink counts ours out
                retire(self.state_dir, gone)


class CheckpointSink:
    """Saves the pollers' memory every `interval_s` (wall clock), after a poll that proved a truncation or an
    unclean election (`EPOCH_LOSSES`: the history sink has flushed its rows), and on close, so a restart resumes it.
    A poll that counted an epoch rise on a V2 cluster has its cluster saved earlier (`RiseCheckpointSink`).

    `held`: the clusters not to save for now (the history sink's `unwritten_losses`: a loss proved and not yet
    written); each save leaves them out and keeps the checkpoint they have on disk."""

    def __init__(self, state_dir: Path, interval_s: float, monitor: Monitor,
                 held: Callable[[], Collection[str]] = tuple) -> None:
        self.state_dir = state_dir
        self.interval_s = interval_s
        self.monitor = monitor
        self.held = held
        self._holding: set[str] = set()  # the clusters last held back, to log each hold once
        self._unsaved_release: set[str] = set()  # released clusters whose save failed: retried at the next poll
        self._last = time.monotonic()  # the first save after one interval: a resumed state is already on disk
        self._now: float | None = None  # the poll clock (simulated in the demo), for saved_at
        self.saves = 0

    def __call__(self, results: list[PollResult], now: float) -> None:
        self._now = now
        held = set(self.held())
        released = self._holding - held  # their loss written since: the save that waited for it
        if time.monotonic() - self._last >= self.interval_s or proved_epoch_loss(results) or released:
            if self.save(now):
                self._unsaved_release.clear()
            else:
                self._unsaved_release |= released
        # a failed save of released clusters: only those again, at every poll until saved (not at the next timed
        # save: a collector killed meanwhile resumes from before the loss and records it again). Every cluster a
        # poll while the disk is full would cost ~0.9 s a poll for a 100,000-partition cluster.
        elif (retry := self._unsaved_release - held) and self.save(now, retry):
            self._unsaved_release.clear()

    def save(self, now: float, clusters: Collection[str] | None = None) -> bool:
        """Save every cluster's checkpoint, or only those of `clusters` (the next timed save stays when it was),
        except those `held` back. False when the save failed (`state_write_failed` says so)."""
        full = clusters is None
        if full:
            self._last = time.monotonic()
        held = set(self.held())
        if held - self._holding:
            log.warning("checkpoint of %s held back until the history holds the loss its poll proved (killed "
                        "meanwhile, the collector finds it again)", ", ".join(sorted(held - self._holding)))
        self._holding = held
        if held:
            clusters = {p.name for p in self.monitor.pollers} if clusters is None else set(clusters)
            clusters -= held
            full = False  # the held clusters' checkpoints are not written: not a full save
            if not clusters:
                return True
        try:
            self.monitor.save_checkpoints(self.state_dir, now, clusters)
        except OSError as e:
            if "state_write_failed" not in self.monitor.conditions:
                log.error("checkpoint not saved under %s: %s (a restart would start without it)", self.state_dir, e)
            self.monitor.conditions["state_write_failed"] = Candidate(
                "state_write_failed", "warning", "state", f"checkpoint not saved under {self.state_dir}: {e}")
            return False
        self.saves += 1
        # only a full save says the state is written again: a small cluster's may fit where another's did not
        if full and self.monitor.conditions.pop("state_write_failed", None) is not None:
            log.info("checkpoint saved again under %s", self.state_dir)
        return True

    def close(self) -> None:
        if self._now is not None:  # nothing polled, nothing new to keep
            self.save(self._now)


class RiseCheckpointSink:
    """Saves the checkpoint of a cluster whose poll counted an epoch rise on a V2 cluster (`counted_epoch_rise`),
    first of the sinks: before the exporter shows the rise, so that a collector killed after a scrape saw it resumes
    past it rather than counting it again at a new time (two rises for the Prometheus twin). Only that cluster's:
    an older client's crash loop saves once a poll while it lasts, and /metrics shows each such poll that much later
    (~0.9 s for a 100,000-partition cluster's checkpoint)."""

    def __init__(self, checkpoints: CheckpointSink) -> None:
        self.checkpoints = checkpoints

    def __call__(self, results: list[PollResult], now: float) -> None:
        # a cluster whose poll also recorded a loss is left to `CheckpointSink`: a truncation or an unclean election
        # is saved after the history sink flushed its ledger rows (`EPOCH_LOSSES`), other kinds at the timed save as
        # before. Saved here, ahead of the rows, a kill before they are written would lose them for good (the
        # checkpoint past what found them; a V2 timeout abort comes in the very poll its fence is counted), a worse
        # harm than a rise the twin may count twice
        recording = {r.snapshot.cluster for r in results if r.snapshot.losses}
        if clusters := counted_epoch_rise(results) - recording:
            self.checkpoints.save(now, clusters)


def build_sinks(config: MonitorConfig, monitor: Monitor | None = None,
                clock: Callable[[], float] = time.time) -> list[Sink]:
    """The configured outputs. `clock`: the clock the monitor polls with (the sandbox's, in the demo)."""
    sinks: list[Sink] = []
    checkpoints = None if monitor is None else CheckpointSink(Path(config.state_dir), config.checkpoint_interval_s,
                                                              monitor)
    if checkpoints is not None:
        sinks.append(RiseCheckpointSink(checkpoints))
    exporter = None
    if config.exporter.enabled:
        exporter = ExporterSink(config.exporter.host, config.exporter.port, config.exporter.granularity,
                                config.exporter.owner_labels, monitor, config.exporter.exceptions_limit)
        sinks.append(exporter)
    history = None
    if config.history.enabled:
        history = HistorySink(config.history, exporter, monitor, config.thresholds,
                              [c.name for c in config.clusters], config.checkpoint_max_age_s, clock)
        sinks.append(history)
        if checkpoints is not None:
            checkpoints.held = lambda: history.unwritten_losses
    sinks.append(LatestStateSink(Path(config.state_dir), (lambda: history.removed) if history is not None else None))
    if checkpoints is not None:
        sinks.append(checkpoints)
    return sinks
