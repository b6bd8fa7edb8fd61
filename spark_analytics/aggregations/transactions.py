"""Transactions (``transactions``, ``producers``, ``lso_gap``): stuck and hanging transactions, producer epoch
bumps, LSO gap percentiles; and the daily roll-ups of the last three (``transaction_epochs``, ``producers_hanging``,
``lso_gap_values`` + ``lso_gap_partitions``), from which a week's figures are the same as from the rows."""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from collectors.model.vocabulary import TRANSACTION_V2
from spark_analytics.aggregations.common import (
    before_end,
    between,
    day_of,
    episodes,
    in_days,
    in_period,
    percentiles,
)
from spark_analytics.aggregations.defaults import DEFAULT_ACCURACY, DEFAULT_TXN_GRACE_S
from spark_analytics.aggregations.thresholds import per_cluster
from spark_analytics.period import Period

TXN_KEYS = ("cluster", "transactional_id", "start_time")
"""A transaction: its id and when it started (a transactional id runs one transaction after another)."""
STUCK_COLUMNS = (*TXN_KEYS, "first_seen", "last_seen", "polls", "max_age_s", "timeout_ms", "last_state", "states",
                 "producer_id", "producer_epoch", "partitions", "grace_s", "stuck")
"""The report's ``transactions`` table: the stuck transactions, each with what on-call needs to find it."""


def transaction_detail(transactions: DataFrame, period: Period, grace_s: float | DataFrame | None = None
                       ) -> DataFrame:
    """One row per transaction seen in the period: distinct (cluster, transactional_id, start_time), with its
    numbers: first and last seen, polls, largest open age, timeout, grace, ``stuck``.

    ``stuck`` when its largest observed open age exceeds ``timeout_ms`` + `grace_s` (the coordinator
    aborts expired transactions on a timer, every 10 s by default, so a few seconds past the timeout is normal).
    `grace_s` is the collector's ``txn_timeout_grace_s``: one number, the `thresholds` frame (each cluster's
    ``txn_grace_s``), or None for the collector's default; the grace applied is the ``grace_s`` column.

    Numbers only, so Spark keeps it a fixed-width hash aggregate: a busy fleet opens hundreds of thousands of
    transactions a week, and the last state, states seen, producer and partitions (strings and arrays, which push
    the aggregate onto sorting every row) are wanted only for the stuck ones (`stuck_transactions`).
    """
    t, grace = per_cluster(_seen(transactions, period), grace_s, "txn_grace_s", DEFAULT_TXN_GRACE_S)
    t = t.withColumn("grace_s", grace)
    agg = t.groupBy(*TXN_KEYS).agg(
        F.min("time").alias("first_seen"), F.max("time").alias("last_seen"), F.count(F.lit(1)).alias("polls"),
        F.max("age_seconds").alias("max_age_s"), F.max("timeout_ms").alias("timeout_ms"),
        F.max("grace_s").alias("grace_s"))
    return agg.withColumn("stuck", F.coalesce(F.col("max_age_s") > F.col("timeout_ms") / 1000.0 + F.col("grace_s"),
                                              F.lit(False)))


def _seen(transactions: DataFrame, period: Period) -> DataFrame:
    return transactions.filter(in_period(period) & F.col("start_time").isNotNull())


def stuck_transactions(transactions: DataFrame, detail: DataFrame, period: Period) -> DataFrame:
    """The stuck transactions of `detail` (`transaction_detail`) with their last state, the states seen, the last
    producer id and epoch and the partitions (``STUCK_COLUMNS``): only their polls are read again."""
    stuck = detail.filter(F.col("stuck"))
    polls = _seen(transactions, period).join(F.broadcast(stuck.select(*TXN_KEYS)), list(TXN_KEYS), "left_semi")
    more = polls.groupBy(*TXN_KEYS).agg(
        F.max_by("state", "time").alias("last_state"), F.array_sort(F.collect_set("state")).alias("states"),
        F.max_by("producer_id", "time").alias("producer_id"),
        F.max_by("producer_epoch", "time").alias("producer_epoch"),
        F.max_by("partitions", "time").alias("partitions"))
    return stuck.join(more, list(TXN_KEYS), "left").select(*STUCK_COLUMNS)


