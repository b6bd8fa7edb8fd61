"""Transaction V2 (KIP-890 part 2, Kafka 4's default) against the sandbox's ground truth, beside the old rules.

The same KRaft cluster runs once with ``transaction.version`` 0 and once with 2: a transactional producer commits
every two seconds, then dies inside a transaction, which the coordinator aborts at its 20 s timeout. Under V2 the
coordinator bumps the producer's epoch at every end, so the epoch rises with each commit. The model says what
really happened (its commit and abort counts, the epoch it handed out); the collector must read the feature level
through the real client (ApiVersions v3+), and under V2 neither page a crash loop for the commits
(`producer_epoch_bumps`) nor claim the abort as the coordinator's (`txn_timeout_abort`): one epoch bump cannot
tell it from the application's own abort there. Under V0 the same abort is claimed, and the commits move nothing.
A client older than Kafka 4 keeps V1's rules on a V2 cluster: once two of its transactions begun at one epoch
prove it, its restarts page again (`collectors.model.txn_clients`), and a Kafka 4 client's ends beside it do not.
"""

from __future__ import annotations

import itertools
import time
from pathlib import Path
from typing import Any

import duckdb
import pytest

from bench.bench_spark import duckdb_headline
from collectors.model.poll import PollResult
from collectors.outputs.history import HistoryWriter
from spark_analytics.period import Period
from tests.support.monitor import alert, make_poller, poll, poll_until
from tests.support.sandbox import frozen, running_sandbox, scenario
from tests.support.spark_history import one_week_start

pytestmark = pytest.mark.integration

TIMEOUT_MS = 20_000


def cluster(transaction_version: int) -> dict[str, Any]:
    return {
        "brokers": 3, "mode": "kraft", "transaction_version": transaction_version,
        "topics": [{"name": "orders", "partitions": 2, "replication_factor": 3, "produce_rate": 10}],
        "transactional_producers": [{"transactional_id": "tx", "topics": ["orders"], "timeout_ms": TIMEOUT_MS,
                                     "transaction_duration_s": 1, "pause_between_s": 1}],
    }


@pytest.mark.parametrize("transaction_version", [0, 2])
def test_epoch_rises_at_every_end_are_neither_a_crash_loop_nor_proof_of_a_timeout_abort(
        transaction_version: int) -> None:
    with running_sandbox(scenario(cluster(transaction_version)), speed=10.0) as sb:
        poller = make_poller(sb, producer_epoch_bumps=3, producer_epoch_window_s=3600)
        found: list[Any] = []
        epochs_seen: set[int] = set()

        def watch(r: PollResult) -> None:
            found.extend(r.snapshot.losses)
            epochs_seen.update(t.producer_epoch for t in r.snapshot.transactions if t.transactional_id == "tx")

        try:
            r = poll(poller, sb)
            assert r.snapshot.transaction_version == transaction_version  # read over TCP, ApiVersions v3+
            sb.advance_to(sb.clock.now() + 30)  # about ten commits, with polls in between seeing them
            start_commits = sb.call(lambda c: c.txn_producers["tx"].commits)
            # five more commits, and (V2) four epochs seen: how many polls fit in five commits is the machine's
            r = poll_until(poller, sb, lambda r: sb.call(lambda c: c.txn_producers["tx"].commits) >= start_commits + 5
                           and (transaction_version != 2 or len(epochs_seen) >= 4), timeout=30, on_poll=watch)
            commits, epoch = sb.call(lambda c: (c.txn_producers["tx"].commits, c.txn_producers["tx"].epoch))
            print(f"transaction.version {transaction_version}: the model committed {commits} transactions, "
                  f"epoch now {epoch}; the collector saw epochs {sorted(epochs_seen)}")
            if transaction_version == 2:
                assert epoch >= commits >= 5 and len(epochs_seen) >= 4  # rises the old rule would count
            else:
                assert epoch == 0 and epochs_seen == {0}
            assert alert(r, "producer_epoch_bumps", "tx") is None

            poll_until(poller, sb, lambda r: any(t.transactional_id == "tx" and t.state == "Ongoing"
                                                 for t in r.snapshot.transactions), timeout=30, on_poll=watch)
            sb.call(lambda c: c.crash_producer("tx", inside_transaction=True))
            aborted = poll_until(poller, sb, lambda r: sb.call(lambda c: c.txn_producers["tx"].timeout_aborts) == 1
                                 and any(t.transactional_id == "tx" and t.state == "CompleteAbort"
                                         for t in r.snapshot.transactions), timeout=60, on_poll=watch)
            truth = sb.call(lambda c: (c.txn_producers["tx"].timeout_aborts, c.txn_producers["tx"].own_aborts,
                                       [w for _, _, w in c.events if "timed out; coordinator aborts" in w]))
            print(f"transaction.version {transaction_version}: the model aborted {truth[0]} transaction at its "
                  f"timeout ({truth[2]}), {truth[1]} of its own; the ledger claimed "
                  f"{[x.kind for x in found]}")
            assert truth[0] == 1 and truth[1] == 0 and len(truth[2]) == 1
            claimed = [x for x in found if x.kind == "txn_timeout_abort"]
            if transaction_version == 2:
                assert claimed == []  # the same abort as below, and no proof of who made it
            else:
                assert [x.transactional_id for x in claimed] == ["tx"]
            assert alert(aborted, "producer_epoch_bumps", "tx") is None
            assert aborted.snapshot.transaction_version == transaction_version
        finally:
            poller.close()


