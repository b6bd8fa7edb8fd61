"""Build the Grafana dashboard of the Kafka reliability monitor.

    python deploy/grafana/build_dashboard.py            # (re)writes deploy/grafana/dashboards/kafka-reliability.json
    python deploy/grafana/build_dashboard.py --check    # exit 1 if the committed JSON differs from what this builds

The JSON is generated, never edited by hand: change this file and run it. The output is deterministic (no
timestamps, fixed uid, panel ids fixed per row: row N is id N*100, its panels N*100+1, ...), so the committed
file only changes when this code does; tests/unit/test_grafana_dashboard.py fails when they drift, and checks
that every query reads only metrics the exporter serves (collectors/outputs/metrics.yaml) and filters on
`cluster=~"$cluster"`.

Conventions of the queries:
* `max by (cluster, ...)` first: two monitor replicas scraping the same cluster are shown once (as in
  deploy/prometheus/alerts.yml), then `sum` / `count` across the remaining labels where a total is meant.
* The exporter's default `exporter.granularity: exceptions` leaves out what is healthy (zero problem counts,
  unclean election when disabled, the durability posture of a topic that can take a failure, a group's status when
  OK): panels read an absent series as healthy and fill it in from series that are always there where it matters.
* The data source is the `datasource` template variable, so the file imports into any Grafana with a
  Prometheus data source; `cluster`, `topic` and `consumergroup` are multi-value variables (All = `.*`).

Standard library only, so it runs with any Python 3.11 from the repository root.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
OUTPUT = HERE / "dashboards" / "kafka-reliability.json"

UID = "kafka-reliability"
TITLE = "Kafka reliability"
DS: dict[str, str] = {"type": "prometheus", "uid": "${datasource}"}

C = 'cluster=~"$cluster"'
CT = f'{C}, topic=~"$topic"'
LOST = f"kafka_monitor_messages_lost_total{{{CT}}}"
CG = f'{C}, consumergroup=~"$consumergroup"'
CGT = f'{CG}, topic=~"$topic"'

GREEN, YELLOW, ORANGE, RED, BLUE = "green", "yellow", "orange", "red", "blue"

Panel = dict[str, Any]


# ----------------------------------------------------------------------------- building blocks


def target(expr: str, legend: str = "", *, ref: str = "A", table: bool = False) -> dict[str, Any]:
    """A Prometheus query; ``table``: an instant query shown as a table row per series."""
    t: dict[str, Any] = {"datasource": DS, "editorMode": "code", "expr": expr, "refId": ref}
    if table:
        t.update(format="table", instant=True, range=False, legendFormat="__auto")
    else:
        t.update(instant=False, range=True, legendFormat=legend or "__auto")
    return t


def targets(*queries: tuple[str, str]) -> list[dict[str, Any]]:
    return [target(expr, legend, ref=chr(ord("A") + i)) for i, (expr, legend) in enumerate(queries)]


def thresholds(*steps: tuple[float | None, str]) -> dict[str, Any]:
    return {"mode": "absolute", "steps": [{"color": color, "value": value} for value, color in steps]}


def value_map(*entries: tuple[int, str, str]) -> list[dict[str, Any]]:
    """Value mappings: (value, text, colour)."""
    options = {str(v): {"color": color, "index": i, "text": text} for i, (v, text, color) in enumerate(entries)}
    return [{"options": options, "type": "value"}]


def color_of(name: str, color: str) -> dict[str, Any]:
    return {"matcher": {"id": "byName", "options": name},
            "properties": [{"id": "color", "value": {"fixedColor": color, "mode": "fixed"}}]}


SEVERITY_COLORS = [color_of("critical", RED), color_of("warning", ORANGE), color_of("info", BLUE)]


def panel(kind: str, title: str, description: str, tgts: list[dict[str, Any]], *, w: int, h: int,
          unit: str = "short", defaults: dict[str, Any] | None = None, options: dict[str, Any] | None = None,
          overrides: list[dict[str, Any]] | None = None, transformations: list[dict[str, Any]] | None = None) -> Panel:
    p: Panel = {
        "type": kind,
        "title": title,
        "description": description,
        "datasource": DS,
        "gridPos": {"h": h, "w": w, "x": 0, "y": 0},  # placed by dashboard()
        "fieldConfig": {"defaults": {"unit": unit, **(defaults or {})}, "overrides": overrides or []},
        "options": options or {},
        "targets": tgts,
    }
    if transformations:
        p["transformations"] = transformations
    return p


def timeseries(title: str, description: str, tgts: list[dict[str, Any]], *, w: int = 12, h: int = 8,
               unit: str = "short", stack: bool = False, bars: bool = False, min0: bool = True,
               overrides: list[dict[str, Any]] | None = None,
               steps: tuple[tuple[float | None, str], ...] | None = None) -> Panel:
    custom: dict[str, Any] = {
        "drawStyle": "bars" if bars else "line",
        "fillOpacity": 60 if bars else (30 if stack else 10),
        "lineWidth": 1,
        "showPoints": "never",
        "spanNulls": False,
        "stacking": {"group": "A", "mode": "normal" if stack else "none"},
    }
    defaults: dict[str, Any] = {"custom": custom, "color": {"mode": "palette-classic"}}
    if min0:
        defaults["min"] = 0
    if steps:
        defaults["thresholds"] = thresholds(*steps)
        custom["thresholdsStyle"] = {"mode": "dashed"}
    options = {"legend": {"calcs": ["lastNotNull", "max"], "displayMode": "table", "placement": "right",
                          "showLegend": True},
               "tooltip": {"mode": "multi", "sort": "desc"}}
    return panel("timeseries", title, description, tgts, w=w, h=h, unit=unit, defaults=defaults, options=options,
                 overrides=overrides)


def stat(title: str, description: str, tgts: list[dict[str, Any]], *, w: int = 6, h: int = 6, unit: str = "short",
         steps: tuple[tuple[float | None, str], ...] = ((None, GREEN), (1, RED)),
         mappings: list[dict[str, Any]] | None = None, overrides: list[dict[str, Any]] | None = None,
         no_value: str = "0") -> Panel:
    defaults = {"thresholds": thresholds(*steps), "mappings": mappings or [], "noValue": no_value,
                "color": {"mode": "thresholds"}}
    options = {"colorMode": "background", "graphMode": "none", "justifyMode": "auto", "orientation": "auto",
               "reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
               "showPercentChange": False, "textMode": "value_and_name", "wideLayout": True}
    return panel("stat", title, description, tgts, w=w, h=h, unit=unit, defaults=defaults, options=options,
                 overrides=overrides)


def state_timeline(title: str, description: str, tgts: list[dict[str, Any]], mappings: list[dict[str, Any]], *,
                   w: int = 12, h: int = 8) -> Panel:
    defaults = {"mappings": mappings, "color": {"mode": "thresholds"}, "thresholds": thresholds((None, GREEN)),
                "custom": {"fillOpacity": 80, "lineWidth": 0}}
    options = {"alignValue": "left", "legend": {"displayMode": "list", "placement": "bottom", "showLegend": False},
               "mergeValues": True, "rowHeight": 0.9, "showValue": "auto", "tooltip": {"mode": "single"}}
    return panel("state-timeline", title, description, tgts, w=w, h=h, defaults=defaults, options=options)


def table(title: str, description: str, columns: list[tuple[str, str]], *, w: int = 12, h: int = 8,
          keep: tuple[str, ...] = ("cluster",), sort_by: str | None = None, desc: bool = False,
          overrides: list[dict[str, Any]] | None = None, value_column: bool = True) -> Panel:
    """A table of instant queries merged on their labels: one (expr, column name) per query; ``keep``: the label
    columns shown (others hidden); ``value_column=False`` hides the value (the labels are the point)."""
    tgts = [target(expr, ref=chr(ord("A") + i), table=True) for i, (expr, _) in enumerate(columns)]
    rename = {("Value" if len(columns) == 1 else f"Value #{t['refId']}"): name
              for t, (_, name) in zip(tgts, columns, strict=True)}
    order = {name: i for i, name in enumerate([*keep, *rename.values()])}
    exclude = {"Time": True, **({} if value_column else {"Value": True})}
    transformations: list[dict[str, Any]] = []
    if len(columns) > 1:
        transformations.append({"id": "merge", "options": {}})
    transformations.append({"id": "organize", "options": {"excludeByName": exclude, "indexByName": order,
                                                          "renameByName": rename, "includeByName": {}}})
    transformations.append({"id": "filterFieldsByName",
                            "options": {"include": {"names": [*keep, *(rename.values() if value_column else [])]}}})
    options: dict[str, Any] = {"cellHeight": "sm", "footer": {"show": False}, "showHeader": True}
    if sort_by:
        options["sortBy"] = [{"desc": desc, "displayName": sort_by}]
    return panel("table", title, description, tgts, w=w, h=h, defaults={"custom": {"align": "auto"}},
                 options=options, overrides=overrides, transformations=transformations)


def cell_colors(column: str, *steps: tuple[float | None, str]) -> dict[str, Any]:
    return {"matcher": {"id": "byName", "options": column},
            "properties": [{"id": "custom.cellOptions", "value": {"type": "color-background"}},
                           {"id": "thresholds", "value": thresholds(*steps)}]}


def bargauge(title: str, description: str, tgts: list[dict[str, Any]], *, w: int = 6, h: int = 8,
             overrides: list[dict[str, Any]] | None = None) -> Panel:
    defaults = {"color": {"mode": "palette-classic"}, "min": 0, "thresholds": thresholds((None, GREEN))}
    options = {"displayMode": "gradient", "orientation": "horizontal", "showUnfilled": True, "minVizHeight": 10,
               "reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False}, "valueMode": "color"}
    return panel("bargauge", title, description, tgts, w=w, h=h, defaults=defaults, options=options,
                 overrides=overrides)


# ----------------------------------------------------------------------------- rows


def posture(metric: str) -> str:
    """A topic's durability posture: the exported value, else (``exceptions`` granularity, where a topic with its
    full ISR is left out) what a full ISR gives: RF - 1 failures before data loss, RF - min ISR before writes stop."""
    fallback = {"kafka_topic_failures_before_data_loss":
                f"max by (cluster, topic) (kafka_topic_replication_factor{{{CT}}}) - 1",
                "kafka_topic_failures_before_write_stop":
                f"clamp_min(max by (cluster, topic) (kafka_topic_replication_factor{{{CT}}}) "
                f"- max by (cluster, topic) (kafka_topic_min_insync_replicas{{{CT}}}), 0)"}[metric]
    return f"(max by (cluster, topic) ({metric}{{{CT}}}) or {fallback})"


def incidents_row() -> list[Panel]:
    return [
        stat("Open incidents by severity",
             "kafka_monitor_incidents_open: incidents the collector has correlated its alerts into (one per cause), "
             "summed over the selected clusters. Runbook: docs/alerts.md#incident-kinds.",
             targets((f"sum by (severity) (max by (cluster, severity) (kafka_monitor_incidents_open{{{C}}}))",
                      "{{severity}}")),
             w=6, h=6, steps=((None, GREEN), (1, ORANGE)), overrides=SEVERITY_COLORS),
        timeseries("Open incidents by kind and severity",
                   "kafka_monitor_incident: open incidents counted by kind (broker, consensus, topic, group, "
                   "transaction, cluster, monitor) and severity.",
                   targets((f"count by (cluster, kind, severity) (max by (cluster, kind, subject, severity) "
                            f"(kafka_monitor_incident{{{C}}}) == 1)", "{{cluster}} {{kind}} {{severity}}")),
                   w=9, h=6, stack=True),
        table("Open incidents",
              "Every open incident now (kafka_monitor_incident == 1): its kind, subject, severity and owner team.",
              [(f"max by (cluster, kind, subject, severity, team) (kafka_monitor_incident{{{C}}}) == 1", "open")],
              keep=("cluster", "severity", "kind", "subject", "team"), w=9, h=6, value_column=False),
        stat("Messages lost in the time range",
             "kafka_monitor_messages_lost_total: the loss ledger (truncation: committed messages a new leader no "
             "longer has, a lower bound; retention_skipped: deleted before a group read them; offset_beyond_log_end: "
             "read past a truncation), increase over the dashboard's time range. A topic's counter is born at its "
             "first loss, already counting it: a series born in the range counts whole.",
             targets((f"sum by (kind) (max by (cluster, topic, kind) ({LOST} unless {LOST} offset $__range "
                      f"or increase({LOST}[$__range])))", "{{kind}}")),
             w=6, h=7),
        timeseries("Messages lost by topic and kind",
                   "kafka_monitor_messages_lost_total, its growth per interval, by topic and kind (the first "
                   "loss of a topic included: its counter is born counting it).",
                   targets((f"max by (cluster, topic, kind) "
                            f"({LOST} - ({LOST} offset $__interval or {LOST} * 0)) > 0",
                            "{{cluster}} {{topic}} {{kind}}")),
                   w=9, h=7, bars=True),
        timeseries("Loss events by kind",
                   "kafka_monitor_loss_events_total: evidence of loss found (truncation, unclean_election, "
                   "retention_skipped, offset_beyond_log_end, zk_zxid_regressed, txn_timeout_abort, "
                   "txn_producer_returned), increase per interval.",
                   targets((f"max by (cluster, kind) "
                            f"(increase(kafka_monitor_loss_events_total{{{C}}}[$__rate_interval])) > 0",
                            "{{cluster}} {{kind}}")),
                   w=9, h=7, bars=True),
    ]


def isr_row() -> list[Panel]:
    partition_states = [("offline", "kafka_cluster_offline_partitions", RED),
                        ("under min ISR", "kafka_cluster_under_min_isr_partitions", RED),
                        ("at min ISR", "kafka_cluster_at_min_isr_partitions", ORANGE),
                        ("under-replicated", "kafka_cluster_under_replicated_partitions", YELLOW)]
    return [
        stat("Brokers",
             "kafka_broker_up: brokers registered that answered the last poll, next to kafka_brokers (registered) "
             "and the brokers down (kafka_broker_up == 0).",
             targets((f"sum by (cluster) (max by (cluster, broker) (kafka_broker_up{{{C}}}))", "{{cluster}} up"),
                     (f"max by (cluster) (kafka_brokers{{{C}}})", "{{cluster}} registered"),
                     (f"count by (cluster) (max by (cluster, broker) (kafka_broker_up{{{C}}}) == 0)",
                      "{{cluster}} down")),
             w=6, h=6, steps=((None, BLUE),),
             overrides=[{"matcher": {"id": "byRegexp", "options": ".* down"},
                         "properties": [{"id": "thresholds", "value": thresholds((None, GREEN), (1, RED))}]}]),
        stat("Partitions not fully in sync",
             "kafka_cluster_*_partitions now: offline (no leader), under min ISR (acks=all writes fail), at min ISR "
             "(one failure from a write stop), under-replicated.",
             targets(*((f"max by (cluster) ({metric}{{{C}}})", f"{{{{cluster}}}} {name}")
                       for name, metric, _ in partition_states)),
             w=6, h=6,
             overrides=[{"matcher": {"id": "byRegexp", "options": f".* {name}"},
                         "properties": [{"id": "thresholds", "value": thresholds((None, GREEN), (1, color))}]}
                        for name, _, color in partition_states]),
        timeseries("Partitions by ISR state",
                   "kafka_cluster_offline_partitions, kafka_cluster_under_min_isr_partitions, "
                   "kafka_cluster_at_min_isr_partitions, kafka_cluster_under_replicated_partitions over time.",
                   targets(*((f"max by (cluster) ({metric}{{{C}}})", f"{{{{cluster}}}} {name}")
                             for name, metric, _ in partition_states)),
                   w=12, h=6),
        table("Topics with partitions not fully in sync",
              "kafka_topic_offline_partitions, kafka_topic_under_min_isr_partitions, "
              "kafka_topic_at_min_isr_partitions and kafka_topic_under_replicated_partitions, topics where one is "
              "above 0 (empty: every partition has its full ISR).",
              [(f"max by (cluster, topic) (kafka_topic_offline_partitions{{{CT}}}) > 0", "offline"),
               (f"max by (cluster, topic) (kafka_topic_under_min_isr_partitions{{{CT}}}) > 0", "under min ISR"),
               (f"max by (cluster, topic) (kafka_topic_at_min_isr_partitions{{{CT}}}) > 0", "at min ISR"),
               (f"max by (cluster, topic) (kafka_topic_under_replicated_partitions{{{CT}}}) > 0",
                "under-replicated")],
              keep=("cluster", "topic"), w=12, h=8, sort_by="offline", desc=True,
              overrides=[cell_colors("offline", (None, RED)), cell_colors("under min ISR", (None, RED)),
                         cell_colors("at min ISR", (None, ORANGE)), cell_colors("under-replicated", (None, YELLOW))]),
        table("Durability posture by topic",
              "How many broker failures the worst partition of each topic can take before acks=all writes stop "
              "(kafka_topic_failures_before_write_stop) and before acknowledged data can be lost "
              "(kafka_topic_failures_before_data_loss), with its replication factor, min.insync.replicas and "
              "whether unclean leader election is enabled. Weakest topics first. Where the exporter leaves a "
              "healthy topic's posture out (granularity: exceptions), the table shows what a full ISR gives.",
              [(posture("kafka_topic_failures_before_data_loss"), "failures before loss"),
               (posture("kafka_topic_failures_before_write_stop"), "failures before write stop"),
               (f"max by (cluster, topic) (kafka_topic_replication_factor{{{CT}}})", "replication factor"),
               (f"max by (cluster, topic) (kafka_topic_min_insync_replicas{{{CT}}})", "min ISR"),
               (f"max by (cluster, topic) (kafka_topic_unclean_leader_election_enabled{{{CT}}}) "
                f"or 0 * max by (cluster, topic) (kafka_topic_replication_factor{{{CT}}})", "unclean election")],
              keep=("cluster", "topic"), w=12, h=8, sort_by="failures before loss",
              overrides=[cell_colors("failures before loss", (None, RED), (1, ORANGE), (2, GREEN)),
                         cell_colors("failures before write stop", (None, RED), (1, ORANGE), (2, GREEN)),
                         cell_colors("unclean election", (None, GREEN), (1, RED))]),
        timeseries("Broker failures the weakest topic can take",
                   "min over topics of kafka_topic_failures_before_write_stop and "
                   "kafka_topic_failures_before_data_loss: 0 means the next broker failure stops acks=all writes, "
                   "or can lose acknowledged data.",
                   targets((f"min by (cluster) {posture('kafka_topic_failures_before_write_stop')}",
                            "{{cluster}} before write stop"),
                           (f"min by (cluster) {posture('kafka_topic_failures_before_data_loss')}",
                            "{{cluster}} before data loss")),
                   w=16, h=7, steps=((None, RED), (1, ORANGE), (2, GREEN))),
        stat("Topics with unclean leader election enabled",
             "kafka_topic_unclean_leader_election_enabled == 1: a replica outside the ISR may become leader and "
             "drop acknowledged messages.",
             targets((f"count by (cluster) (max by (cluster, topic) "
                      f"(kafka_topic_unclean_leader_election_enabled{{{CT}}}) == 1)", "{{cluster}}")),
             w=8, h=7, steps=((None, GREEN), (1, ORANGE))),
    ]


GROUP_STATUS = value_map((0, "OK", GREEN), (1, "WARN", ORANGE), (2, "ERR", RED))


def consumers_row() -> list[Panel]:
    per_group = "by (cluster, consumergroup)"
    return [
        timeseries("Lag by group (messages)",
                   "kafka_consumergroup_lag_sum summed over the group's topics: messages not yet consumed.",
                   targets((f"sum {per_group} (max by (cluster, consumergroup, topic) "
                            f"(kafka_consumergroup_lag_sum{{{CGT}}}))", "{{cluster}} {{consumergroup}}")),
                   w=12, h=8),
        timeseries("Lag by group (seconds) and its SLO",
                   "kafka_consumergroup_group_max_lag_seconds: age of the oldest unread message of the group; dashed: "
                   "the group's SLO (kafka_consumergroup_lag_seconds_slo).",
                   targets((f"max {per_group} (kafka_consumergroup_group_max_lag_seconds{{{CG}}})",
                            "{{cluster}} {{consumergroup}}"),
                           (f"max {per_group} (kafka_consumergroup_lag_seconds_slo{{{CG}}})",
                            "SLO {{cluster}} {{consumergroup}}")),
                   w=12, h=8, unit="s",
                   overrides=[{"matcher": {"id": "byRegexp", "options": "^SLO .*"},
                               "properties": [{"id": "custom.lineStyle",
                                               "value": {"dash": [10, 10], "fill": "dash"}},
                                              {"id": "custom.fillOpacity", "value": 0}]}]),
        timeseries("Lag seconds as a share of the SLO",
                   "kafka_consumergroup_group_max_lag_seconds / kafka_consumergroup_lag_seconds_slo: above 100 % the "
                   "group breaks its SLO (KafkaConsumerGroupLagSecondsHigh). With granularity: exceptions the SLO is "
                   "served for groups past half of it or not OK, so only those show.",
                   targets((f"max {per_group} (kafka_consumergroup_group_max_lag_seconds{{{CG}}}) "
                            f"/ on (cluster, consumergroup) "
                            f"max {per_group} (kafka_consumergroup_lag_seconds_slo{{{CG}}})",
                            "{{cluster}} {{consumergroup}}")),
                   w=12, h=8, unit="percentunit", steps=((None, GREEN), (1, RED))),
        timeseries("Consumption rate by group",
                   "rate of kafka_consumergroup_current_offset_sum (committed offsets summed over the group's "
                   "partitions): messages per second the group commits. With the default granularity "
                   "(exceptions) the exporter serves it for groups that are not OK only; granularity: partition "
                   "serves it for every group.",
                   targets((f"sum {per_group} (max by (cluster, consumergroup, topic) "
                            f"(rate(kafka_consumergroup_current_offset_sum{{{CGT}}}[$__rate_interval])))",
                            "{{cluster}} {{consumergroup}}")),
                   w=12, h=8, unit="ops"),
        state_timeline("Group lag status",
                       "kafka_consumergroup_status_code: 0 OK, 1 WARN (lag growing), 2 ERR (stalled, stopped or "
                       "rewound); a running group without one (granularity: exceptions leaves it out when OK) is OK.",
                       targets((f"max {per_group} (kafka_consumergroup_status_code{{{CG}}}) "
                                f"or 0 * max {per_group} (kafka_consumergroup_members{{{CG}}})",
                                "{{cluster}} {{consumergroup}}")),
                       GROUP_STATUS, w=16, h=8),
        bargauge("Groups by status",
                 "kafka_consumergroups: groups by status now, including INACTIVE and ABANDONED ones (nobody runs "
                 "them, so they have no per-group series).",
                 [target(f"max by (cluster, status) (kafka_consumergroups{{{C}}})", "{{cluster}} {{status}}")],
                 w=8, h=8,
                 overrides=[{"matcher": {"id": "byRegexp", "options": f".* {name}$"},
                             "properties": [{"id": "color", "value": {"fixedColor": color, "mode": "fixed"}}]}
                            for name, color in (("OK", GREEN), ("WARN", ORANGE), ("ERR", RED))]),
    ]


def transactions_row() -> list[Panel]:
    per_id = "by (cluster, transactional_id)"
    return [
        timeseries("Transactional ids by state",
                   "kafka_transaction_state: transactional ids counted by their current state.",
                   targets((f"sum by (cluster, state) (max by (cluster, transactional_id, state) "
                            f"(kafka_transaction_state{{{C}}}))", "{{cluster}} {{state}}")),
                   w=10, h=8, stack=True),
        timeseries("Oldest open transactions",
                   "kafka_transaction_open_age_seconds, the ten oldest open transactions.",
                   targets((f"topk(10, max {per_id} (kafka_transaction_open_age_seconds{{{C}}}))",
                            "{{cluster}} {{transactional_id}}")),
                   w=8, h=8, unit="s"),
        stat("Partitions with a hanging transaction",
             "kafka_transaction_hanging_partitions: partitions with an open transaction no coordinator knows "
             "(KafkaHangingTransaction): they block read_committed consumers.",
             targets((f"max by (cluster) (kafka_transaction_hanging_partitions{{{C}}})", "{{cluster}}")),
             w=6, h=8),
        timeseries("Open age as a share of transaction.timeout.ms",
                   "kafka_transaction_open_age_seconds / kafka_transaction_timeout_seconds: past 100 % (plus the "
                   "30 s grace) the transaction is stuck (KafkaTransactionPastTimeout).",
                   targets((f"max {per_id} (kafka_transaction_open_age_seconds{{{C}}}) "
                            f"/ on (cluster, transactional_id) max {per_id} (kafka_transaction_timeout_seconds{{{C}}})",
                            "{{cluster}} {{transactional_id}}")),
                   w=12, h=8, unit="percentunit", steps=((None, GREEN), (1, RED))),
        timeseries("Producer epoch bumps in the last hour",
                   "changes(kafka_transaction_producer_epoch[1h]): 3 or more is a producer crash loop or two "
                   "producers sharing a transactional.id (KafkaProducerEpochBumps).",
                   targets((f"topk(10, max {per_id} (changes(kafka_transaction_producer_epoch{{{C}}}[1h])))",
                            "{{cluster}} {{transactional_id}}")),
                   w=12, h=8, steps=((None, GREEN), (3, ORANGE))),
    ]


def consensus_row() -> list[Panel]:
    per_server = "by (cluster, server)"
    per_node = "by (cluster, node, role)"
    return [
        state_timeline("ZooKeeper servers serving",
                       "zookeeper_up: 1 if the server answered and serves requests.",
                       targets((f"max {per_server} (zookeeper_up{{{C}}})", "{{cluster}} {{server}}")),
                       value_map((0, "down", RED), (1, "up", GREEN)), w=12, h=7),
        table("ZooKeeper mode",
              "zookeeper_mode: leader, follower, observer or standalone, per server now.",
              [(f"max by (cluster, server, mode) (zookeeper_mode{{{C}}}) == 1", "mode")],
              keep=("cluster", "server", "mode"), w=6, h=7, value_column=False),
        stat("KRaft quorum leader",
             "kafka_kraft_leader_id (none: -1, KafkaKRaftNoLeader) and the leader epoch kafka_kraft_leader_epoch.",
             targets((f"max by (cluster) (kafka_kraft_leader_id{{{C}}})", "{{cluster}} leader"),
                     (f"max by (cluster) (kafka_kraft_leader_epoch{{{C}}})", "{{cluster}} epoch")),
             w=6, h=7, steps=((None, BLUE),), no_value="-",
             mappings=value_map((-1, "none", RED))),
        timeseries("ZooKeeper request latency",
                   "zookeeper_request_latency_avg_seconds and zookeeper_request_latency_max_seconds per server.",
                   targets((f"max {per_server} (zookeeper_request_latency_avg_seconds{{{C}}})",
                            "{{cluster}} {{server}} avg"),
                           (f"max {per_server} (zookeeper_request_latency_max_seconds{{{C}}})",
                            "{{cluster}} {{server}} max")),
                   w=8, h=8, unit="s"),
        timeseries("ZooKeeper follower lag and queue",
                   "zookeeper_follower_lag (transactions behind the leader, ZooKeeperFollowerBehind) and "
                   "zookeeper_outstanding_requests.",
                   targets((f"max {per_server} (zookeeper_follower_lag{{{C}}})", "{{cluster}} {{server}} lag"),
                           (f"max {per_server} (zookeeper_outstanding_requests{{{C}}})",
                            "{{cluster}} {{server}} outstanding")),
                   w=8, h=8),
        timeseries("ZooKeeper connections and synced followers",
                   "zookeeper_connections per server; zookeeper_synced_followers and zookeeper_learners on the "
                   "leader.",
                   targets((f"max {per_server} (zookeeper_connections{{{C}}})", "{{cluster}} {{server}} connections"),
                           (f"max {per_server} (zookeeper_synced_followers{{{C}}})",
                            "{{cluster}} {{server}} synced followers"),
                           (f"max {per_server} (zookeeper_learners{{{C}}})", "{{cluster}} {{server}} learners")),
                   w=8, h=8),
        timeseries("KRaft voter and observer lag",
                   "kafka_kraft_voter_lag: records a replica of the metadata log is behind the high watermark "
                   "(KafkaKRaftVoterLagging above 1000 for voters).",
                   targets((f"max {per_node} (kafka_kraft_voter_lag{{{C}}})", "{{cluster}} {{role}} {{node}}")),
                   w=8, h=8),
        timeseries("Metadata behind: KRaft replicas, ZooKeeper-mode brokers",
                   "kafka_kraft_voter_caught_up_age_seconds: how long before the leader's latest time each replica "
                   "last caught up, on the leader's clock (KafkaKRaftObserverLagging for a broker above 30 s). "
                   "kafka_broker_metadata_behind_seconds: outside KRaft, only for a broker seen behind, how long "
                   "ago at least another answer replaced a leader epoch it still answered "
                   "(KafkaBrokerMetadataLagging above 30 s).",
                   targets((f"max {per_node} (kafka_kraft_voter_caught_up_age_seconds{{{C}}})",
                            "{{cluster}} {{role}} {{node}}"),
                           (f"max by (cluster, broker) (kafka_broker_metadata_behind_seconds{{{C}}})",
                            "{{cluster}} broker {{broker}} (at least)")),
                   w=8, h=8, unit="s"),
        timeseries("Leader elections (10 min)",
                   "changes(kafka_kraft_leader_epoch[10m]) and changes(zookeeper_zxid_epoch[10m]) on the "
                   "ZooKeeper leader: elections of the KRaft quorum or the ZooKeeper ensemble.",
                   targets((f"max by (cluster) (changes(kafka_kraft_leader_epoch{{{C}}}[10m]))", "{{cluster}} KRaft"),
                           (f"max by (cluster) (changes(zookeeper_zxid_epoch{{{C}}}[10m]) "
                            f"and on (cluster, server) zookeeper_is_leader{{{C}}} == 1)", "{{cluster}} ZooKeeper")),
                   w=8, h=8, bars=True),
    ]


def monitor_row() -> list[Panel]:
    per_replica = "by (cluster, instance)"
    return [
        state_timeline("Cluster reachable",
                       "kafka_monitor_cluster_reachable: 1 if the last poll reached the cluster "
                       "(KafkaClusterUnreachable).",
                       targets((f"max by (cluster) (kafka_monitor_cluster_reachable{{{C}}})", "{{cluster}}")),
                       value_map((0, "unreachable", RED), (1, "reachable", GREEN)), w=12, h=6),
        stat("Since the last successful poll",
             "time() - kafka_monitor_last_successful_poll_timestamp_seconds: seconds since a poll last reached the "
             "cluster (3 poll intervals of 30 s is 90 s).",
             targets((f"time() - max by (cluster) (kafka_monitor_last_successful_poll_timestamp_seconds{{{C}}})",
                      "{{cluster}}")),
             w=6, h=6, unit="s", steps=((None, GREEN), (60, ORANGE), (90, RED)), no_value="never"),
        stat("Snapshot age",
             "kafka_monitor_data_age_seconds: age of the snapshot the exporter serves (KafkaMonitorDataStale above "
             "90 s).",
             targets((f"max by (cluster) (kafka_monitor_data_age_seconds{{{C}}})", "{{cluster}}")),
             w=6, h=6, unit="s", steps=((None, GREEN), (60, ORANGE), (90, RED)), no_value="-"),
        timeseries("Poll duration",
                   "kafka_monitor_poll_duration_seconds per monitor replica: the last poll's duration.",
                   targets((f"max {per_replica} (kafka_monitor_poll_duration_seconds{{{C}}})",
                            "{{cluster}} {{instance}}")),
                   w=8, h=7, unit="s"),
        timeseries("Polls per minute",
                   "rate of kafka_monitor_polls_total per monitor replica (2 a minute at the default 30 s interval).",
                   targets((f"sum {per_replica} (rate(kafka_monitor_polls_total{{{C}}}[$__rate_interval])) * 60",
                            "{{cluster}} {{instance}}")),
                   w=8, h=7),
        timeseries("Poll errors",
                   "kafka_monitor_poll_errors: errors the last poll met (see the collector log).",
                   targets((f"max {per_replica} (kafka_monitor_poll_errors{{{C}}})", "{{cluster}} {{instance}}")),
                   w=8, h=7),
        state_timeline("Stale sections",
                       "kafka_monitor_stale: 1 for each section (cluster, partitions, offsets, groups, ...) the last "
                       "poll could not refresh (KafkaMonitorSectionStale).",
                       targets((f"max by (cluster, section) (kafka_monitor_stale{{{C}}})",
                                "{{cluster}} {{section}}")),
                       value_map((0, "fresh", GREEN), (1, "stale", ORANGE)), w=16, h=7),
        table("Not read this poll: alerts held",
              "kafka_monitor_stale_whole (a section that failed for every subject) and kafka_monitor_stale_subject "
              "(the topic, partition, group or transactional id a section failed for): what the last poll could "
              "not judge. The collector keeps the open alerts of these subjects, and the Prometheus alerts hold "
              "theirs (docs/alerts.md, \"Stale data keeps alerts open\"). Empty: every section read.",
              [(f"max by (cluster, section, topic, partition, consumergroup, transactional_id) "
                f"(kafka_monitor_stale_subject{{{C}}} or kafka_monitor_stale_whole{{{C}}})", "held")],
              keep=("cluster", "section", "topic", "partition", "consumergroup", "transactional_id"), w=16, h=7,
              value_column=False),
        timeseries("Detail left out of /metrics",
                   "kafka_monitor_detail_omitted: partitions, group partitions and open alerts not exported one by "
                   "one because more than exporter.exceptions_limit were not healthy (the worst are exported). "
                   "While it is above 0 the per-partition panels show part of the problem; the roll-ups, incidents "
                   "and the collector's own dashboard show all of it.",
                   targets((f"max by (cluster, detail) (kafka_monitor_detail_omitted{{{C}}})",
                            "{{cluster}} {{detail}}")),
                   w=8, h=7),
    ]


ROWS = (
    ("Incidents", incidents_row),
    ("ISR health and durability posture", isr_row),
    ("Consumer lag by group in messages and seconds", consumers_row),
    ("Transactions", transactions_row),
    ("ZooKeeper / KRaft", consensus_row),
    ("Monitor health", monitor_row),
)


# ----------------------------------------------------------------------------- dashboard


def variable(name: str, label: str, query: str, *, include_all: bool = True) -> dict[str, Any]:
    return {
        "name": name,
        "label": label,
        "type": "query",
        "datasource": DS,
        "definition": query,
        "query": {"query": query, "refId": f"{name}-variable"},
        "refresh": 2,  # on time range change
        "regex": "",
        "sort": 1,
        "multi": True,
        "includeAll": include_all,
        "allValue": ".*",
        "current": {},
        "options": [],
        "hide": 0,
    }


def templating() -> list[dict[str, Any]]:
    return [
        {"name": "datasource", "label": "Data source", "type": "datasource", "query": "prometheus",
         "current": {}, "options": [], "refresh": 1, "regex": "", "hide": 0},
        variable("cluster", "Cluster", "label_values(kafka_monitor_cluster_reachable, cluster)"),
        variable("topic", "Topic", f"label_values(kafka_topic_partitions{{{C}}}, topic)"),
        variable("consumergroup", "Consumer group", f"label_values(kafka_consumergroup_members{{{C}}}, "
                                                    "consumergroup)"),
    ]


def layout(rows: tuple[tuple[str, Any], ...]) -> list[Panel]:
    """Rows top to bottom, their panels left to right, wrapping at Grafana's 24 columns."""
    out: list[Panel] = []
    y = 0
    for n, (title, make) in enumerate(rows, start=1):
        out.append({"type": "row", "title": title, "id": n * 100, "collapsed": False, "panels": [],
                    "gridPos": {"h": 1, "w": 24, "x": 0, "y": y}})
        y += 1
        x, line_h = 0, 0
        for i, p in enumerate(make(), start=1):
            w, h = p["gridPos"]["w"], p["gridPos"]["h"]
            if x + w > 24:
                x, y, line_h = 0, y + line_h, 0
            p["gridPos"] = {"h": h, "w": w, "x": x, "y": y}
            p["id"] = n * 100 + i
            out.append(p)
            x, line_h = x + w, max(line_h, h)
        y += line_h
    return out


