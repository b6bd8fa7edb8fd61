"""What the exporter tells Prometheus a stale section left unjudged, and the twins' holds that read it.

The collector keeps an open alert over a stale section, for the subjects the section failed for
(`catalogue.kept_over_stale`); its Prometheus twin keeps its firing alert through ``kafka_monitor_stale_whole``
and ``kafka_monitor_stale_subject`` (`collectors.outputs.stale_metrics`), joined as `twin_holds` writes it. These
tests hold the two paths to one reading: the subjects exported are the subjects the collector keeps, in the
twins' own labels; and alerts.yml is what `twin_holds` derives from the catalogue. promtool runs the holds
(deploy/prometheus/tests/stale.yml), and a real Prometheus one of them (tests/integration/test_prometheus_live.py).
"""

from __future__ import annotations

import pytest
import yaml

from collectors.alerting import twin_holds
from collectors.alerting.catalogue import CATALOGUE, PASS_THROUGH, kept_over_stale, stale_kinds
from collectors.model.records import ClusterSnapshot
from collectors.model.stale_subjects import subject_kinds
from collectors.model.vocabulary import STALE_SECTIONS, STALE_SUBJECT_KINDS, partition_of
from collectors.outputs.exporter import MetricsEndpoint
from collectors.outputs.stale_metrics import stale_scope
from tests.unit.test_exporter import NOW, healthy_and_broken, samples

SUBJECT_LABELS = ("section", "topic", "partition", "consumergroup", "transactional_id")


def stale(sections: list[str], subjects: dict[str, list[str]] | None = None, **kw: object) -> ClusterSnapshot:
    s = healthy_and_broken()
    s.stale, s.stale_sections, s.stale_subjects = True, sections, subjects or {}
    for k, v in kw.items():
        setattr(s, k, v)
    return s


def exported(s: ClusterSnapshot, granularity: str = "exceptions", limit: int = 2000,
             kinds: dict[str, frozenset[str]] | None = None) -> tuple[set[str], set[tuple]]:
    ep = MetricsEndpoint(granularity=granularity, exceptions_limit=limit, stale_kinds=kinds)
    ep.update([s])
    got = samples(ep.render())
    whole = {lab["section"] for lab, v in got.get("kafka_monitor_stale_whole", []) if v == 1.0}
    rows = {tuple(lab.get(k, "") for k in SUBJECT_LABELS)
            for lab, v in got.get("kafka_monitor_stale_subject", []) if v == 1.0}
    assert {lab["section"] for lab, _ in got.get("kafka_monitor_stale", [])} == set(s.stale_sections)
    return whole, rows


def test_fresh_sections_export_nothing() -> None:
    assert exported(healthy_and_broken()) == (set(), set())


def test_an_unreachable_cluster_is_stale_as_a_whole() -> None:
    s = ClusterSnapshot(cluster="gone", time=NOW, reachable=False, stale=True, stale_sections=["cluster"])
    assert exported(s) == ({"cluster"}, set())


def test_sections_that_named_nothing_or_cannot_name_a_twin_subject_are_whole() -> None:
    s = stale(["groups", "quorum", "zookeeper"], {"quorum": ["voter-1"]})
    assert exported(s) == ({"groups", "quorum", "zookeeper"}, set())


def test_a_stale_topic_stands_for_itself_and_for_the_groups_reading_it() -> None:
    s = stale(["partitions"], {"partitions": ["orders"]})
    assert exported(s) == (set(), {("partitions", "orders", "", "", ""), ("partitions", "", "", "fine", ""),
                                   ("partitions", "", "", "slow", "")})
    assert exported(stale(["partitions"], {"partitions": ["gone"]})) == (set(), {("partitions", "gone", "", "", "")})


def test_a_stale_partition_stands_for_itself_and_its_readers_a_group_and_an_id_for_themselves() -> None:
    s = stale(["offsets", "groups", "transactions"],
              {"offsets": ["orders-1", "pay-0"], "groups": ["slow"], "transactions": ["tx-1"]})
    assert exported(s) == (set(), {("offsets", "orders", "1", "", ""), ("offsets", "pay", "0", "", ""),
                                   ("offsets", "", "", "fine", ""), ("offsets", "", "", "slow", ""),
                                   ("groups", "", "", "slow", ""), ("transactions", "", "", "", "tx-1")})


def test_more_subjects_than_the_limit_make_the_section_whole_except_at_partition_granularity() -> None:
    s = stale(["offsets"], {"offsets": ["orders-0", "orders-1", "orders-2"]})  # 3 partitions + 2 groups
    assert exported(s, limit=5)[0] == set()
    assert exported(s, limit=4) == ({"offsets"}, set())
    assert len(exported(s, granularity="partition", limit=4)[1]) == 5
    assert len(exported(s, limit=0)[1]) == 5  # 0: no limit, as everywhere in the exporter


