"""The consumer edge of every service: pulling, the worker and its ack rules, batches, paged replies, request lines."""
