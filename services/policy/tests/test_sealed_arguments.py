"""The policy validates the shape of a secret argument, never the secret: only a sealed envelope passes."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import msgspec
import pytest
from nacl.public import PrivateKey

from effectgate.contracts.events import ToolRequested, encode, request_hash, request_identity
from effectgate.contracts.integrity.sealing import seal
from effectgate.contracts.tools.descriptors import ToolDescriptor
from effectgate.contracts.vocabulary import Verdict
from effectgate.policy.cedar.loading import load_policy
from effectgate.policy.handlers.requests import decide
from effectgate.policy.in_force.holder import PolicyHolder
from effectgate.policy.memory import InMemoryDescriptorSource, InMemoryRateLimiter, InMemoryReplayIndex
from effectgate.policy.service import Envelope, PolicyPorts

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
KEY = PrivateKey.generate()
SENTINEL = "s3cr3t-SENTINEL-value"


def _descriptor(repo_root: Path, content_schema: dict[str, Any]) -> ToolDescriptor:
    data = msgspec.json.decode((repo_root / "deploy" / "tools" / "file_system.json").read_bytes())
    data["operations"]["write"]["input_schema"]["properties"]["content"] = content_schema
    return msgspec.convert(data, ToolDescriptor)


@pytest.fixture
def ports(repo_root: Path) -> PolicyPorts:
    engine = load_policy(repo_root / "deploy/policy/policy.cedar", repo_root / "deploy/policy/principals.toml")
    descriptor = _descriptor(repo_root, {"type": "string", "maxLength": 64, "writeOnly": True})
    return PolicyPorts(
        policy=PolicyHolder(engine),
        descriptors=InMemoryDescriptorSource([descriptor]),
        limiter=InMemoryRateLimiter(),
        replays=InMemoryReplayIndex(),
        clock=lambda: NOW,
        max_request_bytes=65536,
    )


def _env(arguments: dict[str, Any], operation: str = "write") -> Envelope:
    request = ToolRequested(
        event_id="r1",
        occurred_at=NOW,
        request_id="r1",
        tool="file_system",
        operation=operation,
        arguments=arguments,
        idempotency_key="k1",
    )
    data = encode(request)
    return Envelope(principal="demo-agent", data=data, request_id=request_identity(data, None, 1))


async def test_a_sealed_secret_is_decided_and_the_hash_binds_its_ciphertext(ports: PolicyPorts) -> None:
    first = await decide(_env({"path": "a.txt", "content": seal(SENTINEL, KEY.public_key)}), ports)
    second = await decide(_env({"path": "a.txt", "content": seal(SENTINEL, KEY.public_key)}), ports)
    assert first.verdict is Verdict.NEEDS_APPROVAL, first.reason
    assert first.request is not None and first.request_hash == request_hash(first.request)
    assert first.request_hash != second.request_hash  # another ciphertext of the same secret is another request
    assert SENTINEL not in msgspec.json.encode(first).decode()


@pytest.mark.parametrize("content", [SENTINEL, {"$sealed": SENTINEL}, {"value": SENTINEL}, [SENTINEL], 12345678901234])
async def test_a_secret_in_clear_is_refused_naming_the_pointer_without_the_value(
    ports: PolicyPorts, content: Any
) -> None:
    decision = await decide(_env({"path": "a.txt", "content": content}), ports)
    assert (decision.verdict, decision.reason_code) == (Verdict.REFUSE, "secret_not_sealed")
    assert "/content" in decision.reason
    wire = msgspec.json.encode(decision).decode()
    assert SENTINEL not in wire and "12345678901234" not in wire
    assert decision.request is None


@pytest.mark.parametrize(
    "arguments",
    [
        {"path": seal("a.txt", KEY.public_key), "content": seal("x", KEY.public_key)},
        {"path": "a.txt", "content": seal("x", KEY.public_key), "other": {"$sealed": "QUJD"}},
    ],
)
async def test_an_envelope_where_no_secret_is_expected_is_refused(ports: PolicyPorts, arguments: Any) -> None:
    decision = await decide(_env(arguments), ports)
    assert (decision.verdict, decision.reason_code) == (Verdict.REFUSE, "sealed_unexpected")
    assert "/path" in decision.reason or "/other" in decision.reason


async def test_the_rest_of_the_schema_still_applies_to_a_sealed_call(ports: PolicyPorts) -> None:
    decision = await decide(_env({"content": seal(SENTINEL, KEY.public_key)}), ports)
    assert (decision.verdict, decision.reason_code) == (Verdict.REFUSE, "schema_invalid")


async def test_a_marker_that_cannot_be_sealed_denies_fail_closed(repo_root: Path, ports: PolicyPorts) -> None:
    unusable = _descriptor(repo_root, {"type": "array", "items": {"type": "string", "writeOnly": True}})
    ports = PolicyPorts(**{**ports.__dict__, "descriptors": InMemoryDescriptorSource([unusable])})
    decision = await decide(_env({"path": "a.txt", "content": [SENTINEL]}), ports)
    assert (decision.verdict, decision.reason_code) == (Verdict.DENY, "schema_unusable")
    assert "/properties/content/items" in decision.reason and SENTINEL not in decision.reason
