"""deploy/grafana: the dashboard is what build_dashboard.py builds, and it only reads metrics the exporter serves.

* The committed JSON equals the builder's output (so nobody edits it by hand, and it cannot drift).
* Every PromQL expression (panel targets and template variables) names only metrics the exporter emits
  (`collectors.outputs.exporter.METRICS`, counters with `_total`), uses only their labels (or `cluster`) in
  its matchers, filters on `cluster=~"$cluster"`, and parses (`promtool check rules`).
* Panels have titles and the `datasource` variable; ids and uids are unique; the provisioning files point at
  the dashboards directory and the compose Prometheus.
"""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml

from collectors.outputs.exporter import METRICS, PROCESS_WIDE, wire_name

ROOT = Path(__file__).resolve().parents[2]
GRAFANA = ROOT / "deploy" / "grafana"
DASHBOARD = GRAFANA / "dashboards" / "kafka-reliability.json"
DS_REF = {"type": "prometheus", "uid": "${datasource}"}

# PromQL functions, aggregations and keywords: never metric names.
PROMQL_WORDS = {
    "sum", "rate", "irate", "by", "without", "max", "min", "avg", "count", "topk", "bottomk", "label_values",
    "time", "vector", "on", "ignoring", "group_left", "group_right", "clamp_min", "clamp_max", "increase",
    "delta", "deriv", "changes", "sort", "sort_desc", "absent", "bool", "and", "or", "unless", "offset", "inf",
    "nan",
}
NAME = r"[A-Za-z_:][A-Za-z0-9_:]*"


def _load_builder() -> ModuleType:
    spec = importlib.util.spec_from_file_location("build_dashboard", GRAFANA / "build_dashboard.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def emitted() -> dict[str, set[str]]:
    """Every series name the exporter emits (as on the wire) -> the labels it may carry (`cluster` for all but
    the process-wide families)."""
    return {wire_name(name): ({"cluster"} if name not in PROCESS_WIDE else set()) | set(labels)
            for name, (_kind, _help, labels) in METRICS.items()}


def _strip_strings(expr: str) -> str:
    return re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)


