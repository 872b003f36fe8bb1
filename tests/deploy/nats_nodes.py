"""Real nats-server nodes started by the deploy tests, and a bounded wait on them."""

from __future__ import annotations

import json
import subprocess
import time
import urllib.request
from dataclasses import dataclass
from typing import Any

from effectgate.devstack.timing import scaled


@dataclass
class Node:
    name: str
    client: int
    monitor: int
    process: subprocess.Popen[bytes]

    def get(self, endpoint: str) -> dict[str, Any]:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.monitor}/{endpoint}", timeout=2) as answer:
            found: dict[str, Any] = json.load(answer)
        return found

    def leader(self) -> str | None:
        """The JetStream meta leader this node sees in a cluster of 3, if any."""
        if self.process.poll() is not None:
            raise RuntimeError(f"{self.name} exited {self.process.returncode}")
        meta = self.get("jsz").get("meta_cluster", {})
        return meta.get("leader") if meta.get("cluster_size") == 3 else None

    def stop(self) -> None:
        self.process.kill()
        self.process.wait()


def until(check: Any, timeout_s: float) -> Any:
    deadline = time.monotonic() + scaled(timeout_s)
    while time.monotonic() < deadline:
        try:
            if found := check():
                return found
        except OSError:
            pass
        time.sleep(0.2)
    raise TimeoutError("not reached")
