"""The surface's adapters: NATS (agents' connections, the calls ledger, changes) and bearer tokens."""
