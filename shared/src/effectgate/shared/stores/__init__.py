"""What lives on JetStream and Redis for several services: the event stream, KV buckets, indexes and their rebuild."""
