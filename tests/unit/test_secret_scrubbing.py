"""Secret values hunted in text no key name describes: client libraries' errors and tracebacks (`Scrubber`).

The redaction by name (test_config) hides a secret wherever the monitor shows a setting. These tests give the
monitor a library that echoes what it was given, the one boundary no real client reaches on demand, and check
that the snapshot, the alerts and the log show ``***`` where the secret was.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest

from collectors.config import MonitorConfig
from collectors.config.redaction import secret_values
from collectors.model.observations import ZkObservation
from collectors.model.records import ZkServerRecord
from collectors.model.secrets import REDACTED, Scrubber, ScrubLogs
from collectors.runtime.cli import hide_secrets_in_logs
from collectors.runtime.poller import ClusterPoller

PASSWORD = "s3cr3t-Passw0rd!"
JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="monitor" '
        'password="jaas-Passw0rd";')
ZK_PASSWORD = "zk-Passw0rd"


def config() -> MonitorConfig:
    return MonitorConfig.model_validate({"clusters": [{
        "name": "prod", "bootstrap_servers": "127.0.0.1:1",
        "kafka": {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN", "sasl.username": "monitor",
                  "sasl.password": PASSWORD, "sasl.jaas.config": JAAS,
                  "client.id": "kmon-prod"},
        "zookeeper": {"connect": "127.0.0.1:1", "auth_scheme": "digest", "username": "zkuser",
                      "password": ZK_PASSWORD}}],
        "request_timeout_s": 1})


def test_a_scrubber_hides_each_secret_as_written_and_as_escaped() -> None:
    scrub = Scrubber.of(['p@ss "w/rd"'])
    for shown in ('p@ss "w/rd"', repr('p@ss "w/rd"')[1:-1], json.dumps('p@ss "w/rd"')[1:-1], "p%40ss%20%22w%2Frd%22",
                  "p%40ss+%22w%2Frd%22"):
        assert scrub(f"login with {shown} failed") == f"login with {REDACTED} failed"


def test_a_jaas_line_is_hunted_whole_and_by_its_secret_parts_only() -> None:
    scrub = Scrubber.of([JAAS])
    assert scrub(f"bad config: {JAAS}") == f"bad config: {REDACTED}"
    assert scrub("user monitor refused (password jaas-Passw0rd)") == f"user monitor refused (password {REDACTED})"
    assert "monitor" in scrub("monitor")  # the user name is not secret: error messages keep it


def test_the_longest_secret_is_hidden_first_and_short_ones_not_at_all() -> None:
    scrub = Scrubber.of(["abcd", "abcdefgh", "xyz"])
    assert scrub("abcdefgh") == REDACTED  # whole, not "***efgh"
    assert scrub("xyz is short") == "xyz is short"
    assert not Scrubber.of([]) and not Scrubber.of(["ab"])


def test_a_scrubbers_repr_shows_no_secret() -> None:
    scrub = Scrubber.of([PASSWORD])
    assert PASSWORD not in repr(scrub) and PASSWORD not in str(scrub)


def test_a_configs_secret_values_are_its_secret_texts_less_the_descriptive_ones() -> None:
    values = secret_values(config())
    assert sorted(values) == sorted([PASSWORD, JAAS, ZK_PASSWORD])  # not "monitor", "kmon-prod"
    oidc = MonitorConfig.model_validate({"clusters": [{"name": "c", "bootstrap_servers": "k:1", "kafka": {
        "security.protocol": "SASL_SSL", "sasl.mechanism": "OAUTHBEARER", "sasl.oauthbearer.method": "oidc",
        "sasl.oauthbearer.client.id": "kmon", "sasl.oauthbearer.client.secret": PASSWORD,
        "sasl.oauthbearer.scope": "kafka", "sasl.oauthbearer.token.endpoint.url": "https://idp.example.com/token"}}]})
    assert secret_values(oidc) == [PASSWORD]  # how to log in is not hunted: "oidc" would blank words in messages


@pytest.fixture
def echoing_poller(monkeypatch: pytest.MonkeyPatch) -> Iterator[ClusterPoller]:
    """A poller whose Kafka client raises, and whose ZooKeeper server fails, quoting the configured secrets."""
    poller = ClusterPoller(config().clusters[0], config())

    def observe(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError(f"SASL authentication failed: sasl.password={PASSWORD} jaas=[{JAAS}]")

    def zk_observe() -> ZkObservation:
        server = ZkServerRecord("prod", "127.0.0.1:1", False, error=f"auth digest zkuser:{ZK_PASSWORD}")
        return ZkObservation(servers=[server], errors=[f"127.0.0.1:1: digest zkuser:{ZK_PASSWORD} refused"],
                             stale_sections={"zookeeper"})

    monkeypatch.setattr(poller.kafka, "observe", observe)
    assert poller.zk is not None
    monkeypatch.setattr(poller.zk, "observe", zk_observe)
    yield poller
    poller.close()


def shown(poller_result: Any) -> str:
    snap = poller_result.snapshot
    return json.dumps([dataclasses.asdict(snap), [dataclasses.asdict(a) for a in poller_result.opened]], default=str)


def test_a_poll_whose_clients_echo_secrets_shows_them_nowhere(echoing_poller: ClusterPoller,
                                                              caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    root = logging.getLogger()
    hide_secrets_in_logs(config())
    try:
        result = echoing_poller.poll(now=1000.0)
        failed = echoing_poller.failed(1010.0, None, ValueError(f"bad token {PASSWORD}"), time.monotonic())
    finally:
        for handler in root.handlers:
            for f in [f for f in handler.filters if isinstance(f, ScrubLogs)]:
                handler.removeFilter(f)
    unreachable = [a for a in result.snapshot.alerts if a.rule == "cluster_unreachable"]
    assert unreachable and REDACTED in unreachable[0].summary  # the alert still says why, less the secret
    assert result.snapshot.zookeeper[0].error is not None and REDACTED in result.snapshot.zookeeper[0].error
    assert any(REDACTED in e for e in failed.snapshot.errors)
    logged = caplog.text
    assert "SASL authentication failed" in logged and "RuntimeError" in logged  # the traceback is logged ...
    for text in (shown(result), shown(failed), logged):
        for secret in (PASSWORD, "jaas-Passw0rd", ZK_PASSWORD):
            assert secret not in text  # ... with no secret in it


def test_a_log_filter_hides_secrets_in_arguments_tracebacks_and_stacks() -> None:
    f = ScrubLogs(Scrubber.of([PASSWORD]))
    try:
        raise RuntimeError(PASSWORD)
    except RuntimeError:
        record = logging.LogRecord("kafka", logging.ERROR, __file__, 1, "login %s", (PASSWORD,), sys.exc_info(),
                                   sinfo=f"stack {PASSWORD}")
    assert f.filter(record)
    text = logging.Formatter("%(message)s").format(record)
    assert PASSWORD not in text and text.startswith(f"login {REDACTED}") and "RuntimeError" in text


def test_a_record_whose_arguments_do_not_fit_is_passed_on_not_raised() -> None:
    record = logging.LogRecord("kafka", logging.INFO, __file__, 1, "two %s %s", (PASSWORD,), None)
    assert ScrubLogs(Scrubber.of([PASSWORD])).filter(record)
    text = logging.Formatter("%(message)s").format(record)  # logged, not raised: the caller is not the one to fail
    assert "two %s %s" in text and REDACTED in text and PASSWORD not in text
