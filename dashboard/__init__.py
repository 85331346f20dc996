"""The Streamlit dashboard over recorded results (built by a later issue)."""
