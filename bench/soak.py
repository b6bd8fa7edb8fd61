"""Soak: a day of incidents on simulated time; the monitor must stay flat, quiet when it should, and recover.

    .venv/bin/python -m bench.soak [--hours 24] [--poll-interval 30] [--zookeeper] [--quiet 180] [--tracemalloc]

A sandbox cluster (KRaft by default) replays a cycle of the Kafka-side incidents
(broker_crash, broker_slow, slow_follower, consumer_stall, consumer_stop,
consumer_rewind, producer_crash_in_txn, producer_restart, hanging_transaction,
controller_failover, leader_change_hw_dip, metadata_lag with a broker crash inside it), one every few
simulated minutes, each followed by its
recovery allowance and a quiet period. Simulated time is stepped by hand (a
ManualClock): the model advances exactly one poll interval, then the real
collector (ClusterPoller, real clients over TCP) polls with that simulated
`now`. 24 simulated hours at a 30 s interval are 2,880 polls and take minutes.
Incidents fire at their exact simulated second (the clock is stepped to just
before each one), not at the next poll step. One thing stays in real time:
broker_slow's delay (the listener sleeps 4 real seconds, past the collector's
2 s request timeout).

When an incident starts and ends is read from the sandbox's own event log
("incident <type> start|end" markers written by sandbox/incidents.py), not
assumed from the schedule. Checks:

(a) memory: process RSS (VmRSS, which includes the in-process sandbox) and
    gc-tracked object count after a warm-up (first simulated hour) and at the
    end, RSS every simulated hour (least-squares trend), and the size of the
    poller's own memory (ClusterState tables). Fails when RSS grows by more
    than 10 % from warm-up to end. `--tracemalloc` also reports, by package,
    Python memory allocated after the warm-up and still alive at the end (the
    run is then about 3x slower, and tracemalloc's own memory is in the RSS).
(b) recovery: every alert opened during an incident (start .. end + allowance)
    is resolved by end + allowance. Allowances are per incident type, from
    Kafka semantics (see `plans`); an alert still open past it is "stale".
(c) quiet: no alert at all opens outside every incident window (before the
    first incident, or after an allowance and before the next incident).
(d) detection: the alerts raised during each incident include its expected
    rule (any one of the listed rules).
(f) fleet: the batch group idle by schedule (hourly-rollup, policy idle_max_s)
    and the group found Empty (old-etl, INACTIVE) raise no alert at all.
(e) loss: the loss ledger records nothing but the transactions the coordinator
    aborted at their timeout (producer_crash_in_txn, one txn_timeout_abort each):
    clean leader changes (failover and back, leader_change_hw_dip's high
    watermark dip), controller failovers and broker restarts lose nothing.

ZooKeeper is left out by default: a real ZooKeeper ensemble runs on real time
and cannot be compressed, so its incidents (zk_leader_kill, zk_follower_pause)
would be judged against a clock they do not follow. `--zookeeper` runs the
cluster in ZooKeeper mode with a real ensemble and adds those two incidents;
their timing in simulated seconds is then only nominal.

Thresholds are tuned for the compressed run (`soak_thresholds`, documented
there); everything else is the collector's default. Exit code 1 when any
check fails.
"""

from __future__ import annotations

import argparse
import gc
import logging
import math
import re
import sys
import time
import tracemalloc
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from collectors.alerting.rules import ELECTION_ALERT_S
from collectors.config import MonitorConfig, Thresholds
from collectors.model.records import LossRecord
from collectors.model.vocabulary import TXN_PRODUCER_RETURNED, TXN_TIMEOUT_ABORT
from collectors.runtime.poller import ClusterPoller, PollResult
from sandbox.clock import ManualClock
from sandbox.groups import REBALANCE_S
from sandbox.runner import Sandbox
from sandbox.spec import Scenario
from sandbox.timeline import Timeline

REQUEST_TIMEOUT_S = 2.0  # collector request timeout; broker_slow answers later than this
SLOW_BROKER_DELAY_S = 4.0  # broker_slow's delay_s: real seconds (the listener sleeps), past the request timeout
STEP_EPS = 0.001  # incidents fire this long before their scheduled second, at exactly that model time
MARKER = re.compile(r"^incident (\w+) (start|end)$")
RSS_GROWTH_LIMIT = 0.10  # memory "flat": RSS may not grow by more than 10 % from warm-up to end
TXN_LOSS_KINDS = frozenset({TXN_TIMEOUT_ABORT, TXN_PRODUCER_RETURNED})