def transaction_summary(detail: DataFrame) -> DataFrame:
    """Per cluster, from `transaction_detail`: transactions seen, stuck, and the longest open — the headline's
    figures, so the report keeps only the stuck transactions themselves (a busy transactional fleet opens hundreds
    of thousands a week: the bench week's 241 k rows cost 2 s to collect and 800 MB on the driver, for a page
    that lists the stuck ones)."""
    return detail.groupBy("cluster").agg(
        F.count(F.lit(1)).alias("transactions_seen"), F.count_if("stuck").alias("stuck_transactions"),
        F.max("max_age_s").alias("longest_open_s"))


def producer_epoch_bumps(transactions: DataFrame, period: Period, clusters: DataFrame | None = None) -> DataFrame:
    """Per cluster and transactional id: producer epoch increases between consecutive observations.

    ``epoch_bumps`` sums the increases (each InitProducerId or coordinator fence adds one), ``epoch_increases``
    counts the polls where the epoch was seen higher than before. Only observations of the same producer id are
    compared (a new producer id starts again at epoch 0). The transactions table only has rows while a
    transaction is open, so bumps while none is open show up at the next open transaction. `clusters`: the
    ``cluster`` history table; into or out of a poll at which it says Transaction V2 only a rise out of an epoch the
    producer had proved to keep V1's rules at counts, as one (`_epoch_polls`, `_increase`).
    """
    per_poll = _with_deltas(_epoch_polls(transactions.filter(before_end(period)), clusters), ())
    inside = per_poll.filter(in_period(period))
    return inside.groupBy("cluster", "transactional_id").agg(
        F.sum("_delta").cast("long").alias("epoch_bumps"), F.count_if(F.col("_delta") > 0).alias("epoch_increases"),
        F.min_by("epoch", "time").alias("first_epoch"), F.max_by("epoch", "time").alias("last_epoch"))


def _epoch_polls(transactions: DataFrame, clusters: DataFrame | None = None) -> DataFrame:
    """Per cluster, transactional id and poll: the highest epoch seen, its producer id, whether the poll ran
    Transaction V2 (``v2``) and whether the producer had proved by then that it keeps V1's rules at that epoch
    (``keeps_v1``, as the collector recorded it; false where not recorded).

    At a poll where the cluster ran Transaction V2 (`clusters`' ``transaction_version`` 2 or more) every
    transaction end of a client that speaks it bumps the epoch, so an increase into or out of that poll says
    nothing of restarts or fencing unless the producer proved it keeps V1's rules (an older client: the collector's
    `collectors.model.txn_clients`), as the collector counts them (`_increase`). The polls at V2 are few rows of the
    small ``cluster`` table, broadcast; none on an older fleet."""
    t = transactions.filter(F.col("producer_epoch").isNotNull())
    polls = t.groupBy("cluster", "transactional_id", "time").agg(
        F.max_by("producer_id", "producer_epoch").alias("producer_id"), F.max("producer_epoch").alias("epoch"),
        F.max_by(F.coalesce(F.col("keeps_v1"), F.lit(False)), "producer_epoch").alias("keeps_v1"))
    if clusters is None:
        return polls.withColumn("v2", F.lit(False))
    v2 = (clusters.filter(F.col("transaction_version") >= TRANSACTION_V2)
          .select("cluster", "time", F.lit(True).alias("v2")).distinct())
    return (polls.join(F.broadcast(v2), ["cluster", "time"], "left")
            .withColumn("v2", F.coalesce(F.col("v2"), F.lit(False))))


def _increase(prev_pid: Column, prev_epoch: Column, pid: Column, epoch: Column, prev_keeps_v1: Column,
              prev_v2: Column, v2: Column) -> Column:
    """The epoch increase from one observation to the next that restarts and fences made, 0 unless the same producer
    id was seen higher: all of it between two polls before Transaction V2 (each InitProducerId or fence adds one);
    into or out of a V2 poll, one if it rose out of an epoch proved to keep V1's rules (an older client's restart or
    fence, counted once as the collector counts it: the rise may hold V2 ends too, a client upgraded since), else
    none. A null flag (a roll-up day written before these were kept, whose observations at V2 carry no producer id
    instead) reads as false. `collectors.model.txn_clients.counted_increase` is the same rule for one pair (the
    dashboard's), held equal to this one on every case by a test."""
    def known(c: Column) -> Column:
        return F.coalesce(c, F.lit(False))
    rise = epoch - prev_epoch
    amount = F.when(~known(prev_v2) & ~known(v2), rise).when(known(prev_keeps_v1), F.least(rise, F.lit(1)))
    return F.greatest(F.lit(0), F.coalesce(F.when(prev_pid == pid, amount), F.lit(0)))


