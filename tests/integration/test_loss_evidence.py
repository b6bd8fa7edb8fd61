"""Loss evidence against the sandbox's ground truth: an unclean election that truncates a partition is reported
with exactly the messages the model lost; a clean leader change is not reported at all.

The collector polls the sandbox over TCP with the real clients. Ground truth is the model's own event log
("unclean election ledger-0: leader 2, N messages lost", N = the high watermark at the election minus the new
leader's log end). The last poll before the leader dies runs with simulated time frozen and the crash happens at
that same frozen instant, so the high watermark the collector saw is the one the model lost from: the figures
must be equal, not close. The new leader answers OffsetForLeaderEpoch (KIP-320) from its epoch cache.
"""

from __future__ import annotations

import contextlib
import re
import time
from collections.abc import Iterator
from typing import Any

import pytest

from collectors.runtime.poller import ClusterPoller
from sandbox.runner import Sandbox
from tests.support.monitor import alert, make_poller, poll, poll_until
from tests.support.sandbox import frozen, running_sandbox, scenario

pytestmark = pytest.mark.integration

CLUSTER = {
    "brokers": 3,
    "broker_config": {"min.insync.replicas": "1", "replica.lag.time.max.ms": "10000"},
    "topics": [
        # RF 2 on brokers 1 and 2, unclean election allowed: broker 2 falls behind, broker 1 dies, 2 takes over
        {"name": "ledger", "partitions": 1, "replication_factor": 2, "produce_rate": 40,
         "configs": {"unclean.leader.election.enable": "true"}},
        # RF 3, unclean election off: its leader's death is a clean failover
        {"name": "orders", "partitions": 3, "replication_factor": 3, "produce_rate": 30},
    ],
    "groups": [{"group_id": "billing", "topics": ["ledger", "orders"], "commit_interval_s": 1}],
    "transactional_producers": [
        {"transactional_id": "tx", "topics": ["orders"], "timeout_ms": 20_000, "transaction_duration_s": 2}],
}
RESTARTED = re.compile(r"producer tx restarted with epoch (\d+)")
UNCLEAN = re.compile(r"unclean election ledger-0: leader (\d+), ([\d,]+) messages? lost")


@pytest.fixture()
def sb() -> Iterator[Sandbox]:
    with running_sandbox(scenario(CLUSTER), speed=10.0) as s:
        s.advance_to(s.cluster.start + 15)
        yield s


@pytest.fixture()
def poller(sb: Sandbox) -> Iterator[ClusterPoller]:
    p = make_poller(sb)
    poll(p, sb)  # the first sight only starts watching (a monitor started late pages for nothing it found)
    yield p
    p.close()


def losses_of(r: object) -> list[tuple[str, str, int | None]]:
    return [(x.kind, x.subject, x.messages) for x in r.snapshot.losses]  # type: ignore[attr-defined]


