"""The soak (bench/soak.py) cut to two simulated hours: one full cycle of every Kafka-side incident, and the loss
ledger quiet through all of it but the transactions the coordinator aborted.

Same machinery as the 24-hour run: the sandbox on a hand-stepped clock, the real poller every 30 simulated
seconds, incident start/end read from the sandbox's event log. No wall-clock assertions; memory is only
reported by the full run.
"""

from __future__ import annotations

import pytest

from bench.soak import SoakResult, report, run_soak

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def soak() -> SoakResult:
    return run_soak(hours=2.0, poll_s=30.0)


def test_every_incident_type_ran_and_raised_its_expected_rule(soak: SoakResult) -> None:
    judged = {e.plan.type for e in soak.complete}
    assert judged == {s.plan.type for s in soak.slots}, "\n".join(report(soak))
    missed = [(e.plan.type, e.start, sorted(e.rules), e.events[:5]) for e in soak.misses]
    assert not missed, "\n".join(report(soak))


def test_no_alert_outlives_its_incident_allowance(soak: SoakResult) -> None:
    assert not [n.describe() for n in soak.stale], "\n".join(report(soak))


def test_no_alert_in_quiet_periods(soak: SoakResult) -> None:
    assert not [n.describe() for n in soak.false_alerts], "\n".join(report(soak))


def test_incident_times_come_from_the_event_log(soak: SoakResult) -> None:
    # each judged incident began inside its slot and, when it lasts, ended after it began
    for e in soak.complete:
        assert e.start is not None and e.end is not None
        assert e.window[0] - 1 <= e.start <= e.end < e.window[1]
        assert e.end - e.start == pytest.approx(e.plan.span_s, abs=0.01)


def test_nothing_is_recorded_lost_but_the_transactions_the_coordinator_aborted(soak: SoakResult) -> None:
    # clean leader changes (failover and back, a high watermark dip), controller failovers and broker restarts
    # lose nothing; a producer that dies inside a transaction does, and only that is in the ledger
    assert not soak.unexpected_losses, "\n".join(report(soak))
    assert any(e.plan.type == "leader_change_hw_dip" for e in soak.complete)
    crashes = [e for e in soak.complete if e.plan.type == "producer_crash_in_txn"]
    aborts = [x for x, ep in soak.losses if x.kind == "txn_timeout_abort"]
    assert crashes and len(aborts) == len(crashes), "\n".join(report(soak))


def test_a_batch_group_idle_by_policy_and_a_group_nobody_runs_raise_nothing(soak: SoakResult) -> None:
    assert not soak.fleet_alerts, "\n".join(report(soak))
    assert soak.fleet_status.get("old-etl") == "INACTIVE"
    assert soak.fleet_status.get("hourly-rollup") in ("OK", "WARN")  # judged (active), just never alerted
