"""Dashboards: pure functions from store tables (and bench records) to Altair charts."""
