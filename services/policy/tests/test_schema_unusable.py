"""A stored schema that cannot be compiled ends the request ``deny`` (fail closed); nothing is fetched.

Connected: the descriptor is written straight into the real tools KV bucket (as a
descriptor stored before the registry refused remote references would be), the policy
reads it through :class:`ToolsBucket`, and its rate limiter is on real Redis. A counting
HTTP server on 127.0.0.1 (``remote``) would serve the referenced schema; it must never
be asked.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import msgspec
import pytest
import redis.asyncio as aioredis
from nats.js import JetStreamContext

from effectgate.contracts.bus import catalog
from effectgate.contracts.events import ToolRequested, encode
from effectgate.contracts.tools.descriptors import OperationSpec, ToolDescriptor
from effectgate.contracts.vocabulary import RiskTier, SideEffectClass, Verdict
from effectgate.policy.adapters.redis_limiter import RedisRateLimiter
from effectgate.policy.cedar.loading import load_policy
from effectgate.policy.handlers.requests import decide
from effectgate.policy.in_force.holder import PolicyHolder
from effectgate.policy.memory import InMemoryReplayIndex
from effectgate.policy.service import Envelope, PolicyPorts
from effectgate.shared.stores.tools_kv import ToolsBucket

PLAIN = {"type": "object"}


async def _store_directly(
    js: JetStreamContext, name: str, input_schema: dict[str, Any], output_schema: dict[str, Any]
) -> None:
    spec = OperationSpec(
        input_schema=input_schema,
        output_schema=output_schema,
        side_effect_class=SideEffectClass.READ_ONLY,
        risk_tier=RiskTier.TRIVIAL,
    )
    descriptor = ToolDescriptor(name=name, version="1.0.0", adapter="file_system", operations={"lookup": spec})
    kv = await js.key_value(catalog.TOOLS_BUCKET)
    await kv.put(f"{name}.1.0.0", msgspec.json.encode(descriptor))
    await kv.put(f"latest.{name}", b"1.0.0")


@pytest.fixture
async def ports(js: JetStreamContext, redis_client: aioredis.Redis, repo_root: Path) -> PolicyPorts:
    return PolicyPorts(
        policy=PolicyHolder(
            load_policy(repo_root / "deploy/policy/policy.cedar", repo_root / "deploy/policy/principals.toml")
        ),
        descriptors=await ToolsBucket.open(js),
        limiter=RedisRateLimiter(redis_client),
        replays=InMemoryReplayIndex(),
        clock=lambda: datetime.now(UTC),
        max_request_bytes=65_536,
    )


def _request(tool: str, request_id: str) -> Envelope:
    body = ToolRequested(
        event_id=request_id,
        occurred_at=datetime.now(UTC),
        request_id=request_id,
        tool=tool,
        operation="lookup",
        arguments={"q": "x"},
        idempotency_key=request_id,
    )
    return Envelope(principal="demo-agent", data=encode(body), request_id=request_id)


def _stored(base: str) -> dict[str, tuple[dict[str, Any], dict[str, Any]]]:
    """Case -> (input schema, output schema) as stored."""
    remote = f"{base}/remote.json"
    return {
        "input-top-level": ({"$ref": remote}, PLAIN),
        "input-nested": ({"properties": {"q": {"allOf": [{"$ref": remote}]}}}, PLAIN),
        "input-relative": ({"properties": {"q": {"$ref": "other.json#/q"}}}, PLAIN),
        "output": (PLAIN, {"properties": {"result": {"$ref": remote}}}),
    }


@pytest.mark.parametrize("case", ["input-top-level", "input-nested", "input-relative", "output"])
async def test_a_stored_remote_reference_denies_schema_unusable_without_fetching(
    js: JetStreamContext, ports: PolicyPorts, remote: Any, ns: str, case: str
) -> None:
    input_schema, output_schema = _stored(remote.base)[case]
    await _store_directly(js, ns, input_schema, output_schema)

    decision = await decide(_request(ns, f"r{ns}"), ports)

    assert (decision.verdict, decision.reason_code) == (Verdict.DENY, "schema_unusable"), decision.reason
    assert decision.reason.startswith(f"{ns}.lookup: schema cannot be compiled: ")
    assert decision.reason.endswith("denied (fail closed)")
    assert decision.request is None, "nothing was bound for execution"
    assert remote.hits == []


async def test_a_stored_local_reference_still_decides(
    js: JetStreamContext, ports: PolicyPorts, remote: Any, ns: str
) -> None:
    schema = {"$defs": {"q": {"type": "string"}}, "properties": {"q": {"$ref": "#/$defs/q"}}}
    await _store_directly(js, ns, schema, {"$defs": {"o": PLAIN}, "$ref": "#/$defs/o"})

    decision = await decide(_request(ns, f"r{ns}"), ports)

    assert decision.verdict is Verdict.EXECUTE, decision.reason
    assert remote.hits == []
