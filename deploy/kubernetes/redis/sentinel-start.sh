#!/bin/sh
# Start one Sentinel of the StatefulSet redis-sentinel. Sentinel rewrites its config file (the
# primary it follows, the other Sentinels), so the file lives on the pod's own writable volume and is
# written only on its first start. A quorum of 2 of the 3 Sentinels agrees before a failover.
set -eu
conf=/data/sentinel.conf
if [ ! -s "$conf" ]; then
  cat > "$conf" <<CONF
port 26379
dir /data
sentinel resolve-hostnames yes
sentinel announce-hostnames yes
sentinel announce-ip $(hostname).redis-sentinel-headless
sentinel monitor mymaster redis-0.redis-headless 6379 2
sentinel down-after-milliseconds mymaster 5000
sentinel failover-timeout mymaster 30000
sentinel parallel-syncs mymaster 1
CONF
fi
exec redis-server "$conf" --sentinel
