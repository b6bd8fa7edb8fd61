"""The poll: observe every cluster (Kafka and ZooKeeper side by side), build the snapshot, run the rules.

Clusters are polled concurrently and independently: one unreachable cluster
or ZooKeeper server delays nothing else beyond its own request timeout. What
could not be refreshed is marked stale, and alerts that depend on it are kept
open rather than resolved on missing evidence: those of the subjects the failure
concerns where it says (one group's offsets), else all of them.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import logging
import time
from collections.abc import Callable, Collection
from pathlib import Path
from typing import TYPE_CHECKING

from collectors.alerting.catalogue import kept_over_stale
from collectors.alerting.correlation import correlate
from collectors.alerting.evaluation import judge
from collectors.alerting.incidents import IncidentTracker
from collectors.alerting.lifecycle import SAME_TIME_S, AlertTracker
from collectors.alerting.rules import Candidate, cluster_health
from collectors.config import ClusterConfig, MonitorConfig
from collectors.config.redaction import secret_values
from collectors.model.observations import KafkaObservation, ZkObservation
from collectors.model.policy import Policies
from collectors.model.poll import IncidentEvent, PollResult
from collectors.model.records import AlertRecord, ClusterSnapshot, IncidentRecord, LossRecord
from collectors.model.secrets import Scrubber
from collectors.model.snapshot import LOSS_MEMORY_MAX, build_snapshot
from collectors.model.state import ClusterState
from collectors.sources.client_settings import confluent_settings, kafka_python_settings, kazoo_settings
from collectors.sources.kafka_adapter import KafkaAdapter
from collectors.sources.limiter import RequestLimiter

if TYPE_CHECKING:
    from collectors.outputs.checkpoint import Checkpoint
    from collectors.outputs.history.left_open import LastPoll
    from collectors.sources.zk_adapter import ZkAdapter

log = logging.getLogger(__name__)

class ClusterPoller:
    def __init__(self, cluster: ClusterConfig, config: MonitorConfig, limiter: RequestLimiter | None = None,
                 clock: Callable[[], float] | None = None) -> None:
        """`limiter` bounds requests in flight across every cluster of a Monitor (`max_concurrent_requests`);
        a poller on its own gets a limiter of its own. `clock`: the clock the polls' `now` is read from (the
        sandbox's in the demo), read again once the answers are in (`KafkaObservation.answered_by`); without it a
        poll given its `now` knows only that."""
        self.name: str = cluster.name
        self.kraft = cluster.kraft  # as configured: True makes the cluster KRaft from the first poll (`build_snapshot`)
        self.scrub = Scrubber.of(secret_values(cluster))  # its secrets, hidden in the errors its clients give
        self.clock = clock
        self.config = config
        self.thresholds = config.thresholds
        self.kafka = KafkaAdapter(cluster.name, confluent_settings(cluster, config.request_timeout_s),
                                  kafka_python_settings(cluster, config.request_timeout_s),
                                  config.request_timeout_s, kraft=cluster.kraft,
                                  limiter=limiter or RequestLimiter(config.max_concurrent_requests),
                                  topic_filter=cluster.filters.topic_filter(),
                                  group_filter=cluster.filters.group_filter())
        self.zk: ZkAdapter | None = None
        if cluster.zookeeper is not None:
            from collectors.sources.zk_adapter import ZkAdapter

            zk = cluster.zookeeper
            self.zk = ZkAdapter(cluster.name, zk.connect, kazoo_settings(zk),
                                four_letter_words=zk.four_letter_words, timeout_s=config.request_timeout_s)
        self.state = ClusterState(window_size=self.thresholds.lag_window_points)
        self.policies = Policies(config.policies)
        self.alerts = AlertTracker()
        self.incidents = IncidentTracker(self.thresholds.incident_hold_down_s)
        self.cluster_id: str | None = None  # as last reported by the cluster
        self._resumed_cluster_id: str | None = None  # from a checkpoint, until the cluster confirms it
        self._resumed_until: float | None = None  # the last poll the resumed memory was known true at
        self._lost: tuple[list[IncidentEvent], list[AlertRecord]] = ([], [])  # recorded with the next poll
        # alerts the tracker opened and resolved in a poll that raised after: told with the next result
        self._untold: tuple[list[AlertRecord], list[AlertRecord]] = ([], [])
        self._failing: str | None = None  # why the last poll failed (`failed`), until one succeeds
        self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=2, thread_name_prefix=f"poll-{self.name}")

    def close(self) -> None:
        self.kafka.close()
        if self.zk is not None:
            self.zk.close()
        self._pool.shutdown(wait=False, cancel_futures=True)

    def poll(self, now: float | None = None, extra: list[Candidate] | None = None) -> PollResult:
        """One poll; `extra` are monitor-level conditions (e.g. history not writable) shown on every cluster."""
        started = time.monotonic()
        clock = self.clock or time.time
        owned = now is None or self.clock is not None  # a `now` from elsewhere may be on another clock
        now = clock() if now is None else now
        kafka_f = self._pool.submit(self._observe_kafka, now)
        zk_f = self._pool.submit(self.zk.observe) if self.zk is not None else None
        obs = kafka_f.result()
        if owned:
            obs.answered_by = max(now, clock())
        zk_obs = zk_f.result() if zk_f is not None else None
        if obs.cluster_id:
            self._check_identity(obs.cluster_id)
            self.cluster_id = obs.cluster_id
        self._scrub_errors(obs, zk_obs)
        snap = build_snapshot(self.name, obs, zk_obs, self.state, self.thresholds, now, self.policies, kraft=self.kraft)
        result = self._judge(snap, now, extra, started)
        if self._failing is not None:
            log.info("cluster %s: polled again (the polls before failed: %s)", self.name, self._failing)
            self._failing = None
        return result

    def _scrub_errors(self, obs: KafkaObservation, zk_obs: ZkObservation | None) -> None:
        """The clients' error texts with this cluster's secrets hidden, before the snapshot, the alerts' summaries,
        the history and the metrics quote them: a library may echo what it was given (a JAAS line, a URL with
        its password), and no key name is left in its message to redact by (`Scrubber`)."""
        if not self.scrub:
            return
        obs.errors = [self.scrub(e) for e in obs.errors]
        if obs.quorum_no_leader is not None:
            obs.quorum_no_leader = self.scrub(obs.quorum_no_leader)
        if zk_obs is not None:
            zk_obs.errors = [self.scrub(e) for e in zk_obs.errors]
            for server in zk_obs.servers:
                if server.error is not None:
                    server.error = self.scrub(server.error)

    def failed(self, now: float | None, extra: list[Candidate] | None, error: BaseException,
               started: float) -> PollResult:
        """The result of a poll that raised (a bug, a memory it cannot use), in place of the one it did not return:
        the cluster as when no broker answers (not reachable, its ``cluster`` section stale, nothing else known),
        so the `cluster_unreachable` alert opens saying the poll failed, and what is open stays open as over any
        stale poll (`kept_over_stale`). Logged with the traceback once while the same error repeats, in one line
        after. Does not raise: a monitor polling other clusters carries on with theirs (`Monitor.poll_once`)."""
        now = (self.clock or time.time)() if now is None else now
        why = self.scrub(f"poll failed: {type(error).__name__}: {error}")
        if why != self._failing:
            log.error("cluster %s: %s; shown unreachable until a poll succeeds", self.name, why, exc_info=error)
        else:
            log.error("cluster %s: %s (again, as logged before)", self.name, why)
        self._failing = why
        snap = ClusterSnapshot(cluster=self.name, time=now, mode="zookeeper" if self.zk is not None else None,
                               cluster_id=self.cluster_id, reachable=False, stale=True, stale_sections=["cluster"],
                               errors=[why])
        try:
            return self._judge(snap, now, extra, started)
        except Exception:  # the memory the alerts are tracked in is what fails: the alert is shown, untracked
            log.exception("cluster %s: the alerts of its failed poll could not be tracked either", self.name)
            snap.alerts = [AlertRecord(c.rule, c.severity, self.name, c.subject, c.summary, now, now, c.value)
                           for c in cluster_health(snap, self.state, {}, self.thresholds, now)]
            snap.poll_duration_s = time.monotonic() - started
            (opened, resolved), self._untold = self._untold, ([], [])  # what the tracker holds, told at last
            return PollResult(snap, opened, resolved)

    def _judge(self, snap: ClusterSnapshot, now: float, extra: list[Candidate] | None, started: float
               ) -> PollResult:
        """The poll's alerts and incidents from its snapshot, and its result."""
        kept = kept_over_stale(snap)  # the open alerts this poll's stale data keeps (and their timers)
        candidates = judge(snap, self.state, self.thresholds, now, kept) + list(extra or [])
        current, opened, resolved = self.alerts.update(self.name, candidates, now, kept)
        # the tracker now holds this poll's openings and endings: told with this result, or the next if this raises
        (opened_before, resolved_before), self._untold = self._untold, ([], [])
        opened, resolved = opened_before + opened, resolved_before + resolved
        try:
            snap.alerts = current
            for a in current:
                a.incident = None  # the incident tracker stamps the members of this poll's causes
            snap.incidents, incident_events = self.incidents.update(self.name, correlate(snap, current), now)
            restated = self.alerts.restate_due(self.name, now)
        except BaseException:
            self._untold = (opened, resolved)
            raise
        snap.poll_duration_s = time.monotonic() - started
        (lost_incidents, lost_alerts), self._lost = self._lost, ([], [])
        return PollResult(snap, opened, resolved, lost_incidents + incident_events, restated, lost_alerts)

    def resolved_incidents(self) -> list[IncidentRecord]:
        """The cluster's incidents resolved within the hold-down (`thresholds.incident_hold_down_s`), as of the last
        poll: copies, since the tracker reopens the same record if its cause comes back. The snapshot holds the open
        ones only (its ``incidents``, counted open by the history and /metrics); these are for the JSON API's
        ``?all=1``."""
        return [dataclasses.replace(i) for i in self.incidents.recent_for(self.name)]

    def lose(self, incidents: list[IncidentRecord], alerts: list[AlertRecord], until: float) -> None:
        """Record with the next poll that these incidents and alerts, left open by a collector before this one and
        not carried on, ended at `until` (the last poll known to have seen them open; their own ``last_seen`` if
        later) in a way nobody saw: a ``lost`` event each (`collectors.model.vocabulary.LOST`). Without it the
        history keeps them open for good, and the weekly report counts them open at the week's end."""
        from collectors.outputs.history.left_open import lost_ends

        events, ended = lost_ends(incidents, alerts, until)
        self._lost[0].extend(events)
        self._lost[1].extend(ended)

    def checkpoint(self, now: float) -> Checkpoint:
        """What a restart should resume from (call between polls: the state must not change meanwhile)."""
        from collectors.outputs.checkpoint import Checkpoint

        return Checkpoint(cluster=self.name, cluster_id=self.cluster_id or self._resumed_cluster_id, saved_at=now,
                          state=self.state, alerts=self.alerts.open_for(self.name),
                          incidents=self.incidents.open_for(self.name) + self.incidents.recent_for(self.name))

    def resume(self, cp: Checkpoint) -> None:
        """Take over a checkpoint's memory; undone at the first poll if the cluster turns out to be another one."""
        self.state = cp.state
        self.alerts.forget(self.name)
        for a in cp.alerts:
            self.alerts.open[a.key] = a
        self.incidents.forget(self.name)
        self.incidents.restore(cp.incidents, cp.alerts)
        self._resumed_cluster_id = cp.cluster_id
        self._resumed_until = cp.saved_at

    def expect_cluster_id(self, cluster_id: str | None, until: float | None = None) -> bool:
        """What a history left open is of `cluster_id` (None: not recorded), as its last poll at `until` saw it:
        False when this poller already polled another cluster of its name (not to be carried on); else True, and
        it is dropped at the first poll if the cluster turns out to be another one (rebuilt under the same name),
        as a checkpoint's memory is. A resumed checkpoint's id stands."""
        if self.cluster_id is not None:
            return cluster_id is None or self.cluster_id == cluster_id
        if self._resumed_cluster_id is None:
            self._resumed_cluster_id = cluster_id
        if until is not None:
            self._resumed_until = max(until, self._resumed_until or until)
        return True

    def _check_identity(self, cluster_id: str) -> None:
        """The memory this poller holds is of one cluster: the last poll's, else the one a resumed memory was of (a
        checkpoint, or what the history left open). Another cluster id answering is another cluster: a checkpoint of
        another cluster of the name, the bootstrap servers now reaching another one (a DNS or load balancer change),
        or the cluster rebuilt. What was remembered (leader epochs, voter sets, zxids, lag windows, open alerts) says
        nothing of it: compared with it, every difference would read as news (a voter set "changed", partitions
        "truncated"). It is dropped, the open incidents and alerts ending as lost at the last poll known to have seen
        them (each no earlier than its own last_seen anyway), and the cluster is watched afresh."""
        resumed, self._resumed_cluster_id = self._resumed_cluster_id, None
        resumed_until, self._resumed_until = self._resumed_until, None
        if self.cluster_id is not None:
            expected, until = self.cluster_id, self.state.last_good
            whose = "the last poll's"
        else:  # `resumed_until` is set by whatever set `resumed` (a checkpoint's save, the history's last poll)
            expected, until = resumed, resumed_until
            whose = "the memory resumed (checkpoint, or what the history left open)"
        if expected is None or expected == cluster_id:
            return
        log.warning("cluster %s: cluster id is %s, %s was of %s (another cluster answers at its bootstrap servers, "
                    "or it was rebuilt); what the monitor remembered is dropped", self.name, cluster_id, whose,
                    expected)
        self.lose(self.incidents.open_for(self.name), self.alerts.open_for(self.name),
                  until if until is not None else 0.0)
        self.forget()

    def forget(self) -> None:
        """Start over with no memory: the state, open alerts and incidents dropped (none resolved), and the cluster
        id a resumed memory was of."""
        self._resumed_cluster_id = self._resumed_until = None
        self.state = ClusterState(window_size=self.thresholds.lag_window_points)
        self.alerts.forget(self.name)
        self.incidents.forget(self.name)

    def _observe_kafka(self, now: float) -> KafkaObservation:
        try:
            # the topics to ask each broker about: none in KRaft, where the memory is kept empty (`_metadata_lag`)
            return self.kafka.observe(now, self.state.epoch_watch, probe=self.state.metadata_lag.probe_topics(now=now))
        except Exception as e:  # an adapter bug must not take the monitor down
            log.exception("cluster %s: Kafka observation failed", self.name)
            obs = KafkaObservation(time=now, reachable=False)
            obs.fail("cluster", f"observation failed: {type(e).__name__}: {e}")
            return obs