# ----------------------------------------------------------------------------- the cluster and thresholds
def soak_cluster(zookeeper: bool = False) -> dict[str, Any]:
    """A small production-like cluster (the demo's shape): RF 3 / min ISR 2, four groups, two txn producers."""
    return {
        "brokers": 3,
        "mode": "zookeeper" if zookeeper else "kraft",
        "broker_config": {"min.insync.replicas": "2"},
        "topics": [
            {"name": "orders", "partitions": 6, "replication_factor": 3, "produce_rate": 60},
            {"name": "payments", "partitions": 3, "replication_factor": 3, "produce_rate": 20},
            # 1 h retention: the log start moves all day (segments roll and are deleted) under the soak
            {"name": "clickstream", "partitions": 6, "replication_factor": 3, "produce_rate": 120,
             "configs": {"retention.ms": 3_600_000}},
            {"name": "audit-trail", "partitions": 2, "replication_factor": 3, "produce_rate": 0},  # idle
        ],
        "groups": [
            {"group_id": "billing", "topics": ["orders", "payments"], "members": 3},
            {"group_id": "analytics", "topics": ["clickstream"], "members": 2},
            {"group_id": "fraud-detector", "topics": ["payments"], "isolation_level": "read_committed",
             "members": 1},
            {"group_id": "auditor", "topics": ["audit-trail"], "members": 1},
            # fleet policy (issue 15): a batch job idle by design between runs (its policy: idle_max_s), and a
            # group left behind long ago, found Empty with a growing backlog (INACTIVE): neither may alert
            {"group_id": BATCH_GROUP, "topics": ["orders"], "members": 1, "batch_every_s": 1800, "batch_run_s": 300,
             "consume_rate": 200},  # a batch reads fast: the 25 min backlog is gone within its 5 min run
            {"group_id": ABANDONED_GROUP, "topics": ["payments"], "members": 0},
        ],
        "transactional_producers": [
            {"transactional_id": "payments-tx", "topics": ["payments"], "rate": 10, "transaction_duration_s": 2,
             "timeout_ms": 60_000},
            {"transactional_id": "orders-enricher-tx", "topics": ["orders"], "rate": 5,
             "transaction_duration_s": 3, "timeout_ms": 30_000},
        ],
    }


BATCH_GROUP, ABANDONED_GROUP = "hourly-rollup", "old-etl"


def soak_policies() -> list[dict[str, Any]]:
    """The batch group runs 300 s every 1800 s: its commit stands still ~1500 s between runs, and it is up to that
    far behind when a run starts (its lag SLO says so)."""
    return [{"group": f"^{BATCH_GROUP}$", "idle_max_s": 1800, "lag_seconds_slo": 2400, "team": "analytics"}]


def soak_thresholds() -> dict[str, Any]:
    """Thresholds for incidents minutes apart instead of days apart; the rest stay at the collector defaults.

    * consumer_stop_after_s 60 (default 300): a 150 s stall or stop must become STALL/STOP while it lasts.
    * lag_seconds_slo 120 (default 300): same reason; healthy consumers here are < 10 s behind.
    * retention_risk_s 300 (default 3600): clickstream keeps 1 h, so with the default any non-zero lag would be
      "within an hour of deletion"; 5 min ahead is still a warning before loss.
    * txn_timeout_grace_s 5, txn_prepare_stuck_s 30 (defaults 30, 60): the sandbox coordinator aborts on time.
    * lso_gap_messages 200 (default 10,000): a healthy transaction here holds the LSO back by at most ~35
      messages (3 s x ~11 msg/s per partition); a producer dead inside a transaction holds back ~6.7 msg/s per
      payments partition until its 60 s timeout (400 messages), a hanging one ~10 msg/s per orders partition.
    * producer_epoch_window_s 300 (default 3600): with an incident every few minutes, an hour-long window would
      merge separate producer incidents into one "crash loop"; 4 restarts in 2 minutes still are one.
    * kraft_voter_lag_records 100 (default 1000): the metadata log grows 2 records/s (no-op every 500 ms), so
      100 records is 50 s without fetching: a crashed voter shows within a 120 s crash.
    Left at defaults on purpose: under_replicated_grace_s 60, isr_flap_* (4 changes in 600 s: the schedule keeps
    the ISR-changing incidents more than 600 s apart), preferred_leader_imbalance_ratio, lag window sizes.
    """
    return {
        "consumer_stop_after_s": 60,
        "lag_seconds_slo": 120,
        "retention_risk_s": 300,
        "txn_timeout_grace_s": 5,
        "txn_prepare_stuck_s": 30,
        "lso_gap_messages": 200,
        "producer_epoch_window_s": 300,
        "kraft_voter_lag_records": 100,
        "zk_follower_behind_s": 10,
    }


# ----------------------------------------------------------------------------- incident plans
@dataclass(frozen=True)
class Plan:
    """One incident type in the soak cycle: the scenario entries, what must fire, how long recovery may take."""

    type: str
    specs: tuple[dict[str, Any], ...]  # IncidentSpec fields, `at` relative to the plan's slot
    span_s: float  # scheduled first start to last end
    expected: frozenset[str]  # any one of these rules must open during the incident (empty: nothing expected)
    allowance_s: float  # after the incident's end, every alert it raised must be resolved by then
    why: str  # where the allowance comes from


