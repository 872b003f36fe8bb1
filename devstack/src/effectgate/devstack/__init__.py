"""What only local stacks and tests need.

nats-server and redis-server processes, and the pytest plugin.
"""
