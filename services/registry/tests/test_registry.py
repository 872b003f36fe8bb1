"""Publishing descriptors: validation of the descriptor and its schemas, immutable versions on real NATS KV."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import msgspec
import pytest
from nats.js import JetStreamContext

from effectgate.contracts.tools.descriptors import OperationSpec, RateLimit, ToolDescriptor, descriptor_digest
from effectgate.contracts.vocabulary import RiskTier, SideEffectClass
from effectgate.registry.adapters.mcp_import import import_mcp_server
from effectgate.registry.app import _seed
from effectgate.registry.domain import parse_descriptor
from effectgate.registry.errors import PublishRefused
from effectgate.registry.importing import McpImports
from effectgate.registry.service import Registry
from effectgate.registry.settings import RegistrySettings
from effectgate.shared.stores.tools_kv import ToolsBucket

SCHEMA = {"type": "object", "properties": {"q": {"type": "string"}}, "additionalProperties": False}


def _descriptor(name: str, version: str = "1.0.0", schema: dict[str, Any] | None = None) -> ToolDescriptor:
    spec = OperationSpec(
        input_schema=schema or SCHEMA,
        output_schema={"type": "object"},
        side_effect_class=SideEffectClass.READ_ONLY,
        risk_tier=RiskTier.LOW,
    )
    return ToolDescriptor(name=name, version=version, adapter="file_system", operations={"get": spec})


@pytest.mark.parametrize(
    "operation",
    ["evil\x1b]0;T\x07\nmcp_x: ready", "a b", "", "x" * 129, "slash/name", "é", "tab\t"],
)
def test_an_operation_name_outside_the_mcp_tool_name_rule_is_refused(operation: str) -> None:
    good = _descriptor("ok")
    hostile = msgspec.structs.replace(good, operations={operation: good.operations["get"]})
    with pytest.raises(PublishRefused) as refused:
        parse_descriptor(msgspec.json.encode(hostile))
    assert refused.value.reason_code == "invalid_name" and "\n" not in refused.value.reason
    assert refused.value.reason.startswith("ok: operation names must match ")


@pytest.mark.parametrize("operation", ["get", "git_log", "a.b-c_D9", "x" * 128])
def test_an_operation_name_within_the_rule_is_kept(operation: str) -> None:
    good = _descriptor("ok")
    kept = msgspec.structs.replace(good, operations={operation: good.operations["get"]})
    assert list(parse_descriptor(msgspec.json.encode(kept)).operations) == [operation]


@pytest.mark.parametrize(
    ("descriptor", "code"),
    [
        (_descriptor("Bad Name"), "invalid_name"),
        (_descriptor("ok", "1.0"), "invalid_version"),
        (_descriptor("ok", schema={"type": "nonsense"}), "schema_invalid"),
        (_descriptor("ok", schema={"minLength": -1}), "schema_invalid"),
    ],
)
def test_invalid_descriptors_are_refused(descriptor: ToolDescriptor, code: str) -> None:
    with pytest.raises(PublishRefused) as refused:
        parse_descriptor(msgspec.json.encode(descriptor))
    assert refused.value.reason_code == code


@pytest.mark.parametrize(
    ("rate", "named"),
    [
        ({"calls": 0, "period_s": 60}, "operations.get.rate_limit.calls"),
        ({"calls": 5, "period_s": 0}, "operations.get.rate_limit.period_s"),
        ({"calls": 5, "period_s": -1}, "operations.get.rate_limit.period_s"),
        ({"calls": 2_000_000, "period_s": 1}, "operations.get.rate_limit.calls"),
        ({"calls": 5, "period_s": 1e9}, "operations.get.rate_limit.period_s"),
    ],
)
def test_an_operations_unusable_rate_is_refused_naming_it(rate: dict[str, Any], named: str) -> None:
    body = msgspec.to_builtins(_descriptor("ok"))
    body["operations"]["get"]["rate_limit"] = rate
    with pytest.raises(PublishRefused) as refused:
        parse_descriptor(msgspec.json.encode(body))
    assert refused.value.reason_code == "invalid_limits" and refused.value.reason.startswith(named)


def test_an_operations_rate_is_kept() -> None:
    body = msgspec.to_builtins(_descriptor("ok"))
    body["operations"]["get"]["rate_limit"] = {"calls": 2, "period_s": 10}
    parsed = parse_descriptor(msgspec.json.encode(body))
    assert parsed.operations["get"].rate_limit == RateLimit(calls=2, period_s=10.0)


def test_malformed_and_oversized_bodies_are_refused() -> None:
    for body, code in ((b"{", "malformed"), (b'{"name": 1}', "malformed"), (b" " * 300_000, "oversized")):
        with pytest.raises(PublishRefused) as refused:
            parse_descriptor(body)
        assert refused.value.reason_code == code


async def test_published_versions_are_immutable_and_latest_follows_semver(js: JetStreamContext, ns: str) -> None:
    announced: list[Any] = []

    async def announce(subject: str, event: Any) -> object:
        announced.append(event)
        return None

    registry = Registry(bucket=await ToolsBucket.open(js), publish_event=announce, clock=lambda: datetime.now(UTC))
    first = _descriptor(ns, "1.2.0")
    assert (await registry.publish(first)).reason_code == "published"
    assert (await registry.publish(first)).reason_code == "unchanged"
    with pytest.raises(PublishRefused) as refused:
        await registry.publish(msgspec.structs.replace(first, description="changed"))
    assert refused.value.reason_code == "version_immutable"
    await registry.publish(_descriptor(ns, "1.10.0"))
    await registry.publish(_descriptor(ns, "1.10.0-rc.1"))
    latest = await registry.get(ns, None)
    assert latest.descriptor is not None and latest.descriptor.version == "1.10.0"
    exact = await registry.get(ns, "1.2.0")
    assert exact.digest == descriptor_digest(first)
    assert (await registry.get(ns, "9.9.9")).reason_code == "unknown_tool"
    assert [e.version for e in announced] == ["1.2.0", "1.10.0", "1.10.0-rc.1"]
    assert ns in [d.name for d in (await registry.list()).descriptors or []]


async def test_an_mcp_adapter_naming_no_configured_server_is_refused_and_nothing_is_stored(
    js: JetStreamContext, ns: str
) -> None:
    async def announce(subject: str, event: Any) -> object:
        raise AssertionError("nothing is announced")

    bucket = await ToolsBucket.open(js)
    registry = Registry(
        bucket=bucket, publish_event=announce, clock=lambda: datetime.now(UTC), mcp_servers=frozenset({"bank"})
    )
    stray = msgspec.structs.replace(_descriptor(ns), adapter="mcp:bnak")

    with pytest.raises(PublishRefused) as refused:
        await registry.publish(stray)

    assert refused.value.reason_code == "invalid_adapter"
    assert refused.value.reason == "adapter: 'mcp:bnak' names no configured MCP server (configured: bank)"
    assert await bucket.get(ns) is None


async def test_a_descriptor_file_the_registry_refuses_is_logged_and_the_others_are_published(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    good, bad = _descriptor("good"), msgspec.structs.replace(_descriptor("bad"), adapter="python:mod.fn")
    for descriptor in (good, bad):
        (tmp_path / f"{descriptor.name}.json").write_bytes(msgspec.json.encode(descriptor))
    settings = RegistrySettings(descriptors_dir=[tmp_path], mcp_servers_file=None)

    seeded = await _seed(settings, McpImports([], 1.0, import_mcp_server))

    assert [d.name for d in seeded] == ["good"]
    logged = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
    assert logged == [
        f"not published: {tmp_path / 'bad.json'}: invalid_adapter: adapter: 'python:mod.fn' is no adapter "
        "the executor has (it has 'file_system' or 'mcp:<server>' or 'python:<worker>')"
    ]
