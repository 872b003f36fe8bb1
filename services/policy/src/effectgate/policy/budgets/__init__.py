"""Spend budgets: the rules, the ledger, settlement by receipts, reconciliation and rebuild."""
