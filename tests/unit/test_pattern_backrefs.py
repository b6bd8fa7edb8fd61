"""Patterns with a backreference keep their meaning when several are searched at once."""

from __future__ import annotations

import re

import pytest

from collectors.model.patterns import NameFilter, compile_patterns
from collectors.model.policy import Policies, PolicyRule

MIRROR = r"^(\w+)-mirror-\1$"  # e.g. billing-mirror-billing


@pytest.mark.parametrize("patterns", [
    [r"^(orders)-v\d+$", MIRROR],
    [r"^(?P<a>x)(y)?$", r"^(\w+)-(?(1)mirror)-\1$"],
    [r"^(orders)$", r"^(?P<svc>\w+)-mirror-(?P=svc)$"],
    [r"(?i)^ORDERS", MIRROR],  # a global flag: cannot be joined either
    [MIRROR, r"^(orders)-v\d+$", r"^dlq-"],
    [r"^(orders)-v\d+$", r"^a\\1"],  # an escaped backslash, no backreference
])
@pytest.mark.parametrize("name", ["billing-mirror-billing", "billing-mirror-other", "orders-v2", "x", "dlq-1",
                                  "orders", "ORDERS-eu", "a-mirror-a", "a\\1"])
def test_compiled_patterns_answer_as_the_patterns_one_by_one(patterns: list[str], name: str) -> None:
    compiled = compile_patterns(patterns)
    assert compiled is not None
    assert (compiled.search(name) is not None) == any(re.search(p, name) for p in patterns)


def test_a_name_matching_a_pattern_with_a_backreference_is_watched_and_explained_as_such() -> None:
    f = NameFilter(allow=[r"^(orders)-v\d+$", MIRROR])
    assert f("billing-mirror-billing") and f.why_not("billing-mirror-billing") is None
    assert not f("billing-mirror-other") and f.why_not("billing-mirror-other") is not None
    assert NameFilter(deny=[r"^(orders)-v\d+$", MIRROR]).denies("billing-mirror-billing")


def test_a_policy_with_a_backreference_is_found_for_its_group_and_topic() -> None:
    pols = Policies([PolicyRule(group=r"^(pay)ments$", team="payments"),
                     PolicyRule(group=MIRROR, team="mirror-team", lag_seconds_slo=5),
                     PolicyRule(topic=r"^(orders)-v\d+$", team="orders"),
                     PolicyRule(topic=MIRROR, team="mirror-topics")])
    gp = pols.for_group("c", "billing-mirror-billing")
    assert (gp.rule, gp.team) == ("policies[1]", "mirror-team")
    tp = pols.for_topic("c", "billing-mirror-billing")
    assert (tp.rule, tp.team) == ("policies[3]", "mirror-topics")
    assert pols.for_group("c", "payments").team == "payments"


def test_patterns_without_backreferences_still_make_one_search() -> None:
    assert isinstance(compile_patterns([r"^(orders)-v\d+$", r"^dlq-", r"(a|b)+"]), re.Pattern)