def _with_deltas(per_poll: DataFrame, by: Sequence[str]) -> DataFrame:
    w = Window.partitionBy("cluster", "transactional_id", *by).orderBy("time")

    def prev(c: str) -> Column:
        return F.lag(c).over(w)
    return per_poll.withColumn("_delta", _increase(prev("producer_id"), prev("epoch"), F.col("producer_id"),
                                                   F.col("epoch"), prev("keeps_v1"), prev("v2"), F.col("v2")))


EPOCH_DAYS_COLUMNS = ("cluster", "transactional_id", "day", "epoch_bumps", "epoch_increases", "first_time",
                      "first_producer_id", "first_epoch", "last_time", "last_producer_id", "last_epoch",
                      "first_v2", "last_v2", "last_keeps_v1")
"""The last three since the forty-sixth session: a day rolled up before lacks them (null: see `_increase`)."""


def epoch_days(transactions: DataFrame, start: float, end: float, clusters: DataFrame | None = None) -> DataFrame:
    """Per cluster, transactional id and epoch day of ``[start, end)`` (the roll-up table ``transaction_epochs``):
    the epoch increases between that day's observations, and its first and last observation (time, producer id,
    epoch), which `producer_epoch_bumps_from_days` compares with the neighbouring days' to count the increases
    across midnight, and whether those ran Transaction V2 and the last had proved V1's rules (`_increase` across
    midnight). One row per id and day instead of one per open transaction and poll. `clusters`: as for
    `producer_epoch_bumps`."""
    polls = _epoch_polls(transactions.filter(between(start, end)),
                         clusters.filter(between(start, end)) if clusters is not None else None)
    per_poll = _with_deltas(polls.withColumn("day", day_of()), ("day",))
    return per_poll.groupBy("cluster", "transactional_id", "day").agg(
        F.sum("_delta").cast("long").alias("epoch_bumps"), F.count_if(F.col("_delta") > 0).alias("epoch_increases"),
        F.min("time").alias("first_time"), F.min_by("producer_id", "time").alias("first_producer_id"),
        F.min_by("epoch", "time").alias("first_epoch"), F.max("time").alias("last_time"),
        F.max_by("producer_id", "time").alias("last_producer_id"),
        F.max_by("epoch", "time").alias("last_epoch"), F.min_by("v2", "time").alias("first_v2"),
        F.max_by("v2", "time").alias("last_v2"),
        F.max_by("keeps_v1", "time").alias("last_keeps_v1")).select(*EPOCH_DAYS_COLUMNS)


def producer_epoch_bumps_from_days(days: DataFrame, period: Period) -> DataFrame:
    """`producer_epoch_bumps` from `epoch_days` rows (same columns, same figures): each day's own increases, plus
    the one from the last observation of the id's previous day with any to this day's first (the days before
    the period count only as that previous day, as the rows before it do for `producer_epoch_bumps`)."""
    d = days.filter(F.col("day") < F.lit(period.epoch_days[1]))
    w = Window.partitionBy("cluster", "transactional_id").orderBy("day")
    d = d.withColumn("_bridge", _increase(F.lag("last_producer_id").over(w), F.lag("last_epoch").over(w),
                                          F.col("first_producer_id"), F.col("first_epoch"),
                                          F.lag("last_keeps_v1").over(w), F.lag("last_v2").over(w), F.col("first_v2")))
    return in_days(d, period).groupBy("cluster", "transactional_id").agg(
        (F.sum("epoch_bumps") + F.sum("_bridge")).cast("long").alias("epoch_bumps"),
        (F.sum("epoch_increases") + F.count_if(F.col("_bridge") > 0)).alias("epoch_increases"),
        F.min_by("first_epoch", "day").alias("first_epoch"), F.max_by("last_epoch", "day").alias("last_epoch"))


def transactions_by_id(detail: DataFrame, bumps: DataFrame) -> DataFrame:
    """Per cluster and transactional id: transactions seen, stuck, longest open, epoch bumps (from the two above)."""
    per = detail.groupBy("cluster", "transactional_id").agg(
        F.count(F.lit(1)).alias("transactions_seen"), F.count_if("stuck").alias("stuck"),
        F.max("max_age_s").alias("longest_open_s"), F.max("timeout_ms").alias("timeout_ms"))
    return (per.join(bumps, ["cluster", "transactional_id"], "full")
            .select("cluster", "transactional_id", F.coalesce("transactions_seen", F.lit(0)).alias("transactions_seen"),
                    F.coalesce("stuck", F.lit(0)).alias("stuck"), "longest_open_s", "timeout_ms",
                    F.coalesce("epoch_bumps", F.lit(0)).alias("epoch_bumps"),
                    F.coalesce("epoch_increases", F.lit(0)).alias("epoch_increases"), "first_epoch", "last_epoch"))


