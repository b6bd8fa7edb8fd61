"""A group inside its policy's idle window has no lag SLO on /metrics (every granularity), so the shipped
KafkaConsumerGroupLagSecondsHigh rule stays silent there, as the collector's own consumer_lag_seconds rule does
(docs/fleet.md: "no lag-seconds alert inside them"). Checked on the rendered body, and by running promtool on the
series that body holds."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from collectors.model.records import ClusterSnapshot, GroupRecord
from collectors.outputs.exporter import GRANULARITIES, MetricsEndpoint

ROOT = Path(__file__).resolve().parents[2]
RULE = "KafkaConsumerGroupLagSecondsHigh"


def group(gid: str, idle: bool) -> GroupRecord:
    """Two hours behind a ten-minute SLO; `idle`: inside an idle window of its policy."""
    return GroupRecord(cluster="prod", group_id=gid, state="Empty", members=0, coordinator=1, status="OK",
                       lag_seconds_max=7200.0, lag_seconds_slo=600.0, policy="policies[0]", idle=idle)


def body(granularity: str) -> str:
    ep = MetricsEndpoint(granularity=granularity)
    ep.update([ClusterSnapshot(cluster="prod", time=0.0,
                               groups=[group("nightly-etl", idle=True), group("payments", idle=False)])])
    return ep.render().decode()


def series(text: str, name: str) -> dict[str, float]:
    return {s.labels["consumergroup"]: s.value for fam in text_string_to_metric_families(text)
            for s in fam.samples if s.name == name}


@pytest.mark.parametrize("granularity", GRANULARITIES)
def test_no_lag_seconds_slo_series_inside_an_idle_window(granularity: str) -> None:
    text = body(granularity)
    assert series(text, "kafka_consumergroup_lag_seconds_slo") == {"payments": 600.0}  # not nightly-etl's
    # the lag itself is still there, for dashboards
    assert series(text, "kafka_consumergroup_group_max_lag_seconds") == {"nightly-etl": 7200.0, "payments": 7200.0}


def shipped_expr() -> str:
    rules = yaml.safe_load((ROOT / "deploy" / "prometheus" / "alerts.yml").read_text())
    return next(r["expr"] for grp in rules["groups"] for r in grp["rules"] if r.get("alert") == RULE)


@pytest.mark.parametrize("granularity", GRANULARITIES)
def test_the_shipped_rule_compares_the_running_group_only(granularity: str, tmp_path: Path) -> None:
    """promtool evaluates the shipped rule's expression over the series the exporter serves: only the running
    group is above its SLO (the rule's `for` aside, what it would page for)."""
    assert shutil.which("promtool"), "promtool missing: ./run.sh setup installs Debian's prometheus package"
    inputs = []
    for fam in text_string_to_metric_families(body(granularity)):
        for s in fam.samples:
            if s.name in ("kafka_consumergroup_lag_seconds_slo", "kafka_consumergroup_group_max_lag_seconds"):
                labels = ",".join(f'{k}="{v}"' for k, v in sorted(s.labels.items()))
                inputs.append({"series": f"{s.name}{{{labels}}}", "values": f"{s.value:g}x10"})
    case = {
        "evaluation_interval": "30s",
        "tests": [{"interval": "30s", "input_series": inputs, "promql_expr_test": [{
            "expr": shipped_expr(), "eval_time": "4m",
            "exp_samples": [{"labels": '{cluster="prod",consumergroup="payments"}', "value": 7200}],
        }]}],
    }
    path = tmp_path / "idle.yml"
    path.write_text(yaml.safe_dump(case))
    r = subprocess.run(["promtool", "test", "rules", str(path)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
