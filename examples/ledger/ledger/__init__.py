"""A small ledger and the effectgate tools that act on it: refunds, order lookups, reports, journal postings."""