def _consume_rate(cluster: dict[str, Any], group: dict[str, Any], topic: dict[str, Any]) -> float:
    if group.get("consume_rate") is not None:
        return float(group["consume_rate"])
    return 3.0 * topic["produce_rate"] / max(topic["partitions"], 1) + 1.0  # the model's default


def drain_s(cluster: dict[str, Any], group_id: str, backlog_s: float = 0.0, messages: float = 0.0) -> float:
    """Seconds a group needs to work off a backlog: `backlog_s` of production, or `messages` per partition.

    It reads at its consume rate c while production goes on at p (per partition), so a backlog B drains in
    B / (c − p); the slowest partition of the group decides.
    """
    group = next(g for g in cluster["groups"] if g["group_id"] == group_id)
    topics = {t["name"]: t for t in cluster["topics"]}
    worst = 0.0
    for name in group["topics"]:
        t = topics[name]
        p = t["produce_rate"] / max(t["partitions"], 1)
        c = _consume_rate(cluster, group, t)
        backlog = backlog_s * p + messages
        worst = max(worst, backlog / (c - p) if c > p else math.inf)
    return worst


def plans(cluster: dict[str, Any], thresholds: dict[str, Any], poll_s: float, zookeeper: bool) -> list[Plan]:
    """The incident cycle. Order matters: broker_crash and slow_follower (the ISR-changing ones) are far apart.

    Every allowance starts with 2 polls: the first poll after recovery sees it, the second covers rules that
    need two polls (hanging_transaction) and the poll phase. On top of that, per type:
    """
    base = 2 * poll_s
    commit = max(g.get("commit_interval_s", 5.0) for g in cluster["groups"])
    txn = {p["transactional_id"]: p for p in cluster["transactional_producers"]}
    epoch_window = float(thresholds["producer_epoch_window_s"])
    out = [
        Plan("broker_crash", ({"type": "broker_crash", "at": 0, "duration": 120, "broker": 3},), 120,
             frozenset({"broker_down", "broker_unreachable"}),
             300 + base,
             "leader.imbalance.check.interval.seconds=300: preferred leaders (and preferred_leader_imbalance) come "
             "back at the controller's next periodic check; ISR catch-up at 20,000 msg/s is under a second"),
        Plan("consumer_stall", ({"type": "consumer_stall", "at": 0, "duration": 150, "group": "analytics"},), 150,
             frozenset({"consumer_lag_status"}),
             drain_s(cluster, "analytics", backlog_s=150) + commit + base,
             "backlog of 150 s drains at consume - produce rate, then one commit interval"),
        Plan("hanging_transaction", ({"type": "hanging_transaction", "at": 0, "duration": 120, "topic": "orders",
                                      "partition": 1},), 120,
             frozenset({"hanging_transaction"}), base,
             "the abort (kafka-transactions abort) releases the LSO at once; no read_committed reader of orders"),
        Plan("slow_follower", ({"type": "slow_follower", "at": 0, "duration": 150, "broker": 2},), 150,
             frozenset({"at_min_isr", "under_replicated"}), base,
             "the follower's backlog (0.8 x produce rate x 150 s) is copied at 20,000 msg/s; it rejoins the ISR "
             "as soon as it reaches the high watermark"),
        Plan("producer_crash_in_txn", ({"type": "producer_crash_in_txn", "at": 0, "duration": 120,
                                        "transactional_id": "payments-tx"},), 120,
             frozenset({"lso_gap"}),
             drain_s(cluster, "fraud-detector", backlog_s=txn["payments-tx"]["timeout_ms"] / 1000) + commit + base,
             "the coordinator aborts at transaction.timeout.ms (60 s, before the restart); the read_committed "
             "reader then drains what the LSO held back"),
        Plan("consumer_stop", ({"type": "consumer_stop", "at": 0, "duration": 150, "group": "billing"},), 150,
             frozenset({"consumer_lag_status"}),
             drain_s(cluster, "billing", backlog_s=150) + REBALANCE_S + commit + base,
             "members rejoin (rebalance 3 s), the 150 s backlog drains at consume - produce rate, one commit"),
        Plan("producer_restart", tuple({"type": "producer_restart", "at": i * (poll_s + 10),
                                        "transactional_id": "orders-enricher-tx"} for i in range(4)),
             3 * (poll_s + 10),
             frozenset({"producer_epoch_bumps"}), epoch_window + base,
             "a crash loop: 4 restarts a poll apart (a single restart is routine and must not alert); the bumps "
             "leave the producer_epoch_window_s window (300 s) one by one"),
        Plan("consumer_rewind", ({"type": "consumer_rewind", "at": 0, "group": "billing", "messages": 3000},), 0,
             frozenset({"consumer_lag_status"}),
             drain_s(cluster, "billing", messages=3000) + commit + base,
             "3,000 messages per partition re-read at consume - produce rate (REWIND ends when the group passes "
             "its old offset, lag seconds when it is back at the head)"),
        Plan("metadata_lag", ({"type": "metadata_lag", "at": 0, "duration": 150, "broker": 1},
                              {"type": "broker_crash", "at": 10, "duration": 120, "broker": 3}), 150,
             frozenset({"broker_down", "broker_unreachable"}),
             300 + base,
             "broker 1's metadata stops at the crash's eve while broker 3 dies and returns: the polls it answers "
             "must not flip leaders and ISRs back (no isr_flapping, no broker alert resolved early); as broker_crash "
             "after that"),
        Plan("broker_slow", ({"type": "broker_slow", "at": 0, "duration": 90, "broker": 2,
                              "delay_s": SLOW_BROKER_DELAY_S},), 90,
             frozenset({"broker_unreachable"}), base,
             "answers are on time again from the next request"),
        Plan("controller_failover", ({"type": "controller_failover", "at": 0},), 0,
             frozenset() if zookeeper else frozenset({"kraft_leader_election"}),
             (0 if zookeeper else ELECTION_ALERT_S) + base,
             "an election stays visible as an alert for ELECTION_ALERT_S (600 s, collectors/alerting/rules.py); "
             "in ZooKeeper mode nothing is expected (metadata and /controller agree)"),
        Plan("leader_change_hw_dip", ({"type": "leader_change_hw_dip", "at": 0, "duration": 15, "topic": "orders",
                                       "partition": 2, "messages": 100},), 15,
             frozenset(),
             300 + base,
             "a clean leader change (its high watermark reads 100 lower for 15 s): nothing may be recorded as lost; "
             "leadership goes back to the preferred replica at the controller's next check (300 s)"),
    ]
    if zookeeper:
        out += [
            Plan("zk_leader_kill", ({"type": "zk_leader_kill", "at": 0, "duration": 30},), 30,
                 frozenset({"zk_leader_election", "zk_node_not_serving"}), ELECTION_ALERT_S + base,
                 "the new zxid epoch stays visible for ELECTION_ALERT_S (600 s)"),
            Plan("zk_follower_pause", ({"type": "zk_follower_pause", "at": 0, "duration": 40},), 40,
                 frozenset({"zk_node_not_serving"}), float(thresholds["zk_follower_behind_s"]) + base,
                 "a resumed follower syncs with the leader at once"),
        ]
    return out


