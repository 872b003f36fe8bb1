"""Composition root of the chat-ops bot: the only place its settings are read."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Mapping
from pathlib import Path

import nats.errors
from faststream import FastStream
from nats.js import JetStreamContext

from effectgate.chatops.adapters.approvals_rpc import NatsApprovals
from effectgate.chatops.adapters.cards_kv import KvCardStore
from effectgate.chatops.errors import ChatOpsError
from effectgate.chatops.handlers import ChatOpsRuntime, consumers
from effectgate.chatops.ports import ChatPort
from effectgate.chatops.service import ChatOps
from effectgate.chatops.settings import ChatopsSettings
from effectgate.contracts.bus.catalog import Leases
from effectgate.contracts.bus.nats_permissions import CHATOPS, private_inbox
from effectgate.contracts.directory import PrincipalDirectory, load_directory
from effectgate.shared.config.keyring import check_holds_only_own, public_key_of
from effectgate.shared.runtime import leadership
from effectgate.shared.runtime.assembly import Lifecycle, RuntimeCell, new_app, new_broker
from effectgate.shared.runtime.health import monitoring
from effectgate.shared.runtime.leadership import Leadership
from effectgate.shared.runtime.reporting import SecurityReporter

__all__ = ["create_app", "matrix_chat", "slack_chat"]

log = logging.getLogger("effectgate.chatops")


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
        return slack_chat(settings, mentions, reporter)
    return matrix_chat(settings, mentions)


def create_app(settings: ChatopsSettings | None = None) -> FastStream:
    """Build the chat-ops bot.

    Raises:
        OSError / ValueError: the approvals public key, the principal directory or a chat
            setting is missing or invalid.
        effectgate.shared.config.keyring.KeyLayoutError: ``keys_dir`` holds a private key.
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
        lease = await leadership.bind(js, Leases.CHATOPS_RESYNC, "chatops")
        tasks.append(asyncio.create_task(lease.run(), name="chatops-resync-lease"))
        tasks.append(asyncio.create_task(_resync_every(chatops, settings.resync_interval_s, lease)))

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


async def _resync_every(chatops: ChatOps, interval_s: float, lease: Leadership) -> None:
    """Post the cards pending approvals lack, at start and then every ``interval_s`` seconds.

    Covers a card chat refused for a while (the bot was not yet invited) and a cleared
    cards bucket; chat or the approvals service down only delays it. Only the replica holding
    the ``chatops-resync`` lease does it: two replicas would each post the missing card.
    """
    while True:
        if not lease.held():
            await asyncio.sleep(lease.renew_every_s)
            continue
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
        log.warning("EFFECTGATE_CHATOPS_ROOMS names role %r, which no approver has (roles: %s)", role, sorted(roles))
    if not settings.default_room:
        for role in sorted(roles - set(settings.rooms)):
            log.warning("approvals for role %r get no card: no room in EFFECTGATE_CHATOPS_ROOMS (CLI only)", role)


def matrix_chat(settings: ChatopsSettings, mentions: Mapping[str, str]) -> ChatPort:
    """The Matrix adapter ``settings`` describe (for the composition root).

    Args:
        settings: the bot's settings (homeserver, user, password file, device id, rooms, state dir).
        mentions: approver name -> Matrix user id.

    Raises:
        ValueError: a Matrix setting is missing, or the password file is unreadable or empty
            (names the environment variable).
    """
    missing = [
        f"EFFECTGATE_CHATOPS_{name.upper()}"
        for name in ("matrix_homeserver", "matrix_user", "matrix_password_file")
        if not getattr(settings, name)
    ]
    if missing:
        raise ValueError(f"the Matrix chat needs {', '.join(missing)}")
    assert settings.matrix_password_file is not None  # checked above
    logging.getLogger("nio").setLevel(logging.WARNING)  # nio logs every room event it parses at INFO
    try:
        password = settings.matrix_password_file.read_text(encoding="utf-8").strip()
    except OSError as error:
        setting = f"EFFECTGATE_CHATOPS_MATRIX_PASSWORD_FILE={settings.matrix_password_file}"
        raise ValueError(f"{setting}: {error.strerror}") from error
    if not password:
        raise ValueError(f"EFFECTGATE_CHATOPS_MATRIX_PASSWORD_FILE={settings.matrix_password_file}: the file is empty")
    rooms = {*settings.rooms.values(), settings.default_room} - {""}
    from effectgate.chatops.adapters.matrix.platform import MatrixChat

    return MatrixChat(
        settings.matrix_homeserver,
        settings.matrix_user,
        password,
        settings.matrix_device_id,
        rooms,
        mentions,
        settings.matrix_state_dir,
    )


def _secret(settings: ChatopsSettings, field: str) -> str:
    """The secret in the file the setting ``field`` names, stripped.

    Raises:
        ValueError: the file cannot be read or is empty (names the setting).
    """
    path: Path = getattr(settings, field)
    name = f"EFFECTGATE_CHATOPS_{field.upper()}"
    try:
        secret = path.read_text(encoding="utf-8").strip()
    except OSError as error:
        raise ValueError(f"{name}={path}: {error.strerror}") from error
    if not secret:
        raise ValueError(f"{name}={path}: the file is empty")
    return secret


def _needed(settings: ChatopsSettings) -> tuple[str, ...]:
    """The secret files the mode needs.

    Raises:
        ValueError: some are not set (names every missing setting).
    """
    mode_secret = "slack_signing_secret_file" if settings.slack_mode == "http" else "slack_app_token_file"
    needed = ("slack_bot_token_file", mode_secret)
    if missing := [f"EFFECTGATE_CHATOPS_{f.upper()}" for f in needed if getattr(settings, f) is None]:
        raise ValueError(f"Slack ({settings.slack_mode} mode) needs {', '.join(missing)}")
    return needed


def slack_chat(
    settings: ChatopsSettings, mentions: Mapping[str, str], reporter: SecurityReporter | None = None
) -> ChatPort:
    """The Slack adapter the settings describe.

    Args:
        settings: the bot's settings (token files, mode, endpoint address, API URL, part size).
        mentions: approver name to Slack user id.
        reporter: reports requests to the endpoint refused for their signature.

    Raises:
        ValueError: a secret the mode needs is not configured, unreadable or empty (names the setting).
    """
    from slack_sdk.web.async_client import AsyncWebClient

    from effectgate.chatops.adapters.slack.platform import API_TIMEOUT_S, Listen, SlackChat

    token, mode_secret = (_secret(settings, field) for field in _needed(settings))
    http = settings.slack_mode == "http"
    listen = Listen(
        mode=settings.slack_mode,
        host=settings.slack_host,
        port=settings.slack_port,
        socket_fd=settings.slack_socket_fd,
        signing_secret=mode_secret if http else "",
        app_token="" if http else mode_secret,
    )
    client = AsyncWebClient(token=token, base_url=settings.slack_api_url, timeout=API_TIMEOUT_S)
    return SlackChat(client, listen, mentions, part_chars=settings.part_chars, reporter=reporter)
