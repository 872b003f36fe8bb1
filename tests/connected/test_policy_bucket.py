"""The policy bucket on a real JetStream KV: compare-and-swap on ``current``, versions kept, junk never believed."""

from __future__ import annotations

from datetime import UTC, datetime

import msgspec
import pytest
from nats.js import JetStreamContext

from effectgate.shared.stores.policy_kv import PolicyBucket, PolicyConflict, PublishedPolicy, policy_digest

pytestmark = pytest.mark.connected


def _policy(text: str, source: str = "cli") -> PublishedPolicy:
    return PublishedPolicy(version=policy_digest(text), text=text, published_at=datetime.now(UTC), source=source)


async def _bucket(js: JetStreamContext, ns: str) -> PolicyBucket:
    await js.create_key_value(bucket=f"POLICY_{ns}", history=1)
    return await PolicyBucket.open(js, f"POLICY_{ns}")


async def test_current_moves_only_from_the_revision_read(js: JetStreamContext, ns: str) -> None:
    bucket = await _bucket(js, ns)
    empty = await bucket.current()
    assert (empty.policy, empty.revision, empty.problem) == (None, None, None)

    first = await bucket.replace_current(_policy("// one"), None)
    with pytest.raises(PolicyConflict):
        await bucket.replace_current(_policy("// late"), None)  # created meanwhile by someone else
    second = await bucket.replace_current(_policy("// two"), first)
    with pytest.raises(PolicyConflict):
        await bucket.replace_current(_policy("// stale"), first)

    now = await bucket.current()
    assert now.revision == second and now.policy is not None and now.policy.text == "// two"
    kept = await bucket.version(policy_digest("// one"))
    assert kept is not None and kept.text == "// one"  # every version put in force stays readable
    assert await bucket.version(policy_digest("// never published")) is None


async def test_the_seeded_file_is_remembered(js: JetStreamContext, ns: str) -> None:
    bucket = await _bucket(js, ns)
    assert await bucket.file_version() is None
    await bucket.mark_file(policy_digest("// file"))
    assert await bucket.file_version() == policy_digest("// file")


async def test_an_entry_whose_text_is_not_its_version_is_never_believed_and_is_repaired(
    js: JetStreamContext, ns: str
) -> None:
    bucket, kv = await _bucket(js, ns), await js.key_value(f"POLICY_{ns}")
    claimed = {"version": "sha256:" + "0" * 64, "text": "permit", "published_at": "2026-01-01T00:00:00Z"}
    revision = await kv.put("current", msgspec.json.encode(claimed | {"source": "cli"}))
    junk = await bucket.current()
    assert junk.policy is None and junk.revision == revision and "does not hash" in (junk.problem or "")

    await kv.put(f"v.{policy_digest('// real')[7:]}", b"a stored reply, not a policy")
    await bucket.replace_current(_policy("// real"), junk.revision)  # the next publication repairs both
    repaired = await bucket.version(policy_digest("// real"))
    assert repaired is not None and repaired.text == "// real"
    assert (await bucket.current()).policy == await bucket.version(policy_digest("// real"))

    with pytest.raises(ValueError, match="not a policy version"):
        await bucket.version("latest")
