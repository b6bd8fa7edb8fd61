"""Where a secret must never show: what the security tests check after a refused login."""

from __future__ import annotations

import json

import pytest

from collectors.model.records import ClusterSnapshot, snapshot_to_dict
from collectors.outputs.exporter import MetricsEndpoint


def assert_nowhere(s: ClusterSnapshot, caplog: pytest.LogCaptureFixture, *secrets: str) -> str:
    """None of `secrets` in the snapshot's JSON, its /metrics body, its alerts or the captured log (messages and
    their arguments); returns the /metrics body, for the caller's own checks."""
    as_json = json.dumps(snapshot_to_dict(s), default=str)
    ep = MetricsEndpoint()
    ep.update([s])
    metrics = ep.render().decode()
    alerts = " ".join(f"{a.subject} {a.summary}" for a in s.alerts)
    for secret in secrets:
        assert secret not in as_json
        assert secret not in metrics
        assert secret not in alerts
        assert secret not in caplog.text
        assert all(secret not in str(rec.args) for rec in caplog.records)
    return metrics