def build() -> dict[str, Any]:
    return {
        "uid": UID,
        "title": TITLE,
        "description": "Kafka reliability monitor: incidents and data loss, ISR health and durability posture, "
                       "consumer lag, transactions, ZooKeeper / KRaft and the monitor itself. Generated by "
                       "deploy/grafana/build_dashboard.py: do not edit by hand.",
        "tags": ["kafka", "reliability", "kafka-reliability-monitor"],
        "editable": True,
        "graphTooltip": 1,
        "id": None,
        "links": [],
        "liveNow": False,
        "refresh": "30s",
        "schemaVersion": 39,
        "time": {"from": "now-6h", "to": "now"},
        "timepicker": {},
        "timezone": "",
        "version": 1,
        "weekStart": "",
        "fiscalYearStartMonth": 0,
        "annotations": {"list": [{
            "builtIn": 1, "datasource": {"type": "grafana", "uid": "-- Grafana --"}, "enable": True, "hide": True,
            "iconColor": "rgba(0, 211, 255, 1)", "name": "Annotations & Alerts", "type": "dashboard"}]},
        "templating": {"list": templating()},
        "panels": layout(ROWS),
    }


def render() -> str:
    return json.dumps(build(), indent=2, ensure_ascii=False) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", type=Path, default=OUTPUT, help=f"where to write (default {OUTPUT})")
    parser.add_argument("--check", action="store_true", help="only compare with the file; exit 1 if it differs")
    args = parser.parse_args(argv)
    text = render()
    if args.check:
        current = args.output.read_text(encoding="utf-8") if args.output.exists() else ""
        if current != text:
            print(f"{args.output} is out of date: run python deploy/grafana/build_dashboard.py", file=sys.stderr)
            return 1
        print(f"{args.output} is up to date")
        return 0
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(text, encoding="utf-8")
    print(f"wrote {args.output} ({len(build()['panels'])} panels)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