def test_unclean_election_truncation_is_reported_with_the_models_exact_loss(sb: Sandbox,
                                                                             poller: ClusterPoller) -> None:
    sb.call(lambda c: c.set_slow_follower(2, True))  # 2 keeps a fifth of the pace: out of the ISR in 10 s
    poll_until(poller, sb, lambda r: any(p.topic == "ledger" and p.isr == [1] for p in r.snapshot.partitions),
               timeout=60)
    with frozen(sb):
        before = poll(poller, sb)
        hw = next(p.high_watermark for p in before.snapshot.partitions if p.topic == "ledger")
        epoch = next(p.leader_epoch for p in before.snapshot.partitions if p.topic == "ledger")
        committed_before = next(g.committed_offset for g in before.snapshot.group_partitions
                                if (g.group_id, g.topic) == ("billing", "ledger"))
        sb.call(lambda c: c.crash_broker(1))
        sb.advance_to(sb.clock.now())  # one tick at the frozen time: its listener closes, as a dead process's does
    assert committed_before is not None and hw is not None
    seen: list[tuple[str, str, int | None]] = []
    seen_with_poll: list[Any] = []

    def until_truncated(r: Any) -> bool:
        seen.extend(losses_of(r))
        seen_with_poll.extend(r.snapshot.losses)
        return alert(r, "data_truncated", "ledger-0") is not None

    r = poll_until(poller, sb, until_truncated, timeout=60)
    truth = [UNCLEAN.search(w) for _, _, w in sb.call(lambda c: list(c.events))]
    leader, lost = next((int(m.group(1)), int(m.group(2).replace(",", ""))) for m in truth if m)
    assert leader == 2 and lost > 0
    assert ("truncation", "ledger-0", lost) in seen  # the collector's figure is the model's, exactly
    assert ("unclean_election", "ledger-0", None) in seen
    truncated = alert(r, "data_truncated", "ledger-0")
    assert truncated.severity == "critical" and truncated.value == lost
    assert f"{hw:,}" in truncated.summary and "unclean election enabled" in truncated.summary
    unclean = alert(r, "unclean_election", "ledger-0")
    assert f"(epoch {epoch})" in unclean.summary and "-> 2" in unclean.summary
    record = next(x for x in poller.state.recent_losses if x.kind == "truncation")
    assert (record.kind, record.leader_before, record.leader_after, record.epoch_before) == ("truncation", 1, 2, epoch)
    assert record.epoch_after is not None and record.epoch_after > epoch and record.unclean_enabled
    # billing had read ledger-0 past where the new leader's log now ends: it read messages that are gone and,
    # unless it resets, skips as many new ones (its lag of 0 would say "fine"). Known from its last commit
    # before the change, however briefly its offset was beyond the log end.
    beyond = [x for x in seen_with_poll if x.kind == "offset_beyond_log_end"]
    assert [(x.group_id, x.subject, x.offset) for x in beyond] == [("billing", "ledger-0", hw - lost)]
    assert committed_before - (hw - lost) <= beyond[0].messages <= lost
    read_gone = alert(r, "offset_beyond_log_end", "billing")
    assert read_gone is not None and read_gone.value == beyond[0].messages
    # one cause: broker 1 is down, so the loss is part of its incident, not a second one
    broker = next(i for i in r.snapshot.incidents if i.kind == "broker")
    assert broker.members.get("data_truncated") == 1 and broker.members.get("unclean_election") == 1
    assert not any(i.kind == "topic" and i.subject == "ledger" for i in r.snapshot.incidents)


def test_a_clean_leader_change_is_no_loss(sb: Sandbox, poller: ClusterPoller) -> None:
    """Broker 1 leads orders-0 (RF 3, unclean election off); when it dies, an in-sync replica takes over with
    the whole log: the epoch moves, the collector asks, and nothing is reported."""
    first = poll(poller, sb)
    epochs = {p.partition: p.leader_epoch for p in first.snapshot.partitions if p.topic == "orders" and p.leader == 1}
    assert epochs  # broker 1 leads some of orders
    sb.call(lambda c: c.crash_broker(1))
    seen: list[tuple[str, str, int | None]] = []

    def moved(r: object) -> bool:
        seen.extend(losses_of(r))
        parts = [p for p in r.snapshot.partitions  # type: ignore[attr-defined]
                 if p.topic == "orders" and p.partition in epochs]
        return all(p.leader not in (-1, 1) and p.leader_epoch > epochs[p.partition] for p in parts)

    poll_until(poller, sb, moved, timeout=60)
    r = poll(poller, sb)  # one more: the epoch answers of the moved partitions are in
    seen.extend(losses_of(r))
    assert seen == []
    assert alert(r, "data_truncated") is None and alert(r, "unclean_election") is None
    watched = {k[1]: w.epoch for k, w in poller.state.epoch_watch.items() if k[0] == "orders"}
    assert all(watched[p] > epochs[p] for p in epochs)  # the collector moved on to the new epochs


def test_retention_deleting_unread_messages_is_counted_as_the_model_deleted_them(sb: Sandbox,
                                                                                  poller: ClusterPoller) -> None:
    """billing stops; orders' retention drops to 20 s: segments it never read are deleted. The messages the
    ledger counts as skipped add up to the model's log start minus the group's commit, exactly."""
    sb.call(lambda c: c.set_group_mode("billing", "stopped"))
    poll(poller, sb)  # the group seen above the log start: what happens next is seen happen
    sb.call(lambda c: c.set_topic_config("orders", "retention.ms", "20000"))
    skipped: dict[str, int] = {}

    def deleted_unread(r: object) -> bool:
        for x in r.snapshot.losses:  # type: ignore[attr-defined]
            if x.kind == "retention_skipped":
                skipped[x.subject] = skipped.get(x.subject, 0) + (x.messages or 0)
        return len(skipped) == 3

    poll_until(poller, sb, deleted_unread, timeout=60)
    with frozen(sb):
        r = poll(poller, sb)
        deleted_unread(r)
        truth = sb.call(lambda c: {f"orders-{i}": c.partition("orders", i).log_start - c.groups["billing"].committed[
            ("orders", i)] for i in range(3)})
    assert all(v > 0 for v in truth.values())
    assert skipped == truth
    lost = alert(r, "retention_data_loss", "billing")
    assert lost is not None and lost.value == sum(truth.values())


