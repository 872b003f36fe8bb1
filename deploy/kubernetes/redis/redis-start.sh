#!/bin/sh
# Start one Redis node of the StatefulSet redis: replica of the primary the Sentinels name, or, when no
# Sentinel answers yet (the first start of all), pod redis-0 is the primary and the others its replicas.
# Idempotency records and pending approvals: an fsync per write (at most once per effect, as compose).
set -eu
self="$(hostname).redis-headless"
primary="$(timeout 5 redis-cli -h redis-sentinel -p 26379 sentinel get-master-addr-by-name mymaster 2>/dev/null | head -n 1 || true)"
if [ -z "$primary" ]; then
  primary="redis-0.redis-headless"
fi
set -- --dir /data --appendonly yes --appendfsync always --protected-mode no \
  --replica-announce-ip "$self"
if [ "$primary" != "$self" ] && [ "$primary" != "$(hostname)" ]; then
  set -- "$@" --replicaof "$primary" 6379
fi
exec redis-server "$@"
