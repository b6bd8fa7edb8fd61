"""Counts in the words people read: ``1 partition``, ``3 partitions``, never ``partition(s)``.

On-call reads the monitor's text whole: an incident's summary, a dashboard banner, the weekly report's page, a
CLI line in a cron mail, a log line. ``1 day(s) not compacted`` makes them parse the sentence twice. Every layer
(collectors, the weekly report, the dashboard) says a count through `plural`, so they agree; the Prometheus
alerts' annotations do the same in Go templates (``deploy/prometheus/alerts.yml``).
"""

from __future__ import annotations

__all__ = ["count_of", "plural"]


def plural(n: int, word: str, many: str | None = None) -> str:
    """``1 partition``, ``3 partitions``, ``12,000 partitions``: `many` when the plural is not `word` + ``s``
    (``plural(2, "ledger entry", "ledger entries")``)."""
    return f"{n:,} {count_of(n, word, many)}"


def count_of(n: int, word: str, many: str | None = None) -> str:
    """The word alone, agreeing with `n`: ``partition`` for 1, ``partitions`` otherwise (0 too); for a verb or a
    noun whose count is said elsewhere in the sentence (``2 partitions of orders have``)."""
    return word if n == 1 else many or word + "s"

