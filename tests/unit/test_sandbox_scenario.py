"""Scenario files and the incident timeline: validation messages and schedule."""

from __future__ import annotations

import pytest

from sandbox.__main__ import main as sandbox_main
from sandbox.scenario import ScenarioError, load_scenario, parse_scenario
from sandbox.spec import INCIDENT_TYPES, IncidentSpec, Scenario
from sandbox.timeline import Timeline

GOOD = """
cluster:
  brokers: 3
  topics:
    - {name: orders, partitions: 3, replication_factor: 3}
  groups:
    - {group_id: billing, topics: [orders]}
incidents:
  - {type: broker_crash, at: 10, duration: 20, broker: 2}
"""


def test_default_scenario_is_valid_and_has_every_major_incident() -> None:
    s = load_scenario(None)
    kinds = {i.type for i in s.incidents}
    assert {"broker_crash", "slow_follower", "consumer_stall", "producer_crash_in_txn",
            "hanging_transaction", "consumer_behind_retention", "controller_failover",
            "zk_leader_kill", "zk_follower_pause"} <= kinds
    assert s.repeat_every and s.cluster.mode == "zookeeper"


def test_valid_scenario_parses() -> None:
    s = parse_scenario(GOOD)
    assert s.incidents[0].broker == 2 and s.cluster.topics[0].name == "orders"


def test_bad_field_is_named_with_its_line() -> None:
    bad = GOOD.replace("partitions: 3, replication_factor: 3", "partitions: many, replication_factor: 3")
    with pytest.raises(ScenarioError) as e:
        parse_scenario(bad, "x.yaml")
    msg = str(e.value)
    assert "cluster.topics[0].partitions" in msg
    assert "(line 5)" in msg


def test_unknown_incident_lists_valid_ones() -> None:
    bad = GOOD.replace("type: broker_crash", "type: broker_crsh")
    with pytest.raises(ScenarioError) as e:
        parse_scenario(bad)
    msg = str(e.value)
    assert "broker_crsh" in msg and "(line 9)" in msg
    for name in INCIDENT_TYPES:
        assert name in msg


def test_unknown_keys_and_dangling_references_are_rejected() -> None:
    with pytest.raises(ScenarioError, match="colour"):
        parse_scenario(GOOD.replace("brokers: 3", "brokers: 3\n  colour: blue"))
    with pytest.raises(ScenarioError, match="unknown group 'nobody'"):
        parse_scenario(GOOD + "  - {type: consumer_stall, at: 1, group: nobody}\n")
    with pytest.raises(ScenarioError, match="broker 7"):
        parse_scenario(GOOD.replace("broker: 2", "broker: 7"))


def test_not_yaml_is_a_clear_error() -> None:
    with pytest.raises(ScenarioError, match="not valid YAML"):
        parse_scenario("cluster: [unclosed")


def test_cli_exits_2_with_message_for_bad_scenario(tmp_path, capsys) -> None:
    f = tmp_path / "s.yaml"
    f.write_text(GOOD.replace("at: 10", "at: -5"))
    assert sandbox_main(["--scenario", str(f)]) == 2
    err = capsys.readouterr().err
    assert "incidents[0].at" in err and "line 9" in err


def test_cli_rejects_unknown_incident_from_command_line(capsys) -> None:
    assert sandbox_main(["--incident", "meteor_strike:at=5"]) == 2
    assert "valid incidents" in capsys.readouterr().err


def test_timeline_fires_each_action_once_in_order_and_repeats() -> None:
    incs = [IncidentSpec(type="broker_crash", at=10, duration=5, broker=1),
            IncidentSpec(type="controller_failover", at=12)]
    tl = Timeline(incs, repeat_every=100)
    assert tl.due(9) == []
    first = tl.due(12)
    assert [(a.spec.type, a.starting) for a in first] == [("broker_crash", True), ("controller_failover", True)]
    assert tl.due(12) == []
    assert [(a.spec.type, a.starting) for a in tl.due(16)] == [("broker_crash", False)]
    again = tl.due(111)
    assert [(a.cycle, a.spec.type) for a in again] == [(1, "broker_crash")]


@pytest.mark.parametrize(("incident", "message"), [
    ({"type": "unclean_election", "at": 1, "duration": 20, "topic": "orders"}, "longer than replica.lag.time.max.ms"),
    ({"type": "unclean_election", "at": 1, "topic": "orders"}, "longer than replica.lag.time.max.ms"),
    ({"type": "acks1_leader_loss", "at": 1, "duration": 30, "topic": "orders"}, "shorter than replica.lag.time"),
    ({"type": "leader_change_hw_dip", "at": 1, "topic": "orders", "partition": 3}, "partition 3 not in 0..2"),
])
def test_loss_incidents_are_checked_against_the_cluster(incident: dict[str, object], message: str) -> None:
    cluster = {"topics": [{"name": "orders", "partitions": 3, "replication_factor": 3}]}
    with pytest.raises(ValueError, match=message):
        Scenario.model_validate({"cluster": cluster, "incidents": [incident]})
