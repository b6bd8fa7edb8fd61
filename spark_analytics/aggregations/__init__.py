"""The weekly report's figures as pure DataFrame -> DataFrame functions (no I/O, no actions).

One module per table family — `cluster` (polls, reachability, brokers, controller), `replication`, `incidents`
(one per cause), `alerts` (alert episodes: the symptoms), `thresholds` (the collector's, as recorded), `consumers`,
`transactions`, `consensus`, `headline` (and week over week) — on the helpers of `common`. This
package puts them together (`compute_tables`, `chart_series`) and re-exports every public name,
so callers write ``from spark_analytics import aggregations as A`` and ``A.consumer_lag(...)``.

Every function takes history DataFrames with the columns of `collectors.outputs.history.TABLES`, time columns as
DoubleType epoch seconds (`spark_analytics.io` converts the TIMESTAMP columns of version 4 files on reading; extra
columns are ignored, missing data is just fewer rows) and a `Period` (``start <= time < end``, epoch seconds), and
returns a small DataFrame keyed by ``cluster`` first. The inputs may hold rows from before the period (the
CLI loads the previous ISO week too): functions that look for *changes* (controller changes, elections,
epoch bumps, episodes) use those earlier rows as context, so a change at the first poll of the week is seen;
functions that *count* only look at rows inside the period. Rows at or after ``period.end`` are never used,
so the previous week's figures are computed exactly the same way from the same frames.

Conventions, written down once:

* **Poll interval** (`poll_intervals`): per cluster, the median gap between consecutive distinct ``time``
  values of the ``cluster`` table inside the period (one row per poll). The median ignores the odd long gap
  (collector restart) and the odd short one (a manual ``--once`` run). Figures in minutes are
  ``polls with the condition x poll interval / 60``: each poll stands for one interval of wall time. With a
  single poll the interval is unknown and minute figures are null.
* **Percentiles** (`Options.percentiles`): the consumer lag percentiles come from fixed log-scale histograms by
  default (`histogram`): within 1 % of the exact value, relative, and mergeable, so a week is the sum of its
  days' roll-ups (`spark_analytics.rollup`). ``exact``: Spark's ``percentile`` over the polls (linear
  interpolation between the two closest ranks, like numpy's default and DuckDB's ``quantile_cont``), what
  the histogram approximates. ``approx``: ``percentile_approx`` with accuracy 10,000 (nearest-rank, within
  n/10,000 ranks). The small tables' percentiles (LSO gap, voter lag) are exact unless ``approx``.
  Observations are polls: "p99 lag" is the lag exceeded in 1 % of the polls.
* **Episodes** (retention loss, follower behind, hanging transactions): runs of consecutive polls (numbered
  from the ``cluster`` table, so irregular gaps between polls do not matter) in which a condition held; one
  poll without the condition ends an episode. Duration = last - first flagged poll + one poll interval.
* **Null versus zero**: a figure whose source table has no row for a cluster in the period is null
  (unknown: no ZooKeeper, no groups, no data); event tables (``partition_changes``, ``alert_events``,
  ``incident_events``) have rows only when something happened, so their counts are 0 for a cluster that was
  polled.
* **Thresholds**: the lag SLO and the transaction grace are the collector's own, as it recorded them
  (``cluster.thresholds``, the latest in the period per cluster; `thresholds`), else the collector's defaults;
  the command line may override them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from pyspark.sql import DataFrame

from spark_analytics.aggregations.alerts import alert_episodes, alert_summary
from spark_analytics.aggregations.cluster import (
    broker_availability,
    cluster_health,
    cluster_timeseries,
    controller_changes,
    poll_intervals,
)
from spark_analytics.aggregations.common import PCT_NAMES, PCTS, poll_index
from spark_analytics.aggregations.consensus import (
    kraft_leader_changes,
    kraft_voter_lag,
    zk_elections,
    zk_follower_behind,
    zk_polls,
    zk_quorum,
    zk_servers,
    zk_timeseries,
    zk_write_rate,
)
from spark_analytics.aggregations.consumers import (
    consumer_lag,
    consumer_lag_from_days,
    lag_timeseries,
    lag_timeseries_from_days,
    retention_loss_episodes,
)
from spark_analytics.aggregations.defaults import (
    COLLECTOR_DEFAULTS,
    DEFAULT_ACCURACY,
    DEFAULT_LAG_SLO_S,
    DEFAULT_TXN_GRACE_S,
)
from spark_analytics.aggregations.headline import headline, week_over_week
from spark_analytics.aggregations.incidents import (
    FROM_ALERT_EPISODES,
    FROM_INCIDENTS,
    incident_kinds,
    incident_source,
    incidents,
)
from spark_analytics.aggregations.losses import data_lost, poll_gaps
from spark_analytics.aggregations.replication import (
    cluster_replication,
    cluster_replication_from_days,
    isr_changes_by_broker,
    isr_changes_by_topic,
    topic_replication,
    topic_replication_from_days,
)
from spark_analytics.aggregations.thresholds import thresholds
from spark_analytics.aggregations.transactions import (
    STUCK_COLUMNS,
    hanging_transactions,
    lso_gaps,
    lso_gaps_from_days,
    producer_epoch_bumps,
    producer_epoch_bumps_from_days,
    stuck_transactions,
    transaction_detail,
    transaction_summary,
    transactions_by_id,
)
from spark_analytics.aggregations.trend import trend
from spark_analytics.figures import HEADLINE, HEADLINE_NAMES
from spark_analytics.period import Period

__all__ = [
    "APPROX",
    "BUCKETS",
    "COLLECTOR_DEFAULTS",
    "DEFAULT_ACCURACY",
    "DEFAULT_LAG_SLO_S",
    "DEFAULT_TXN_GRACE_S",
    "EXACT",
    "FROM_ALERT_EPISODES",
    "FROM_INCIDENTS",
    "HEADLINE",
    "HEADLINE_INPUTS",
    "HEADLINE_NAMES",
    "HISTOGRAM",
    "PCTS",
    "PCT_NAMES",
    "PERCENTILE_MODES",
    "STUCK_COLUMNS",
    "SUMMARIES",
    "Options",
    "Period",
    "alert_episodes",
    "alert_summary",
    "broker_availability",
    "chart_series",
    "cluster_health",
    "cluster_replication",
    "cluster_timeseries",
    "compute_tables",
    "consumer_lag",
    "controller_changes",
    "data_lost",
    "hanging_transactions",
    "headline",
    "incident_kinds",
    "incident_source",
    "incidents",
    "isr_changes_by_broker",
    "isr_changes_by_topic",
    "kraft_leader_changes",
    "kraft_voter_lag",
    "lag_timeseries",
    "lso_gaps",
    "nice_bucket",
    "poll_gaps",
    "poll_index",
    "poll_intervals",
    "producer_epoch_bumps",
    "retention_loss_episodes",
    "stuck_transactions",
    "thresholds",
    "topic_replication",
    "transaction_detail",
    "transaction_summary",
    "transactions_by_id",
    "trend",
    "week_over_week",
    "zk_elections",
    "zk_follower_behind",
    "zk_polls",
    "zk_quorum",
    "zk_servers",
    "zk_timeseries",
    "zk_write_rate",
]


HISTOGRAM, EXACT, APPROX = "histogram", "exact", "approx"
PERCENTILE_MODES = (HISTOGRAM, EXACT, APPROX)


@dataclass(frozen=True)
class Options:
    """The command line's say in the figures (percentile method, poll interval, chart bucket, and overrides of
    the collector's thresholds: None = as the collector recorded them, else its defaults)."""

    lag_slo_s: float | None = None
    percentiles: str = HISTOGRAM  # HISTOGRAM, EXACT or APPROX (see the package doc)
    accuracy: int = DEFAULT_ACCURACY
    txn_grace_s: float | None = None
    poll_interval_s: float | None = None
    bucket_s: int | None = None  # chart time bucket; None: `nice_bucket` of the data's span
    rollups: str | None = None  # daily roll-up directory (`spark_analytics.rollup`), used where fresh

    @property
    def exact_percentiles(self) -> bool:
        """Exact percentiles for the small tables (LSO gap, voter lag): all but APPROX."""
        return self.percentiles != APPROX


