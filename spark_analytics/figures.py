"""The weekly report's headline figures, declared once: name, label, which way is worse, unit.

`aggregations.headline` computes one column per figure and `week_over_week` compares them in this order; the
page's cards and the dashboard's History page pick `KEY_FIGURES` from the same list. Plain data (no Spark), so
the dashboard can import it.

Most figures count or time something bad, so "higher is worse" and a plain count are the defaults: a row only
spells out what differs, which makes the few neutral or higher-is-better figures stand out.
"""

from __future__ import annotations

from typing import NamedTuple

from spark_analytics.formatting import COUNT, MESSAGES, MINUTES, PER_SECOND, RECORDS, SECONDS, SHARE

HIGHER_IS_WORSE = 1
HIGHER_IS_BETTER = -1
NEUTRAL = 0


class Figure(NamedTuple):
    name: str
    label: str
    polarity: int = HIGHER_IS_WORSE
    unit: str = COUNT


HEADLINE: tuple[Figure, ...] = (
    Figure("polls", "Polls", NEUTRAL),
    Figure("poll_interval_s", "Poll interval", NEUTRAL, SECONDS),
    Figure("coverage", "Data coverage", HIGHER_IS_BETTER, SHARE),
    Figure("unreachable_minutes", "Cluster unreachable", unit=MINUTES),
    Figure("under_replicated_minutes", "Under-replicated", unit=MINUTES),
    Figure("under_min_isr_minutes", "Under min ISR (acks=all blocked)", unit=MINUTES),
    Figure("offline_minutes", "Offline partitions", unit=MINUTES),
    Figure("topics_under_min_isr", "Topics under min ISR"),
    Figure("isr_shrinks", "ISR shrinks"),
    Figure("isr_expands", "ISR expands", NEUTRAL),
    Figure("incidents_opened", "Incidents opened"),
    Figure("critical_incidents", "Critical incidents opened"),
    Figure("incidents_open_at_end", "Incidents open at week end"),
    Figure("mttr_minutes", "Mean time to recover", unit=MINUTES),
    Figure("longest_incident_minutes", "Longest incident", unit=MINUTES),
    Figure("alert_episodes_opened", "Alert episodes opened (symptoms)"),
    Figure("min_broker_availability", "Worst broker availability", HIGHER_IS_BETTER, SHARE),
    Figure("broker_down_minutes", "Broker down (sum over brokers)", unit=MINUTES),
    Figure("controller_changes", "Controller changes"),
    Figure("lag_slo_share", "Consumer polls within lag SLO", HIGHER_IS_BETTER, SHARE),
    Figure("worst_lag_seconds_p99", "Worst group p99 lag", unit=SECONDS),
    Figure("worst_lag_messages_p99", "Worst group p99 lag (messages)", unit=MESSAGES),
    Figure("groups_breaching_slo", "Group-topics ever over the SLO"),
    Figure("warn_minutes", "Group-topic minutes in WARN", unit=MINUTES),
    Figure("err_minutes", "Group-topic minutes in ERR", unit=MINUTES),
    Figure("retention_loss_episodes", "Retention-loss episodes"),
    Figure("transactions_seen", "Transactions seen", NEUTRAL),
    Figure("stuck_transactions", "Stuck transactions"),
    Figure("hanging_transactions", "Hanging transactions"),
    Figure("longest_open_txn_s", "Longest open transaction", unit=SECONDS),
    Figure("lso_gap_p99", "LSO gap p99", unit=MESSAGES),
    Figure("epoch_bumps", "Producer epoch bumps"),
    Figure("zk_elections", "ZooKeeper leader elections"),
    Figure("zk_minutes_without_quorum", "ZooKeeper without quorum", unit=MINUTES),
    Figure("zk_follower_behind_episodes", "ZooKeeper follower-behind episodes (>= 2 polls)"),
    Figure("zk_writes_per_s", "ZooKeeper writes per second", NEUTRAL, PER_SECOND),
    Figure("kraft_leader_changes", "KRaft leader changes"),
    Figure("kraft_voter_lag_p99", "Worst KRaft voter p99 lag", unit=RECORDS),
)
HEADLINE_NAMES = tuple(f.name for f in HEADLINE)
UNITS = {f.name: f.unit for f in HEADLINE}

KEY_FIGURES = ("under_min_isr_minutes", "offline_minutes", "under_replicated_minutes", "incidents_opened",
               "mttr_minutes", "min_broker_availability", "lag_slo_share", "worst_lag_seconds_p99",
               "stuck_transactions", "hanging_transactions", "zk_elections", "controller_changes")
"""The first screen's cards, on the page and on the dashboard: what was at risk, for how long, who was stuck."""
