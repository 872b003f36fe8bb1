"""Work beside the flow: the backstop that ends every request, the index rebuild, the heartbeat."""
