"""Names and rights on the bus: the subjects' catalog, NATS users and permissions, credentials, limits, paging."""
