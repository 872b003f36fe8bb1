"""Every decision names the principal directory and attributes it was made over (``entities_digest``).

Files saying the same give the same digest whatever their layout; a change of anything a
decision reads (an agent's autonomy, roles, operator or attribute, an approver's roles, a
tool's attribute, a declared type) gives another; chat identities, which no decision reads, do not.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import msgspec
import pytest

from effectgate.contracts.directory import PrincipalDirectory
from effectgate.contracts.events import ToolRequested, encode, request_identity
from effectgate.contracts.tools.descriptors import ToolDescriptor
from effectgate.policy.cedar.attributes import parse_attributes
from effectgate.policy.cedar.entities import entities_digest
from effectgate.policy.cedar.loading import build_engine
from effectgate.policy.handlers.requests import decide
from effectgate.policy.in_force.holder import PolicyHolder
from effectgate.policy.memory import InMemoryDescriptorSource, InMemoryRateLimiter, InMemoryReplayIndex
from effectgate.policy.service import Envelope, PolicyPorts

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)

DIRECTORY = """
[principals.demo-agent]
autonomy = 1
roles = ["agent"]
operator = "alice"

[approvers.alice]
roles = ["operator"]
matrix = "@alice:example.org"

[approvers.bob]
roles = ["operator", "sre"]

[approvers.carol]
roles = ["finance", "security"]

[approvers.dan]
roles = ["finance", "security"]
"""
ATTRIBUTES = """
[types.agent]
department = "String"

[types.tool]
owner = "String"

[agents.demo-agent]
department = "payments"

[tools.file_system]
owner = "platform"
"""
SAME_DIRECTORY = """
# the same agents and approvers, in another order and layout
[approvers.bob]
roles = ["sre", "operator"]
[approvers.dan]
roles = ["security", "finance"]
[approvers.carol]
roles = ["finance", "security"]
[approvers.alice]
roles = ["operator"]
slack = "U0123"
[principals.demo-agent]
roles = ["agent"]
operator = "alice"
autonomy = 1
"""


def digest(directory: str = DIRECTORY, attributes: str = ATTRIBUTES) -> str:
    return entities_digest(PrincipalDirectory.from_toml(directory), parse_attributes(attributes))


def test_files_saying_the_same_give_the_same_digest() -> None:
    assert digest() == digest(SAME_DIRECTORY) == digest(attributes="# comment\n" + ATTRIBUTES)
    assert digest().startswith("sha256:") and len(digest()) == len("sha256:") + 64


@pytest.mark.parametrize(
    ("directory", "attributes"),
    [
        (DIRECTORY.replace("autonomy = 1", "autonomy = 2"), ATTRIBUTES),
        (DIRECTORY.replace('roles = ["agent"]', 'roles = ["agent", "batch"]'), ATTRIBUTES),
        (DIRECTORY.replace('operator = "alice"\n', ""), ATTRIBUTES),
        (DIRECTORY.replace('roles = ["operator", "sre"]', 'roles = ["operator"]'), ATTRIBUTES),
        (DIRECTORY + '[principals.other]\nautonomy = 0\nroles = ["agent"]\n', ATTRIBUTES),
        (DIRECTORY, ATTRIBUTES.replace('department = "payments"', 'department = "sales"')),
        (DIRECTORY, ATTRIBUTES.replace('owner = "platform"', 'owner = "security"')),
        (DIRECTORY, ATTRIBUTES.replace('owner = "String"', 'owner = "String"\nteam = "String"')),
    ],
    ids=["autonomy", "roles", "operator", "approver", "agent", "agent attribute", "tool attribute", "type"],
)
def test_a_change_of_what_a_decision_reads_changes_the_digest(directory: str, attributes: str) -> None:
    assert digest(directory, attributes) != digest()


def ports(repo_root: Path, engine_directory: str | None) -> PolicyPorts:
    data = (repo_root / "deploy" / "tools" / "file_system.json").read_bytes()
    file_system = msgspec.json.decode(data, type=ToolDescriptor)
    holder = PolicyHolder()
    if engine_directory is not None:
        text = (repo_root / "deploy/policy/policy.cedar").read_text()
        attributes = parse_attributes(ATTRIBUTES)
        holder = PolicyHolder(
            build_engine(text, PrincipalDirectory.from_toml(engine_directory), attributes, [file_system])
        )
    return PolicyPorts(
        policy=holder,
        descriptors=InMemoryDescriptorSource([file_system]),
        limiter=InMemoryRateLimiter(),
        replays=InMemoryReplayIndex(),
        clock=lambda: NOW,
        max_request_bytes=4096,
    )


def envelope(operation: str = "read", body: bytes | None = None) -> Envelope:
    request = ToolRequested(
        event_id="r1",
        occurred_at=NOW,
        request_id="r1",
        tool="file_system",
        operation=operation,
        arguments={"path": "a.txt"},
        idempotency_key="k1",
    )
    data = encode(request) if body is None else body
    return Envelope(principal="demo-agent", data=data, request_id=request_identity(data, None, 7))


@pytest.mark.parametrize(
    "made",
    [envelope(), envelope("write"), envelope("no_such_operation"), envelope(body=b"not json")],
    ids=["executed", "needs approval", "denied", "refused"],
)
async def test_every_decision_under_a_policy_carries_its_digest(repo_root: Path, made: Envelope) -> None:
    decision = await decide(made, ports(repo_root, DIRECTORY))

    assert decision.entities_digest == digest() and decision.policy_version is not None


async def test_a_decision_made_without_a_policy_carries_none(repo_root: Path) -> None:
    decision = await decide(envelope(), ports(repo_root, None))

    assert decision.entities_digest is None and decision.policy_version is None
