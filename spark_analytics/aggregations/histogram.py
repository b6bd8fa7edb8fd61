"""Fixed log-scale histograms: percentiles with a stated relative error, mergeable across days.

A value ``v > 0`` falls in bucket ``i = ceil(ln v / ln γ)`` with ``γ = (1 + α) / (1 - α)``: bucket ``i`` holds
``(γ^(i-1), γ^i]``, and its representative ``2 γ^i / (γ + 1)`` is within ``α`` (relative) of every value in it
(the DDSketch construction). Values ``<= 0`` (a group with no lag) have a bucket of their own, represented
exactly by 0. Buckets are fixed: the histogram of a week is the sum of its days' histograms, bucket by bucket, so
daily roll-ups merge into weeks and months without going back to the polls.

Percentiles are taken like the exact ones (linear interpolation between the two closest ranks, Spark's
``percentile``, DuckDB's ``quantile_cont``), over the representatives with their counts as weights. The exact
interpolated value is ``x_lo (1 - f) + x_hi f`` for the observations at the two ranks; the histogram's is the same
sum over their representatives, each within ``α x``, so **the histogram percentile is within α of the exact
percentile, relative** — for any distribution, any percentile. ``ALPHA`` is 1 %. Values <= 0 are counted as 0.

Pure: Column expressions and plain-Python twins (for tests and readers of roll-ups outside Spark).
"""

from __future__ import annotations

import math

from pyspark.sql import Column
from pyspark.sql import functions as F

ALPHA = 0.01
"""The largest relative error of a histogram percentile against the exact one."""
GAMMA = (1 + ALPHA) / (1 - ALPHA)
LOG_GAMMA = math.log(GAMMA)
ZERO_BUCKET = -(2**31)
"""The bucket of values <= 0 (represented exactly by 0). Real buckets stay far above it: 1e-300 is bucket -34,500."""


def bucket_of(v: float) -> int:
    """The bucket of one value (Python twin of `bucket`)."""
    return ZERO_BUCKET if v <= 0 else math.ceil(math.log(v) / LOG_GAMMA)


def representative(i: int) -> float:
    """The value that stands for bucket `i` (Python twin of `rep`)."""
    return 0.0 if i == ZERO_BUCKET else 2.0 * GAMMA**i / (GAMMA + 1.0)


def bucket(col: str | Column) -> Column:
    """The bucket of each row's value (int; null stays null)."""
    c = (F.col(col) if isinstance(col, str) else col).cast("double")
    return (F.when(c.isNull(), F.lit(None).cast("int"))
            .when(c <= 0, F.lit(ZERO_BUCKET))
            .otherwise(F.ceil(F.log(c) / F.lit(LOG_GAMMA)).cast("int")))


def rep(col: str | Column) -> Column:
    """The representative value of each row's bucket (double)."""
    c = F.col(col) if isinstance(col, str) else col
    return (F.when(c == F.lit(ZERO_BUCKET), F.lit(0.0))
            .otherwise(F.lit(2.0 / (GAMMA + 1.0)) * F.pow(F.lit(GAMMA), c.cast("double"))))


def percentiles(bucket_col: str | Column, count_col: str, pcts: list[float] | tuple[float, ...]) -> Column:
    """Aggregate: the interpolated percentiles (an array, in `pcts` order) of histogram rows ``(bucket, count)``;
    rows with a null bucket are left out.

    Spark's ``percentile`` with a frequency: exact over the weighted representatives, cheap (a few hundred
    distinct buckets per key, not one entry per poll). Rows of the same bucket need not be merged first: the
    aggregate adds up the counts of equal values (several days' rows of one bucket give one entry)."""
    return F.percentile(rep(bucket_col), list(pcts), F.col(count_col).cast("long"))


def percentiles_of(hist: dict[int, int], pcts: list[float] | tuple[float, ...]) -> list[float | None]:
    """Python twin of `percentiles` for one histogram ``{bucket: count}`` (None when empty)."""
    items = sorted((i, n) for i, n in hist.items() if n > 0)
    total = sum(n for _, n in items)
    if total == 0:
        return [None for _ in pcts]

    def at(rank: int) -> float:  # 0-based rank
        seen = 0
        for i, n in items:
            seen += n
            if rank < seen:
                return representative(i)
        return representative(items[-1][0])

    out: list[float | None] = []
    for p in pcts:
        pos = p * (total - 1)
        lo = math.floor(pos)
        hi = min(lo + 1, total - 1)
        f = pos - lo
        out.append(at(lo) * (1 - f) + at(hi) * f)
    return out
