"""A producer that keeps Transaction V1's rules on a Transaction V2 cluster (a client older than Kafka 4), proved
by two transactions begun at one epoch (`collectors.model.txn_clients`): its rises count again, for
`producer_epoch_bumps` and for the loss ledger's timeout aborts; a V2 producer's rises, one transaction an epoch,
never do."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest

from collectors.alerting.evaluation import judge
from collectors.config import Thresholds
from collectors.model.observations import KafkaObservation, PartitionMeta
from collectors.model.snapshot import build_snapshot
from collectors.model.state import ClusterState
from collectors.model.txn_clients import EpochSeen, counted_increase, proved_v1, rise_counts
from collectors.outputs.checkpoint import Checkpoint, checkpoint_path, load_checkpoint, save_checkpoint
from tests.unit.test_checkpoint import edit_meta

TH = Thresholds(producer_epoch_bumps=3, producer_epoch_window_s=3600)
T = 1_800_000_000.0


def test_a_rise_counts_only_out_of_an_epoch_two_transactions_began_at() -> None:
    seen: dict[str, EpochSeen] = {}
    assert not rise_counts(seen, "tx", 7, 3, T)  # first sighting
    assert not rise_counts(seen, "tx", 7, 3, T)  # the same transaction again: no proof
    assert not rise_counts(seen, "tx", 7, 3, None)  # none open
    assert not seen["tx"].keeps_v1
    assert not rise_counts(seen, "tx", 7, 4, T + 10)  # a rise out of an epoch of one transaction: a V2 end, maybe
    assert not rise_counts(seen, "tx", 7, 4, T + 20) and seen["tx"].keeps_v1  # a second transaction at epoch 4
    assert not rise_counts(seen, "tx", 7, 4, T + 30) and seen["tx"].starts == [T + 10, T + 20]  # two are enough
    assert rise_counts(seen, "tx", 7, 5, None)  # out of a proven epoch: a restart or a fence
    assert not seen["tx"].keeps_v1 and seen["tx"].proven == (7, 4)  # the new epoch proves nothing yet
    assert proved_v1(seen, "tx", 7, 4) and not proved_v1(seen, "tx", 7, 5) and not proved_v1(seen, "tx", 7, 3)
    rise_counts(seen, "tx", 7, 5, T + 40)
    rise_counts(seen, "tx", 7, 5, T + 50)
    assert not rise_counts(seen, "tx", 8, 0, T + 60)  # a new producer id (an exhausted epoch): starts over
    rise_counts(seen, "tx", 8, 0, T + 70)
    assert not rise_counts(seen, "tx", 8, 0, None) and seen["tx"].keeps_v1
    assert not rise_counts(seen, "other", 8, 1, T)  # each transactional id apart


def observation(now: float, epoch: int, state: str, start: float, timeout_ms: int = 60_000) -> KafkaObservation:
    o = KafkaObservation(time=now, cluster_id="c", controller_id=1, brokers=[(1, "h", 9092, None)],
                         partitions=[PartitionMeta("t", 0, 1, 1, [1], [1], [])],
                         topic_configs={"t": {"min.insync.replicas": "1"}}, transaction_version=2)
    o.high_watermark[("t", 0)], o.log_start[("t", 0)], o.last_stable[("t", 0)] = 500, 0, 500
    o.listed_transactions["tx"] = 7
    o.transactions.append({"transactional_id": "tx", "coordinator": 1, "transaction_state": state,
                           "producer_id": 7, "producer_epoch": epoch, "transaction_timeout_ms": timeout_ms,
                           "transaction_start_time_ms": int(start * 1000), "partitions": [("t", 0)]})
    return o


STALE, UNLISTED = "stale", "unlisted"  # another id's DescribeTransactions failed; ListTransactions failed


def run(polls: list[tuple[int, str, float] | tuple[int, str, float, str]], st: ClusterState | None = None,
        t0: float = T) -> tuple[list[bool], list[str], ClusterState]:
    """One poll every 30 s: (epoch, state, start offset from the poll[, STALE or UNLISTED]) each; whether
    `producer_epoch_bumps` fired at each, and the loss ledger's kinds."""
    st = st if st is not None else ClusterState()
    fired, losses = [], []
    for i, (epoch, state, ago, *how) in enumerate(polls):
        now = t0 + 30 * i
        o = observation(now, epoch, state, now - ago)
        if how:
            o.stale_sections.add("transactions")
        if how == [UNLISTED]:
            o.listed_transactions.clear()
            o.transactions.clear()
        snap = build_snapshot("c", o, None, st, TH, now)
        fired.append(any(c.rule == "producer_epoch_bumps" for c in judge(snap, st, TH, now)))
        losses += [x.kind for x in snap.losses]
    return fired, losses, st