def _loss_key(x: LossRecord) -> tuple[object, ...]:
    """A loss as the ledger records it once: the same in a checkpoint and in the history (times as float seconds)."""
    return (x.cluster, round(x.time, 3), x.kind, x.topic, x.partition, x.group_id, x.transactional_id, x.server)


class Monitor:
    """All configured clusters; `poll_once` polls them concurrently."""

    def __init__(self, config: MonitorConfig, clock: Callable[[], float] | None = None) -> None:
        """`clock`: the one `poll_once`'s `now` is read from (`ClusterPoller`)."""
        self.config = config
        self.limiter = RequestLimiter(config.max_concurrent_requests)
        self.pollers = [ClusterPoller(c, config, self.limiter, clock) for c in config.clusters]
        # conditions of the monitor itself, raised as alerts on every cluster while they hold
        self.conditions: dict[str, Candidate] = {}
        self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=max(1, len(self.pollers)),
                                                           thread_name_prefix="monitor")

    def poll_once(self, now: float | None = None) -> list[PollResult]:
        """One result per cluster, in configuration order. A cluster's poll that raises becomes that cluster's
        result only (`ClusterPoller.failed`: unreachable, alerted); the others' go on as if it had not."""
        started = time.monotonic()
        extra = list(self.conditions.values())
        futures = [self._pool.submit(p.poll, now, extra) for p in self.pollers]
        results = []
        for p, f in zip(self.pollers, futures, strict=True):
            try:
                results.append(f.result())
            except Exception as e:
                results.append(p.failed(now, extra, e, started))
        return results

    def resolved_incidents(self) -> dict[str, list[IncidentRecord]]:
        """`ClusterPoller.resolved_incidents` of every cluster, by name."""
        return {p.name: p.resolved_incidents() for p in self.pollers}

    def adopt_incidents(self, incidents: list[IncidentRecord], alerts: list[AlertRecord] | None = None
                        ) -> dict[str, str | None]:
        """Carry on the open incidents a history holds (`IncidentTracker.adopt`), each cluster its own, and place in
        them the `alerts` carried on with them: recorded id -> the id of ours it replaces, if any."""
        return {k: v for p in self.pollers for k, v in p.incidents.adopt(
            (r for r in incidents if r.cluster == p.name), (a for a in alerts or () if a.cluster == p.name)).items()}

    def expect_cluster_ids(self, polls: dict[str, LastPoll]) -> set[str]:
        """`ClusterPoller.expect_cluster_id` for each cluster's last poll in a history: the names whose memory the
        history may be carried into (those not in `polls` too: nothing says which cluster it was)."""
        return {p.name for p in self.pollers
                if p.name not in polls or p.expect_cluster_id(polls[p.name].cluster_id, polls[p.name].time)}

    def lose(self, incidents: list[IncidentRecord], alerts: list[AlertRecord], until: dict[str, float]) -> int:
        """`ClusterPoller.lose` for each cluster polled here, but not what this monitor goes on tracking (a resumed
        checkpoint's: the same incident id, the same alert episode); `until`: per cluster, its last poll known to
        have seen them open. Returns how many are lost."""
        n = 0
        for p in self.pollers:
            ids = {i.id for i in p.incidents.open_for(p.name)}
            seen = {(a.rule, a.subject): a.first_seen for a in p.alerts.open_for(p.name)}
            lost = [i for i in incidents if i.cluster == p.name and i.id not in ids]
            gone = [a for a in alerts if a.cluster == p.name
                    and abs(seen.get((a.rule, a.subject), -1e18) - a.first_seen) >= SAME_TIME_S]
            if lost or gone:
                p.lose(lost, gone, until.get(p.name, 0.0))
            n += len(lost) + len(gone)
        return n

    def recall_losses(self, losses: list[LossRecord]) -> int:
        """Add the losses a history recorded (`left_open.recent_losses`) to each cluster's memory of recent losses
        that it does not hold already (a checkpoint older than the history, or none): the alerts a loss keeps open
        for `loss_alert_hold_s` stay open across a takeover. How many were added."""
        added = 0
        for p in self.pollers:
            st = p.state
            known = {_loss_key(x) for x in st.recent_losses}
            new = [x for x in losses if x.cluster == p.name and _loss_key(x) not in known]
            if new:
                st.recent_losses = sorted([*st.recent_losses, *new], key=lambda x: x.time)[-LOSS_MEMORY_MAX:]
                added += len(new)
        return added

    def adopt_alerts(self, alerts: list[AlertRecord]) -> dict[tuple[str, str, str], float | None]:
        """Carry on the open alerts a history holds (`AlertTracker.adopt`): key -> the first_seen of ours it
        replaces, if any. Those of timed rules get the condition timer their firing implies where the poller has
        none (`seed_timers`), or the first poll would find their condition pending and resolve them."""
        from collectors.alerting.evaluation import seed_timers

        adopted: dict[tuple[str, str, str], float | None] = {}
        for p in self.pollers:
            ours = p.alerts.adopt(a for a in alerts if a.cluster == p.name)
            seed_timers(p.state.condition_since, (p.alerts.open[k] for k in ours if k in p.alerts.open),
                        p.thresholds)  # not those given up for an episode the history holds ended
            adopted.update(ours)
        return adopted

    def resume(self, state_dir: Path, now: float | None = None) -> list[str]:
        """Resume every cluster from its checkpoint if one is usable; returns one log line per cluster.

        A missing, damaged, foreign or too old checkpoint never stops the monitor: that cluster starts fresh.
        """
        from collectors.outputs.checkpoint import CheckpointError, describe, load_checkpoint

        now = time.time() if now is None else now
        lines = []
        for p in self.pollers:
            try:
                cp = load_checkpoint(state_dir, p.name, lag_points=p.state.lag_points,
                                     window_size=p.thresholds.lag_window_points, now=now,
                                     max_age_s=self.config.checkpoint_max_age_s)
                if cp is None:
                    lines.append(f"{p.name}: starting fresh (no checkpoint)")
                    continue
                p.resume(cp)
                lines.append(f"{p.name}: resumed from checkpoint {describe(cp, now)}")
            except CheckpointError as e:
                lines.append(f"{p.name}: starting fresh, checkpoint not used: {e}")
            except Exception as e:  # a bug reading or resuming it: that cluster starts fresh, the others go on
                log.exception("cluster %s: checkpoint could not be resumed", p.name)
                p.forget()
                lines.append(f"{p.name}: starting fresh, checkpoint not used: {type(e).__name__}: {e}")
        return lines

    def save_checkpoints(self, state_dir: Path, now: float | None = None,
                         clusters: Collection[str] | None = None) -> int:
        """Save every cluster's checkpoint, or only those of `clusters`; returns bytes written. Raises OSError (the
        caller alerts)."""
        from collectors.outputs.checkpoint import save_checkpoint

        now = time.time() if now is None else now
        return sum(save_checkpoint(state_dir, p.checkpoint(now))[1] for p in self.pollers
                   if clusters is None or p.name in clusters)

    def close(self) -> None:
        for p in self.pollers:
            p.close()
        self._pool.shutdown(wait=False, cancel_futures=True)