@dataclass(frozen=True)
class Slot:
    plan: Plan
    at: float  # seconds into the cycle
    length: float  # slot length: span + allowance + quiet, rounded up to whole polls


def schedule(plan_list: list[Plan], poll_s: float, quiet_s: float, first_at: float) -> tuple[list[Slot], float]:
    """Lay the plans out one after another; returns the slots and the cycle length (the timeline repeats)."""
    slots, t = [], first_at
    for p in plan_list:
        length = math.ceil((p.span_s + p.allowance_s + quiet_s) / poll_s) * poll_s
        slots.append(Slot(p, t, length))
        t += length
    return slots, t


ISR_CHANGING = frozenset({"broker_crash", "slow_follower", "metadata_lag"})  # each shrinks and re-expands ISRs once


def check_isr_spacing(slots: list[Slot], period_s: float, window_s: float) -> None:
    """ISR-changing incidents must be more than isr_flap_window_s apart (also across the cycle's wrap).

    Otherwise two separate incidents (2 ISR changes each) add up to isr_flap_changes=4 in the window and
    isr_flapping opens, correctly, for a flapping the schedule made up.
    """
    spans = sorted((s.at, s.at + s.plan.span_s) for s in slots if s.plan.type in ISR_CHANGING)
    if len(spans) < 2:
        return
    nexts = [start for start, _ in spans[1:]] + [spans[0][0] + period_s]
    for (_, end), start in zip(spans, nexts, strict=True):
        if start - end <= window_s:
            raise ValueError(f"ISR-changing incidents only {start - end:.0f}s apart (isr_flap_window_s {window_s:.0f})")


def soak_scenario(cluster: dict[str, Any], slots: list[Slot], cycle_s: float) -> Scenario:
    incidents = []
    for s in slots:
        for spec in s.plan.specs:
            incidents.append({**spec, "at": s.at + spec["at"]})
    return Scenario.model_validate({"cluster": cluster, "incidents": incidents, "repeat_every": cycle_s})


# ----------------------------------------------------------------------------- bookkeeping
@dataclass
class Note:
    """One alert as the soak saw it."""

    rule: str
    subject: str
    opened: float  # simulated seconds since the start
    resolved: float | None = None
    episode: Episode | None = None
    stale_at: float | None = None  # when it was first seen open past its allowance

    def describe(self) -> str:
        end = f"resolved t+{self.resolved:.0f}s" if self.resolved is not None else "still open"
        where = (f" ({self.episode.plan.type} #{self.episode.cycle} t+{self.episode.start:.0f}s.."
                 f"{self.episode.end if self.episode.end is None else round(self.episode.end)})"
                 if self.episode is not None else "")
        return f"{self.rule} {self.subject} opened t+{self.opened:.0f}s, {end}{where}"