def test_an_older_client_on_a_v2_cluster_is_proved_by_its_transactions_and_its_restarts_page(tmp_path: Path) -> None:
    """Two producers on a V2 cluster, a transaction of 8 s every ~10 s each: "legacy" an older client (one epoch for
    all its transactions), "modern" a Kafka 4 one (a bump at each end). legacy restarts at 40, 80 and 120 s; a poll
    every 6 s sees each of its instances begin two transactions or more, so each restart counts and the third
    pages, with the sandbox's count of restarts as its value. modern's epoch rises at each of its ends and pages
    nothing. The history the polls wrote holds the proof (``transactions.keeps_v1``), and the weekly report's rule
    (its DuckDB reference, whose rule the Spark tests hold the report to) counts the sandbox's three restarts from
    it, and none of modern's ends."""
    cl = cluster(2)
    cl["transactional_producers"] = [
        {"transactional_id": name, "topics": ["orders"], "transaction_duration_s": 8, "pause_between_s": 0.2,
         "transaction_v2": name == "modern"} for name in ("legacy", "modern")]
    sc = scenario(cl, incidents=[{"type": "producer_restart", "at": at, "transactional_id": "legacy"}
                                 for at in (40, 80, 120)])
    writer = HistoryWriter(tmp_path / "history", flush_interval_s=0, retention_days=None)
    with running_sandbox(sc, speed=10.0, start=one_week_start(time.time(), 140.0)) as sb:
        p = make_poller(sb, producer_epoch_bumps=3, producer_epoch_window_s=3600)
        paged: dict[float, dict[str, float | None]] = {}  # simulated seconds after the start: the pages
        rise_times: dict[str, list[float | None]] = {"legacy": [], "modern": []}  # what the twin counts changes of
        try:
            for at in range(5, 140, 6):  # not in step with the producers' ~10 s: polls see them in every state
                sb.advance_to(sb.cluster.start + at)
                with frozen(sb):
                    r = poll(p, sb)
                writer.add(r)
                for t in r.snapshot.transactions:
                    rise_times[t.transactional_id].append(t.epoch_rise_time)
                paged[r.snapshot.time - sb.cluster.start] = {
                    a.subject: a.value for a in r.snapshot.alerts if a.rule == "producer_epoch_bumps"}
        finally:
            p.close()
            writer.close()
        epochs = sb.call(lambda c: {n: (c.txn_producers[n].epoch, c.txn_producers[n].commits)
                                    for n in ("legacy", "modern")})
    restarts = [(t - sb.cluster.start, e) for _, t, e in sb.cluster.events
                if e.startswith("producer legacy restarted with epoch")]
    counted = duckdb_headline(duckdb.connect(), tmp_path / "history", Period.containing(sb.cluster.start))[
        "epoch_bumps"]
    print(f"the sandbox: legacy restarted {len(restarts)} times ({restarts}), epoch {epochs['legacy'][0]} after "
          f"{epochs['legacy'][1]} commits; modern epoch {epochs['modern'][0]} after {epochs['modern'][1]} commits; "
          f"the collector paged {paged}; the report's rule counts {counted} epoch bumps from the history; "
          f"the Prometheus twin's rise timestamp of legacy changed {_changes(rise_times['legacy'])} times")
    assert len(restarts) == 3 and epochs["legacy"][0] == 3  # one epoch for its transactions, one more a restart
    assert epochs["modern"][0] >= epochs["modern"][1] >= 10  # a bump at every end
    third = restarts[-1][0]
    assert not any(a for at, a in paged.items() if at < third)
    assert all(a == {"legacy": 3.0} for at, a in paged.items() if at > third)  # the first poll after it on
    proved = duckdb.sql(f"SELECT transactional_id, bool_or(keeps_v1) AS kv FROM read_parquet("
                        f"'{tmp_path}/history/transactions/*/*.parquet') GROUP BY ALL ORDER BY 1").fetchall()
    assert proved == [("legacy", True), ("modern", False)]
    assert counted == len(restarts)
    # the Prometheus twin (KafkaProducerEpochBumps) counts the changes of legacy's exported rise timestamp: one a
    # restart, from a series there (0.0) since its first instance was proved; modern exports none
    assert _changes(rise_times["legacy"]) == len(restarts) and 0.0 in rise_times["legacy"]
    assert set(rise_times["modern"]) == {None}


def _changes(values: list[float | None]) -> int:
    """What the twin counts (Prometheus's changes() - resets(): the rises) over the polls a series was exported at."""
    present = [v for v in values if v is not None]
    return sum(1 for a, b in itertools.pairwise(present) if b > a)