def test_an_old_clients_restarts_page_on_a_v2_cluster_a_new_clients_ends_do_not() -> None:
    # an old client: each instance begins two transactions (a new start each poll) at its epoch, then restarts
    old = [(e, "Ongoing", 1.0) for e in (10, 10, 11, 11, 12, 12, 13, 13)]
    fired, _, st = run(old)
    assert fired == [False] * 6 + [True, True]  # rises at polls 2, 4 and 6: the third pages
    assert [e for _, e in st.producer_epochs["tx"]] == [11, 11, 12, 13]
    # a Kafka 4 client: one transaction an epoch, whatever its states when polled
    new = [(10, "Ongoing", 1.0), (11, "PrepareCommit", 5.0), (12, "Ongoing", 1.0), (13, "CompleteCommit", 5.0),
           (14, "Ongoing", 1.0), (15, "Ongoing", 1.0), (16, "Ongoing", 1.0), (17, "PrepareCommit", 5.0)]
    fired, _, st = run(new)
    assert fired == [False] * 8 and "tx" not in st.producer_epochs


def test_each_transaction_row_records_whether_its_producer_had_proved_v1_at_its_epoch() -> None:
    """The history keeps the proof the collector judged by (``transactions.keeps_v1``): true from the poll that saw
    the second transaction begun at an epoch, false at a new epoch until it is proved again, null (None) on a
    cluster before V2, where every rise counts."""
    from collectors.outputs.history.rows import snapshot_columns

    st, seen = ClusterState(), []
    for i, epoch in enumerate((10, 10, 10, 11, 11)):
        now = T + 30 * i
        snap = build_snapshot("c", observation(now, epoch, "Ongoing", now - 1.0), None, st, TH, now)
        (record,) = snap.transactions
        seen.append(record.keeps_v1)
        assert snapshot_columns(snap)["transactions"]["keeps_v1"] == [record.keeps_v1]
    assert seen == [False, True, True, False, True]
    # the epoch goes back to 10, proven before (a coordinator restored from old data): not proven at it again
    # until two transactions begin there, as the collector counts no rise out of it before (`rise_counts`)
    for i, epoch in enumerate((10, 11), start=5):
        now = T + 30 * i
        (record,) = build_snapshot("c", observation(now, epoch, "Ongoing", now - 1.0), None, st, TH, now).transactions
        seen.append(record.keeps_v1)
    assert seen[5:] == [False, False] and st.txn_epochs["tx"].proven == (7, 11)
    o = observation(T, 10, "Ongoing", T - 1.0)
    o.transaction_version = 0
    snap = build_snapshot("c", o, None, ClusterState(), TH, T)
    assert snap.transactions[0].keeps_v1 is None and snapshot_columns(snap)["transactions"]["keeps_v1"] == [None]


def test_the_exported_rise_timestamp_changes_once_for_each_rise_the_collector_counts() -> None:
    """`TransactionRecord.epoch_rise_time`, what the Prometheus twin of producer_epoch_bumps counts the changes of
    on a V2 cluster (deploy/prometheus/alerts.yml): there for an older client from the poll that proves it (0.0)
    so that its first rise is a change too, the time of each counted rise after, and never for a client that
    speaks V2 (its rises are its transactions' ends). Exported as
    ``kafka_transaction_producer_epoch_rise_timestamp_seconds`` for that producer only."""
    from prometheus_client.parser import text_string_to_metric_families

    from collectors.outputs.exporter import MetricsEndpoint

    def series(polls: list[int], new_start_each_poll: bool) -> tuple[list[float | None], ClusterState, Any]:
        st, got, snap = ClusterState(), [], None
        for i, epoch in enumerate(polls):
            now = T + 30 * i
            snap = build_snapshot("c", observation(now, epoch, "Ongoing", now - 1.0 if new_start_each_poll else T),
                                  None, st, TH, now)
            got.append(snap.transactions[0].epoch_rise_time)
        return got, st, snap

    old, st, snap = series([10, 10, 11, 11, 12, 12, 13, 13], True)  # an older client restarted three times
    assert old == [None, 0.0, T + 60, T + 60, T + 120, T + 120, T + 180, T + 180]
    changes = sum(1 for a, b in itertools.pairwise(old) if None not in (a, b) and b > a)  # changes - resets
    counted = len(st.producer_epochs["tx"]) - 1  # every entry but the first is a rise the rule counts
    assert changes == counted == 3
    ep = MetricsEndpoint()
    ep.update([snap])
    got = {(s.labels["transactional_id"], s.value) for f in text_string_to_metric_families(ep.render().decode())
           for s in f.samples if s.name == "kafka_transaction_producer_epoch_rise_timestamp_seconds"}
    assert got == {("tx", T + 180)}
    modern, _, snap = series([10, 11, 12, 13, 14, 15], False)  # one transaction an epoch: V2 ends
    assert modern == [None] * 6
    ep.update([snap])
    assert b"kafka_transaction_producer_epoch_rise_timestamp_seconds{" not in ep.render()
    o = observation(T, 10, "Ongoing", T - 1.0)
    o.transaction_version = 0  # before V2 the epoch gauge's own changes are the rises
    assert build_snapshot("c", o, None, ClusterState(), TH, T).transactions[0].epoch_rise_time is None