@dataclass
class Episode:
    """One occurrence of a plan; start and end come from the event log markers."""

    plan: Plan
    cycle: int
    window: tuple[float, float]  # its slot, simulated seconds since start
    start: float | None = None
    end: float | None = None
    markers: int = 0
    notes: list[Note] = field(default_factory=list)
    events: list[str] = field(default_factory=list)

    @property
    def deadline(self) -> float | None:
        return None if self.end is None else self.end + self.plan.allowance_s

    def covers(self, t: float) -> bool:
        if self.start is None or t < self.start:
            return False
        return self.end is None or t <= self.end + self.plan.allowance_s

    @property
    def rules(self) -> set[str]:
        return {n.rule for n in self.notes}

    @property
    def hit(self) -> bool:
        return not self.plan.expected or bool(self.rules & self.plan.expected)


def vmrss_kib() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def state_size(poller: ClusterPoller) -> dict[str, int]:
    st = poller.state
    return {"hw_history": len(st.hw_history), "commit_windows": len(st.commit_windows),
            "partition_view": len(st.partition_view), "isr_changes": sum(len(d) for d in st.isr_changes.values()),
            "condition_since": len(st.condition_since), "producer_epochs": sum(len(d) for d in
                                                                               st.producer_epochs.values()),
            "txn_state_since": len(st.txn_state_since), "known_brokers": len(st.known_brokers),
            "open_alerts": len(poller.alerts.open)}


@dataclass
class Memory:
    at: float  # simulated seconds since start
    rss_kib: int
    gc_objects: int
    state: dict[str, int]
    types: Counter[str] = field(default_factory=Counter)  # gc-tracked objects by type name
    traced_kib: dict[str, float] = field(default_factory=dict)  # tracemalloc: live KiB by top-level package


@dataclass
class SoakResult:
    hours: float
    poll_s: float
    zookeeper: bool
    slots: list[Slot]
    cycle_s: float
    episodes: list[Episode]
    notes: list[Note]
    polls: int = 0
    t0: float = 0.0  # the simulated clock at the start (epoch seconds)
    real_s: float = 0.0
    end_t: float = 0.0
    mem_start: Memory | None = None
    mem_end: Memory | None = None
    rss_hourly: list[tuple[float, int]] = field(default_factory=list)  # (simulated s, VmRSS KiB)
    losses: list[tuple[LossRecord, Episode | None]] = field(default_factory=list)  # the ledger, with its episode
    fleet_status: dict[str, str] = field(default_factory=dict)  # the fleet groups' status at the last poll

    @property
    def complete(self) -> list[Episode]:
        """Episodes that began and whose allowance ended within the run (the others are not judged)."""
        return [e for e in self.episodes if e.start is not None and e.deadline is not None
                and e.deadline <= self.end_t]

    @property
    def stale(self) -> list[Note]:
        return [n for n in self.notes if n.stale_at is not None]

    @property
    def false_alerts(self) -> list[Note]:
        return [n for n in self.notes if n.episode is None]

    @property
    def misses(self) -> list[Episode]:
        return [e for e in self.complete if not e.hit]

    @property
    def fleet_alerts(self) -> list[Note]:
        """Alerts about the batch group idle by design or the group nobody runs (there must be none)."""
        return [n for n in self.notes if n.subject in (BATCH_GROUP, ABANDONED_GROUP)]

    @property
    def unexpected_losses(self) -> list[LossRecord]:
        """Ledger rows no scripted incident explains. Only a producer that dies inside a transaction loses data
        here (the coordinator aborts it at its timeout, then the producer comes back); clean leader changes,
        high watermark dips, failovers and restarts must record nothing."""
        return [x for x, ep in self.losses
                if not (x.kind in TXN_LOSS_KINDS and ep is not None and ep.plan.type == "producer_crash_in_txn")]

    @property
    def rss_growth(self) -> float | None:
        if self.mem_start is None or self.mem_end is None or not self.mem_start.rss_kib:
            return None
        return (self.mem_end.rss_kib - self.mem_start.rss_kib) / self.mem_start.rss_kib

    @property
    def passed(self) -> bool:
        growth = self.rss_growth
        return (not self.stale and not self.false_alerts and not self.misses and not self.unexpected_losses
                and not self.fleet_alerts
                and (growth is None or growth <= RSS_GROWTH_LIMIT))


# ----------------------------------------------------------------------------- the run
def _step_to(sb: Sandbox, t: float) -> None:
    clock = sb.clock
    assert isinstance(clock, ManualClock)
    if t > clock.now():
        clock.advance(t - clock.now())
    sb.advance_to(t)  # the clock is there already: waits for two ticks of the model at time t


