"""The card re-sync runs on the replica holding the ``chatops-resync`` lease only (real NATS KV)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from nats.js import JetStreamContext

from effectgate.chatops.app import _resync_every
from effectgate.devstack.leases import runs_of_two_replicas
from effectgate.shared.runtime.leadership import Leadership

pytestmark = pytest.mark.connected


def _chatops(posted: list[str], name: str) -> Any:
    async def resync() -> int:
        posted.append(name)
        return 0

    return SimpleNamespace(resync=resync)


async def test_of_two_replicas_only_the_lease_holder_posts_missing_cards(js: JetStreamContext, ns: str) -> None:
    async def resync(ran: list[str], name: str, lease: Leadership) -> None:
        await _resync_every(_chatops(ran, name), 0.05, lease)

    posted = await runs_of_two_replicas(js, ns, resync)
    assert posted and set(posted) == {"one"}, posted
