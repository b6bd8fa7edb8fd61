"""Brokers coming and going, and what that does to leaders and ISRs.

* Brokers crash uncontrolled: the process is gone at once (connection refused),
  but the controller only notices when the session expires
  (`zookeeper.session.timeout.ms`, 18 s, or `broker.session.timeout.ms`, 9 s in
  KRaft). Until then the dead broker stays registered and keeps leadership, as
  in a real cluster; then it is fenced, leaders move to an alive in-sync
  replica and it leaves every ISR. With no such replica the partition goes
  offline (leader -1) keeping the last ISR member, unless the topic allows
  unclean election, in which case an out-of-sync replica takes over and the
  high watermark falls back to its log end (acknowledged data lost). In KRaft
  only an active controller fences: while the quorum has no leader
  (`sandbox.controller`) nothing is fenced and no leader moves.
* Followers fetch at a bounded rate; one that has not caught up to the leader's
  log end for `replica.lag.time.max.ms` leaves the ISR and rejoins once its log
  end reaches the high watermark. High watermark = min log end over the ISR.
* Odd but legal states on demand: a broker that flaps (crash/restart on a
  period), a partition offline with every broker up (its replicas' log
  directories failed).

A partition of an idle topic settles once a step could no longer change it
(followers caught up, nothing produced, no ISR timer running): replication
then skips it until an event wakes it (`Topology._wake`): a crash, restart,
fencing, election, slow follower, or a write. So an idle 100,000-partition
cluster costs next to nothing per step, and one broker outage costs what its
own partitions need.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Iterable
from typing import Any

from collectors.model.wording import plural
from sandbox.controller import Controller
from sandbox.topology import Partition, Topic

ALARM_EARLY_S = 1e-3  # wake a settled partition this much before its lag timer can fire (float rounding)
FOLLOWER_FETCH_RATE = 20_000.0  # messages/s a healthy follower can copy per partition
SLOW_FOLLOWER_FACTOR = 0.2  # share of the produce rate a slow follower keeps up with


class Replication(Controller):
    """Broker lifecycle, session expiry, leader election, follower fetching and the ISR."""

    _last_rebalance: float | None = None  # last auto.leader.rebalance check; None: none yet (count from start)
    _alarm_seq = 0  # tie-breaker of _alarms entries

    # ----------------------------------------------------------------- time
    def _flap(self) -> None:
        """Brokers scripted to flap: down for the first `down` seconds of every `period`, up for the rest."""
        for b in self.brokers.values():
            if b.flap is None:
                continue
            since, period, down = b.flap
            phase = (self.now - since) % period
            if phase < down and b.process_up:
                self.crash_broker(b.node_id)
                b.crashed_at = self.now - phase  # the crash happened at the cycle start, between two steps
            elif phase >= down and not b.process_up:
                self.restart_broker(b.node_id)

    def _expire_sessions(self) -> None:
        timeout = self.session_timeout_s()
        for b in self.brokers.values():
            if b.registered and not b.process_up and b.crashed_at is not None \
                    and self.now - b.crashed_at >= timeout:
                if self.mode == "kraft" and not self.controller_active():
                    continue  # no quorum leader: nobody fences it yet
                self._fence(b.node_id)

    def _fence(self, node_id: int) -> None:
        """The controller declares a broker dead: move leadership, shrink ISRs."""
        b = self.brokers[node_id]
        b.registered = False
        self.changes.brokers.add(node_id)
        self.log(f"broker {node_id} fenced (session expired)")
        if self.controller_id == node_id:
            self._elect_controller()
        for p in self._replicas_on[node_id]:
            self._wake(p)
            changed = False
            if node_id in p.isr and len(p.isr) > 1:
                p.isr.remove(node_id)
                changed = True
            if p.leader == node_id:
                self._elect_leader(p)
                changed = True
            if changed:
                p.partition_epoch += 1
                self.changes.partitions.add((p.topic, p.index))

    def _elect_leader(self, p: Partition) -> None:
        self._wake(p)
        candidates = [r for r in p.replicas if r in p.isr and self.brokers[r].registered
                      and r not in p.failed_replicas]
        if candidates:
            p.leader = candidates[0]
            p.bump_epoch()
            return
        p.leader = -1
        p.bump_epoch()
        if self.unclean_allowed(p.topic):
            out_of_sync = [r for r in p.replicas if self.brokers[r].registered and r not in p.failed_replicas]
            if out_of_sync:
                new = out_of_sync[0]
                lost = p.hwm - int(p.leo[new])
                p.leader = new
                p.bump_epoch()  # the unclean election is an epoch of its own, as in Kafka
                p.isr = [new]
                p.hwm = min(p.hwm, int(p.leo[new]))
                self._touch(p.topic)
                for r in p.replicas:
                    p.leo[r] = min(p.leo[r], p.leo[new])
                self.log(f"unclean election {p.topic}-{p.index}: leader {new}, "
                         f"{plural(max(lost, 0), 'message')} lost")

    def _replicate(self, dt: float) -> None:
        """Followers fetch, the ISR shrinks and expands, high watermarks advance.

        Every partition of a producing topic is looked at each step; of an idle topic only those awake.
        """
        lag_max = int(self.broker_setting("replica.lag.time.max.ms")) / 1000.0
        shrinks: dict[int, list[str]] = {}
        expands: dict[int, list[str]] = {}
        awake = self._awake
        alarms = self._alarms
        while alarms and alarms[0][0] <= self.now:
            when, _, topic, index = heapq.heappop(alarms)
            if self._alarm_at.get((topic, index)) == when:  # else the partition was woken (and re-set) since
                self._wake(self.topics[topic].partitions[index])
        producing = self._producing
        if awake:
            names = {t.name for t in producing}.union(awake)
            topics = [self.topics[x] for x in sorted(names, key=self._rank.__getitem__)]
        else:
            topics = producing
        for t in topics:
            if t.produce_rate > 0:
                awake.pop(t.name, None)
                indices: Iterable[int] = range(len(t.partitions))
                woken = None
            else:
                woken = awake[t.name]
                indices = sorted(woken)
            moved = False
            for i in indices:
                p = t.partitions[i]
                moved = self._replicate_partition(t, p, dt, lag_max, shrinks, expands) or moved
                if woken is not None and self._settle(p, lag_max):
                    woken.discard(i)
            if woken is not None and not woken:
                del awake[t.name]
            if moved:
                self._touch(t.name)
        self._replicated_at = self.now
        for what, per_broker in (("left", shrinks), ("rejoined", expands)):
            for broker, parts in sorted(per_broker.items()):
                sample = ", ".join(parts[:3]) + (f" and {len(parts) - 3} more" if len(parts) > 3 else "")
                self.log(f"broker {broker} {what} the ISR of {len(parts)} partitions ({sample})")

    def _replicate_partition(self, t: Topic, p: Partition, dt: float, lag_max: float,
                             shrinks: dict[int, list[str]], expands: dict[int, list[str]]) -> bool:
        """One partition's step; True if its high watermark moved. (Runs for every producing partition at
        every step, hence the locals.)"""
        leader = p.leader
        if leader < 0:
            return False
        brokers = self.brokers
        now = self.now
        leo, caught_up_at, isr = p.leo, p.caught_up_at, p.isr
        leader_up = brokers[leader].process_up
        target = leo[leader]
        changed = False
        for r in p.replicas:
            if r == leader:
                caught_up_at[r] = now
                continue
            b = brokers[r]
            if b.process_up and leader_up and not p.stalled:
                rate = (t.produce_rate / max(len(t.partitions), 1) * SLOW_FOLLOWER_FACTOR
                        if b.slow_fetch else FOLLOWER_FETCH_RATE)
                fetched = min(target, leo[r] + rate * dt)
                leo[r] = fetched
                if fetched >= target:
                    caught_up_at[r] = now
            in_isr = r in isr
            if in_isr and b.registered and now - caught_up_at[r] > lag_max and leader_up:
                isr.remove(r)
                changed = True
                shrinks.setdefault(r, []).append(f"{p.topic}-{p.index}")
            elif not in_isr and b.registered and b.process_up and leader_up \
                    and leo[r] >= p.hwm and leo[r] >= target:
                isr.append(r)
                isr.sort(key=p.replicas.index)
                changed = True
                expands.setdefault(r, []).append(f"{p.topic}-{p.index}")
        moved = False
        if leader_up:
            hwm = max(p.hwm, int(min([leo[r] for r in isr])))
            moved = hwm != p.hwm
            p.hwm = hwm
        if changed:
            p.partition_epoch += 1
            self.changes.partitions.add((p.topic, p.index))
        return moved

    def _settle(self, p: Partition, lag_max: float) -> bool:
        """Settle `p` if no further step can change it until an event wakes it or an alarm rings; False while
        something can happen at any step: a follower catching up or about to rejoin the ISR.

        Settled, `p.quiet` lists the replicas each step would still mark caught up. A dead follower still in
        the ISR (its broker not fenced yet) leaves it at a known time, `replica.lag.time.max.ms` after it was
        last caught up: an alarm wakes the partition a little before (the step then decides, as always).
        Called right after the partition's step, with nothing produced to it.
        """
        if not p.online:
            p.quiet = ()  # a step skips an offline partition altogether
            return True
        if p.stalled:
            return False  # followers not fetching leave the ISR on time, with or without new data
        if not self.brokers[p.leader].process_up:
            p.quiet = (p.leader,)  # a dead leader still registered: nobody fetches, nothing shrinks until fencing
            return True
        target = p.leo[p.leader]
        quiet = [p.leader]
        alarm = math.inf
        for r in p.replicas:
            if r == p.leader:
                continue
            b = self.brokers[r]
            if b.process_up:
                if p.leo[r] < target or r not in p.isr:
                    return False  # still fetching, or about to rejoin the ISR
                quiet.append(r)
            elif r in p.isr and b.registered:
                alarm = min(alarm, p.caught_up_at[r] + lag_max - ALARM_EARLY_S)
        p.quiet = tuple(quiet)
        if alarm < math.inf and self._alarm_at.get((p.topic, p.index)) != alarm:
            self._alarm_at[(p.topic, p.index)] = alarm  # one entry per deadline, however often it settles again
            self._alarm_seq += 1
            heapq.heappush(self._alarms, (alarm, self._alarm_seq, p.topic, p.index))
        return True

    def _rebalance_leaders(self) -> None:
        """auto.leader.rebalance.enable: move leadership back to the preferred replica periodically."""
        if self.broker_setting("auto.leader.rebalance.enable") != "true":
            return
        if self.mode == "kraft" and not self.controller_active():
            return  # the controller does it: without a quorum leader, nobody
        interval = int(self.broker_setting("leader.imbalance.check.interval.seconds"))
        last = self.start if self._last_rebalance is None else self._last_rebalance
        if self.now - last < interval:
            return
        self._last_rebalance = self.now
        self.elect_preferred_leaders()

    def elect_preferred_leaders(self) -> None:
        """Move leadership back to the first replica wherever it is in sync (kafka-leader-election)."""
        for p in self.all_partitions():
            pref = p.replicas[0]
            if p.online and p.leader != pref and pref in p.isr and self.brokers[pref].registered:
                self._wake(p)
                p.leader = pref
                p.bump_epoch()
                p.partition_epoch += 1
                self.changes.partitions.add((p.topic, p.index))

    # ----------------------------------------------------------------- incidents
    def crash_broker(self, node_id: int) -> None:
        b = self.brokers[node_id]
        if not b.process_up:
            return
        b.process_up = False
        b.crashed_at = self.now
        self.changes.brokers.add(node_id)
        for p in self._replicas_on[node_id]:
            self._wake(p)
        self.log(f"broker {node_id} crashed")

    def restart_broker(self, node_id: int) -> None:
        b = self.brokers[node_id]
        if b.process_up:
            return
        b.process_up = True
        b.crashed_at = None
        was_registered = b.registered
        b.registered = True
        self.changes.brokers.add(node_id)
        self.log(f"broker {node_id} restarted")
        if self.controller_id < 0:
            self._elect_controller()
        for p in self._replicas_on[node_id]:
            self._wake(p)
            if not was_registered and p.leader == -1 and node_id in p.isr and node_id not in p.failed_replicas:
                p.leader = node_id  # the last in-sync replica is back: the partition comes online
                p.bump_epoch()
                p.partition_epoch += 1
                self.changes.partitions.add((p.topic, p.index))
            p.caught_up_at[node_id] = self.now

    def start_flapping(self, node_id: int, period_s: float, down_s: float | None = None) -> None:
        """Crash the broker now and every `period_s`; it restarts `down_s` (default half a period) after each."""
        down = period_s / 2 if down_s is None else down_s
        if not 0 < down < period_s:
            raise ValueError(f"down_s must be in (0, {period_s}), got {down}")
        self.brokers[node_id].flap = (self.now, period_s, down)
        self.log(f"broker {node_id} flapping: down {down:g}s every {period_s:g}s")
        self._flap()

    def stop_flapping(self, node_id: int) -> None:
        """End the flapping; the broker is restarted if it is down at that moment."""
        b = self.brokers[node_id]
        if b.flap is None:
            return
        b.flap = None
        self.restart_broker(node_id)
        self.log(f"broker {node_id} stopped flapping")

    def set_broker_delay(self, node_id: int, delay_s: float) -> None:
        self.brokers[node_id].response_delay_s = delay_s

    def lag_metadata(self, node_id: int, view: dict[str, Any] | None) -> None:
        """The broker's metadata cache stops following the controller (a broker slow to apply its updates, or cut
        off from it): until called again with None it answers Metadata with `view`, the cluster as it was when the
        lag began (`handlers.metadata_answer`), while the others answer as it is. Clients must not take its older
        leaders for news: Kafka's own ignore a partition's metadata of a lower leader epoch (KIP-320).

        In KRaft the cache is the metadata log the broker fetches from the quorum leader: its fetch stops where it
        is, and DescribeQuorum says so (the broker's log end offset and last fetch stay; a voter's lag grows)."""
        b = self.brokers[node_id]
        was, since = b.metadata_view, b.metadata_view_since
        b.metadata_view, b.metadata_view_since = view, (self.now if view is not None else None)
        if view is None and was is not None and since is not None and self.mode != "kraft":
            # what really happened, for a monitor's words to be compared with: how long, and how many partitions
            # it answered at an older leader epoch than the controller's when it caught up
            now_epochs = {(t.name, q.index): q.leader_epoch for t in self.topics.values() for q in t.partitions}
            behind = sorted(f"{t['name']}-{p['partition_index']}" for t in was["topics"] for p in t["partitions"]
                            if p["leader_epoch"] < now_epochs.get((t["name"], p["partition_index"]), -1))
            self.log(f"broker {node_id}: metadata cache caught up after {self.now - since:.0f}s; it had answered "
                     f"{len(behind)} partition(s) at an older leader epoch: {', '.join(behind[:5]) or 'none'}")
            return
        if self.mode != "kraft" or (view is None and b.metadata_stopped is None):
            self.log(f"broker {node_id}: metadata cache " + ("stops following the controller" if view else "caught up"))
            return
        voter = self.voters.get(node_id)
        if view is not None:
            b.metadata_stopped = (voter.leo if voter is not None else self.metadata_hwm, self.now)
            self.log(f"broker {node_id}: metadata cache stops following the controller, its metadata log fetch "
                     f"stopped at offset {int(b.metadata_stopped[0])}")
        else:
            offset, since = b.metadata_stopped
            b.metadata_stopped = None
            self.log(f"broker {node_id}: metadata cache caught up after {self.now - since:.0f}s, "
                     f"{int(self.metadata_hwm - offset)} records behind")

    def set_slow_follower(self, node_id: int, slow: bool) -> None:
        self.brokers[node_id].slow_fetch = slow
        for p in self._replicas_on[node_id]:
            self._wake(p)

    def fail_partition(self, topic: str, index: int | None = None) -> None:
        """Every replica of the partition (None: of the topic) loses its log directory; brokers stay up.

        As Kafka's controller does, the partition keeps its last leader as sole ISR member and goes offline.
        """
        for p in self.topics[topic].partitions if index is None else [self.topics[topic].partitions[index]]:
            self._wake(p)
            p.failed_replicas = set(p.replicas)
            if p.online:
                p.isr = [p.leader]
                p.leader = -1
                p.bump_epoch()
                p.partition_epoch += 1
                self.changes.partitions.add((p.topic, p.index))
            self.log(f"{p.topic}-{p.index} offline: every replica's log directory failed")

    def stall_followers(self, topic: str, index: int, stalled: bool = True) -> None:
        """The followers of one partition stop fetching it (or fetch again): the leader's log runs ahead of the
        high watermark, and after `replica.lag.time.max.ms` they leave the ISR."""
        p = self.topics[topic].partitions[index]
        self._wake(p)
        p.stalled = stalled
        self.log(f"{topic}-{index}: followers {'stop fetching' if stalled else 'fetch again'} "
                 f"(ISR {p.isr}, high watermark {p.hwm:,}, leader log end {p.leader_leo:,})")

    def lose_leader(self, topic: str, index: int) -> tuple[int, int]:
        """The leader's replica of one partition fails with whatever its followers had not copied.

        A new leader is elected (from the ISR; else an out-of-sync replica where unclean election is allowed;
        else the partition waits offline for the old leader), the followers fetch again, and the old leader's
        replica comes back as a follower and truncates to the new leader's log, as Kafka's does. Logs the
        ground truth and returns it as (committed, tail): committed messages lost (they were below the high
        watermark: acknowledged to acks=all producers, maybe read, and visible to a monitor as the high
        watermark going back) and the tail above the high watermark lost with them (acknowledged only to
        acks=1 producers: no reader of high watermarks can see it go).
        """
        p = self.topics[topic].partitions[index]
        old = p.leader
        if old < 0:
            self.log(f"leader lost {topic}-{index}: no leader to lose")
            return 0, 0
        self._wake(p)
        p.stalled = False
        hw_before, leo_before, epoch_before = p.hwm, int(p.leo[old]), p.leader_epoch
        p.failed_replicas.add(old)
        if old in p.isr and len(p.isr) > 1:
            p.isr.remove(old)
        self._elect_leader(p)  # an unclean election logs its own line
        p.partition_epoch += 1
        self.changes.partitions.add((topic, index))
        new = p.leader
        p.failed_replicas.discard(old)
        if new < 0:  # nobody may lead: the old leader's replica, back, leads again with its whole log
            self._elect_leader(p)
            self.log(f"leader lost {topic}-{index}: no replica could take over (unclean election disabled); "
                     f"leader {old} is back with its log, 0 committed and 0 acks=1-only messages lost")
            return 0, 0
        kept = int(p.epoch_starts[-1][1])  # the new leader's log end when it took over
        p.leo[old] = min(p.leo[old], kept)
        p.caught_up_at[old] = self.now
        self._touch(topic)
        committed = max(0, hw_before - kept)
        tail = max(0, leo_before - max(kept, hw_before))
        self.log(f"leader lost {topic}-{index}: leader {old} (epoch {epoch_before}) -> {new} (epoch "
                 f"{p.leader_epoch}); {plural(committed, 'committed message')} lost (high watermark {hw_before:,} -> "
                 f"{p.hwm:,}), {plural(tail, 'acks=1-only message')} lost above it")
        return committed, tail

    def move_leader(self, topic: str, index: int, dip_messages: int, dip_s: float) -> None:
        """A clean leader change to another in-sync replica, whose high watermark reads `dip_messages` lower for
        `dip_s` seconds, until its followers fetch again (the dip KIP-207 describes). Nothing is lost."""
        p = self.topics[topic].partitions[index]
        old = p.leader
        to = [r for r in p.isr if r != old and self.brokers[r].registered and self.brokers[r].process_up
              and r not in p.failed_replicas]
        if old < 0 or not to:
            self.log(f"leader change {topic}-{index}: no other in-sync replica to move to")
            return
        self._wake(p)
        p.leader = to[0]
        p.bump_epoch()
        p.partition_epoch += 1
        self.changes.partitions.add((topic, index))
        floor = max(p.log_start, p.hwm - dip_messages)
        p.hw_dip = (self.now + dip_s, floor)
        self.log(f"leader change {topic}-{index}: leader {old} -> {p.leader} (epoch {p.leader_epoch}); its high "
                 f"watermark reads {floor:,}, {p.hwm - floor:,} below {p.hwm:,}, for {dip_s:g}s until its "
                 f"followers fetch; 0 messages lost")

    def end_hw_dip(self, topic: str, index: int) -> None:
        self.topics[topic].partitions[index].hw_dip = None

    def recover_partition(self, topic: str, index: int | None = None) -> None:
        """Undo `fail_partition`: the last ISR member leads again; the others rejoin once caught up."""
        for p in self.topics[topic].partitions if index is None else [self.topics[topic].partitions[index]]:
            self._wake(p)
            p.failed_replicas = set()
            if not p.online:
                self._elect_leader(p)
                p.partition_epoch += 1
                self.changes.partitions.add((p.topic, p.index))
            self.log(f"{p.topic}-{p.index} log directories back")
