"""`collectors.model.wording`: a count and its noun agree, in every layer that says one."""

from __future__ import annotations

import pytest

from collectors.model.wording import count_of, plural
from spark_analytics.formatting import fmt_counted


@pytest.mark.parametrize(("n", "text"), [(0, "0 partitions"), (1, "1 partition"), (2, "2 partitions"),
                                         (1200, "1,200 partitions"), (-1, "-1 partitions")])
def test_a_count_and_its_noun_agree(n: int, text: str) -> None:
    assert plural(n, "partition") == text


def test_an_irregular_plural_is_given() -> None:
    assert plural(1, "ledger entry", "ledger entries") == "1 ledger entry"
    assert plural(3, "ledger entry", "ledger entries") == "3 ledger entries"


def test_the_word_alone_agrees_for_a_verb_or_a_pronoun() -> None:
    assert [count_of(n, "is", "are") for n in (0, 1, 2)] == ["are", "is", "are"]
    assert count_of(1, "It holds", "They hold") == "It holds" and count_of(4, "node") == "nodes"


@pytest.mark.parametrize(("v", "text"), [(1, "1 incident"), (1.0, "1 incident"), (0, "0 incidents"),
                                         (12345, "12,345 incidents"), (None, "n/a incidents"),
                                         (float("nan"), "n/a incidents")])
def test_a_figure_that_may_be_missing_agrees_too(v: object, text: str) -> None:
    assert fmt_counted(v, "incident") == text