def test_a_downgrade_from_v2_starts_the_count_over_as_the_upgrade_does() -> None:
    """Two rises counted under V2's rules, then the cluster reads as V1 (a downgrade) and the producer restarts
    once: one rise under the rules in force, no page, as the twin judges it (its V2 series stops, its epoch gauge's
    changes are not counted for the hour the level was 2). The rises counted under V2 went at the switch."""
    st = ClusterState()
    fired = []
    for i, (epoch, version) in enumerate([(10, 2), (10, 2), (11, 2), (11, 2), (12, 2), (12, 0), (13, 0)]):
        now = T + 30 * i
        o = observation(now, epoch, "Ongoing", now - 1.0)
        o.transaction_version = version
        snap = build_snapshot("c", o, None, st, TH, now)
        fired.append(any(c.rule == "producer_epoch_bumps" for c in judge(snap, st, TH, now)))
    assert fired == [False] * 7
    assert [e for _, e in st.producer_epochs["tx"]] == [12, 13] and "tx" not in st.txn_epochs


def test_a_prepare_is_at_the_epoch_after_the_transactions_own_so_it_proves_nothing() -> None:
    """Under V2 the end's bump comes as Prepare* is written: a poll that sees PrepareCommit sees the transaction
    begun at the epoch before. Its start must not count as a second transaction at the new epoch."""
    polls = [(10, "PrepareCommit", 5.0), (10, "Ongoing", 1.0), (11, "Ongoing", 1.0), (12, "Ongoing", 1.0)]
    fired, _, st = run(polls)
    assert fired == [False] * 4 and "tx" not in st.producer_epochs


def test_an_old_clients_transaction_aborted_at_its_timeout_is_in_the_ledger_on_a_v2_cluster() -> None:
    """A proven V1 producer's own abort bumps nothing, so one bump after the timeout is the coordinator's."""
    polls = [(10, "Ongoing", 1.0), (10, "Ongoing", 1.0), (10, "Ongoing", 31.0), (10, "Ongoing", 61.0),
             (11, "PrepareAbort", 91.0)]
    _, losses, _ = run([(e, s, ago) for e, s, ago in polls])
    assert losses == ["txn_timeout_abort"]
    # the same sightings but one transaction at the epoch: no proof of V1, no claim (the V2 rule stands)
    polls = [(10, "Ongoing", 1.0), (10, "Ongoing", 31.0), (10, "Ongoing", 61.0), (11, "PrepareAbort", 91.0)]
    assert run(polls)[1] == []


def test_a_poll_that_cannot_judge_the_abort_leaves_it_to_the_next_with_the_proof() -> None:
    """The poll that sees the rise out of the proven epoch has its transactions stale (another id's answer failed):
    the ledger judges nothing then, and the next poll must still know the epoch the watch saw open was proven."""
    polls = [(10, "Ongoing", 1.0), (10, "Ongoing", 1.0), (10, "Ongoing", 31.0), (10, "Ongoing", 61.0),
             (11, "PrepareAbort", 91.0, STALE), (11, "CompleteAbort", 121.0)]
    assert run(polls)[1] == ["txn_timeout_abort"]


def test_a_coordinator_that_does_not_list_its_transactions_for_a_poll_loses_no_proof() -> None:
    """ListTransactions unanswered (a coordinator moving): the producer is not listed, but that is no news of it;
    the proof and the rises counted stay, and its next restart counts."""
    polls = [(10, "Ongoing", 1.0), (10, "Ongoing", 1.0), (11, "Ongoing", 1.0), (11, "Ongoing", 1.0),
             (11, "Ongoing", 1.0, UNLISTED), (12, "Ongoing", 1.0)]
    _, _, st = run(polls)
    assert [e for _, e in st.producer_epochs["tx"]] == [11, 11, 12]
    _, _, st = run(polls[:4])  # a good poll that lists it no more: it is gone, and so is its memory
    gone = observation(T + 120, 11, "Ongoing", T + 119)
    gone.listed_transactions.clear()
    gone.transactions.clear()
    build_snapshot("c", gone, None, st, TH, T + 120)
    assert "tx" not in st.txn_epochs and "tx" not in st.producer_epochs


