"""The report's time line of incidents and alert episodes (`spark_analytics.charts.chart_incidents`): each bar runs
as far as its row counts in the week, and says how it ended."""

from __future__ import annotations

from typing import Any

import pandas as pd
import plotly.graph_objects as go

from spark_analytics.charts import chart_incidents
from spark_analytics.formatting import fmt_time

START, END = 1_795_000_000.0, 1_795_000_000.0 + 7 * 86_400
AS_OF = START + 9_000


def _row(kind: str, status: str, start: float, end: float | None, minutes: float) -> dict[str, Any]:
    return {"rule": kind, "severity": "critical", "subject": f"{kind} {status}", "start": START + start,
            "end": None if end is None else START + end, "status": status, "minutes_in_period": minutes,
            "duration_s": None if end is None else end - start, "open_for_s": AS_OF - START - start
            if status == "open" else None}


def test_a_lost_or_superseded_incident_ends_where_it_is_counted_not_at_the_last_poll() -> None:
    """Before, every row without an end was drawn up to the last poll as "still open": an incident its collector
    lost (``lost``: last seen open at 1800 s; ``superseded``: the same cause opened again at 3500 s) looked open
    through the rest of the week."""
    figures: list[go.Figure] = []

    def ch(fig: go.Figure, height: int = 360) -> str:
        figures.append(fig)
        return "<div></div>"

    rows = pd.DataFrame([_row("broker", "resolved", 100, 700, 10.0), _row("topic", "open", 5000, None, 4000 / 60),
                         _row("group", "lost", 1000, None, 800 / 60),
                         _row("transaction", "superseded", 3000, None, 500 / 60)])
    chart_incidents(ch, rows, START, END, AS_OF)
    (fig,) = figures
    (bars,) = fig.data
    drawn = {label.split(" · ")[0]: (ms / 1000, text) for label, ms, text in zip(bars.y, bars.x, bars.hovertext,
                                                                                strict=True)}
    assert {k: v[0] for k, v in drawn.items()} == {"broker": 600, "topic": 4000, "group": 800, "transaction": 500}
    assert drawn["topic"][1].endswith("still open")
    assert "lost: last seen open" in drawn["group"][1] and "end unseen" in drawn["group"][1]
    assert "end unknown" in drawn["transaction"][1]
    assert drawn["broker"][1].endswith(fmt_time(START + 700))  # its end
