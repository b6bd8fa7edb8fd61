"""An optional access token in front of the dashboard.

Streamlit has no authentication of its own, and the dashboard shows cluster names, topics, groups and
alert text. It binds 127.0.0.1 by default; when it must be reachable by others, either put it behind a
reverse proxy that authenticates (README, "Dashboard access") or set a token: ``KMON_DASHBOARD_TOKEN_FILE``
(a file holding it, preferred: environments leak into process listings and crash reports) or
``KMON_DASHBOARD_TOKEN``. Viewers then open ``http://host:8501/?token=...`` once per browser session, or
type it into the prompt. The token is compared in constant time, removed from the address bar at once (so
it does not end up in screenshots or shared links), and never shown or logged.

A token file that is set but unreadable or empty fails closed: the dashboard shows nothing but that error.
"""

from __future__ import annotations

import hmac
import os
from pathlib import Path

TOKEN_ENV = "KMON_DASHBOARD_TOKEN"
TOKEN_FILE_ENV = "KMON_DASHBOARD_TOKEN_FILE"
SESSION_KEY = "kmon_access_granted"


class AccessConfigError(ValueError):
    """The token is configured in a way that cannot be used (the dashboard then refuses to serve)."""


def expected_token(environ: dict[str, str] | None = None) -> str | None:
    """The configured token, None when none is (open dashboard, as on loopback)."""
    env = os.environ if environ is None else environ
    path = env.get(TOKEN_FILE_ENV)
    if path:
        try:
            token = Path(path).read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError) as e:
            raise AccessConfigError(f"{TOKEN_FILE_ENV}: cannot read the token file: {type(e).__name__}") from None
        if not token:
            raise AccessConfigError(f"{TOKEN_FILE_ENV}: the token file is empty")
        return token
    token = env.get(TOKEN_ENV, "").strip()
    return token or None


def token_matches(given: str | None, expected: str) -> bool:
    """Constant-time comparison (a timing difference must not reveal how much of a guess was right)."""
    if not given:
        return False
    return hmac.compare_digest(given.strip().encode("utf-8"), expected.encode("utf-8"))


def require_access() -> None:
    """Stop the script run unless this browser session has shown the token (no-op without a token)."""
    import streamlit as st

    try:
        expected = expected_token()
    except AccessConfigError as e:
        st.error(f"The dashboard's access token is misconfigured: {e}")
        st.stop()
    if expected is None or st.session_state.get(SESSION_KEY):
        return
    given = st.query_params.get("token")
    if given is not None:
        del st.query_params["token"]  # out of the address bar, whatever the outcome
        if token_matches(given, expected):
            st.session_state[SESSION_KEY] = True
            return
    st.title("Kafka reliability")
    typed = st.text_input("Access token", type="password", key="kmon_token_input",
                          help="Ask whoever runs the monitor; it is the content of the dashboard's token file.")
    if typed and token_matches(typed, expected):
        st.session_state[SESSION_KEY] = True
        st.session_state.pop("kmon_token_input", None)
        st.rerun()
    if typed or given is not None:
        st.error("That token is not valid.")
    st.stop()