def test_a_producer_dead_mid_transaction_is_aborted_at_the_timeout_and_its_return_is_linked(
        sb: Sandbox, poller: ClusterPoller) -> None:
    """The producer of "tx" dies inside a transaction; the coordinator aborts it after its 20 s timeout and
    fences the producer (epoch + 1); later a new instance comes back (epoch + 1 again). The ledger has both,
    with the epochs the model logged."""
    poll_until(poller, sb, lambda r: any(t.transactional_id == "tx" and t.state == "Ongoing"
                                         for t in r.snapshot.transactions), timeout=30)
    sb.call(lambda c: c.crash_producer("tx", inside_transaction=True))
    found: list[Any] = []

    def seen(kind: str) -> Any:
        return lambda r: (found.extend(r.snapshot.losses), any(x.kind == kind for x in found))[1]

    poll_until(poller, sb, seen("txn_timeout_abort"), timeout=60)
    events = [w for _, _, w in sb.call(lambda c: list(c.events))]
    assert "transaction tx timed out; coordinator aborts" in events
    abort = next(x for x in found if x.kind == "txn_timeout_abort")
    assert abort.transactional_id == "tx" and abort.epoch_after == abort.epoch_before + 1
    assert "orders-" in abort.evidence and "20s timeout" in abort.evidence
    sb.call(lambda c: c.restart_producer("tx"))
    poll_until(poller, sb, seen("txn_producer_returned"), timeout=60)
    back = next(x for x in found if x.kind == "txn_producer_returned")
    restarted = [int(m.group(1)) for w in sb.call(lambda c: [e[2] for e in c.events]) if (m := RESTARTED.search(w))]
    assert back.transactional_id == "tx" and back.epoch_before == abort.epoch_after
    assert back.epoch_after == restarted[-1]
    assert [x.kind for x in found].count("txn_timeout_abort") == 1  # one abort, one record


def test_a_timeout_abort_that_comes_while_a_poll_runs_is_recorded(sb: Sandbox, poller: ClusterPoller) -> None:
    """A poll takes seconds on a big cluster, and the coordinator's abort can come between the poll's start (its
    `now`) and the request that sees it. Here every poll's answers come 1 s after its start, 10 s of the sandbox's
    clock: the transaction is seen open, then aborted, by polls that began before its 20 s timeout ran out. The
    abort is still recorded, as the test above records it from fast polls (measured from the poll's start, it was
    missed for good: the next poll sees nothing open)."""
    observe = poller.kafka.observe

    def slow(now: float, watch: Any, **kwargs: Any) -> Any:
        time.sleep(1.0)
        return observe(now, watch, **kwargs)

    poller.kafka.observe = slow  # type: ignore[method-assign]
    test_a_producer_dead_mid_transaction_is_aborted_at_the_timeout_and_its_return_is_linked(sb, poller)


