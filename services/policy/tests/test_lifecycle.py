"""Publishing, seeding and following a policy over in-memory ports; decisions name the version that made them."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import msgspec
import pytest

from effectgate.contracts.directory import PrincipalDirectory
from effectgate.contracts.events import PolicyPublished, SecurityEvent, ToolRequested, encode
from effectgate.contracts.tools.descriptors import ToolDescriptor
from effectgate.contracts.vocabulary import Verdict
from effectgate.policy.cedar.attributes import Attributes
from effectgate.policy.cedar.engine import PolicyEngine
from effectgate.policy.cedar.loading import build_engine
from effectgate.policy.handlers.operator import policy_text
from effectgate.policy.handlers.requests import decide
from effectgate.policy.in_force.following import Follower
from effectgate.policy.in_force.holder import PolicyHolder
from effectgate.policy.in_force.publishing import Publisher, PublishReply, should_seed
from effectgate.policy.memory import (
    InMemoryDescriptorSource,
    InMemoryPolicyStore,
    InMemoryRateLimiter,
    InMemoryReplayIndex,
)
from effectgate.policy.service import Envelope, PolicyPorts
from effectgate.shared.runtime.reporting import SecurityReporter
from effectgate.shared.stores.policy_kv import CurrentEntry, PolicyConflict, PublishedPolicy, policy_digest

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
READS = """@id("reads") permit (principal, action == Action::"execute", resource)
when { context.side_effect == "READ_ONLY" };"""
NO_READS = """@id("reads-need-approval") @approver_role("operator")
permit (principal, action == Action::"execute_with_approval", resource);"""
NEVER = '@id("never") permit (principal, action, resource) when { principal has department };'


@pytest.fixture
def file_system(repo_root: Path) -> ToolDescriptor:
    return msgspec.json.decode((repo_root / "deploy/tools/file_system.json").read_bytes(), type=ToolDescriptor)


@pytest.fixture
def directory(repo_root: Path) -> PrincipalDirectory:
    return PrincipalDirectory.from_toml((repo_root / "deploy/policy/principals.toml").read_text())


class Registry(InMemoryDescriptorSource):
    def __init__(self, descriptors: list[ToolDescriptor]) -> None:
        super().__init__(descriptors)
        self.failing = False

    async def list(self) -> list[ToolDescriptor]:
        if self.failing:
            raise OSError("registry down")
        return await super().list()


class Replica:
    """One policy replica's holder, publisher and follower over a shared store and registry."""

    def __init__(self, store: InMemoryPolicyStore, registry: Registry, directory: PrincipalDirectory) -> None:
        def build(text: str, listed: Sequence[ToolDescriptor]) -> PolicyEngine:
            return build_engine(text, directory, Attributes(), listed)

        self.holder, self.announced, self.reports = PolicyHolder(build=build), list[PolicyPublished](), []
        self.publisher = Publisher(self.holder, store, registry, lambda: NOW, self._announce)
        self.reporter = SecurityReporter("policy")
        self.reporter.attach_publish(self._report)
        self.follower = Follower(self.holder, store, registry, self.reporter)

    async def _announce(self, event: PolicyPublished) -> None:
        self.announced.append(event)

    async def _report(self, subject: str, event: SecurityEvent) -> None:
        self.reports.append(event)

    @property
    def version(self) -> str | None:
        return self.holder.engine.version if self.holder.engine else None


@pytest.fixture
def registry(file_system: ToolDescriptor) -> Registry:
    return Registry([file_system])


@pytest.fixture
def store() -> InMemoryPolicyStore:
    return InMemoryPolicyStore()


@pytest.fixture
def replica(store: InMemoryPolicyStore, registry: Registry, directory: PrincipalDirectory) -> Replica:
    return Replica(store, registry, directory)


def _published(text: str, source: str = "cli") -> PublishedPolicy:
    return PublishedPolicy(version=policy_digest(text), text=text, published_at=NOW, source=source)


@pytest.mark.parametrize(
    ("file", "seeded", "current", "seed"),
    [
        ("sha256:a", None, None, True),  # nothing in force: the file is the policy
        ("sha256:a", "sha256:a", "sha256:b", False),  # unchanged file: a later publication stays
        ("sha256:c", "sha256:a", "sha256:b", True),  # the file was edited: it wins at restart
        ("sha256:a", None, "sha256:b", True),  # never seeded (a bucket from before seeding)
        ("sha256:a", "sha256:a", None, True),  # marked but nothing in force
    ],
)
def test_the_seeding_rule(file: str, seeded: str | None, current: str | None, seed: bool) -> None:
    entry = CurrentEntry(_published("x") if current else None, 1 if current else None)
    assert should_seed(file, seeded, entry) is seed


