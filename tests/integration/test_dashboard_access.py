"""The dashboard's optional access token, through Streamlit's AppTest: no data before the token, all after."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from streamlit.testing.v1 import AppTest

from dashboard.access import AccessConfigError, expected_token, token_matches

pytestmark = pytest.mark.integration

APP = Path(__file__).resolve().parents[2] / "dashboard" / "app.py"
TOKEN = "s3cret-t0ken-for-the-dashboard"


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch, dashboard_data: Any, tmp_path: Path) -> Any:
    monkeypatch.setenv("KMON_STATE_DIR", str(dashboard_data.state_dir))
    monkeypatch.setenv("KMON_HISTORY", str(dashboard_data.history_dir))
    monkeypatch.setenv("KMON_REPORTS", str(dashboard_data.reports_dir))
    monkeypatch.setenv("KMON_REFRESH", "0")
    monkeypatch.setenv("KMON_POLL_INTERVAL", "3600")
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    monkeypatch.setenv("KMON_DASHBOARD_TOKEN_FILE", str(token_file))
    return dashboard_data


def shown(at: AppTest) -> str:
    parts = []
    for kind in ("title", "subheader", "markdown", "caption", "error", "warning", "info", "metric", "dataframe"):
        parts += [str(getattr(e, "value", "")) for e in getattr(at, kind)]
    return "\n".join(parts)


def app(query: dict[str, str] | None = None) -> AppTest:
    at = AppTest.from_file(str(APP), default_timeout=60)
    at.query_params.update(query or {})
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_without_the_token_nothing_of_the_cluster_is_shown(env: Any) -> None:
    at = app()
    assert [t.label for t in at.text_input] == ["Access token"]
    assert not at.dataframe and not at.metric and not at.sidebar.selectbox
    assert env.cluster not in shown(at)  # not even the cluster's name


def test_a_wrong_token_is_refused(env: Any) -> None:
    at = app({"token": "guess"})
    assert "not valid" in shown(at) and not at.dataframe and env.cluster not in shown(at)
    assert "token" not in at.query_params
    at.text_input[0].input(TOKEN[:-1]).run()
    assert "not valid" in shown(at) and not at.dataframe


def test_the_token_in_the_link_opens_the_dashboard_and_leaves_the_address_bar(env: Any) -> None:
    at = app({"token": TOKEN})
    assert not at.text_input or at.text_input[0].label != "Access token"
    assert env.cluster in shown(at) and at.dataframe  # the overview with its alert table
    assert "token" not in at.query_params
    assert TOKEN not in shown(at)


def test_the_token_typed_into_the_prompt_opens_the_dashboard(env: Any) -> None:
    at = app()
    at.text_input[0].input(TOKEN).run()
    assert not at.exception and env.cluster in shown(at) and at.dataframe


def test_an_unreadable_token_file_fails_closed(env: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("KMON_DASHBOARD_TOKEN_FILE", str(tmp_path / "missing"))
    at = app({"token": TOKEN})
    assert "misconfigured" in shown(at) and not at.dataframe and env.cluster not in shown(at)


def test_token_sources_and_comparison(tmp_path: Path) -> None:
    assert expected_token({}) is None  # no token: open, as on loopback
    assert expected_token({"KMON_DASHBOARD_TOKEN": " abc "}) == "abc"
    f = tmp_path / "t"
    f.write_text("from-file\n")
    assert expected_token({"KMON_DASHBOARD_TOKEN_FILE": str(f), "KMON_DASHBOARD_TOKEN": "env"}) == "from-file"
    f.write_text("  \n")
    with pytest.raises(AccessConfigError, match="empty"):
        expected_token({"KMON_DASHBOARD_TOKEN_FILE": str(f)})
    assert token_matches("abc", "abc") and not token_matches("abd", "abc") and not token_matches("", "abc")
    assert not token_matches(None, "abc") and token_matches("ünï", "ünï")
