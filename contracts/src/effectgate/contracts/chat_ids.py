"""Approvers' chat identities: which chat user answers as which approver."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from effectgate.contracts.errors import Problem

__all__ = ["PLATFORMS", "ChatDirectory", "ChatIds", "ChatIdsInvalid", "chat_directory", "chat_ids_of"]

MATRIX_USER: Final = re.compile(r"^@[a-z0-9._=/+-]+:(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+)(:[0-9]{1,5})?\Z")
"""A Matrix user id (spec "User Identifiers"): ``@`` localpart ``:`` server name (host, optional port)."""
MATRIX_MAX_CHARS: Final = 255
"""The Matrix spec's limit on a user id, characters."""
SLACK_USER: Final = re.compile(r"^[UW][A-Z0-9]{2,20}\Z")
"""A Slack user id: ``U…`` (or ``W…`` in an Enterprise Grid), upper-case letters and digits."""
PLATFORMS: Final = ("matrix", "slack")
"""The chat platforms an approver may name an id on (the keys of ``[approvers.<name>]``)."""


class ChatIdsInvalid(Problem, ValueError):
    """An approver's chat identity is not valid; the message names the table, key and rule."""


@dataclass(frozen=True, slots=True)
class ChatIds:
    """One approver's chat identities (``None``: none on that platform).

    Attributes:
        matrix: Matrix user id, e.g. ``@alice:example.org``.
        slack: Slack user id, e.g. ``U0123ABC``.
    """

    matrix: str | None = None
    slack: str | None = None

    def on(self, platform: str) -> str | None:
        """The id on ``platform`` (``matrix`` or ``slack``), ``None`` when there is none or no such platform."""
        if platform not in PLATFORMS:
            return None
        value: str | None = getattr(self, platform)
        return value


def _checked(platform: str, value: Any, where: str) -> str:
    if platform == "matrix":
        if not isinstance(value, str) or len(value) > MATRIX_MAX_CHARS or not MATRIX_USER.match(value):
            raise ChatIdsInvalid(f"{where}: matrix must be a Matrix user id like '@alice:example.org', got {value!r}")
        return value
    if not isinstance(value, str) or not SLACK_USER.match(value):
        raise ChatIdsInvalid(f"{where}: slack must be a Slack user id like 'U0123ABC' (U… or W…), got {value!r}")
    return value


def chat_ids_of(table: Mapping[str, Any], where: str) -> ChatIds:
    """The chat identities in one ``[approvers.<name>]`` table (its other keys are not looked at).

    Raises:
        ChatIdsInvalid: a present id is not a valid id of its platform.
    """
    found = {platform: _checked(platform, table[platform], where) for platform in PLATFORMS if platform in table}
    return ChatIds(**found)


@dataclass(frozen=True, slots=True)
class ChatDirectory:
    """Approver name to chat identities, and back.

    Attributes:
        ids: approver name to their :class:`ChatIds`.
    """

    ids: Mapping[str, ChatIds]
    _owners: Mapping[tuple[str, str], str]

    def approver_for(self, platform: str, chat_user: str) -> str | None:
        """The approver whose id on ``platform`` is ``chat_user``; ``None`` for an unmapped user."""
        return self._owners.get((platform, chat_user))

    def of(self, approver: str) -> ChatIds:
        """``approver``'s chat identities (empty when they have none, or are not an approver)."""
        return self.ids.get(approver, ChatIds())


def chat_directory(ids: Mapping[str, ChatIds]) -> ChatDirectory:
    """Index ``ids`` by chat id.

    Raises:
        ChatIdsInvalid: one chat id is given to two approvers (names both).
    """
    owners: dict[tuple[str, str], str] = {}
    for approver, chat in sorted(ids.items()):
        for platform in PLATFORMS:
            if (value := chat.on(platform)) is None:
                continue
            if (other := owners.setdefault((platform, value), approver)) != approver:
                raise ChatIdsInvalid(
                    f"[approvers.{other}] and [approvers.{approver}] both have {platform} = {value!r}: "
                    "a chat id may belong to one approver only"
                )
    return ChatDirectory(ids=dict(ids), _owners=owners)
