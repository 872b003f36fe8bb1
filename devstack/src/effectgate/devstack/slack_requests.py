"""Test doubles of what Slack posts to an app: interaction bodies, sent signed (tests only, never the bot).

The builders make the bodies Slack posts to an app (a button click, a dialog submission, a
slash command); :func:`post_signed` sends one (or any bytes) over HTTP with the
``X-Slack-Signature`` and ``X-Slack-Request-Timestamp`` headers made with the signing secret by
``slack_sdk``'s signer.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from urllib.parse import urlencode

import aiohttp
from slack_sdk.signature import SignatureVerifier

__all__ = ["block_action", "post_signed", "slash_command", "view_submission"]


def block_action(user: str, channel: str, message_ts: str, action_id: str, value: str, trigger_id: str = "") -> str:
    """The form body Slack posts when ``user`` clicks the button ``action_id`` on message ``message_ts``."""
    payload = {
        "type": "block_actions",
        "team": {"id": "T0FAKE"},
        "user": {"id": user, "team_id": "T0FAKE"},
        "api_app_id": "A0FAKE",
        "container": {"type": "message", "message_ts": message_ts, "channel_id": channel},
        "channel": {"id": channel},
        "message": {"ts": message_ts},
        "trigger_id": trigger_id or f"trigger-{time.monotonic_ns()}",
        "response_url": "https://hooks.slack.invalid/actions/T0FAKE/1/x",
        "actions": [{"type": "button", "action_id": action_id, "block_id": "effectgate_answer", "value": value}],
    }
    return urlencode({"payload": json.dumps(payload)})


def view_submission(user: str, callback_id: str, private_metadata: str, reason: str | None) -> str:
    """The form body Slack posts when ``user`` submits a dialog with one ``reason`` input."""
    values = {"reason": {"reason": {"type": "plain_text_input", "value": reason}}}
    view = {"id": "V0FAKE", "type": "modal", "callback_id": callback_id, "private_metadata": private_metadata}
    payload = {
        "type": "view_submission",
        "team": {"id": "T0FAKE"},
        "user": {"id": user, "team_id": "T0FAKE"},
        "api_app_id": "A0FAKE",
        "view": view | {"state": {"values": values}},
    }
    return urlencode({"payload": json.dumps(payload)})


def slash_command(user: str, channel: str, text: str, command: str = "/effectgate") -> str:
    """The form body Slack posts when ``user`` types ``command text`` in ``channel``."""
    fields = {"command": command, "text": text, "user_id": user, "channel_id": channel, "team_id": "T0FAKE"}
    fields |= {"trigger_id": f"trigger-{time.monotonic_ns()}", "api_app_id": "A0FAKE"}
    return urlencode(fields | {"response_url": "https://hooks.slack.invalid/commands/T0FAKE/1/x"})


async def post_signed(
    url: str,
    body: str | bytes,
    secret: str,
    timestamp: int | str | None = None,
    signature: str | None = None,
    *,
    content_type: str = "application/x-www-form-urlencoded",
    headers: Mapping[str, str] | None = None,
) -> tuple[int, str]:
    """POST ``body`` to ``url`` signed with ``secret`` as Slack signs it.

    Args:
        url: the app's endpoint.
        body: the form body (see the builders above), or any bytes.
        secret: the signing secret (a wrong one makes a bad signature).
        timestamp: ``X-Slack-Request-Timestamp``, Unix seconds (or any text); default now.
        signature: sent instead of the computed ``v0=…`` signature when given.
        content_type: the ``Content-Type``.
        headers: more headers (e.g. ``X-Slack-Retry-Num``), sent as given.

    Returns:
        The HTTP status and the response text.
    """
    stamp = str(int(time.time()) if timestamp is None else timestamp)
    if signature is None:
        signature = SignatureVerifier(secret).generate_signature(timestamp=stamp, body=body) or ""
    sent = {"Content-Type": content_type, "X-Slack-Request-Timestamp": stamp, "X-Slack-Signature": signature}
    async with (
        aiohttp.ClientSession() as session,
        session.post(url, data=body, headers=sent | dict(headers or {})) as response,
    ):
        return response.status, await response.text()
