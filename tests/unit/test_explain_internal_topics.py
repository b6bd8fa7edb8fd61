"""`explain --topic` says what the adapter's filter does with a topic named ``__...``."""

from __future__ import annotations

import pytest

from collectors.config.explain import explain
from collectors.config.loader import parse_config

ALLOW_ORDERS = """
clusters:
  - name: prod
    bootstrap_servers: k:9092
    filters:
      topics: {allow: ['^orders']}
"""
INTERNAL_OFF = """
clusters:
  - name: prod
    bootstrap_servers: k:9092
    filters: {internal_topics: false}
"""


@pytest.mark.parametrize(("text", "topic"), [
    (ALLOW_ORDERS, "__amazon_msk_canary"),
    (ALLOW_ORDERS, "__confluent.support.metrics"),
    (ALLOW_ORDERS, "__consumer_offsets"),
    (ALLOW_ORDERS, "__transaction_state"),
    (ALLOW_ORDERS, "orders"),
    (INTERNAL_OFF, "__orders-changelog"),
    (INTERNAL_OFF, "__consumer_offsets"),
    (INTERNAL_OFF, "__transaction_state"),
])
def test_explain_agrees_with_the_filter_given_the_brokers_internal_flag(text: str, topic: str) -> None:
    cfg = parse_config(text)
    watch = cfg.clusters[0].filters.topic_filter()
    assert watch is not None
    is_internal = topic in ("__consumer_offsets", "__transaction_state")  # what broker metadata flags
    first = explain(cfg, topic=topic)[0]
    assert first.endswith(": watched") == watch(topic, is_internal), first


def test_an_ordinary_double_underscore_topic_is_not_called_internal() -> None:
    first = explain(parse_config(ALLOW_ORDERS), topic="__amazon_msk_canary")[0]
    assert "matches no allow pattern" in first
    assert explain(parse_config(INTERNAL_OFF), topic="__orders-changelog")[0].endswith(": watched")
    assert "internal topics off" in explain(parse_config(INTERNAL_OFF), topic="__transaction_state")[0]
