"""deploy/prometheus: promtool accepts the rules and their unit tests pass, and the rules stay in step with the code.

* `promtool check rules` / `check config` / `test rules` run for real (the test command installs
  Debian's prometheus package; a missing promtool is a failure, not a skip).
* Every alert in alerts.yml has a promtool case where it fires and one where it stays quiet.
* Every metric an expression reads is one the exporter serves (`collectors.outputs.exporter.METRICS`), `up`, or
  what a twin's hold reads: its own `ALERTS` and its recorded condition (`collectors.alerting.twin_holds`).
* Every collector rule (`collectors.alerting.catalogue`) maps to the Prometheus alert(s) covering it; the
  pass-through alert excludes exactly the rules that have a dedicated alert.
* Every alert follows the conventions documented at the top of alerts.yml and is in docs/alerts.md.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import yaml

from collectors.alerting.catalogue import CATALOGUE, INCIDENT_ALERTS, PASS_THROUGH, PROMETHEUS_ONLY, RULES
from collectors.alerting.correlation import INCIDENT_KINDS
from collectors.model import vocabulary
from collectors.outputs.exporter import METRICS
from tests.support import markdown

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy" / "prometheus"
ALERTS = DEPLOY / "alerts.yml"
TEST_FILES = sorted((DEPLOY / "tests").glob("*.yml"))
DOC = ROOT / "docs" / "alerts.md"

# Collector rule -> the Prometheus alert(s) that cover the same condition, from the rule catalogue.
COVERAGE: dict[str, tuple[str, ...]] = {r.name: r.prometheus for r in CATALOGUE}

# Collector rules deliberately left without a Prometheus alert: rule -> reason. None today.
UNCOVERED: dict[str, str] = {}

SEVERITIES = set(vocabulary.SEVERITIES)
PROMQL_WORDS = {"and", "or", "unless", "bool", "offset", "by", "without", "on", "ignoring", "group_left",
                "group_right", "inf", "nan"}


def _load(path: Path) -> Any:
    return yaml.safe_load(path.read_text())


def _alert_rules() -> list[dict[str, Any]]:
    return [r for g in _load(ALERTS)["groups"] for r in g["rules"] if "alert" in r]


def _promtool() -> str:
    exe = shutil.which("promtool")
    assert exe, "promtool missing: ./run.sh setup installs Debian's prometheus package"
    return exe


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([_promtool(), *args], capture_output=True, text=True, timeout=120, cwd=ROOT)


def metric_names(expr: str) -> set[str]:
    """Metric names a PromQL expression reads (strings, matchers, ranges, grouping labels, functions removed)."""
    e = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)
    e = re.sub(r"\{[^}]*\}", " ", e)
    e = re.sub(r"\[[^\]]*\]", " ", e)
    e = re.sub(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", e)
    names = set()
    for m in re.finditer(r"[A-Za-z_:][A-Za-z0-9_:]*", e):
        word = m.group(0)
        if word.lower() in PROMQL_WORDS or e[m.end():].lstrip().startswith("("):
            continue  # keyword, or a function / aggregation call
        if m.start() > 0 and (e[m.start() - 1].isdigit() or e[m.start() - 1] == "."):
            continue  # exponent or unit of a number literal (1e3)
        names.add(word)
    return names


def _test_cases() -> list[tuple[Path, dict[str, Any]]]:
    cases = []
    for path in TEST_FILES:
        for group in _load(path)["tests"]:
            for case in group.get("alert_rule_test", []):
                cases.append((path, case))
    return cases


# ----------------------------------------------------------------------------- promtool


def test_promtool_check_rules() -> None:
    r = _run("check", "rules", str(ALERTS))
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"{sum(len(g['rules']) for g in _load(ALERTS)['groups'])} rules found" in r.stdout


def test_promtool_check_example_config() -> None:
    r = _run("check", "config", str(DEPLOY / "prometheus.yml"))
    assert r.returncode == 0, r.stdout + r.stderr


def test_promtool_unit_tests_pass() -> None:
    assert len(TEST_FILES) >= 5
    r = _run("test", "rules", *map(str, TEST_FILES))
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.count("SUCCESS") == len(TEST_FILES), r.stdout


def test_test_files_load_the_real_rules() -> None:
    for path in TEST_FILES:
        assert _load(path)["rule_files"] == ["../alerts.yml"], path


# ----------------------------------------------------------------------------- coverage of the unit tests


def test_every_alert_fires_in_a_test_and_stays_quiet_in_another() -> None:
    names = {r["alert"] for r in _alert_rules()}
    fired: set[str] = set()
    quiet: set[str] = set()
    for path, case in _test_cases():
        assert case["alertname"] in names, f"{path.name}: test for unknown alert {case['alertname']}"
        (fired if case.get("exp_alerts") else quiet).add(case["alertname"])
    assert names - fired == set(), "alerts no promtool test fires"
    assert names - quiet == set(), "alerts no promtool test checks staying quiet"


def test_firing_cases_check_labels_and_annotations() -> None:
    for path, case in _test_cases():
        for exp in case.get("exp_alerts") or []:
            labels, annotations = exp.get("exp_labels", {}), exp.get("exp_annotations", {})
            where = f"{path.name} {case['alertname']} @ {case['eval_time']}"
            assert labels.get("severity") in SEVERITIES, where
            if case["alertname"] != "KafkaMonitorDown":
                assert labels.get("cluster"), f"{where}: alert without a cluster label"
            assert annotations.get("summary") and "First step:" in annotations.get("description", ""), where


# ----------------------------------------------------------------------------- rules vs. the code


def test_metric_name_extraction() -> None:
    expr = ('max by (cluster, topic) (rate(kafka_x{a="b{c}"}[5m])) > on (cluster) group_left (y) kafka_y * 1e3 '
            'and changes(kafka_z[1h]) >= 3 unless up{job="j"} == 0')
    assert metric_names(expr) == {"kafka_x", "kafka_y", "kafka_z", "up"}


def test_every_metric_in_the_rules_is_exported() -> None:
    recorded = {r["record"] for g in _load(ALERTS)["groups"] for r in g["rules"] if "record" in r}
    seen: set[str] = set()
    for rule in _alert_rules():
        names = metric_names(rule["expr"])
        assert names, rule["alert"]
        unknown = names - set(METRICS) - {"up", "ALERTS"} - recorded  # a twin's hold reads its own alerts and value
        assert not unknown, f"{rule['alert']} reads metrics the exporter does not serve: {sorted(unknown)}"
        seen |= names
    assert len(seen) >= 30  # the extraction really found the metrics


def test_every_collector_rule_is_covered() -> None:
    alerts = {r["alert"] for r in _alert_rules()}
    assert set(COVERAGE) | set(UNCOVERED) == set(RULES), "update COVERAGE when a collector rule is added or removed"
    assert not set(COVERAGE) & set(UNCOVERED)
    for rule, names in COVERAGE.items():
        assert names and set(names) <= alerts, f"{rule}: {names} not all in alerts.yml"
    for rule, reason in UNCOVERED.items():
        assert reason.strip(), rule
    mapped = {name for names in COVERAGE.values() for name in names}
    assert alerts == mapped | set(PROMETHEUS_ONLY) | set(INCIDENT_ALERTS), \
        "every alert covers a collector rule, or is listed Prometheus-only or as an incident alert"
    assert not mapped & set(PROMETHEUS_ONLY) and not (mapped | set(PROMETHEUS_ONLY)) & set(INCIDENT_ALERTS)


def test_incident_alerts_read_the_incident_family_and_carry_the_incident() -> None:
    rules = {r["alert"]: r for r in _alert_rules()}
    for name in INCIDENT_ALERTS:
        r = rules[name]
        assert metric_names(r["expr"]) == {"kafka_monitor_incident"}, name
        severity = r["labels"]["severity"]
        assert f'kafka_monitor_incident{{severity="{severity}"}}' in r["expr"], name
        # grouped by incident, routed by team
        assert re.search(r"max by \(cluster, kind, subject, team\)", r["expr"]), name
        assert r["annotations"]["runbook_url"] == "docs/alerts.md#incident-{{ $labels.kind }}", name
    assert {r["labels"]["severity"] for n, r in rules.items() if n in INCIDENT_ALERTS} == {"critical", "warning"}
    doc = DOC.read_text()
    for kind in INCIDENT_KINDS:
        assert f'<a id="incident-{kind}"></a>' in doc, f"docs/alerts.md has no runbook anchor for {kind} incidents"


def test_pass_through_excludes_exactly_the_rules_with_a_dedicated_alert() -> None:
    rule = next(r for r in _alert_rules() if r["alert"] == PASS_THROUGH)
    m = re.search(r'rule!~"([^"]*)"', rule["expr"])
    assert m, rule["expr"]
    excluded = set(m.group(1).split("|"))
    dedicated = {r for r, names in COVERAGE.items() if PASS_THROUGH not in names}
    assert excluded == dedicated
    # what passes through must be critical in the collector, or the pass-through never sees it
    source = (ROOT / "collectors" / "alerting" / "rules.py").read_text()
    for r, names in COVERAGE.items():
        if PASS_THROUGH in names:
            assert RULES[r].severity == "critical", r
            assert re.search(rf'Candidate\(\s*"{r}",\s*CRITICAL', source), r


# ----------------------------------------------------------------------------- conventions and docs


def test_rule_conventions() -> None:
    rules = _alert_rules()
    assert len({r["alert"] for r in rules}) == len(rules), "duplicate alert names"
    for r in rules:
        name, expr = r["alert"], r["expr"]
        assert r.get("labels", {}).get("severity") in SEVERITIES, name
        ann = r.get("annotations", {})
        assert ann.get("summary") and ann.get("description"), name
        assert "First step:" in ann["description"], f"{name}: description without an on-call first step"
        for clause in re.findall(r"\b(?:by|on)\s*\(([^)]*)\)", expr):
            assert "cluster" in [c.strip() for c in clause.split(",")], f"{name}: grouping without cluster: {clause}"
        if name != "KafkaMonitorDown":
            assert "$labels.cluster" in ann["summary"] + ann["description"], name
        if "for" in r:
            assert re.fullmatch(r"\d+[smh]", r["for"]), name


def test_alerts_and_collector_rules_are_documented() -> None:
    doc = DOC.read_text()
    missing = [a["alert"] for a in _alert_rules() if f"`{a['alert']}`" not in doc]
    missing += [r for r in RULES if f"`{r}`" not in doc]
    assert not missing, f"missing from docs/alerts.md: {missing}"


# ----------------------------------------------------------------------------- runbook links


def test_every_alert_links_its_runbook_section() -> None:
    anchors = markdown.anchors(DOC.read_text())
    assert {"incident-broker", "rule-broker-down", "the-monitor-itself", "paging-incidents-not-symptoms"} <= anchors
    # what templated links expand to: incident kinds, and the rules the pass-through alert re-raises
    expansions = {
        "{{ $labels.kind }}": sorted(INCIDENT_KINDS),
        '{{ reReplaceAll "_" "-" $labels.rule }}': sorted(
            r.replace("_", "-") for r, names in COVERAGE.items() if PASS_THROUGH in names),
    }
    for rule in _alert_rules():
        name, url = rule["alert"], rule["annotations"].get("runbook_url", "")
        assert url.startswith("docs/alerts.md#"), f"{name}: runbook_url {url!r} is not a docs/alerts.md section"
        anchor = url.split("#", 1)[1]
        targets = [anchor]
        for template, values in expansions.items():
            if template in anchor:
                assert values, f"{name}: nothing to expand {template} with"
                targets = [anchor.replace(template, v) for v in values]
        assert "{{" not in "".join(targets), f"{name}: templated runbook anchor this test cannot expand: {anchor}"
        missing = [t for t in targets if t not in anchors]
        assert not missing, f"{name}: docs/alerts.md has no section {missing}"
        # and it is the right section: the rule the alert mirrors, the incident kinds, or the monitor itself
        mirrored = [RULES[r].anchor for r, names in COVERAGE.items() if name in names and name != PASS_THROUGH]
        if mirrored:
            assert url in mirrored, f"{name}: runbook_url {url} is not the section of a rule it mirrors {mirrored}"
        elif name in PROMETHEUS_ONLY:
            assert anchor == "the-monitor-itself", name
        else:
            assert name in INCIDENT_ALERTS or name == PASS_THROUGH, name
