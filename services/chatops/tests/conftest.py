"""Fixtures of the chat-ops tests: approval cards as the workflow builds them."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import msgspec
import pytest

from toolgate.chatops.domain import Card


@pytest.fixture
def make_card() -> Callable[..., Card]:
    """A pending card for ``alice`` and ``bob``; keyword arguments replace fields (``args`` the arguments)."""

    def build(args: dict[str, Any] | None = None, **fields: Any) -> Card:
        card = Card(
            approval_id="ap-0123456789ab",
            request_ids=("req-1",),
            principal="agent-7",
            call="files@1.0.0.write_file",
            side_effect_class="irreversible_write",
            risk_tier="high",
            policy_id="writes-need-approval",
            approver_role="operator",
            approvers=("alice", "bob"),
            approvals_required=1,
            idempotency_key="key-1",
            request_hash12="0123456789ab",
            expires_at=datetime(2030, 1, 2, 3, 4, 5, tzinfo=UTC),
            arguments=json.dumps(args if args is not None else {"path": "notes.txt"}, indent=2),
        )
        return msgspec.structs.replace(card, **fields)

    return build