def test_a_truncation_while_the_monitor_was_down_longer_than_checkpoint_max_age_is_still_claimed(
        sb: Sandbox, poller: ClusterPoller, tmp_path: Any) -> None:
    """The collector saves its checkpoint and stops; broker 1 dies and broker 2, behind, is elected uncleanly; the
    collector starts again after `checkpoint_max_age_s` (5 s here). Before, the whole checkpoint was refused as too
    old and the first poll only started watching: the truncation went unclaimed. Where the old epoch ends in the new
    leader's log is proof across any gap, so the epochs are resumed (and nothing else) and the loss is the model's,
    exactly."""
    from collectors.outputs.checkpoint import load_checkpoint, save_checkpoint

    sb.call(lambda c: c.set_slow_follower(2, True))
    poll_until(poller, sb, lambda r: any(p.topic == "ledger" and p.isr == [1] for p in r.snapshot.partitions),
               timeout=60)
    with frozen(sb):
        poll(poller, sb)
        save_checkpoint(tmp_path, poller.checkpoint(sb.clock.now()))
        saved_at = sb.clock.now()
        poller.close()
        sb.call(lambda c: c.crash_broker(1))
        sb.advance_to(sb.clock.now())
    while sb.clock.now() < saved_at + 10:  # nobody watches
        time.sleep(0.2)
    again = make_poller(sb)
    try:
        cp = load_checkpoint(tmp_path, again.name, lag_points=again.state.lag_points,
                             window_size=again.thresholds.lag_window_points, now=sb.clock.now(), max_age_s=5)
        assert cp is not None and cp.evidence_only and not cp.alerts and cp.state.epoch_watch
        assert not cp.state.hw_history and not cp.state.condition_since  # the rest starts fresh
        again.resume(cp)
        seen: list[tuple[str, str, int | None]] = []
        r = poll_until(again, sb, lambda r: seen.extend(losses_of(r)) or
                       alert(r, "data_truncated", "ledger-0") is not None, timeout=60)
    finally:
        again.close()
    truth = [UNCLEAN.search(w) for _, _, w in sb.call(lambda c: list(c.events))]
    lost = next(int(m.group(2).replace(",", "")) for m in truth if m)
    assert lost > 0 and ("truncation", "ledger-0", lost) in seen
    assert alert(r, "data_truncated", "ledger-0").value == lost


def test_an_ha_pair_records_a_truncation_once_when_the_holder_could_not_write_it(
        sb: Sandbox, poller: ClusterPoller, tmp_path: Any) -> None:
    """Two collectors on one history root (an HA pair) both watch the unclean election that truncates ledger-0;
    only the lease's holder writes. The holder cannot write its ledger rows (``loss_events`` is a file where the
    table's directory should be) and stops. The standby kept its own rows of the loss, only those, and writes them
    when it takes the root over: the history holds the truncation once, with the model's count, and group
    billing's reading past the cut once, from its commit before the crash. Each collector
    asked at its own polls; their rows are the same loss (`loss_rows.covers`), so the standby would have dropped
    its own had the holder written its."""
    from collectors.outputs.history import HistoryWriter, read_table
    from collectors.outputs.history.loss_rows import covers

    root = tmp_path / "history"
    holder = HistoryWriter(root, exclusive=True, clusters=[poller.name], clock=sb.clock.now)
    standby = HistoryWriter(root, exclusive=True, clusters=[poller.name], clock=sb.clock.now)
    assert holder.standby_of is None and standby.standby_of is not None
    other = make_poller(sb)
    pairs = [(poller, holder), (other, standby)]
    try:
        poll(other, sb)  # the standby's first sight: it starts watching
        sb.call(lambda c: c.set_slow_follower(2, True))
        poll_until(poller, sb, lambda r: any(p.topic == "ledger" and p.isr == [1] for p in r.snapshot.partitions),
                   timeout=60)
        blocked = root / "loss_events"
        blocked.write_text("not a directory")  # the holder's disk refuses the ledger, from before the loss
        committed: dict[str, int | None] = {}
        with frozen(sb):
            for (p, w), who in zip(pairs, ("holder", "standby"), strict=True):
                last = poll(p, sb)
                w.add(last)
                w.flush()
                committed[who] = next(g.committed_offset for g in last.snapshot.group_partitions
                                      if (g.group_id, g.topic, g.partition) == ("billing", "ledger", 0))
            sb.call(lambda c: c.crash_broker(1))
            sb.advance_to(sb.clock.now())
        rows: dict[str, list[Any]] = {"holder": [], "standby": []}
        read_past: dict[str, list[Any]] = {"holder": [], "standby": []}
        for (p, w), who in zip(pairs, rows, strict=True):
            def recorded(r: Any, w: HistoryWriter = w, who: str = who) -> bool:
                w.add(r)
                w.flush()
                rows[who].extend(x for x in r.snapshot.losses if x.kind == "truncation")
                read_past[who].extend(x for x in r.snapshot.losses if x.kind == "offset_beyond_log_end")
                return bool(rows[who])

            poll_until(p, sb, recorded, timeout=60)
        assert holder.unwritten_loss_clusters() == {poller.name} and holder.last_error is not None
        assert standby.unwritten_loss_clusters() == {poller.name}  # the standby kept its rows: nobody wrote them
        assert standby.standby_of is not None
        truth = [UNCLEAN.search(w) for _, _, w in sb.call(lambda c: list(c.events))]
        lost = next(int(m.group(2).replace(",", "")) for m in truth if m)
        [theirs], [ours] = rows["holder"], rows["standby"]
        assert lost > 0 and theirs.messages == ours.messages == lost  # each collector's figure is the model's
        fields = ("cluster", "kind", "topic", "partition", "group_id", "epoch_before", "epoch_after", "offset")
        assert covers({f: getattr(theirs, f) for f in fields}, {f: getattr(ours, f) for f in fields})
        # billing had read past the cut (its commit, seen by both at the frozen last poll): each recorded it, from
        # that commit, as the same loss; the standby kept its row with the truncation's
        [their_read], [our_read] = read_past["holder"], read_past["standby"]
        cut = ours.offset
        assert committed["holder"] == committed["standby"] and committed["standby"] is not None
        assert (our_read.group_id, our_read.offset, our_read.messages) == ("billing", cut, committed["standby"] - cut)
        assert (our_read.epoch_before, our_read.epoch_after) == (ours.epoch_before, ours.epoch_after)
        assert covers({f: getattr(their_read, f) for f in fields}, {f: getattr(our_read, f) for f in fields})
        assert not holder.close()  # it stops with the loss unwritten
        blocked.unlink()  # the disk is back; the standby takes over at its next flush
        assert standby.flush() and standby.standby_of is None and not standby.buffered_never_dropped()
    finally:
        other.close()
        for w in (holder, standby):  # again after a pass: harmless (nothing buffered, the lease let go again)
            w.close()
    ledger = read_table(root, "loss_events")
    assert sorted(ledger.kind) == ["offset_beyond_log_end", "truncation", "unclean_election"]  # once each: ours
    [row] = ledger[ledger.kind == "truncation"].itertuples()
    assert (row.topic, row.partition, row.messages) == ("ledger", 0, lost)
    [row] = ledger[ledger.kind == "offset_beyond_log_end"].itertuples()
    assert (row.group_id, row.offset, row.messages) == ("billing", cut, our_read.messages)


