"""Composition root of the chat-ops bot: the only place its settings are read."""

from __future__ import annotations

import asyncio
import contextlib
import logging

import nats.errors
from faststream import FastStream
from nats.js import JetStreamContext

from toolgate.chatops.adapters.approvals_rpc import NatsApprovals
from toolgate.chatops.adapters.cards_kv import KvCardStore
from toolgate.chatops.errors import ChatOpsError
from toolgate.chatops.handlers import ChatOpsRuntime, consumers
from toolgate.chatops.ports import ChatPort
from toolgate.chatops.service import ChatOps
from toolgate.chatops.settings import ChatopsSettings
from toolgate.contracts.directory import PrincipalDirectory, load_directory
from toolgate.contracts.nats_permissions import CHATOPS, private_inbox
from toolgate.shared.health import monitoring
from toolgate.shared.keyring import check_holds_only_own, public_key_of
from toolgate.shared.reporting import SecurityReporter
from toolgate.shared.service import Lifecycle, RuntimeCell, new_app, new_broker

__all__ = ["create_app"]

log = logging.getLogger("toolgate.chatops")


def chat_of(settings: ChatopsSettings, directory: PrincipalDirectory, reporter: SecurityReporter) -> ChatPort:
    """The chat adapter ``settings.platform`` names, mentioning approvers by their chat ids.

    ``reporter`` gets the Slack endpoint's requests refused for their signature.

    Raises:
        ValueError: the platform's settings are incomplete (names the missing setting).
    """
    mentions = {
        name: chat_id for name in directory.approvers if (chat_id := directory.chat_ids(name).on(settings.platform))
    }
    if settings.platform == "slack":
        from toolgate.chatops.adapters.slack import slack_chat

        return slack_chat(settings, mentions, reporter)
    from toolgate.chatops.adapters.matrix import matrix_chat

    return matrix_chat(settings, mentions)


def create_app(settings: ChatopsSettings | None = None) -> FastStream:
    """Build the chat-ops bot.

    Raises:
        OSError / ValueError: the approvals public key, the principal directory or a chat
            setting is missing or invalid.
        toolgate.shared.keyring.KeyLayoutError: ``keys_dir`` holds a private key.
    """
    settings = settings or ChatopsSettings()
    check_holds_only_own(settings.keys_dir, "chatops")
    approvals_key = public_key_of(settings.keys_dir, "approvals")
    receipts_key = public_key_of(settings.keys_dir, "receipts")
    directory = load_directory(settings.principals_file)
    reporter = SecurityReporter("chatops")
    chat = chat_of(settings, directory, reporter)
    broker = new_broker("chatops", settings, reporter, inbox_prefix=private_inbox(CHATOPS))
    cell: RuntimeCell[ChatOpsRuntime] = RuntimeCell()

    async def build(js: JetStreamContext) -> None:
        chatops = ChatOps(
            chat=chat,
            cards=await KvCardStore.open(js),
            approvals=NatsApprovals(broker.connection),
            approver_of=directory.approver_for_chat,
            rooms=settings.rooms,
            default_room=settings.default_room,
            fold_chars=settings.fold_chars,
            part_chars=settings.part_chars,
            reporter=reporter,
        )
        cell.set(ChatOpsRuntime(chatops, approvals_key, receipts_key))
        await chat.start(chatops.on_answer)
        tasks.append(asyncio.create_task(_resync_every(chatops, settings.resync_interval_s)))

    async def stop() -> None:
        for task in tasks:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await chat.stop()

    _warn_about_rooms(settings, directory)
    tasks: list[asyncio.Task[None]] = []
    plan = Lifecycle(consumers(cell), closers=[stop], reporter=reporter, monitoring=monitoring("chatops", settings))
    return new_app(broker, build, plan)


async def _resync_every(chatops: ChatOps, interval_s: float) -> None:
    """Post the cards pending approvals lack, at start and then every ``interval_s`` seconds.

    Covers a card chat refused for a while (the bot was not yet invited) and a cleared
    cards bucket; chat or the approvals service down only delays it.
    """
    while True:
        try:
            if posted := await chatops.resync():
                log.info("resync: %d card(s) posted for pending approvals", posted)
        except (ChatOpsError, TimeoutError, OSError, nats.errors.Error) as error:
            log.warning("resync failed (%s); again in %.0f s", error, interval_s)
        await asyncio.sleep(interval_s)


def _warn_about_rooms(settings: ChatopsSettings, directory: PrincipalDirectory) -> None:
    """Say at start what would otherwise show only when an approval arrives: a mistyped role, a role without a room."""
    roles = set().union(*directory.approvers.values())
    for role in sorted(set(settings.rooms) - roles):
        log.warning("TOOLGATE_CHATOPS_ROOMS names role %r, which no approver has (roles: %s)", role, sorted(roles))
    if not settings.default_room:
        for role in sorted(roles - set(settings.rooms)):
            log.warning("approvals for role %r get no card: no room in TOOLGATE_CHATOPS_ROOMS (CLI only)", role)
