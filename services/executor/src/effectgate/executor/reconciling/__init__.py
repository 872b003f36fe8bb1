"""Reconciliation of ``uncertain`` calls: the reconciler, the operator's list and resolve, and what a replay shows."""
