"""Kafka reliability dashboard: ``streamlit run dashboard/app.py -- --state-dir DIR --history DIR [--reports DIR]``.

Reads the collector's latest state files and Parquet history (it never talks to Kafka). Options (after ``--``),
each with an environment fallback: ``--state-dir`` (KMON_STATE_DIR, default data/demo/state), ``--history``
(KMON_HISTORY, default data/demo/history), ``--reports`` (KMON_REPORTS, default data/reports), ``--refresh``
seconds between checks for new data (KMON_REFRESH, default 30, 0 = off), ``--poll-interval`` seconds
(KMON_POLL_INTERVAL; default: inferred from the history) that staleness is measured in.
Bind address and port are streamlit's own options (``--server.address 127.0.0.1``).
"""

from dashboard.ui import run_app

run_app()
