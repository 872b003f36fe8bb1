"""The chat-ops workflow on the Slack adapter: real HTTP to a loopback Slack API and signed clicks back."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest_asyncio

from effectgate.chatops.app import slack_chat
from effectgate.chatops.domain import card_for
from effectgate.chatops.memory import MemoryCardStore
from effectgate.chatops.service import ChatOps
from effectgate.chatops.settings import ChatopsSettings
from effectgate.devstack.fake_slack import FakeSlack
from effectgate.devstack.slack_requests import block_action, post_signed, slash_command
from effectgate.shared.runtime.reporting import SecurityReporter

SECRET = "workflow-signing-secret"
CHANNEL = "C0CARDS"
USERS = {"U0ALICE": "alice", "U0BOB": "bob"}


@pytest_asyncio.fixture
async def fake() -> AsyncIterator[FakeSlack]:
    slack = FakeSlack(channels=(CHANNEL,))
    await slack.start()
    yield slack
    await slack.stop()


@pytest_asyncio.fixture
async def bot(fake: FakeSlack, approvals: Any, reports: list[Any], tmp_path: Path) -> AsyncIterator[Any]:
    (tmp_path / "token").write_text(fake.token)
    (tmp_path / "secret").write_text(SECRET)
    settings = ChatopsSettings(
        platform="slack",
        slack_api_url=fake.api_url,
        slack_port=0,
        slack_bot_token_file=tmp_path / "token",
        slack_signing_secret_file=tmp_path / "secret",
    )
    chat = slack_chat(settings, {name: user for user, name in USERS.items()})
    reporter = SecurityReporter("chatops")
    reporter.report = lambda kind, **fields: reports.append((kind, fields))  # type: ignore[method-assign]
    workflow = ChatOps(
        chat=chat,
        cards=MemoryCardStore(),
        approvals=approvals,
        approver_of=lambda platform, user: USERS.get(user) if platform == "slack" else None,
        rooms={"operator": CHANNEL},
        reporter=reporter,
    )
    await chat.start(workflow.on_answer)
    yield workflow
    await chat.stop()


async def test_a_card_is_posted_once_even_when_its_post_answer_was_lost(
    bot: Any, fake: FakeSlack, make_requested: Any
) -> None:
    event = make_requested()
    await bot.chat.post_card(CHANNEL, card_for(event, 200), "txn")  # posted, but the workflow never heard
    await bot.on_requested(event)
    assert len(fake.called("chat.postMessage")) == 1
    record = await bot.cards.get(event.approval_id)
    assert record.message_id == fake.messages[CHANNEL][0]["ts"]


async def test_a_click_is_sent_as_the_mapped_approver_and_answered_in_the_thread(
    bot: Any, fake: FakeSlack, approvals: Any, make_requested: Any
) -> None:
    event = make_requested()
    await bot.on_requested(event)
    ts = (await bot.cards.get(event.approval_id)).message_id
    click = block_action("U0ALICE", CHANNEL, ts, "approve", event.approval_id)
    assert (await post_signed(bot.chat.url, click, SECRET))[0] == 200
    reply = await fake.wait_for("chat.postMessage", lambda p: p.get("thread_ts") == ts)
    assert approvals.decided == [("alice", {"approval_id": event.approval_id, "approve": True, "note": ""})]
    assert "(as approver alice)" in reply["text"]


async def test_an_unmapped_click_is_refused_reported_and_sends_nothing(
    bot: Any, fake: FakeSlack, approvals: Any, reports: list[Any], make_requested: Any
) -> None:
    event = make_requested()
    await bot.on_requested(event)
    ts = (await bot.cards.get(event.approval_id)).message_id
    click = block_action("U0MALLORY", CHANNEL, ts, "approve", event.approval_id)
    assert (await post_signed(bot.chat.url, click, SECRET))[0] == 200
    reply = await fake.wait_for("chat.postMessage", lambda p: p.get("thread_ts") == ts)
    assert "U0MALLORY is not a mapped approver" in reply["text"] and approvals.decided == []
    assert [fields["reason_code"] for _, fields in reports] == ["unmapped_chat_user"]


async def test_the_slash_command_reaches_the_approvals_service_and_answers_privately(
    bot: Any, fake: FakeSlack, approvals: Any
) -> None:
    command = slash_command("U0BOB", CHANNEL, "reject ap-0123456789ab not this file")
    assert (await post_signed(bot.chat.url, command, SECRET))[0] == 200
    reply = await fake.wait_for("chat.postEphemeral")
    assert approvals.decided == [("bob", {"approval_id": "ap-0123456789ab", "approve": False, "note": "not this file"})]
    assert reply["user"] == "U0BOB" and "ap-0123456789ab" in reply["text"]
