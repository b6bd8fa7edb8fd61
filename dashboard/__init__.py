"""Streamlit dashboard over the latest state files and the Parquet history."""
