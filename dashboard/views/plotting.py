"""The plotly helpers every view's charts share: one layout, the empty-chart message, lines over epoch times.

Plotly has no notion of time zones, so figures get naive local wall-clock datetimes on the axis and the UTC time
in ``customdata`` for the hover text (`time_trace`); see `dashboard.views.common` for the conversions.
"""

from __future__ import annotations

from typing import Any

import plotly.graph_objects as go

from dashboard.views.common import epoch_to_axis, epoch_to_utc_text


def base_layout(fig: go.Figure, height: int = 320, title: str | None = None, legend: bool = True) -> go.Figure:
    fig.update_layout(template="plotly_white", height=height, margin={"l": 10, "r": 10, "t": 40 if title else 10,
                                                                        "b": 10},
                      title={"text": title} if title else None, showlegend=legend,
                      legend={"orientation": "h", "yanchor": "bottom", "y": 1.02, "x": 0},
                      font={"size": 12}, hoverlabel={"namelength": -1})
    return fig


def empty_figure(message: str, height: int = 200) -> go.Figure:
    fig = go.Figure()
    fig.add_annotation(text=message, showarrow=False, x=0.5, y=0.5, xref="paper", yref="paper",
                       font={"size": 14, "color": "#555"})
    fig.update_xaxes(visible=False)
    fig.update_yaxes(visible=False)
    return base_layout(fig, height=height, legend=False)


def time_hover(value_label: str, value_fmt: str = "%{y:,}") -> str:
    """Hover text: local time on the axis, UTC from customdata[0]."""
    return (f"%{{x|%Y-%m-%d %H:%M:%S}} (local)<br>%{{customdata[0]}}<br>{value_label}: {value_fmt}"
            "<extra>%{fullData.name}</extra>")


def time_trace(times: Any, values: Any, tz: str | None, name: str, value_label: str, value_fmt: str = "%{y:,}",
               **style: Any) -> go.Scatter:
    """A line over epoch times the way every history chart draws one: the viewer's wall clock on the axis, the
    UTC time and the value in the hover (`time_hover`); `style` is passed to ``go.Scatter`` (mode, line...)."""
    return go.Scatter(x=epoch_to_axis(times, tz), y=values, name=name,
                      customdata=[[u] for u in epoch_to_utc_text(times)],
                      hovertemplate=time_hover(value_label, value_fmt), **style)
