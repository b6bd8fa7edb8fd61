"""The rule catalogue against everything that names rules: the rules' code, the poller's timers,
deploy/prometheus/alerts.yml, docs/alerts.md and the README."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from collectors.alerting import catalogue
from collectors.alerting.catalogue import (
    CATALOGUE,
    INCIDENT_ALERTS,
    PASS_THROUGH,
    PROMETHEUS_ONLY,
    RULES,
    rules_markdown,
)
from collectors.model.vocabulary import SEVERITY_RANK

ROOT = Path(__file__).resolve().parents[2]


def _alerts() -> dict[str, str]:
    doc = yaml.safe_load((ROOT / "deploy" / "prometheus" / "alerts.yml").read_text())
    return {r["alert"]: r["labels"]["severity"] for g in doc["groups"] for r in g["rules"] if "alert" in r}


def test_alerts_yml_docs_and_catalogue_name_the_same_alerts() -> None:
    alerts = _alerts()
    mirrored = {a for r in CATALOGUE for a in r.prometheus}
    assert set(alerts) == mirrored | set(PROMETHEUS_ONLY) | set(INCIDENT_ALERTS)
    assert not set(INCIDENT_ALERTS) & (mirrored | set(PROMETHEUS_ONLY)), "an incident alert mirrors no single rule"
    doc = (ROOT / "docs" / "alerts.md").read_text()
    documented = set(re.findall(r"^\| `([A-Z]\w+)` \|", doc, re.M))
    assert documented == set(alerts), "docs/alerts.md's Prometheus tables list exactly the alerts of alerts.yml"
    m = re.search(r"(\d+) alerts in (\d+) groups", doc)
    groups = yaml.safe_load((ROOT / "deploy" / "prometheus" / "alerts.yml").read_text())["groups"]
    alerting = [g for g in groups if any("alert" in r for r in g["rules"])]  # not twin-conditions (recording)
    assert m and int(m.group(1)) == len(alerts) and int(m.group(2)) == len(alerting)
    readme = (ROOT / "README.md").read_text()
    m = re.search(r"The (\d+) shipped alerts", readme)
    assert m and int(m.group(1)) == len(alerts)


def test_docs_rule_table_is_generated_from_the_catalogue() -> None:
    doc = (ROOT / "docs" / "alerts.md").read_text()
    assert rules_markdown() in doc
    documented = set(re.findall(r'<a id="rule-[\w-]+"></a>`(\w+)`', doc))
    assert documented == set(RULES)


def test_rule_names_in_the_code_are_the_catalogue() -> None:
    source = "\n".join(p.read_text() for p in (ROOT / "collectors").rglob("*.py"))
    raised = set(re.findall(r'Candidate\(\s*"(\w+)"', source))
    assert raised == set(RULES), "every rule the code raises is in the catalogue, and every entry is raised"


def test_alert_severity_matches_its_rule() -> None:
    alerts = _alerts()
    for r in CATALOGUE:
        if r.prometheus == (PASS_THROUGH,):
            assert r.severity == "critical", r.name  # the pass-through only sees critical alerts
            continue
        worst = min((alerts[a] for a in r.prometheus), key=SEVERITY_RANK.__getitem__)
        assert worst == r.severity, f"{r.name}: collector {r.severity}, Prometheus at worst {worst}"


def test_runbook_anchors_exist() -> None:
    doc = (ROOT / "docs" / "alerts.md").read_text()
    for r in CATALOGUE:
        path, anchor = r.anchor.split("#")
        assert path == "docs/alerts.md" and f'id="{anchor}"' in doc


def test_families_partition_the_rules() -> None:
    seen: set[str] = set()
    for family in catalogue.FAMILIES:
        names = catalogue.rules_of(family)
        assert names, family
        assert not names & seen
        seen |= names
    assert seen == set(RULES)


def test_kept_when_stale() -> None:
    assert catalogue.kept_when_stale([]) == frozenset()
    kept = catalogue.kept_when_stale(["configs"])
    assert kept == {"unsafe_durability"}
    assert {"offline_partition", "under_min_isr"} <= catalogue.kept_when_stale({"partitions"})
    # an unreachable cluster keeps every Kafka-side alert it cannot re-judge, but not its own unreachability
    whole = catalogue.kept_when_stale({"cluster"})
    assert "cluster_unreachable" not in whole and "consumer_lag_status" in whole


def test_a_malformed_catalogue_names_the_rule_and_field(tmp_path: Path) -> None:
    import pytest

    good = "x:\n  severity: warning\n  family: groups\n  subject: group\n  page: consumers\n  meaning: m\n" \
           "  first_step: f\n  prometheus: [A]\n"
    f = tmp_path / "rules.yaml"
    f.write_text(good)
    assert catalogue.load_catalogue(f)[0].name == "x"
    for bad, words in ((good.replace("warning", "loud"), "x: severity 'loud'"),
                       (good + "  colour: red\n", "x: unknown fields ['colour']"),
                       (good.replace("  prometheus: [A]\n", ""), "x: meaning, first_step and prometheus"),
                       (good + "  keep_when_stale: [nowhere]\n", "x: keep_when_stale")):
        f.write_text(bad)
        with pytest.raises(catalogue.CatalogueError, match=words.replace("[", r"\[").replace("]", r"\]")):
            catalogue.load_catalogue(f)


def test_every_rule_leads_to_a_real_dashboard_page() -> None:
    from dashboard.views.alerts import alert_target

    pages = {p.stem for p in (ROOT / "dashboard" / "app_pages").glob("*.py")}
    for r in CATALOGUE:
        page, params = alert_target(r.name, "orders-3" if r.subject == "partition" else "x", "c1")
        assert page == r.page and page in pages, r.name
        assert params["cluster"] == "c1"
        if r.subject == "partition":
            assert params["topic"] == "orders"
    assert alert_target("a_rule_from_the_future", "x")[0] == "history"


def test_incident_groupings_name_catalogue_rules() -> None:
    """The rule groups that correlation and the dashboard share name real rules, none in two groups: a rule
    renamed in rules.yaml and not here would silently fall out of its incident."""
    groups = {"broker": catalogue.BROKER_CAUSES, "partition": catalogue.PARTITION_SYMPTOMS,
              "consensus": catalogue.CONSENSUS_RULES, "cluster": frozenset(catalogue.CLUSTER_RULES),
              "monitor": frozenset(catalogue.MONITOR_RULES)}
    seen: set[str] = set()
    for name, rules in groups.items():
        assert rules and rules <= set(RULES), (name, sorted(rules - set(RULES)))
        assert not rules & seen, (name, sorted(rules & seen))
        seen |= rules
    assert set(catalogue.MONITOR_RULES) == catalogue.rules_of("monitor") >= {"history_maintenance_failed"}
