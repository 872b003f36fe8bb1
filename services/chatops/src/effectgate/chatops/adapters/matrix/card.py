"""Matrix message contents of approval cards, thread posts and replies (pure, no I/O).

Every string that came from the agent (arguments, ids, the idempotency key, related lines) is
HTML-escaped and set in ``<code>`` or ``<pre><code>``, so it cannot inject markup, create links
or pills.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Mapping
from datetime import UTC
from html import escape
from typing import Any

from effectgate.chatops.domain import Card

__all__ = ["CARD_KEY", "card_content", "edit_content", "thread_content"]

CARD_KEY = "dev.effectgate.approval"
"""Content key of a card: ``{"approval_id": "ap-…"}``."""

_HINT = "React ✅ to approve or ❌ to reject, or send !approve {id}, !reject {id} <reason>, !withdraw {id}."
_CLOSED = "Answers are closed."


def card_content(card: Card, mentions: Mapping[str, str]) -> dict[str, Any]:
    """The ``m.room.message`` content of ``card``.

    Args:
        card: what the card shows.
        mentions: approver name -> Matrix user id; only ``card.approvers`` found here are mentioned.

    Returns:
        ``m.text`` content with ``body``, ``formatted_body`` (HTML), ``m.mentions`` and :data:`CARD_KEY`.
    """
    mentioned = [mentions[name] for name in card.approvers if name in mentions]
    return {
        "msgtype": "m.text",
        "body": _plain(card, mentions),
        "format": "org.matrix.custom.html",
        "formatted_body": _html(card, mentions),
        "m.mentions": {"user_ids": mentioned},
        CARD_KEY: {"approval_id": card.approval_id},
    }


def edit_content(message_id: str, card: Card, mentions: Mapping[str, str]) -> dict[str, Any]:
    """An ``m.replace`` edit of the card ``message_id`` showing ``card``; it notifies nobody again."""
    new = card_content(card, mentions)
    return {
        "msgtype": "m.text",
        "body": "* " + new["body"],
        "format": "org.matrix.custom.html",
        "formatted_body": "* " + new["formatted_body"],
        "m.new_content": new,
        "m.mentions": {},
        "m.relates_to": {"rel_type": "m.replace", "event_id": message_id},
    }


def thread_content(root_id: str, text: str, notify: tuple[str, ...] = (), preformatted: bool = True) -> dict[str, Any]:
    """A message in the thread of ``root_id`` with ``text`` shown inertly.

    Args:
        root_id: the thread root (a card's event id).
        text: any text; escaped.
        notify: user ids to notify (intentional mentions); nobody else is.
        preformatted: ``<pre><code>`` (thread parts, folded values) instead of a ``<code>`` line.
    """
    inert = f"<pre><code>{escape(text)}</code></pre>" if preformatted else f"<code>{escape(text)}</code>"
    return {
        "msgtype": "m.text",
        "body": text,
        "format": "org.matrix.custom.html",
        "formatted_body": inert,
        "m.mentions": {"user_ids": list(notify)},
        "m.relates_to": {
            "rel_type": "m.thread",
            "event_id": root_id,
            "is_falling_back": True,
            "m.in_reply_to": {"event_id": root_id},
        },
    }


def _fields(card: Card) -> list[tuple[str, str]]:
    expires = card.expires_at.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    return [
        ("principal", card.principal),
        ("call", card.call),
        ("side-effect class", card.side_effect_class),
        ("risk tier", card.risk_tier),
        ("policy", card.policy_id),
        ("approver role", card.approver_role),
        ("approvals required", str(card.approvals_required)),
        ("idempotency key", card.idempotency_key),
        ("request hash", card.request_hash12),
        ("expires", expires),
        ("requests", ", ".join(card.request_ids)),
    ]


def _hint(card: Card) -> str:
    return _HINT.format(id=card.approval_id) if card.answerable else _CLOSED


def _plain(card: Card, mentions: Mapping[str, str]) -> str:
    lines = [f"Approval {card.approval_id}: {card.status_line()}"]
    lines += [f"WARNING: {line}" for line in card.warnings()]
    lines += [f"{name}: {value}" for name, value in _fields(card)]
    lines += ["arguments:", card.arguments]
    lines += ["files (as the approval binds them):", *card.contents] if card.contents else []
    lines += [f"approvers: {', '.join(card.approvers) or 'none'}", _hint(card)]
    return "\n".join(lines)


def _html(card: Card, mentions: Mapping[str, str]) -> str:
    parts = [f"<p><strong>Approval</strong> <code>{escape(card.approval_id)}</code>: {_code(card.status_line())}</p>"]
    parts += [f"<p><strong>⚠ WARNING</strong>: {_code(line)}</p>" for line in card.warnings()]
    items = "".join(f"<li>{name}: {_code(value)}</li>" for name, value in _fields(card))
    parts += [f"<ul>{items}</ul>", f'<pre><code class="language-json">{escape(card.arguments)}</code></pre>']
    if card.contents:
        files = "".join(f"<li>{_code(line)}</li>" for line in card.contents)
        parts += [f"<p><strong>Files</strong> (as the approval binds them):</p><ul>{files}</ul>"]
    pills = ", ".join(_pill(name, mentions) for name in card.approvers) or "none"
    parts += [f"<p>approvers: {pills}</p>", f"<p>{escape(_hint(card))}</p>"]
    return "".join(parts)


def _code(text: str) -> str:
    return f"<code>{escape(text)}</code>"


def _pill(name: str, mentions: Mapping[str, str]) -> str:
    user_id = mentions.get(name)
    if user_id is None:
        return _code(name)
    link = "https://matrix.to/#/" + urllib.parse.quote(user_id, safe="@:")
    return f'<a href="{escape(link)}">{escape(name)}</a>'