def test_a_transaction_stuck_in_prepare_keeps_its_clock_over_an_unanswered_listing() -> None:
    """PrepareCommit since T, the same transaction at every poll; the poll at T + 30 has ListTransactions
    unanswered. The clock of "in PrepareCommit since" must not restart there, or `stuck_transaction` (60 s) pages a
    poll later than it should, and an open one resolves and opens again."""
    st = ClusterState()
    stuck = []
    for i in range(4):
        now = T + 30 * i
        o = observation(now, 10, "PrepareCommit", T - 5)
        if i == 1:
            o.stale_sections.add("transactions")
            o.listed_transactions.clear()
            o.transactions.clear()
        snap = build_snapshot("c", o, None, st, TH, now)
        stuck.append(any(c.rule == "stuck_transaction" for c in judge(snap, st, TH, now)))
    assert st.txn_state_since["tx"] == ("PrepareCommit", T)
    assert stuck == [False, False, False, True]  # 90 s in PrepareCommit at the last poll


def test_the_proof_survives_a_restart_and_an_older_checkpoint_loads_without_it(tmp_path: Path) -> None:
    _, _, st = run([(10, "Ongoing", 1.0), (10, "Ongoing", 1.0)])
    assert st.txn_epochs["tx"].keeps_v1
    save_checkpoint(tmp_path, Checkpoint("c", "c", T + 60, st))
    cp = load_checkpoint(tmp_path, "c", lag_points=st.lag_points, window_size=st.window_size, now=T + 90,
                         max_age_s=3600)
    assert cp is not None and cp.state.txn_epochs == st.txn_epochs
    _, _, resumed = run([(11, "Ongoing", 1.0)], cp.state, t0=T + 90)
    assert [e for _, e in resumed.producer_epochs["tx"]] == [11, 11]  # the rise counted after the restart
    path = checkpoint_path(tmp_path, "c")
    edit_meta(path, lambda m: m["txn_epochs"]["tx"].__setitem__(2, [5.0, 5.0]))  # one start written twice
    cp = load_checkpoint(tmp_path, "c", lag_points=st.lag_points, window_size=st.window_size, now=T + 90,
                         max_age_s=3600)
    assert cp is not None and cp.state.txn_epochs["tx"].starts == [5.0] and not cp.state.txn_epochs["tx"].keeps_v1
    edit_meta(path, lambda m: m.pop("txn_epochs"))  # a checkpoint from before the field
    cp = load_checkpoint(tmp_path, "c", lag_points=st.lag_points, window_size=st.window_size, now=T + 90,
                         max_age_s=3600)
    assert cp is not None and cp.state.txn_epochs == {}


@pytest.mark.parametrize(("prev", "now", "want"), [
    ((7, 5, False, False), (7, 9, False), 4),  # V1 both: every restart and fence between the polls
    ((7, 5, True, False), (7, 9, False), 4),
    ((7, 5, False, True), (7, 9, True), 0),  # V2: a transaction end looks the same
    ((7, 5, False, False), (7, 9, True), 0),  # into a V2 poll
    ((7, 5, False, True), (7, 9, False), 0),  # out of one
    ((7, 5, True, True), (7, 9, True), 1),  # out of an epoch proved V1: once, as counted live
    ((7, 5, True, True), (7, 6, True), 1),
    ((7, 5, True, True), (7, 5, True), 0),
    ((7, 5, True, True), (7, 3, True), 0),  # went back
    ((7, 5, False, False), (7, 3, False), 0),
    ((8, 5, False, False), (7, 9, False), 0),  # a new producer id
    ((None, 5, False, False), (7, 9, False), 0),  # unknown counts nothing
    ((7, None, False, False), (7, 9, False), 0),
    ((7, 5, None, True), (7, 9, True), 0),  # a flag not kept reads as false
    ((7, 5, False, None), (7, 9, None), 4),
])
def test_the_rise_the_report_and_the_dashboard_count(prev: tuple[Any, ...], now: tuple[Any, ...],
                                                     want: int) -> None:
    (prev_pid, prev_epoch, prev_keeps, prev_v2), (pid, epoch, v2) = prev, now
    assert counted_increase(prev_pid, prev_epoch, pid, epoch, prev_keeps, prev_v2, v2) == want
