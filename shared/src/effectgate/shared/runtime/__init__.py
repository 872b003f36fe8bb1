"""A service's life: building it, connections, health, metrics, traces, logs, child processes, security reports."""
