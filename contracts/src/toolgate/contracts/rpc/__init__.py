"""Request and reply bodies of every request/reply subject (:class:`toolgate.contracts.catalog.Rpc`)."""
