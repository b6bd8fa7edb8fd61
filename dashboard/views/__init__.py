"""Pure view functions: latest-state dicts and history DataFrames in, display frames and plotly figures out.

Nothing here imports Streamlit, so every function is unit-testable on hand-made data
(`tests/unit/test_dashboard_views.py`).
"""
