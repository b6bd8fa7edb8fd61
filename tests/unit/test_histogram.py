"""Fixed log-scale histograms (`spark_analytics.aggregations.histogram`): the stated 1 % bound, exhaustively on
awkward distributions, and the Spark expressions equal to their Python twins."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest

from spark_analytics.aggregations import histogram as H
from tests.support.spark_history import spark_session

PCTS = (0.0, 0.01, 0.5, 0.9, 0.95, 0.99, 0.999, 1.0)


def _hist(values: list[float]) -> dict[int, int]:
    out: dict[int, int] = {}
    for v in values:
        b = H.bucket_of(v)
        out[b] = out.get(b, 0) + 1
    return out


def _within(approx: float, exact: float) -> bool:
    return abs(approx - exact) <= H.ALPHA * abs(exact) * (1 + 1e-9) + 1e-12


def test_every_value_is_within_alpha_of_its_buckets_representative() -> None:
    rng = random.Random(3)
    values = [10 ** rng.uniform(-6, 12) for _ in range(20_000)] + [1.0, 2.0, 1e-9, 123456789.0]
    for v in values:
        r = H.representative(H.bucket_of(v))
        assert _within(r, v), (v, r)
    assert H.representative(H.bucket_of(0.0)) == 0.0 and H.bucket_of(-5.0) == H.ZERO_BUCKET


DISTRIBUTIONS = {
    "uniform": lambda rng: [rng.uniform(0, 1000) for _ in range(3001)],
    "heavy tail": lambda rng: [rng.paretovariate(1.1) * 10 for _ in range(2000)],
    "mostly zero": lambda rng: [0.0] * 950 + [rng.uniform(1, 1e6) for _ in range(50)],
    "integers with ties": lambda rng: [float(rng.randint(0, 20)) for _ in range(777)],
    "one value": lambda rng: [42.0],
    "two values far apart": lambda rng: [1.0, 1e9],
    "stall": lambda rng: [float(i) for i in range(7200)],
}


@pytest.mark.parametrize("name", sorted(DISTRIBUTIONS))
def test_histogram_percentiles_are_within_one_percent_of_the_exact_interpolated_ones(name: str) -> None:
    values = DISTRIBUTIONS[name](random.Random(len(name)))
    got = H.percentiles_of(_hist(values), PCTS)
    exact = np.percentile(np.array(values), [p * 100 for p in PCTS])  # linear interpolation, like Spark's
    for p, a, e in zip(PCTS, got, exact, strict=True):
        assert a is not None and _within(a, float(e)), (name, p, a, e)


def test_a_week_is_the_sum_of_its_days() -> None:
    rng = random.Random(11)
    days = [[rng.lognormvariate(3, 2) for _ in range(500)] for _ in range(7)]
    merged: dict[int, int] = {}
    for d in days:
        for b, n in _hist(d).items():
            merged[b] = merged.get(b, 0) + n
    flat = [v for d in days for v in d]
    assert merged == _hist(flat)
    assert H.percentiles_of(merged, PCTS) == H.percentiles_of(_hist(flat), PCTS)
    assert H.percentiles_of({}, PCTS) == [None] * len(PCTS)


def test_spark_expressions_match_the_python_twins() -> None:
    spark: Any = spark_session()
    rng = random.Random(5)
    values = [0.0, -1.0, 0.5, 1.0, 59.999, 60.0, 1e7] + [10 ** rng.uniform(-3, 9) for _ in range(300)]
    df = spark.createDataFrame([(v,) for v in values] + [(None,)], "v double")
    got = df.select("v", H.bucket("v").alias("b"), H.rep(H.bucket("v")).alias("r")).collect()
    for row in got:
        if row.v is None:
            assert row.b is None
            continue
        assert row.b == H.bucket_of(row.v)
        assert row.r == pytest.approx(H.representative(row.b), rel=1e-12)
    hist = _hist(values)
    rows = spark.createDataFrame(list(hist.items()), "bucket int, n long")
    [agg] = rows.agg(H.percentiles("bucket", "n", PCTS).alias("p")).collect()
    assert agg.p == pytest.approx(H.percentiles_of(hist, PCTS), rel=1e-9)
