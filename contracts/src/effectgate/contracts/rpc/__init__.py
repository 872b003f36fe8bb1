"""Request and reply bodies of every request/reply subject (:class:`effectgate.contracts.bus.catalog.Rpc`)."""
