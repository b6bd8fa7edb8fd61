"""The seam between the exporter and the modules that fill its metric families (`loss_metrics`, `stale_metrics`).

A fill asks for a family by name and adds samples to it; prometheus-client's families (for `collect`) and the
exporter's own text writer (for `render_text`) both answer, so one fill serves both. Declared once here, where the
fillers can import it without importing the exporter.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol


class Samples(Protocol):
    """A metric family being filled: `add_metric(labels, value)`, the labels in the family's order."""

    def add_metric(self, labels: Sequence[str], value: float) -> None: ...


Family = Callable[[str], Samples]
"""The metric family of a name, created on first use: prometheus-client's for `collect`, our text writer's for
`render_text`. Both take `add_metric(labels, value)`, so one fill serves both."""
