"""The weekly page's "Data lost" paragraph: its counts read whole, one message or many, and a zero says the
coverage behind it (`spark_analytics.render`)."""

from __future__ import annotations

import pandas as pd

from spark_analytics.render import _data_lost_section

COVERAGE = {"polls": 2016, "coverage": 1.0, "gaps": []}


def _lost(messages: int, rows: int) -> str:
    df = pd.DataFrame([{"kind": "truncation", "subject": f"orders-{i}", "messages": messages, "events": 1,
                        "first": None, "last": None, "evidence": "epoch 3 ends at 99 < 100"} for i in range(rows)])
    doc = {"data_lost": df.to_dict("records"), "messages_lost": messages * rows, "coverage": COVERAGE}
    return "".join(_data_lost_section(None, {"data_lost": df}, doc))


def test_one_message_lost_reads_singular() -> None:
    page = _lost(1, 1)
    assert "1 committed or unread message lost this week (truncations and retention), 1 ledger line;" in page


def test_many_messages_lost_read_plural() -> None:
    page = _lost(1500, 2)
    assert "3,000 committed or unread messages lost this week (truncations and retention), 2 ledger lines;" in page


def test_nothing_lost_says_the_coverage_behind_the_zero() -> None:
    page = "".join(_data_lost_section(None, {}, {"data_lost": [], "coverage": COVERAGE}))
    assert "No data lost this week, as far as the monitor saw: 2,016 polls, coverage" in page and "no gaps" in page
