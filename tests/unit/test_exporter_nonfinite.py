"""A value that is not a finite number never costs a poll its /metrics body: it is written NaN, +Inf or -Inf, as
prometheus-client writes it. And ZooKeeper's ``srvr`` latencies are read as `parse_mntr` reads numbers: "NaN",
"inf" or an overflow are unknown (None), not values, and the server still answered."""

from __future__ import annotations

import math

import pytest
from prometheus_client.parser import text_string_to_metric_families

from collectors.model.records import ClusterSnapshot, GroupRecord, ZkServerRecord
from collectors.outputs.exporter import MetricsEndpoint, _fmt
from collectors.sources.zk_fourletter import FourLetterNotWhitelisted, parse_mntr, parse_srvr
from collectors.sources.zk_servers import server_record

SRVR = ("Zookeeper version: 3.8.4\nLatency min/avg/max: 0/{avg}/{max}\nReceived: 1\nSent: 1\nConnections: 1\n"
        "Outstanding: 0\nZxid: 0x100000001\nMode: leader\nNode count: 5\n")
FAMILIES = ("zookeeper_request_latency_avg_seconds", "zookeeper_request_latency_max_seconds",
            "kafka_consumergroup_group_max_lag_seconds")


def snapshot(t: float) -> ClusterSnapshot:
    zk = ZkServerRecord(cluster="c", server="zk1:2181", serving=True, mode="leader", latency_avg_ms=math.nan,
                        latency_max_ms=math.inf)
    g = GroupRecord(cluster="c", group_id="billing", state="Stable", members=1, coordinator=1,
                    lag_seconds_max=-math.inf)
    return ClusterSnapshot(cluster="c", time=t, zookeeper=[zk], groups=[g])


@pytest.mark.parametrize(("value", "text"), [(math.nan, "NaN"), (math.inf, "+Inf"), (-math.inf, "-Inf"),
                                             (3.0, "3"), (0.25, "0.25"), (1e20, "1e+20")])
def test_values_are_written_the_exposition_way(value: float, text: str) -> None:
    assert _fmt(value) == text


@pytest.mark.parametrize("granularity", ["exceptions", "partition", "topic"])
def test_a_non_finite_value_is_rendered_not_a_failed_poll(granularity: str) -> None:
    ep = MetricsEndpoint(granularity=granularity)
    ep.update([ClusterSnapshot(cluster="c", time=1000.0)])
    ep.update([snapshot(2000.0)])  # raised ValueError (int(nan)): /metrics and the API kept the previous poll
    fast = ep.render().decode()
    assert 'kafka_monitor_polls_total{cluster="c"} 2' in fast
    ref = ep.render_via_client().decode()
    lines = {ln for ln in fast.splitlines() if ln.startswith(FAMILIES)}
    assert lines == {ln for ln in ref.splitlines() if ln.startswith(FAMILIES)}  # prometheus-client's spelling
    assert lines == {'zookeeper_request_latency_avg_seconds{cluster="c",server="zk1:2181"} NaN',
                     'zookeeper_request_latency_max_seconds{cluster="c",server="zk1:2181"} +Inf',
                     'kafka_consumergroup_group_max_lag_seconds{cluster="c",consumergroup="billing"} -Inf'}
    parsed = {s.name: s.value for f in text_string_to_metric_families(fast) for s in f.samples if s.name in FAMILIES}
    assert math.isnan(parsed[FAMILIES[0]]) and parsed[FAMILIES[1]] == math.inf and parsed[FAMILIES[2]] == -math.inf


@pytest.mark.parametrize("word", ["NaN", "nan", "inf", "-Infinity", "1e400"])
def test_srvr_latency_that_is_not_a_finite_number_is_unknown(word: str) -> None:
    stats = parse_srvr(SRVR.format(avg=word, max=word))
    assert stats["latency_avg"] is None and stats["latency_max"] is None and stats["mode"] == "leader"
    # the server answered: serving, its latency from mntr where it has one, else unknown; never NaN
    rec = server_record("c", "zk1:2181", stats, parse_mntr("zk_avg_latency\t2.5\nzk_max_latency\t1e400\n"))
    assert rec.serving and rec.latency_avg_ms == 2.5 and rec.latency_max_ms is None
    rec = server_record("c", "zk1:2181", stats, FourLetterNotWhitelisted("mntr", host="zk1", port=2181,
                                                                         command="mntr"))
    assert rec.serving and rec.latency_avg_ms is None


def test_srvr_latency_numbers_and_garbage() -> None:
    stats = parse_srvr(SRVR.format(avg="1.6739", max="9"))
    assert (stats["latency_min"], stats["latency_avg"], stats["latency_max"]) == (0.0, 1.6739, 9.0)
    with pytest.raises(ValueError, match="Latency"):
        parse_srvr(SRVR.format(avg="fast", max="9"))


def test_mntr_keeps_an_overflowing_number_a_string() -> None:
    assert parse_mntr("zk_avg_latency\t1e400\nzk_max_latency\tNaN\nzk_min_latency\t0.5\n") == {
        "zk_avg_latency": "1e400", "zk_max_latency": "NaN", "zk_min_latency": 0.5}