async def test_seeding_publishes_the_file_once_and_a_restart_keeps_a_later_publication(
    replica: Replica, store: InMemoryPolicyStore, registry: Registry, directory: PrincipalDirectory
) -> None:
    said = await replica.publisher.seed(READS)
    assert "seeded" in said and store.file == policy_digest(READS) and replica.version == policy_digest(READS)
    assert [(e.version, e.source, e.previous_version) for e in replica.announced] == [
        (policy_digest(READS), "file", None)
    ]

    assert (await replica.publisher.publish(NO_READS, "cli")).ok
    restarted = Replica(store, registry, directory)
    assert "stays in force" in await restarted.publisher.seed(READS)  # the same file: the publication stays
    await restarted.follower.check()
    assert restarted.version == policy_digest(NO_READS) == store.entry.policy.version  # type: ignore[union-attr]

    edited = READS + "\n// edited\n"
    assert "seeded" in await Replica(store, registry, directory).publisher.seed(edited)
    assert store.entry.policy is not None and store.entry.policy.version == policy_digest(edited)


async def test_an_invalid_policy_is_refused_with_a_pointed_message_and_nothing_changes(
    replica: Replica, store: InMemoryPolicyStore
) -> None:
    assert (await replica.publisher.publish(READS, "cli")).ok
    before, revision, events = replica.holder.engine, store.entry.revision, len(replica.announced)

    reply = await replica.publisher.publish(NEVER, "cli")

    assert (reply.ok, reply.version) == (False, None)
    assert "'never'" in reply.reason and "principal.department" in reply.reason
    assert replica.holder.engine is before and store.entry.revision == revision and len(replica.announced) == events
    assert policy_digest(NEVER) not in store.versions


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("// every rule was removed\n", "holds no policy"),
        ('@id("no-role") permit (principal, action == Action::"execute_with_approval", resource);', "@approver_role"),
    ],
)
async def test_a_policy_that_would_deny_everything_or_approve_with_no_approver_is_refused(
    replica: Replica, store: InMemoryPolicyStore, text: str, named: str
) -> None:
    assert (await replica.publisher.publish(READS, "cli")).ok
    before, revision = replica.holder.engine, store.entry.revision
    reply = await replica.publisher.publish(text, "cli")
    assert (reply.ok, named in reply.reason) == (False, True), reply
    assert replica.holder.engine is before and store.entry.revision == revision


async def test_an_unreadable_registry_refuses_the_publication(replica: Replica, registry: Registry) -> None:
    registry.failing = True
    reply = await replica.publisher.publish(READS, "cli")
    assert not reply.ok and "registry" in reply.reason and replica.holder.engine is None


async def test_a_publication_that_lost_the_race_reads_again_and_wins(
    replica: Replica, store: InMemoryPolicyStore
) -> None:
    assert (await replica.publisher.publish(READS, "cli")).ok
    replace = store.replace_current
    raced = False

    async def first_loses(policy: PublishedPolicy, revision: int | None) -> int:
        nonlocal raced
        if not raced:  # another replica publishes between our read and our write
            raced = True
            await replace(_published(READS + "\n// other\n"), revision)
            raise PolicyConflict("moved")
        return await replace(policy, revision)

    store.replace_current = first_loses  # type: ignore[method-assign]
    reply = await replica.publisher.publish(NO_READS, "cli")
    assert reply.ok and store.entry.policy is not None and store.entry.policy.version == policy_digest(NO_READS)
    assert replica.announced[-1].previous_version == policy_digest(READS + "\n// other\n")


@pytest.mark.parametrize(
    ("body", "named"),
    [
        (b"not json", "not {"),
        (b'{"text": 5}', "Expected `str`"),
        (b'{"text": "x", "admin": true}', "admin"),
        (b"[]", "Expected `object`"),
        (b'{"text": "a\\u0000b"}', "NUL"),
        (b'{"text": "' + b"x" * 300 + b'"}', "256"),
    ],
)
def test_a_malformed_publication_is_refused_naming_the_problem(body: bytes, named: str) -> None:
    reply = policy_text(body, max_bytes=256)
    assert isinstance(reply, PublishReply) and not reply.ok and named in reply.reason, reply


def test_a_well_formed_publication_gives_its_text() -> None:
    assert policy_text(encode({"text": READS}), max_bytes=4096) == READS


