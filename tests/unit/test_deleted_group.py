"""A group deleted between ListGroups and DescribeGroups is gone, not an error (`kafka_adapter._answered_groups`)."""

from __future__ import annotations

from types import SimpleNamespace

from collectors.model.observations import KafkaObservation
from collectors.sources.kafka_adapter import _answered_groups


def test_a_group_not_found_is_dead_and_no_section_goes_stale() -> None:
    obs = KafkaObservation(time=0.0)
    obs.groups = {g: {"state": "Empty", "members": 0} for g in ("console-consumer-1", "billing", "locked")}
    answer = [SimpleNamespace(group_id="console-consumer-1", error_code=69),  # GROUP_ID_NOT_FOUND (v6+)
              SimpleNamespace(group_id="billing", error_code=0)]
    assert [g.group_id for g in _answered_groups(answer, "DescribeGroups", obs)] == ["billing"]
    assert obs.groups["console-consumer-1"]["state"] == "Dead" and not obs.stale_sections and not obs.errors
    # any other error is still no answer: the groups section is stale, as before
    assert list(_answered_groups([SimpleNamespace(group_id="locked", error_code=30)], "DescribeGroups", obs)) == []
    assert obs.stale_sections == {"groups"} and obs.errors == ["DescribeGroups locked: GROUP_AUTHORIZATION_FAILED"]