def selectors(expr: str) -> list[tuple[str, dict[str, str]]]:
    """(metric name, {label: matcher text}) for every selector of a PromQL expression (Grafana's
    label_values(selector, label) counts as its selector)."""
    out: list[tuple[str, dict[str, str]]] = []
    m = re.fullmatch(rf"\s*label_values\((.*),\s*({NAME})\s*\)\s*", expr, re.S)
    if m:
        expr = m.group(1)
    # matchers: name{a="x", b=~"y"}; quoted values may hold any character
    matcher_re = re.compile(rf'\s*({NAME})\s*(=~|!~|!=|=)\s*("(?:[^"\\]|\\.)*")\s*,?')
    pos_free = []  # the expression with every {…} block and its name removed, for the bare selectors
    i = 0
    for sm in re.finditer(rf"({NAME})?\s*\{{((?:[^}}\"]|\"(?:[^\"\\]|\\.)*\")*)\}}", expr):
        body, labels = sm.group(2), {}
        at = 0
        while at < len(body.rstrip()):
            mm = matcher_re.match(body, at)
            assert mm, f"cannot parse matchers {{{body}}} in {expr!r}"
            labels[mm.group(1)] = mm.group(2) + mm.group(3)
            at = mm.end()
        name = sm.group(1) or labels.get("__name__", "")
        out.append((name.strip('"'), labels))
        pos_free.append(expr[i:sm.start()])
        i = sm.end()
    pos_free.append(expr[i:])
    rest = _strip_strings(" ".join(pos_free))
    rest = re.sub(r"\[[^\]]*\]", " ", rest)  # ranges, $__rate_interval
    rest = re.sub(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", rest)
    rest = re.sub(r"\$\{?\w+\}?", " ", rest)  # Grafana variables
    for bm in re.finditer(NAME, rest):
        word = bm.group(0)
        if word.lower() in PROMQL_WORDS or rest[bm.end():].lstrip().startswith("("):
            continue  # keyword, or a function / aggregation call
        if bm.start() > 0 and (rest[bm.start() - 1].isdigit() or rest[bm.start() - 1] == "."):
            continue  # exponent or unit of a number literal (1e3, 5m)
        out.append((word, {}))
    return out


def problems(expr: str, *, need_cluster: bool = True) -> list[str]:
    """What is wrong with one dashboard expression (empty: nothing)."""
    known = emitted()
    found = selectors(expr)
    errors = [] if found else [f"no metric found in {expr!r}"]
    for name, labels in found:
        if name not in known:
            errors.append(f"{name} is not a metric the exporter emits")
            continue
        errors += [f"{name} has no label {label!r}" for label in labels if label not in known[name]]
        if need_cluster and labels.get("cluster") != '=~"$cluster"':
            errors.append(f'{name} is not filtered on cluster=~"$cluster"')
    m = re.fullmatch(rf"\s*label_values\((.*),\s*({NAME})\s*\)\s*", expr, re.S)
    if m and found and found[0][0] in known and m.group(2) not in known[found[0][0]]:
        errors.append(f"label_values of {found[0][0]} by {m.group(2)}, which it does not carry")
    return errors


@pytest.fixture(scope="module")
def dashboard() -> dict[str, Any]:
    return json.loads(DASHBOARD.read_text(encoding="utf-8"))


def _panels(d: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for p in d["panels"]:
        out.append(p)
        out += p.get("panels", [])  # collapsed rows hold their panels
    return out


def _expressions(d: dict[str, Any]) -> list[tuple[str, str, bool]]:
    """(where, expression, must filter on $cluster) for every query of the dashboard."""
    out = []
    for p in _panels(d):
        for t in p.get("targets", []):
            out.append((f"panel {p['id']} {p['title']!r} {t['refId']}", t["expr"], True))
    for v in d["templating"]["list"]:
        if v["type"] == "query":
            query = v["query"]["query"] if isinstance(v["query"], dict) else v["query"]
            out.append((f"variable {v['name']}", query, v["name"] != "cluster"))
    return out


# ----------------------------------------------------------------------------- generated, not edited


def test_committed_json_is_what_the_builder_builds() -> None:
    builder = _load_builder()
    assert DASHBOARD.read_text(encoding="utf-8") == builder.render(), \
        "deploy/grafana/dashboards/kafka-reliability.json drifted: run python deploy/grafana/build_dashboard.py"
    assert builder.render() == builder.render()  # deterministic


def test_builder_runs_as_a_script_from_the_repository_root(tmp_path: Path) -> None:
    out = tmp_path / "d.json"
    r = subprocess.run([sys.executable, "deploy/grafana/build_dashboard.py", "--output", str(out)], cwd=ROOT,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert out.read_text(encoding="utf-8") == DASHBOARD.read_text(encoding="utf-8")
    r = subprocess.run([sys.executable, "deploy/grafana/build_dashboard.py", "--check"], cwd=ROOT,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr


# ----------------------------------------------------------------------------- queries vs. the exporter


def test_selector_extraction() -> None:
    expr = ('sum by (cluster) (rate(kafka_x_total{cluster=~"$cluster", topic=~"a{b}"}[$__rate_interval])) * 60 '
            '/ on (cluster) group_left max(kafka_y) and time() - kafka_z{cluster="c"} offset 5m > 1e3')
    assert selectors(expr) == [("kafka_x_total", {"cluster": '=~"$cluster"', "topic": '=~"a{b}"'}),
                               ("kafka_z", {"cluster": '="c"'}), ("kafka_y", {})]
    assert selectors("label_values(kafka_topic_partitions{cluster=~\"$cluster\"}, topic)") == \
        [("kafka_topic_partitions", {"cluster": '=~"$cluster"'})]


def test_the_check_catches_unknown_metrics_labels_and_missing_cluster_filters() -> None:
    assert problems('max by (cluster) (kafka_topic_partitions{cluster=~"$cluster", topic=~"$topic"})') == []
    assert problems('sum(rate(kafka_monitor_polls_total{cluster=~"$cluster"}[5m]))') == []
    assert problems('kafka_bogus_metric{cluster=~"$cluster"}') == [
        "kafka_bogus_metric is not a metric the exporter emits"]
    assert problems('rate(kafka_monitor_polls{cluster=~"$cluster"}[5m])') == [
        "kafka_monitor_polls is not a metric the exporter emits"]  # a counter is served with _total
    assert problems('kafka_topic_partitions{cluster=~"$cluster", consumergroup="g"}') == [
        "kafka_topic_partitions has no label 'consumergroup'"]
    assert problems("max(kafka_brokers) + kafka_monitor_stale") == [
        'kafka_brokers is not filtered on cluster=~"$cluster"',
        'kafka_monitor_stale is not filtered on cluster=~"$cluster"']
    assert problems("label_values(kafka_monitor_cluster_reachable, topic)", need_cluster=False) == [
        "label_values of kafka_monitor_cluster_reachable by topic, which it does not carry"]


def test_every_query_reads_only_emitted_metrics_with_their_labels_and_filters_the_cluster(
        dashboard: dict[str, Any]) -> None:
    errors = [f"{where}: {e}" for where, expr, need in _expressions(dashboard)
              for e in problems(expr, need_cluster=need)]
    assert not errors, "\n".join(errors)
    used = {name for _, expr, _ in _expressions(dashboard) for name, _ in selectors(expr)}
    assert len(used) >= 50  # the extraction really found the metrics
    # the families the dashboard exists to show
    assert {"kafka_monitor_incidents_open", "kafka_monitor_incident", "kafka_monitor_messages_lost_total",
            "kafka_monitor_loss_events_total", "kafka_topic_failures_before_data_loss",
            "kafka_consumergroup_lag_sum", "kafka_consumergroup_group_max_lag_seconds", "kafka_monitor_polls_total",
            "kafka_monitor_last_successful_poll_timestamp_seconds", "kafka_kraft_voter_lag", "zookeeper_up"} <= used


def test_every_query_parses(dashboard: dict[str, Any], tmp_path: Path) -> None:
    """promtool parses each query, Grafana's variables replaced by what Grafana would send."""
    promtool = shutil.which("promtool")
    assert promtool, "promtool missing: ./run.sh setup installs Debian's prometheus package"
    rules = []
    for i, (_, expr, _) in enumerate(_expressions(dashboard)):
        m = re.fullmatch(rf"\s*label_values\((.*),\s*({NAME})\s*\)\s*", expr, re.S)
        expr = m.group(1) if m else expr
        expr = expr.replace("$__rate_interval", "2m").replace("$__range", "6h").replace("$__interval", "30s")
        assert "$" not in _strip_strings(expr), expr
        rules.append({"record": f"dashboard:query_{i}", "expr": expr})
    path = tmp_path / "queries.yml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}))
    r = subprocess.run([promtool, "check", "rules", str(path)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr


def test_the_loss_panels_count_a_topics_first_loss(dashboard: dict[str, Any], tmp_path: Path) -> None:
    """The exporter's per-topic loss counter is born at a topic's first loss, already counting it (1,200 messages
    truncated): increase() alone sees nothing until a second loss. promtool evaluates the panels' own queries
    (Grafana's variables as it would send them, a 15 s step) over a counter born at 5m."""
    promtool = shutil.which("promtool")
    assert promtool, "promtool missing: ./run.sh setup installs Debian's prometheus package"
    exprs = {p["title"]: p["targets"][0]["expr"] for p in _panels(dashboard)
             if p["title"] in ("Messages lost in the time range", "Messages lost by topic and kind")}
    assert len(exprs) == 2

    def grafana(expr: str) -> str:
        return (expr.replace("$__range", "1h").replace("$__interval", "15s").replace('"$cluster"', '".*"')
                .replace('"$topic"', '".*"'))

    series = 'kafka_monitor_messages_lost_total{cluster="a",topic="orders",kind="truncation"}'
    lost = {"series": series, "values": "_x20 1200x40"}  # absent for 5m, born at 1,200, no loss since
    tests = [{"interval": "15s", "input_series": [lost], "promql_expr_test": [
        {"expr": grafana(exprs["Messages lost in the time range"]), "eval_time": "10m",
         "exp_samples": [{"labels": '{kind="truncation"}', "value": 1200}]},
        {"expr": grafana(exprs["Messages lost by topic and kind"]), "eval_time": "5m",
         "exp_samples": [{"labels": '{cluster="a",topic="orders",kind="truncation"}', "value": 1200}]},
        {"expr": grafana(exprs["Messages lost by topic and kind"]), "eval_time": "5m15s", "exp_samples": []},
    ]}]
    path = tmp_path / "loss.yml"
    path.write_text(yaml.safe_dump({"evaluation_interval": "15s", "tests": tests}))
    r = subprocess.run([promtool, "test", "rules", str(path)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr


# ----------------------------------------------------------------------------- structure


def test_panels_have_titles_the_datasource_variable_and_unique_ids(dashboard: dict[str, Any]) -> None:
    panels = _panels(dashboard)
    ids = [p["id"] for p in panels]
    assert len(ids) == len(set(ids)), "duplicate panel ids"
    for p in panels:
        assert p.get("title", "").strip(), f"panel {p['id']} without a title"
        if p["type"] == "row":
            continue
        assert p["datasource"] == DS_REF, p["title"]
        assert p["targets"], p["title"]
        assert all(t["datasource"] == DS_REF for t in p["targets"]), p["title"]
        refs = [t["refId"] for t in p["targets"]]
        assert len(refs) == len(set(refs)), p["title"]
        g = p["gridPos"]
        assert g["x"] >= 0 and g["x"] + g["w"] <= 24 and g["h"] > 0, p["title"]
    titles = [p["title"] for p in panels]
    assert len(titles) == len(set(titles)), "duplicate panel titles"
    rows = [p["title"] for p in panels if p["type"] == "row"]
    assert rows == ["Incidents", "ISR health and durability posture", "Consumer lag by group in messages and seconds",
                    "Transactions", "ZooKeeper / KRaft", "Monitor health"]


def test_uid_and_template_variables(dashboard: dict[str, Any]) -> None:
    assert dashboard["uid"] == "kafka-reliability" and dashboard["id"] is None
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource" and variables["datasource"]["query"] == "prometheus"
    assert variables["cluster"]["query"]["query"] == "label_values(kafka_monitor_cluster_reachable, cluster)"
    for name in ("cluster", "topic", "consumergroup"):
        assert variables[name]["datasource"] == DS_REF, name
    uids = [dashboard["uid"]] + [v.get("uid") for v in variables.values() if v.get("uid")]
    assert len(uids) == len(set(uids))


def test_provisioning_points_at_the_dashboards_and_the_compose_prometheus() -> None:
    ds = yaml.safe_load((GRAFANA / "provisioning" / "datasources" / "prometheus.yml").read_text())
    (source,) = ds["datasources"]
    assert source["type"] == "prometheus" and source["url"] == "http://prometheus:9090" and source["isDefault"]
    prov = yaml.safe_load((GRAFANA / "provisioning" / "dashboards" / "kafka-reliability.yml").read_text())
    (provider,) = prov["providers"]
    compose = yaml.safe_load((ROOT / "deploy" / "docker-compose.yml").read_text())
    grafana = compose["services"]["grafana"]
    mounts = {m.split(":")[1]: m.split(":")[0] for m in grafana["volumes"]}
    assert all(m.endswith(":ro") for m in grafana["volumes"])
    # the path the provider reads is the mount of deploy/grafana/dashboards
    assert mounts[provider["options"]["path"]] == "./grafana/dashboards"
    assert mounts["/etc/grafana/provisioning"] == "./grafana/provisioning"
    assert "prometheus" in grafana["depends_on"]
    assert re.fullmatch(r"grafana/grafana(-oss)?:\d+\.\d+\.\d+", grafana["image"])