def test_only_the_kinds_kept_over_a_section_are_exported_and_counted() -> None:
    """A stale topic's readers join no twin that holds over `partitions` (the consumer rules do not keep over it):
    they are not exported, nor counted against the limit, which one topic read by many groups would pass."""
    kinds = stale_kinds()
    assert kinds["partitions"] == {"partition", "topic"} and kinds["offsets"] == {"partition", "group"}
    s = stale(["partitions", "configs"], {"partitions": ["orders"], "configs": ["orders"]})
    assert exported(s, limit=1, kinds=kinds) == (set(), {("partitions", "orders", "", "", ""),
                                                          ("configs", "orders", "", "", "")})
    assert exported(s, limit=1)[0] == {"partitions", "configs"}  # every twin kind: the two readers count


def test_every_subject_a_twin_joins_on_is_exported() -> None:
    kinds = stale_kinds()
    for alert, rule in _alerts().items():
        if alert not in twin_holds.twin_sections():
            continue
        kind = twin_holds.twin_kind(twin_holds.condition_of(rule["expr"]))
        for section in twin_holds.twin_sections()[alert]:
            if kind is not None and kind in subject_kinds(section):
                assert kind in kinds[section], (alert, section, kind)


@pytest.mark.parametrize("rule", [r for r in CATALOGUE if r.subject in ("partition", "topic", "group",
                                                                         "transactional_id") and r.keep_when_stale])
def test_the_subjects_exported_are_the_subjects_the_collector_keeps(rule: object) -> None:
    """For every rule kept per subject, and every section it depends on: the alerts the collector keeps are those
    whose subject the exporter names (a whole section, or one whose failures cannot name the rule's kind: every
    subject, both ways)."""
    s = stale([], {})
    subjects = {"partitions": ["orders", "gone"], "offsets": ["orders-1"], "groups": ["slow"],
                "transactions": ["tx-1"], "producers": ["pay-1"], "configs": ["pay"]}
    candidates = ["orders-0", "orders-1", "pay-1", "gone-4", "orders", "pay", "fine", "slow", "tx-1", "tx-2"]
    for section in sorted(rule.keep_when_stale):
        s.stale_sections = [section]
        s.stale_subjects = {section: subjects[section]} if section in subjects else {}
        kept = kept_over_stale(s).get(rule.name, frozenset())
        whole, named = stale_scope(s, None, stale_kinds())
        for subject in candidates:
            by_exporter = (section in whole or rule.subject not in subject_kinds(section)  # the twin: any failure
                           or any(_names(row, rule.subject, subject) for row in named.get(section, ())))
            assert (kept is None or subject in kept) == by_exporter, (rule.name, section, subject)


def _names(row: tuple[str, str, str, str], kind: str, subject: str) -> bool:
    """Whether an exported subject row joins an alert of `kind` on `subject`, as the twins' holds join."""
    topic, partition, group, txid = row
    if kind == "partition":
        part = partition_of(subject)
        return part is not None and topic == part[0] and partition in ("", str(part[1])) and bool(topic)
    if kind == "topic":
        return bool(topic) and topic == subject and not partition
    return (group if kind == "group" else txid) == subject


# ----------------------------------------------------------------------------- the twins' holds


def _alerts() -> dict[str, dict]:
    doc = yaml.safe_load(twin_holds.ALERTS_YML.read_text())
    return {r["alert"]: r for g in doc["groups"] for r in g["rules"] if "alert" in r}


def test_every_twin_of_a_kept_rule_holds_as_the_catalogue_says() -> None:
    alerts = _alerts()
    holds = twin_holds.twin_sections()
    assert len(holds) >= 25 and PASS_THROUGH not in holds
    for name, rule in alerts.items():
        expr = " ".join(rule["expr"].split())
        if name not in holds:
            assert twin_holds.MARKER not in expr, f"{name} holds, but no rule it covers is kept over stale sections"
            continue
        want = " ".join(twin_holds.expression(name, twin_holds.condition_of(rule["expr"])).split())
        assert expr == want, f"{name}: run `python -m collectors.alerting.twin_holds`"
        assert f'ALERTS{{alertname="{name}", alertstate="firing"}}' in expr


def test_the_rewrite_is_idempotent_and_keeps_every_other_line() -> None:
    text = twin_holds.ALERTS_YML.read_text()
    assert twin_holds.rewrite(text) == text


