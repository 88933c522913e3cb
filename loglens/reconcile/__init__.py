"""Reconcile bench_serving's client figures with the server log (see `loglens.reconcile.core`)."""