BUCKETS = (5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600)


def nice_bucket(span_s: float, poll_interval_s: float | None, points: int = 400) -> int:
    """The smallest round bucket >= span / points and >= the poll interval (charts of ~400 points)."""
    want = max(span_s / points, poll_interval_s or 0.0, 1.0)
    return next((b for b in BUCKETS if b >= want), BUCKETS[-1])


SUMMARIES: dict[str, tuple[str, ...]] = {"incident_kinds": ("incidents",), "alert_summary": ("alert_episodes",)}
"""Report tables that only summarise other report tables: the function of that name over these, in this order."""

HEADLINE_INPUTS: frozenset[str] = frozenset({
    "polls", "thresholds", "cluster_health", "cluster_replication", "isr_by_broker", "incidents", "incident_source",
    "alert_episodes", "broker_availability",
    "controller_changes", "consumer_lag", "retention_loss", "transaction_summary", "hanging_transactions",
    "lso_gap_cluster", "epoch_bumps", "zk_write_rate", "zk_quorum", "zk_elections", "zk_follower_behind",
    "kraft_voter_lag", "kraft_leader_changes"})
"""The tables `headline` reads (all the previous week needs)."""


def compute_tables(tables: dict[str, DataFrame], period: Period, opts: Options = Options(),
                   polls: DataFrame | None = None, only: frozenset[str] | None = None,
                   limits: DataFrame | None = None, parts: dict[str, DataFrame] | None = None,
                   shared: list[DataFrame] | None = None, summaries: bool = True,
                   ready: Callable[[str, DataFrame], None] | None = None) -> dict[str, DataFrame]:
    """Every report table for `period` (lazy; nothing runs until the caller collects).

    `tables` maps history table names to DataFrames (``cluster``, ``brokers``, ``topic_health``,
    ``partition_changes``, ``group_lag``, ``transactions``, ``producers``, ``lso_gap``, ``consensus``,
    ``alert_events``, ``incident_events``, ``loss_events``). `polls` and `limits` (the `thresholds` table) may be given
    precomputed (e.g. collected once and turned back into a small DataFrame, so they are not recomputed for every
    table); `only` restricts the result to those names. `parts` (daily roll-up tables of `spark_analytics.rollup`,
    stored or computed; any subset of ``group_lag_days`` + ``group_lag_hist``, ``group_lag_flags``,
    ``topic_health_days`` + ``topic_health_polls``, ``transaction_epochs``, ``producers_hanging``,
    ``lso_gap_values`` + ``lso_gap_partitions``) replace ``group_lag``, ``topic_health``, ``producers``, ``lso_gap``
    and (for the epoch bumps) ``transactions`` for the tables they make: the consumer lag then has histogram
    percentiles (and a day rolled up against another recorded lag SLO than the week's has its polls within the
    SLO estimated from its histogram: `consumers.consumer_lag_from_days`), every other figure is the same.
    `shared`, when given, receives the intermediate frames that more than one of the returned tables is made from (the
    transactions' detail, the epoch bumps, the poll index of the episode tables): cache them while collecting,
    and each is computed once. Without `summaries`, the tables that only summarise others (`SUMMARIES`) are left
    out where the tables they summarise are built: a caller that summarises the collected tables instead would
    otherwise pay for plans it never runs (~0.25 s of driver time a report). `ready`, when given, is called with
    each table that reads none of those intermediate frames as soon as it is built, so that the caller can start
    running it while the others are still being planned; the rest wait for the caller to cache `shared`.
    """
    ex, acc = opts.exact_percentiles, opts.accuracy
    if polls is None:
        polls = poll_intervals(tables["cluster"], period, opts.poll_interval_s)
    if limits is None:
        limits = thresholds(tables["cluster"], period, opts.lag_slo_s, opts.txn_grace_s)
    lim = limits
    # intermediate frames several tables may be made from: counted as the tables are built (`shared`)
    uses: dict[int, list[DataFrame]] = {}
    readers: list[str] = []  # the tables built so far that read one of them

    def use(df: DataFrame) -> DataFrame:
        uses.setdefault(id(df), []).append(df)
        readers.append(building)  # the table being built (below)
        return df

    p = parts or {}
    idx = poll_index(tables["cluster"], polls, period)
    detail = transaction_detail(tables["transactions"], period, lim)
    bumps = (producer_epoch_bumps_from_days(p["transaction_epochs"], period) if "transaction_epochs" in p
             else producer_epoch_bumps(tables["transactions"], period, tables["cluster"]))
    builders = {
        "polls": lambda: polls,
        "thresholds": lambda: lim,
        "cluster_health": lambda: cluster_health(tables["cluster"], polls, period),
        "cluster_replication": lambda: cluster_replication(tables["topic_health"], polls, period),
        "topic_replication": lambda: topic_replication(tables["topic_health"], polls, period),
        "isr_by_broker": lambda: isr_changes_by_broker(tables["partition_changes"], period),
        "isr_by_topic": lambda: isr_changes_by_topic(tables["partition_changes"], period),
        "data_lost": lambda: data_lost(tables["loss_events"], period),
        "poll_gaps": lambda: poll_gaps(tables["cluster"], polls, period),
        "incidents": lambda: incidents(tables["incident_events"], polls, period),
        "incident_kinds": lambda: incident_kinds(incidents(tables["incident_events"], polls, period)),
        "incident_source": lambda: incident_source(tables["cluster"], tables["incident_events"], period),
        "alert_episodes": lambda: alert_episodes(tables["alert_events"], polls, period),
        "alert_summary": lambda: alert_summary(alert_episodes(tables["alert_events"], polls, period)),
        "broker_availability": lambda: broker_availability(tables["brokers"], polls, period),
        "controller_changes": lambda: controller_changes(tables["cluster"], period),
        "consumer_lag": lambda: consumer_lag(tables["group_lag"], polls, period, lim, ex, acc),
        "retention_loss": lambda: retention_loss_episodes(tables["group_lag"], use(idx), period),
        "transactions": lambda: stuck_transactions(tables["transactions"], use(detail), period),  # counts: summary
        "transaction_summary": lambda: transaction_summary(use(detail)),
        "epoch_bumps": lambda: use(bumps),
        "transactions_by_id": lambda: transactions_by_id(use(detail), use(bumps)),
        "hanging_transactions": lambda: hanging_transactions(tables["producers"], use(idx), period),
        "lso_gap": lambda: lso_gaps(tables["lso_gap"], period, ex, acc),
        "lso_gap_cluster": lambda: lso_gaps(tables["lso_gap"], period, ex, acc, by=("cluster",)),
        "zk_elections": lambda: zk_elections(tables["consensus"], period),
        "zk_quorum": lambda: zk_quorum(tables["consensus"], polls, period),
        "zk_servers": lambda: zk_servers(tables["consensus"], period),
        "zk_follower_behind": lambda: zk_follower_behind(tables["consensus"], use(idx), period),
        "zk_write_rate": lambda: zk_write_rate(tables["consensus"], period),
        "kraft_leader_changes": lambda: kraft_leader_changes(tables["consensus"], period),
        "kraft_voter_lag": lambda: kraft_voter_lag(tables["consensus"], polls, period, ex, acc),
    }
    if "topic_health_days" in p:
        builders["cluster_replication"] = lambda: cluster_replication_from_days(
            p["topic_health_days"], p["topic_health_polls"], polls, period)
        builders["topic_replication"] = lambda: topic_replication_from_days(p["topic_health_days"], polls, period)
    if "group_lag_hist" in p:
        builders["consumer_lag"] = lambda: consumer_lag_from_days(p["group_lag_days"], p["group_lag_hist"], polls,
                                                                  period, lim)
    if "group_lag_flags" in p:
        builders["retention_loss"] = lambda: retention_loss_episodes(p["group_lag_flags"], use(idx), period)
    if "producers_hanging" in p:
        builders["hanging_transactions"] = lambda: hanging_transactions(p["producers_hanging"], use(idx), period)
    if "lso_gap_values" in p:
        builders["lso_gap"] = lambda: lso_gaps_from_days(p["lso_gap_values"], p["lso_gap_partitions"], period)
        builders["lso_gap_cluster"] = lambda: lso_gaps_from_days(p["lso_gap_values"], p["lso_gap_partitions"],
                                                                 period, by=("cluster",))
    wanted = [name for name in builders if only is None or name in only]
    later = {name for name, inputs in SUMMARIES.items() if not summaries and all(i in wanted for i in inputs)}
    out: dict[str, DataFrame] = {}
    for building in (name for name in wanted if name not in later):
        out[building] = builders[building]()
        if ready is not None and building not in readers:
            ready(building, out[building])
    if shared is not None:
        shared.extend(used[0] for used in uses.values() if len(used) > 1)
    return out


def chart_series(tables: dict[str, DataFrame], period: Period, worst_groups: DataFrame,
                 opts: Options = Options(), parts: dict[str, DataFrame] | None = None) -> dict[str, DataFrame]:
    """Bucketed time series for the report's charts (small: one row per cluster and bucket); the lag chart from
    the roll-up's 15-minute series when `parts` are given."""
    b = opts.bucket_s or 900
    lag = (lag_timeseries(tables["group_lag"], worst_groups, period, b) if parts is None
           else lag_timeseries_from_days(parts["group_lag_series"], worst_groups, period, b))
    return {
        "cluster_timeseries": cluster_timeseries(tables["cluster"], period, b),
        "lag_timeseries": lag,
        "zk_timeseries": zk_timeseries(tables["consensus"], period, b),
    }