class _Collector:
    """A `python -m collectors --json` process; its stdout drained on a thread (a full pipe would stall it) into
    the loss records and the truncation alerts it printed."""

    def __init__(self, cfg: Any, name: str) -> None:
        import subprocess
        import sys
        import threading
        from pathlib import Path

        self.name = name
        self.proc = subprocess.Popen([sys.executable, "-m", "collectors", "--config", str(cfg), "--json",
                                      "--log-level", "INFO"],  # the lease's lines are INFO
                                     cwd=Path(__file__).resolve().parents[2], stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)
        self.polls = 0
        self.truncations: list[dict[str, Any]] = []  # the loss records of kind truncation it printed
        self.read_past: list[dict[str, Any]] = []  # ... and of kind offset_beyond_log_end
        self.isr: list[int] | None = None  # ledger-0's, at its last poll
        self.err = ""
        self.unread: Exception | None = None  # a line of stdout that did not read as a document
        self._threads = [threading.Thread(target=self._read, daemon=True),
                         threading.Thread(target=self._read_err, daemon=True)]
        for t in self._threads:
            t.start()

    def _read(self) -> None:
        import json

        assert self.proc.stdout is not None
        for line in self.proc.stdout:  # drained to the end whatever a line holds: a full pipe stalls the process
            try:
                doc = json.loads(line)["clusters"][0]
                self.truncations += [x for x in doc["losses"] if x["kind"] == "truncation"]
                self.read_past += [x for x in doc["losses"] if x["kind"] == "offset_beyond_log_end"]
                self.isr = next((p["isr"] for p in doc["partitions"]
                                 if (p["topic"], p["partition"]) == ("ledger", 0)), self.isr)
                self.polls += 1
            except Exception as e:
                self.unread = self.unread or e

    def _read_err(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.err += line

    def stop(self) -> int:
        import signal

        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(timeout=30)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
        for t in self._threads:
            t.join(timeout=5)
        return code


def _until(what: str, done: Any, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


@pytest.mark.parametrize("holder_writes", [False, True], ids=["holder-cannot-write", "holder-writes"])
def test_two_collector_processes_on_one_history_record_a_truncation_once(sb: Sandbox, tmp_path: Any,
                                                                         holder_writes: bool) -> None:
    """The HA pair as deployed: two `python -m collectors` processes, state directories of their own, one history
    root. The first holds the root's lease; the second stands by. Both watch the unclean election that truncates
    ledger-0, and group billing's reading past the cut; each keeps its own record, and the history must hold each
    loss once (a process polls on its own clock, not at the crash's instant: its count can fall short of the
    model's by the messages written after its last poll before the crash, never exceed it).

    ``holder-cannot-write``: ``loss_events`` is a file where the directory should be, and the holder is stopped
    (SIGTERM) with its rows unwritten. The standby takes the root over and, the disk mended (before its takeover or
    after: either order may come), writes its own: the history holds the standby's rows.
    ``holder-writes``: the usual pair. The holder writes the loss, and is then stopped (a deploy): the standby,
    which kept its rows until it found the holder's (at a flush as standby, or at its takeover: either may come),
    takes over without writing the loss again: the history holds the holder's rows."""
    from collectors.outputs.history import read_table

    root = tmp_path / "history"
    procs: list[_Collector] = []
    try:
        for name in ("holder", "standby"):
            cfg = tmp_path / f"{name}.yaml"
            cfg.write_text(
                f"clusters:\n  - name: sandbox\n    bootstrap_servers: '{sb.bootstrap_servers}'\n"
                f"poll_interval_s: 1\nrequest_timeout_s: 3\nstate_dir: {tmp_path / name}\ncheckpoint_interval_s: 1\n"
                f"exporter: {{enabled: false}}\nhistory: {{root: {root}, flush_interval_s: 1}}\n")
            procs.append(_Collector(cfg, name))
            _until(f"the {name}'s first poll", lambda p=procs[-1]: p.polls >= 1)  # the first holds the lease
        holder, standby = procs
        _until("the standby standing by", lambda: "this one stands by" in standby.err, timeout=10)
        sb.call(lambda c: c.set_slow_follower(2, True))
        _until("broker 2 out of ledger-0's ISR", lambda: holder.isr == [1] and standby.isr == [1])
        blocked = root / "loss_events"
        if not holder_writes:
            blocked.write_text("not a directory")  # the holder's disk refuses the ledger
        sb.call(lambda c: c.crash_broker(1))
        _until("both collectors' record of the truncation", lambda: holder.truncations and standby.truncations)
        if holder_writes:
            _until("the holder's ledger written", lambda: blocked.is_dir() and
                   (read_table(root, "loss_events").kind == "truncation").any())
        assert holder.stop() == 0
        assert ("stopping with the record of a loss in sandbox" in holder.err) is not holder_writes
        if not holder_writes:
            blocked.unlink()
        _until("the standby's takeover", lambda: "this one writes it from now on" in standby.err)
        _until("the ledger written", lambda: blocked.is_dir() and
               (read_table(root, "loss_events").kind == "truncation").any())
        time.sleep(1.5)  # a flush more: nothing written twice
        assert standby.stop() == 0
    finally:
        for p in procs:
            with contextlib.suppress(Exception):  # every one stopped, whatever another's stop raised
                p.stop()
    assert holder.unread is None and standby.unread is None
    assert "has not recorded" not in standby.err  # no loss was ever the standby's alone for 10 minutes
    truth = [UNCLEAN.search(w) for _, _, w in sb.call(lambda c: list(c.events))]
    lost = next(int(m.group(2).replace(",", "")) for m in truth if m)
    ledger = read_table(root, "loss_events")
    assert sorted(ledger.kind) == ["offset_beyond_log_end", "truncation", "unclean_election"], ledger  # once each
    writer = holder if holder_writes else standby
    [row] = ledger[ledger.kind == "truncation"].itertuples()
    [theirs] = writer.truncations
    assert (row.topic, row.partition, row.messages) == ("ledger", 0, theirs["messages"])  # the writer's row
    assert abs(row.time - theirs["time"]) < 1e-3
    [read] = ledger[ledger.kind == "offset_beyond_log_end"].itertuples()  # billing, caught up, read past the cut
    [their_read] = writer.read_past
    assert (read.group_id, read.offset, read.messages) == ("billing", theirs["offset"], their_read["messages"])
    assert 0 < row.messages <= lost and all(0 < x["messages"] <= lost for x in holder.truncations + standby.truncations)