HANGING_COLUMNS = ("cluster", "topic", "partition", "producer_id", "time", "txn_start_offset", "transactional_id",
                   "hanging")


def hanging_days(producers: DataFrame, start: float, end: float) -> DataFrame:
    """The producer rows of ``[start, end)`` flagged ``hanging`` (the roll-up table ``producers_hanging``): all
    `hanging_transactions` reads, so it takes them in place of ``producers``. Rare rows."""
    return producers.filter(between(start, end) & F.coalesce(F.col("hanging"), F.lit(False))).select(
        *HANGING_COLUMNS)


def hanging_transactions(producers: DataFrame, poll_idx: DataFrame, period: Period) -> DataFrame:
    """Episodes of a producer with an open transaction on a partition that no coordinator knows (``hanging``).

    One hanging transaction (topic, partition, producer id) can give several episodes when some polls could not
    tell (the transactions section stale); the headline counts distinct (topic, partition, producer id).
    """
    h = producers.filter(before_end(period) & F.coalesce(F.col("hanging"), F.lit(False)))
    return episodes(h.select(*HANGING_COLUMNS[:-1]),
                    ["cluster", "topic", "partition", "producer_id"], poll_idx, period,
                    [F.max("txn_start_offset").alias("txn_start_offset"),
                     F.max("transactional_id").alias("transactional_id")])


def lso_gaps(lso_gap: DataFrame, period: Period, exact: bool = True, accuracy: int = DEFAULT_ACCURACY,
             by: Sequence[str] = ("cluster", "topic")) -> DataFrame:
    """LSO gap percentiles (messages between the high watermark and the last stable offset).

    The history has a row only for partitions whose gap is > 0 at the poll, so these are percentiles over
    partition-polls *with an open transaction holding the LSO back*; ``partition_polls`` says how many.
    """
    g = lso_gap.filter(in_period(period))
    return percentiles(g.groupBy(*by), {"lso_gap": "lso_gap"}, exact, accuracy,
                       F.count(F.lit(1)).alias("partition_polls"),
                       F.countDistinct("topic", "partition").alias("partitions"))


LSO_GAP_COLUMNS = ("partition_polls", "partitions", "lso_gap_p50", "lso_gap_p95", "lso_gap_p99", "lso_gap_max")


def lso_gap_values(lso_gap: DataFrame, start: float, end: float) -> DataFrame:
    """Per cluster, topic, epoch day of ``[start, end)`` and LSO gap value: the partition-polls with it (the roll-up
    table ``lso_gap_values``). Exact percentiles weigh each value by its polls, so the week's are the same as from
    the rows; a gap is a message count that repeats, so a day of ~70 k partition-polls keeps ~2 k values."""
    return lso_gap.filter(between(start, end)).groupBy("cluster", "topic", day_of().alias("day"), "lso_gap").agg(
        F.count(F.lit(1)).alias("polls"))


def lso_gap_partitions(lso_gap: DataFrame, start: float, end: float) -> DataFrame:
    """Per cluster, topic, partition and epoch day of ``[start, end)``: the partition's polls with an LSO gap (the
    roll-up table ``lso_gap_partitions``, for the count of distinct partitions)."""
    return lso_gap.filter(between(start, end)).groupBy("cluster", "topic", "partition", day_of().alias("day")).agg(
        F.count(F.lit(1)).alias("polls"))


def lso_gaps_from_days(values: DataFrame, partitions: DataFrame, period: Period,
                       by: Sequence[str] = ("cluster", "topic")) -> DataFrame:
    """`lso_gaps` (exact) from `lso_gap_values` and `lso_gap_partitions` rows: same columns, same figures."""
    v = percentiles(in_days(values, period).groupBy(*by), {"lso_gap": "lso_gap"}, True, DEFAULT_ACCURACY,
                    F.sum("polls").alias("partition_polls"), frequency="polls")
    p = in_days(partitions, period).groupBy(*[F.col(c).alias(f"_{c}") for c in by]).agg(
        F.countDistinct("topic", "partition").alias("partitions"))
    on = [F.col(c).eqNullSafe(F.col(f"_{c}")) for c in by]
    return v.join(p, on, "left").select(*by, *LSO_GAP_COLUMNS)