async def test_every_replica_follows_the_published_version(
    store: InMemoryPolicyStore, registry: Registry, directory: PrincipalDirectory
) -> None:
    one, two = Replica(store, registry, directory), Replica(store, registry, directory)
    assert (await one.publisher.publish(READS, "cli")).ok
    await two.follower.check()
    assert one.version == two.version == policy_digest(READS)

    assert (await two.publisher.publish(NO_READS, "cli")).ok
    await one.follower.check()
    assert one.version == two.version == policy_digest(NO_READS)


async def test_a_version_a_replica_cannot_build_keeps_its_engine_and_raises_an_alarm_once(
    store: InMemoryPolicyStore, registry: Registry, directory: PrincipalDirectory
) -> None:
    replica = Replica(store, registry, directory)
    await store.replace_current(_published(READS), None)
    await replica.follower.check()
    before = replica.holder.engine
    await store.replace_current(_published(NEVER), store.entry.revision)  # accepted elsewhere, not here

    await replica.follower.check()
    await replica.follower.check()
    await replica.reporter.flush()

    assert replica.holder.engine is before and replica.holder.readiness().ready
    assert [(r.kind, r.reason_code) for r in replica.reports] == [("policy_not_applied", "policy_invalid")]
    assert policy_digest(NEVER) in replica.reports[0].detail and "principal.department" in replica.reports[0].detail


async def test_an_unbelievable_current_entry_changes_nothing(replica: Replica, store: InMemoryPolicyStore) -> None:
    await store.replace_current(_published(READS), None)
    await replica.follower.check()
    store.entry = CurrentEntry(None, 9, "its text does not hash to its version")
    await replica.follower.check()
    assert replica.version == policy_digest(READS)


def _request(request_id: str, tool: str = "file_system", arguments: dict[str, Any] | None = None) -> Envelope:
    data = encode(
        ToolRequested(
            event_id=request_id,
            occurred_at=NOW,
            request_id=request_id,
            tool=tool,
            operation="read",
            arguments={"path": "a.txt"} if arguments is None else arguments,
            idempotency_key=request_id,
        )
    )
    return Envelope(principal="demo-agent", data=data, request_id=request_id)


async def test_each_decision_names_the_version_that_made_it_and_what_the_policy_said(
    replica: Replica, registry: Registry
) -> None:
    ports = PolicyPorts(replica.holder, registry, InMemoryRateLimiter(), InMemoryReplayIndex(), lambda: NOW, 4096)
    assert (await replica.publisher.publish(READS, "cli")).ok
    first = await decide(_request("r1"), ports)
    assert (first.verdict, first.policy_verdict, first.policy_version) == (
        Verdict.EXECUTE,
        Verdict.EXECUTE,
        policy_digest(READS),
    )

    assert (await replica.publisher.publish(NO_READS, "cli")).ok  # swapped without a restart
    second = await decide(_request("r2"), ports)
    assert (second.verdict, second.policy_verdict, second.policy_version) == (
        Verdict.NEEDS_APPROVAL,
        Verdict.NEEDS_APPROVAL,
        policy_digest(NO_READS),
    )

    invalid = await decide(_request("r3", arguments={"path": 5}), ports)  # never reached the policy
    assert (invalid.reason_code, invalid.policy_verdict, invalid.policy_version) == (
        "schema_invalid",
        None,
        policy_digest(NO_READS),
    )


TYPOS = [
    (
        '@id("t") permit (principal, action, resource) when { context.side_effect == "REVERSIBLE_WRTE" };',
        '"REVERSIBLE_WRTE"',
    ),
    (
        '@id("t") @approver_role("operatr") permit (principal, action == Action::"execute_with_approval", resource);',
        "'operatr'",
    ),
]


@pytest.mark.parametrize(("text", "value"), TYPOS)
async def test_a_typo_policy_is_refused_at_publish_naming_the_policy_and_the_value(
    replica: Replica, store: InMemoryPolicyStore, text: str, value: str
) -> None:
    reply = await replica.publisher.publish(text, "cli")

    assert not reply.ok and "policy 't'" in reply.reason and value in reply.reason and "1:" in reply.reason, reply
    assert store.entry.policy is None and replica.holder.engine is None


@pytest.mark.parametrize(("text", "value"), TYPOS)
async def test_a_typo_policy_already_in_the_bucket_is_not_loaded_and_every_call_is_denied_with_why(
    store: InMemoryPolicyStore, registry: Registry, directory: PrincipalDirectory, text: str, value: str
) -> None:
    await store.replace_current(_published(text), None)  # published before the check existed
    started = Replica(store, registry, directory)

    await started.follower.check()

    assert started.holder.engine is None
    problem = started.holder.problem or ""
    assert "policy 't'" in problem and value in problem, problem
    assert not started.holder.readiness().ready and value in started.holder.readiness().reason