def _monitor_config(sb: Sandbox, poll_s: float, thresholds: dict[str, Any]) -> MonitorConfig:
    cluster: dict[str, Any] = {"name": "soak", "bootstrap_servers": sb.bootstrap_servers}
    if sb.zk_connect:
        cluster["zookeeper"] = {"connect": sb.zk_connect}
    return MonitorConfig.model_validate({"clusters": [cluster], "poll_interval_s": poll_s,
                                         "request_timeout_s": REQUEST_TIMEOUT_S, "thresholds": thresholds,
                                         "policies": soak_policies()})


def run_soak(hours: float = 24.0, poll_s: float = 30.0, zookeeper: bool = False, quiet_s: float = 180.0,
             first_at: float = 300.0, warmup_s: float = 3600.0, trace: bool = False,
             progress: Callable[[str], None] | None = None) -> SoakResult:
    cluster = soak_cluster(zookeeper)
    thresholds = soak_thresholds()
    slots, cycle_s = schedule(plans(cluster, thresholds, poll_s, zookeeper), poll_s, quiet_s, first_at)
    # the timeline repeats every (cycle - first_at): cycle n's slots sit at first_at + n * that + offset
    period = cycle_s - first_at
    check_isr_spacing(slots, period, Thresholds().isr_flap_window_s)
    sc = soak_scenario(cluster, slots, period)
    total = hours * 3600.0
    n_polls = int(total // poll_s)
    episodes: list[Episode] = []
    for c in range(int(total // period) + 1):
        for s in slots:
            lo = c * period + s.at
            if lo <= total:
                episodes.append(Episode(s.plan, c, (lo, lo + s.length)))
    res = SoakResult(hours, poll_s, zookeeper, slots, period, episodes, [])
    timeline = Timeline(sc.incidents, sc.repeat_every)
    actions = sorted({a.at for c in range(int(total // period) + 2) for a in timeline.actions_in_cycle(c)
                      if a.at <= total})

    clock = ManualClock(start=float(int(time.time())))
    sb = Sandbox(sc, zookeeper=zookeeper, tick_s=0.01, clock=clock)
    sb.start()
    cfg = _monitor_config(sb, poll_s, thresholds)
    poller = ClusterPoller(cfg.clusters[0], cfg)
    t0 = res.t0 = sb.cluster.start
    open_notes: dict[tuple[str, str], Note] = {}
    seen_seq = 0
    real0 = time.monotonic()
    ai = 0
    try:
        for k in range(n_polls + 1):
            t = k * poll_s
            while ai < len(actions) and actions[ai] <= t:
                if actions[ai] - STEP_EPS > clock.now() - t0:
                    _step_to(sb, t0 + actions[ai] - STEP_EPS)
                ai += 1
            _step_to(sb, t0 + t)
            events = sb.call(lambda c, after=seen_seq: [e for e in c.events if e[0] > after])
            if events:
                seen_seq = events[-1][0]
            _file_events(events, t0, episodes)
            r = poller.poll(t0 + t)
            _file_alerts(r, t, t0, episodes, open_notes, res.notes)
            res.losses += [(x, next((e for e in episodes if e.covers(t)), None)) for x in r.snapshot.losses]
            res.fleet_status = {g.group_id: g.status for g in r.snapshot.groups
                                if g.group_id in (BATCH_GROUP, ABANDONED_GROUP)}
            res.polls += 1
            res.end_t = t
            if res.mem_start is None and t >= warmup_s:
                res.mem_start = _memory(t, poller)
                if trace:
                    tracemalloc.start()  # allocations from here on: what is still alive at the end is growth
            if k % max(1, int(3600 // poll_s)) == 0:
                res.rss_hourly.append((t, vmrss_kib()))
            if progress is not None and k and k % max(1, int(3600 // poll_s)) == 0:
                progress(f"t+{t / 3600:.1f}h polls {k} real {time.monotonic() - real0:.0f}s "
                         f"RSS {vmrss_kib() / 1024:.1f} MiB open {sorted(open_notes)} "
                         f"stale {len(res.stale)} false {len(res.false_alerts)}")
        res.mem_end = _memory(res.end_t, poller)
    finally:
        tracemalloc.stop()
        res.real_s = time.monotonic() - real0
        poller.close()
        sb.stop()
    return res


def _memory(t: float, poller: ClusterPoller) -> Memory:
    gc.collect()
    objects = gc.get_objects()
    types = Counter(type(o).__name__ for o in objects)
    del objects
    traced: dict[str, float] = {}
    if tracemalloc.is_tracing():
        for stat in tracemalloc.take_snapshot().statistics("filename"):
            name = stat.traceback[0].filename
            pkg = next((p for p in ("collectors", "sandbox", "bench", "kafka", "confluent_kafka")
                        if f"/{p}/" in name), "other")
            traced[pkg] = traced.get(pkg, 0.0) + stat.size / 1024
    return Memory(t, vmrss_kib(), sum(types.values()), state_size(poller), types, traced)


def _file_events(events: list[tuple[int, float, str]], t0: float, episodes: list[Episode]) -> None:
    for _, when, what in events:
        rel = when - t0
        m = MARKER.match(what)
        if m is None:
            for e in episodes:
                if e.start is not None and (e.end is None or rel <= e.end + e.plan.allowance_s) \
                        and rel >= e.start and len(e.events) < 50:
                    e.events.append(f"t+{rel:.0f}s {what}")
            continue
        kind = m.group(1)
        # its episode: a plan with an incident of that type (a plan may script several: metadata_lag's crash), the
        # slot that contains the marker (markers fire STEP_EPS early)
        ep = next((e for e in episodes if any(s["type"] == kind for s in e.plan.specs)
                   and e.window[0] - 1.0 <= rel < e.window[1]), None)
        if ep is None:
            continue
        ep.markers += 1
        if ep.start is None:
            ep.start = rel
        expected_markers = sum(1 + (s.get("duration") is not None) for s in ep.plan.specs)
        if ep.markers >= expected_markers:
            ep.end = rel  # the last marker: the incident is over (instant ones end where they start)


def _file_alerts(r: PollResult, t: float, t0: float, episodes: list[Episode], open_notes: dict[tuple[str, str], Note],
                 notes: list[Note]) -> None:
    for a in r.opened:
        ep = next((e for e in episodes if e.covers(t)), None)
        n = Note(a.rule, a.subject, a.first_seen - t0, episode=ep)
        open_notes[(a.rule, a.subject)] = n
        notes.append(n)
        if ep is not None:
            ep.notes.append(n)
    for a in r.resolved:
        n = open_notes.pop((a.rule, a.subject), None)
        if n is not None:
            n.resolved = (a.resolved_at or t0 + t) - t0
    for n in open_notes.values():
        dl = n.episode.deadline if n.episode is not None else None
        if dl is not None and t > dl and n.stale_at is None:
            n.stale_at = t


# ----------------------------------------------------------------------------- the report
def report(res: SoakResult) -> list[str]:
    out = []
    mode = "ZooKeeper mode with a real ensemble" if res.zookeeper else \
        "KRaft mode; ZooKeeper left out (a real ensemble runs on real time and cannot be compressed)"
    out.append(f"soak: {res.hours:g} simulated hours, poll every {res.poll_s:g} s, {mode}")
    out.append(f"cycle: {len(res.slots)} incident types, {res.cycle_s:.0f} s per cycle "
               f"(an incident every {res.cycle_s / len(res.slots) / 60:.1f} min on average), "
               f"first at t+{res.slots[0].at:.0f}s")
    complete = res.complete
    header = f"{'incident type':<22} {'n':>3} {'expected rule':<40} {'hit':>7} {'max resolve':>11} " \
             f"{'allowance':>9}  other rules raised"
    out += ["", header, "-" * len(header)]
    for s in res.slots:
        eps = [e for e in complete if e.plan.type == s.plan.type]
        ttr = [max(0.0, n.resolved - e.end) for e in eps for n in e.notes
               if n.resolved is not None and e.end is not None]
        hits = sum(e.hit for e in eps)
        expected = " | ".join(sorted(s.plan.expected)) or "(none expected)"
        others = sorted(set().union(*(e.rules for e in eps)) - s.plan.expected) if eps else []
        out.append(f"{s.plan.type:<22} {len(eps):>3} {expected:<40} {f'{hits}/{len(eps)}':>7} "
                   f"{(f'{max(ttr):.0f} s' if ttr else '-'):>11} {s.plan.allowance_s:>7.0f} s  "
                   f"{', '.join(others) or '-'}")
    unfinished = len([e for e in res.episodes if e not in complete])
    out.append("")
    out.append("summary:")
    speed = res.end_t / res.real_s if res.real_s else 0.0
    out.append(f"  polls {res.polls}, simulated {res.end_t / 3600:.2f} h, real {res.real_s:.0f} s "
               f"(x{speed:.0f}), incidents judged {len(complete)} (+{unfinished} not finished by the end)")
    ms, me = res.mem_start, res.mem_end
    if ms is not None and me is not None:
        growth = res.rss_growth or 0.0
        out.append(f"  RSS start {ms.rss_kib / 1024:.1f} MiB (t+{ms.at / 3600:.1f}h, after warm-up), "
                   f"end {me.rss_kib / 1024:.1f} MiB (t+{me.at / 3600:.1f}h), "
                   f"delta {(me.rss_kib - ms.rss_kib) / 1024:+.1f} MiB ({growth:+.1%}; limit +{RSS_GROWTH_LIMIT:.0%})")
        pts = [(t / 3600, kib / 1024) for t, kib in res.rss_hourly if t >= ms.at]
        if len(pts) >= 3:
            mx, my = sum(x for x, _ in pts) / len(pts), sum(y for _, y in pts) / len(pts)
            slope = sum((x - mx) * (y - my) for x, y in pts) / sum((x - mx) ** 2 for x, _ in pts)
            out.append(f"  RSS trend after warm-up {slope * 1024:+.0f} KiB per simulated hour (least squares over "
                       f"{len(pts)} hourly samples: {' '.join(f'{y:.1f}' for _, y in pts)} MiB)")
        out.append(f"  gc objects start {ms.gc_objects}, end {me.gc_objects}, delta {me.gc_objects - ms.gc_objects:+d}"
                   f"; most grown types: {', '.join(f'{k} {v:+d}' for k, v in _grown(ms, me)) or '-'} "
                   "(Note: this soak's own record of each alert)")
        if me.traced_kib:
            out.append("  tracemalloc, allocated after warm-up and alive at the end (KiB): "
                       + ", ".join(f"{k} {v:.0f}" for k, v in sorted(me.traced_kib.items(), key=lambda x: -x[1])))
        out.append(f"  poller state start {ms.state}")
        out.append(f"  poller state end   {me.state}")
    else:
        out.append("  RSS: run shorter than the warm-up, not measured")
    out.append(f"  stale alerts (open past allowance): {len(res.stale)}")
    out += [f"    {n.describe()} (still open at t+{n.stale_at:.0f}s)" for n in res.stale[:30]]
    out.append(f"  false alerts in quiet periods: {len(res.false_alerts)}")
    out += [f"    {n.describe()}" for n in res.false_alerts[:30]]
    out.append(f"  incidents without their expected rule: {len(res.misses)}")
    for e in res.misses[:20]:
        out.append(f"    {e.plan.type} #{e.cycle} t+{e.start:.0f}s..{e.end:.0f}s raised {sorted(e.rules) or '-'}; "
                   f"events: {'; '.join(e.events[:8])}")
    kinds = Counter(x.kind for x, _ in res.losses)
    lost = sum(x.messages or 0 for x, _ in res.losses)
    dips = sum(1 for e in complete if e.plan.type == "leader_change_hw_dip")
    crashes = sum(1 for e in complete if e.plan.type == "producer_crash_in_txn")
    by_kind = ", ".join(f"{k} {v}" for k, v in sorted(kinds.items())) or "none"
    out.append(f"  loss ledger: {len(res.losses)} records ({by_kind}), {lost:,} messages; "
               f"{crashes} producer_crash_in_txn episodes judged; {dips} leader changes with a high watermark dip")
    out.append(f"  loss records no incident explains (must be 0): {len(res.unexpected_losses)}")
    out += [f"    {x.kind} {x.subject} {x.messages} t+{x.time - res.t0:.0f}s: {x.evidence}"
            for x in res.unexpected_losses[:20]]
    out.append(f"  alerts about {BATCH_GROUP} (batch, idle by policy) or {ABANDONED_GROUP} (found Empty, inactive), "
               f"must be 0: {len(res.fleet_alerts)}; their status at the end: {res.fleet_status}")
    out += [f"    {n.describe()}" for n in res.fleet_alerts[:10]]
    out.append(f"  result: {'PASS' if res.passed else 'FAIL'}")
    return out


def _grown(a: Memory, b: Memory, n: int = 5) -> list[tuple[str, int]]:
    diff = Counter(b.types)
    diff.subtract(a.types)
    return [(k, v) for k, v in diff.most_common(n) if v > 0]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--hours", type=float, default=24.0, help="simulated hours (default 24)")
    ap.add_argument("--poll-interval", type=float, default=30.0, help="simulated seconds between polls")
    ap.add_argument("--quiet", type=float, default=180.0, help="quiet seconds after each allowance")
    ap.add_argument("--zookeeper", action="store_true", help="ZooKeeper mode with a real ensemble (+ zk incidents)")
    ap.add_argument("--tracemalloc", action="store_true",
                    help="trace allocations after the warm-up and report what is still alive at the end, by package")
    ap.add_argument("--allowances", action="store_true", help="print each incident type's allowance and exit")
    a = ap.parse_args(argv)
    logging.basicConfig(level=logging.ERROR)
    logging.getLogger("kafka").setLevel(logging.CRITICAL)  # connection refused / timeouts are the incidents
    if a.allowances:
        cl = soak_cluster(a.zookeeper)
        for p in plans(cl, soak_thresholds(), a.poll_interval, a.zookeeper):
            print(f"{p.type:<22} {p.allowance_s:>5.0f} s  {p.why}")
        return 0
    res = run_soak(a.hours, a.poll_interval, a.zookeeper, a.quiet, trace=a.tracemalloc,
                   progress=lambda s: print(s, file=sys.stderr, flush=True))
    print("\n".join(report(res)))
    return 0 if res.passed else 1


if __name__ == "__main__":
    sys.exit(main())