def test_the_rewrite_keeps_groups_after_its_own_reads_scalars_as_yaml_refuses_and_unholds() -> None:
    text = twin_holds.ALERTS_YML.read_text()
    mine = "  - name: my-team\n    rules:\n      - alert: MyTeamAlert\n        expr: up == 0\n"
    assert mine in twin_holds.rewrite(text + mine)
    # a plain scalar with a YAML comment, a quoted one: their values, not their text
    block = _block(text, "KafkaBrokerDown")
    plain = text.replace(block, "        expr: max by (cluster, broker) (kafka_broker_up) == 0  # down\n")
    assert twin_holds.rewrite(plain) == text
    quoted = text.replace(block, '        expr: "max by (cluster, broker) (kafka_broker_up) == 0"\n')
    assert twin_holds.rewrite(quoted) == text
    twice = text.replace("      - alert: KafkaBrokerDown\n", "      - alert: KafkaBrokerDown\n        expr: "
                         "max by (cluster, broker) (kafka_broker_up{broker=\"9\"}) == 0\n        labels:\n"
                         "          severity: info\n      - alert: KafkaBrokerDown\n", 1)
    with pytest.raises(ValueError, match="KafkaBrokerDown: two rules of that name"):
        twin_holds.rewrite(twice)
    commented = text.replace(block, "        expr: |\n          # down\n          max by (cluster, broker) "
                                    "(kafka_broker_up) == 0\n")
    with pytest.raises(ValueError, match="KafkaBrokerDown: a PromQL comment"):
        twin_holds.rewrite(commented)
    assert not twin_holds._has_comment('max by (cluster) (x{topic="a#b"}) > 0')
    # a twin whose rules no longer keep over stale sections loses its hold and its recording rule
    held = dict(twin_holds.twin_sections())
    del held["KafkaLsoGap"]
    original = twin_holds.twin_sections
    twin_holds.twin_sections = lambda: held  # type: ignore[assignment]
    try:
        out = twin_holds.rewrite(text)
    finally:
        twin_holds.twin_sections = original  # type: ignore[assignment]
    lso = yaml.safe_load(out)
    rules = {r.get("alert") or r["record"]: r for g in lso["groups"] for r in g["rules"]}
    assert rules["KafkaLsoGap"]["expr"] == "max by (cluster, topic, partition) (kafka_topic_partition_lso_gap) > 10000"
    assert "twin:KafkaLsoGap:condition" not in rules


def _block(text: str, alert: str) -> str:
    """The ``expr:`` block of `alert` in alerts.yml's `text`, as written."""
    lines = text.splitlines(keepends=True)
    at = next(i for i, x in enumerate(lines) if x.strip() == f"- alert: {alert}")
    start = next(i for i in range(at, len(lines)) if lines[i].strip().startswith("expr:"))
    end = next(i for i in range(start + 1, len(lines)) if not lines[i].startswith("          "))
    return "".join(lines[start:end])


def test_a_twin_joins_each_section_on_the_labels_its_failures_can_name() -> None:
    # a topic twin: a stale topic on the topic; a partition twin: a topic on the topic, a partition on both, and
    # its roll-up branch (no topic) on any failure; a group twin: its groups, whatever named them; a broker twin:
    # whole sections only.
    def text(alert: str, condition: str) -> str:
        return " ".join(" ".join(twin_holds.hold(alert, condition)).split())

    topic = text("KafkaTopicMinIsrTooLow", "max by (cluster, topic) (x) < 2")
    assert ('ALERTS{alertname="KafkaTopicMinIsrTooLow", alertstate="firing", topic!=""} and on (cluster, topic) '
            'kafka_monitor_stale_subject{section=~"configs|partitions", topic!=""}') in topic
    assert 'topic=""}' not in topic
    part = text("KafkaHangingTransaction", "max by (cluster, topic, partition) (x) == 1 or (max by (cluster) (y))")
    assert ('and on (cluster, topic, partition) kafka_monitor_stale_subject{section=~"offsets|producers", '
            'topic!="", partition!=""}') in part
    assert 'and on (cluster, topic) kafka_monitor_stale_subject{section="partitions", topic!=""}' in part
    assert 'kafka_monitor_stale{section=~"cluster|transactions"}' in part  # a transactional id names no partition
    assert ('ALERTS{alertname="KafkaHangingTransaction", alertstate="firing", topic=""} and on (cluster) '
            'kafka_monitor_stale{section=~"cluster|offsets|partitions|producers|transactions"}') in part
    group = text("KafkaConsumerGroupLagError", "max by (cluster, consumergroup) (x) == 2")
    assert 'kafka_monitor_stale_subject{section=~"groups|offsets", consumergroup!=""}' in group
    broker = text("KafkaBrokerDown", "max by (cluster, broker) (x) == 0")
    assert "kafka_monitor_stale_subject" not in broker and 'kafka_monitor_stale{section="cluster"}' in broker


def test_every_section_a_failure_names_the_subjects_of_has_a_kind() -> None:
    assert set(STALE_SUBJECT_KINDS) <= set(STALE_SECTIONS)
    for section in STALE_SECTIONS:
        assert bool(subject_kinds(section)) == (section in STALE_SUBJECT_KINDS), section
