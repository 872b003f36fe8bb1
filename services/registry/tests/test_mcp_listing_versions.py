"""A changed MCP listing becomes a new descriptor version, on real NATS KV with a real (scripted) server."""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import msgspec
import pytest
from nats.js import JetStreamContext

from effectgate.contracts.tools.descriptors import RateLimit
from effectgate.contracts.vocabulary import SideEffectClass
from effectgate.registry.adapters.mcp_import import import_mcp_server
from effectgate.registry.app import _publish
from effectgate.registry.revisions import descriptor_changes, listing_version, next_patch
from effectgate.registry.service import Registry
from effectgate.shared.mcp.servers import McpServerConfig
from effectgate.shared.stores.tools_kv import ToolsBucket

SCRIPT = Path(__file__).resolve().parents[3] / "tests" / "fixtures" / "mcp" / "scripted_server.py"
NAME_SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}}}
TARGET_SCHEMA = {"type": "object", "properties": {"target": {"type": "string"}}}


class Listing:
    """The definitions file a scripted server lists its tools from; the test rewrites it."""

    def __init__(self, path: Path, server: str) -> None:
        self.path = path
        self.config = McpServerConfig(
            name=server, command=sys.executable, args=[str(SCRIPT), str(path)], trust_hints=True
        )
        self.write("1.0.0", read_only=True, schema=NAME_SCHEMA)

    def write(self, version: str, *, read_only: bool, schema: dict[str, Any]) -> None:
        hints = {"readOnlyHint": True} if read_only else {"readOnlyHint": False, "destructiveHint": True}
        touch = {"name": "touch", "description": "touch a file", "inputSchema": schema, "annotations": hints}
        self.path.write_text(json.dumps({"version": version, "workdir": str(self.path.parent), "tools": [touch]}))


@pytest.fixture
def listing(tmp_path: Path, ns: str) -> Listing:
    return Listing(tmp_path / "tools.json", ns)


@pytest.fixture
async def registry(js: JetStreamContext) -> Registry:
    async def announce(subject: str, event: Any) -> object:
        return None

    return Registry(bucket=await ToolsBucket.open(js), publish_event=announce, clock=lambda: datetime.now(UTC))


async def restart(registry: Registry, listing: Listing) -> tuple[str, str]:
    """What a registry start does with the server: import, then publish the listing."""
    reply = await registry.publish_listing(await import_mcp_server(listing.config))
    assert reply.descriptor is not None
    return reply.reason_code, reply.descriptor.version


async def test_a_changed_listing_is_a_new_version_and_an_identical_one_is_not(
    registry: Registry, listing: Listing, caplog: pytest.LogCaptureFixture
) -> None:
    tool = f"mcp_{listing.config.name}"
    assert await restart(registry, listing) == ("published", "1.0.0")
    assert await restart(registry, listing) == ("unchanged", "1.0.0")

    listing.write("1.0.0", read_only=False, schema=TARGET_SCHEMA)  # same reported version, other tools
    with caplog.at_level(logging.WARNING, logger="effectgate.registry"):
        assert await restart(registry, listing) == ("published", "1.0.1")

    warning = next(record for record in caplog.records if record.levelno == logging.WARNING)
    assert f"{tool} changed since 1.0.0" in warning.getMessage()
    assert "touch: input schema, side-effect class READ_ONLY -> IRREVERSIBLE_WRITE" in warning.getMessage()
    old, new = (await registry.get(tool, "1.0.0")).descriptor, (await registry.get(tool, None)).descriptor
    assert old is not None and old.operations["touch"].side_effect_class is SideEffectClass.READ_ONLY
    assert new is not None and new.version == "1.0.1"
    assert new.operations["touch"].side_effect_class is SideEffectClass.IRREVERSIBLE_WRITE
    assert "upstream version 1.0.0" in new.description

    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="effectgate.registry"):
        assert await restart(registry, listing) == ("unchanged", "1.0.1")
    assert caplog.records == []


async def test_a_listing_changed_back_is_newest_again(registry: Registry, listing: Listing) -> None:
    await restart(registry, listing)
    listing.write("1.0.0", read_only=False, schema=TARGET_SCHEMA)
    await restart(registry, listing)
    listing.write("1.0.0", read_only=True, schema=NAME_SCHEMA)

    assert await restart(registry, listing) == ("published", "1.0.2")
    latest = (await registry.get(f"mcp_{listing.config.name}", None)).descriptor
    assert latest is not None and latest.operations["touch"].side_effect_class is SideEffectClass.READ_ONLY


async def test_a_higher_upstream_version_is_used_and_a_lower_one_is_not(registry: Registry, listing: Listing) -> None:
    await restart(registry, listing)

    listing.write("2.0.0", read_only=True, schema=NAME_SCHEMA)
    assert await restart(registry, listing) == ("published", "2.0.0")
    listing.write("1.5.0", read_only=False, schema=NAME_SCHEMA)
    assert await restart(registry, listing) == ("published", "2.0.1")


async def test_the_registry_start_publishes_mcp_descriptors_as_listings(registry: Registry, listing: Listing) -> None:
    await _publish(registry, await import_mcp_server(listing.config))
    listing.write("1.0.0", read_only=False, schema=NAME_SCHEMA)

    await _publish(registry, await import_mcp_server(listing.config))

    latest = (await registry.get(f"mcp_{listing.config.name}", None)).descriptor
    assert latest is not None and latest.version == "1.0.1"


@pytest.mark.parametrize(
    ("reported", "highest", "expected"),
    [
        ("1.0.0", None, "1.0.0"),
        ("1.2.0", "1.1.9", "1.2.0"),
        ("1.0.0", "1.0.0", "1.0.1"),
        ("0.9.0", "1.4.2", "1.4.3"),
        ("2.0.0-rc.1", "2.0.0-rc.1", "2.0.1"),
    ],
)
def test_listing_version(reported: str, highest: str | None, expected: str) -> None:
    assert listing_version(reported, highest) == expected


def test_next_patch_refuses_a_non_version() -> None:
    assert next_patch("3.1.4") == "3.1.5"
    with pytest.raises(ValueError, match="not a semantic version"):
        next_patch("3.1")


async def test_descriptor_changes_name_operations_and_fields(listing: Listing) -> None:
    before = await import_mcp_server(listing.config)
    after = msgspec.structs.replace(before, operations={"other": before.operations["touch"]}, timeout_s=5.0)

    assert descriptor_changes(before, before) == []
    assert descriptor_changes(before, after) == ["operation other added", "operation touch removed", "timeout_s"]
    touch = msgspec.structs.replace(before.operations["touch"], rate_limit=RateLimit(calls=1, period_s=1.0))
    limited = msgspec.structs.replace(before, operations={"touch": touch}, rate_limit=RateLimit(calls=1, period_s=9))
    assert descriptor_changes(before, limited) == ["touch: rate limit", "rate_limit"]
