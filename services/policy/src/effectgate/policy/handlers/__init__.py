"""The policy service's broker edge: the only place its messages' bytes are decoded."""
