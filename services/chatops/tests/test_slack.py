"""The Slack adapter against a loopback Slack Web API, with interactions signed and sent over real HTTP."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from effectgate.chatops.adapters.slack.platform import SlackChat
from effectgate.chatops.answers import Action, ChatAnswer
from effectgate.chatops.app import slack_chat
from effectgate.chatops.errors import ChatRefused, ChatUnavailable
from effectgate.chatops.settings import ChatopsSettings
from effectgate.contracts.security import SecurityKind, digest
from effectgate.devstack.fake_slack import FakeSlack
from effectgate.devstack.slack_requests import block_action, post_signed, slash_command, view_submission
from effectgate.shared.runtime.reporting import SecurityReporter

SECRET = "8f742231b10e8888abcd99yyyzzz85a5"
MENTIONS = {"alice": "U0ALICE", "bob": "U0BOB"}
CHANNEL = "C0CARDS"


def settings(tmp_path: Path, api_url: str, **fields: Any) -> ChatopsSettings:
    files = {"slack_bot_token_file": "xoxb-fake-token", "slack_signing_secret_file": SECRET}
    for name, value in files.items():
        (tmp_path / name).write_text(value + "\n", encoding="utf-8")
    paths = {name: tmp_path / name for name in files}
    return ChatopsSettings(platform="slack", slack_api_url=api_url, slack_port=0, **(paths | fields))


@pytest_asyncio.fixture
async def fake() -> AsyncIterator[FakeSlack]:
    slack = FakeSlack(channels=(CHANNEL,))
    await slack.start()
    yield slack
    await slack.stop()


class Sink:
    def __init__(self) -> None:
        self.answers: asyncio.Queue[ChatAnswer] = asyncio.Queue()
        self.fail_next = False

    async def __call__(self, answer: ChatAnswer) -> None:
        await self.answers.put(answer)
        if self.fail_next:
            self.fail_next = False
            raise RuntimeError("the workflow broke")

    async def next(self) -> ChatAnswer:
        return await asyncio.wait_for(self.answers.get(), 5)


@pytest_asyncio.fixture
async def slack(fake: FakeSlack, tmp_path: Path, reports: list[Any]) -> AsyncIterator[tuple[SlackChat, Sink]]:
    reporter = SecurityReporter("chatops")
    reporter.report = lambda kind, **fields: reports.append((kind, fields)) or True  # type: ignore[method-assign,func-returns-value]
    adapter, sink = slack_chat(settings(tmp_path, fake.api_url), MENTIONS, reporter), Sink()
    await adapter.start(sink)
    yield adapter, sink
    await adapter.stop()


async def posted(chat: SlackChat, card: Any) -> str:
    return await chat.post_card(CHANNEL, card, f"card-{card.approval_id}")


async def test_a_card_is_posted_with_its_metadata_and_mentions(slack: Any, fake: FakeSlack, make_card: Any) -> None:
    adapter, _ = slack
    ts = await posted(adapter, make_card())
    message = fake.message(CHANNEL, ts)
    assert message is not None
    metadata = {"event_type": "effectgate_approval", "event_payload": {"approval_id": "ap-0123456789ab"}}
    assert message["metadata"] == metadata
    assert "<@U0ALICE>" in message["text"] and "<@U0BOB>" in message["text"]
    assert fake.called("chat.postMessage")[0]["unfurl_links"] is False


async def test_an_edit_replaces_the_card_in_place(slack: Any, fake: FakeSlack, make_card: Any) -> None:
    adapter, _ = slack
    ts = await posted(adapter, make_card())
    await adapter.edit_card(CHANNEL, ts, make_card(state="granted", answered_by=("alice",)))
    message = fake.message(CHANNEL, ts)
    assert message is not None and "approved" in message["text"] and "<@U0ALICE>" not in message["text"]
    assert not [b for b in message["blocks"] if b["type"] == "actions"]
    assert len(fake.called("chat.postMessage")) == 1


async def test_a_card_whose_post_answer_was_lost_is_found_by_its_metadata(
    slack: Any, fake: FakeSlack, make_card: Any
) -> None:
    adapter, _ = slack
    ts = await posted(adapter, make_card())
    card = fake.message(CHANNEL, ts)
    assert card is not None
    forged = {"ts": "1.000001", "user": "U0MALLORY", "text": "x", "metadata": card["metadata"]}
    fake.messages[CHANNEL].append(forged)  # another app's message claiming to be the card
    for number in range(450):  # the card is now on the third page of history
        fake.messages[CHANNEL].append({"ts": f"2.{number:06d}", "user": "U0ALICE", "text": "chatter"})
    assert await adapter.find_card(CHANNEL, "ap-0123456789ab") == ts
    assert await adapter.find_card(CHANNEL, "ap-ffffffffffff") is None
    assert all(c["include_all_metadata"] in ("1", "true", True) for c in fake.called("conversations.history"))


async def test_thread_posts_are_literal_and_long_text_comes_in_numbered_parts(
    slack: Any, fake: FakeSlack, make_card: Any
) -> None:
    adapter, _ = slack
    ts = await posted(adapter, make_card())
    text = "<!channel> " + "x" * 7000
    await adapter.post_in_thread(CHANNEL, ts, text, "txn-1")
    replies = fake.thread(CHANNEL, ts)
    assert len(replies) == 3 and all("<!channel>" not in r["text"] for r in replies)
    shown = [r["blocks"][0]["elements"][0]["elements"][0]["text"] for r in replies]
    assert [s.splitlines()[0] for s in shown] == [f"(part {n} of 3)" for n in (1, 2, 3)]
    assert "".join(s.split("\n", 1)[1] for s in shown) == text


@pytest.mark.parametrize(
    ("status", "retry_after_s"),
    [(429, 7.0), (500, None), (503, None)],
)
async def test_rate_limits_and_server_errors_mean_try_again_later(
    slack: Any, fake: FakeSlack, make_card: Any, status: int, retry_after_s: float | None
) -> None:
    adapter, _ = slack
    fake.fail(status, "chat.postMessage", retry_after_s=retry_after_s)
    with pytest.raises(ChatUnavailable) as raised:
        await posted(adapter, make_card())
    assert raised.value.retry_after_s == retry_after_s
    assert not fake.messages.get(CHANNEL)
    await posted(adapter, make_card())  # the retry succeeds once Slack is back
    assert len(fake.messages[CHANNEL]) == 1


async def test_an_unreachable_slack_means_try_again_later(slack: Any, fake: FakeSlack, make_card: Any) -> None:
    adapter, _ = slack
    await fake.stop()
    with pytest.raises(ChatUnavailable):
        await posted(adapter, make_card())


async def test_an_unknown_channel_or_message_is_refused_for_good(slack: Any, make_card: Any) -> None:
    adapter, _ = slack
    with pytest.raises(ChatRefused, match="channel_not_found"):
        await adapter.post_card("C0NOWHERE", make_card(), "txn")
    with pytest.raises(ChatRefused, match="message_not_found"):
        await adapter.edit_card(CHANNEL, "9.999999", make_card())


async def test_a_card_slack_would_refuse_is_refused_before_sending(slack: Any, fake: FakeSlack, make_card: Any) -> None:
    adapter, _ = slack
    with pytest.raises(ChatRefused, match="not sent"):
        await posted(adapter, make_card(approval_id="ap-" + "f" * 200))  # a header over Slack's 150 characters
    assert fake.called("chat.postMessage") == []


async def test_a_signed_click_reaches_the_sink(slack: Any, make_card: Any, reports: list[Any]) -> None:
    adapter, sink = slack
    ts = await posted(adapter, make_card())
    body = block_action("U0ALICE", CHANNEL, ts, "approve", "ap-0123456789ab")
    status, _ = await post_signed(adapter.url, body, SECRET)
    assert status == 200
    assert await sink.next() == ChatAnswer(
        platform="slack",
        chat_user="U0ALICE",
        action=Action.APPROVE,
        approval_id="ap-0123456789ab",
        room=CHANNEL,
        message_id=ts,
    )
    assert reports == []


@pytest.mark.parametrize(
    ("forgery", "code"),
    [
        ({"secret": "not-the-signing-secret"}, "slack_signature_invalid"),
        ({"timestamp": int(time.time()) - 600}, "slack_signature_stale"),
        ({"signature": "v0=" + "0" * 64}, "slack_signature_invalid"),
    ],
    ids=["wrong secret", "stale timestamp", "made-up signature"],
)
async def test_an_unsigned_or_stale_click_gets_401_reaches_nothing_and_is_reported(
    slack: Any, fake: FakeSlack, reports: list[Any], forgery: dict[str, Any], code: str
) -> None:
    adapter, sink = slack
    body = block_action("U0ALICE", CHANNEL, "1.000001", "approve", "ap-0123456789ab")
    status, _ = await post_signed(adapter.url, body, **({"secret": SECRET} | forgery))
    assert status == 401
    ((kind, fields),) = reports
    assert (kind, fields["reason_code"]) == (SecurityKind.APPROVAL_REFUSED, code)
    assert fields["payload_sha256"] == digest(body)
    honest = block_action("U0BOB", CHANNEL, "1.000001", "reject", "ap-0123456789ab")
    fake.fail(500, "views.open")  # the reject is handed on at once: the next answer is the honest one
    assert (await post_signed(adapter.url, honest, SECRET))[0] == 200
    assert (await sink.next()).chat_user == "U0BOB"
    assert sink.answers.empty()


async def test_reject_asks_for_a_reason_and_the_dialog_gives_the_rejection(
    slack: Any, fake: FakeSlack, make_card: Any
) -> None:
    adapter, sink = slack
    ts = await posted(adapter, make_card())
    click = block_action("U0BOB", CHANNEL, ts, "reject", "ap-0123456789ab", trigger_id="trigger-42")
    assert (await post_signed(adapter.url, click, SECRET))[0] == 200
    opened = await fake.wait_for("views.open")
    assert opened["trigger_id"] == "trigger-42" and sink.answers.empty()
    view = opened["view"]
    submitted = view_submission("U0BOB", view["callback_id"], view["private_metadata"], "wrong <!channel> file")
    assert (await post_signed(adapter.url, submitted, SECRET))[0] == 200
    answer = await sink.next()
    assert (answer.action, answer.approval_id) == (Action.REJECT, "ap-0123456789ab")
    assert answer.note == "wrong <!channel> file"
    assert (answer.room, answer.message_id, answer.chat_user) == (CHANNEL, ts, "U0BOB")


async def test_the_slash_command_answers_and_replies_to_the_user_alone(slack: Any, fake: FakeSlack) -> None:
    adapter, sink = slack
    status, text = await post_signed(adapter.url, slash_command("U0BOB", CHANNEL, "approve ap-0123456789ab"), SECRET)
    assert status == 200 and "approve ap-0123456789ab: sent" in text
    answer = await sink.next()
    assert (answer.action, answer.approval_id, answer.message_id) == (Action.APPROVE, "ap-0123456789ab", "")
    await adapter.reply(answer, "ap-0123456789ab: approved (as bob)")
    ephemeral = await fake.wait_for("chat.postEphemeral")
    assert (ephemeral["channel"], ephemeral["user"]) == (CHANNEL, "U0BOB")
    status, text = await post_signed(adapter.url, slash_command("U0BOB", CHANNEL, "approve everything"), SECRET)
    assert status == 200 and "usage: /effectgate" in text and sink.answers.empty()


async def test_a_reply_to_a_click_goes_to_the_cards_thread(slack: Any, fake: FakeSlack, make_card: Any) -> None:
    adapter, sink = slack
    ts = await posted(adapter, make_card())
    await post_signed(adapter.url, block_action("U0EVE", CHANNEL, ts, "approve", "ap-0123456789ab"), SECRET)
    await adapter.reply(await sink.next(), "U0EVE is not a mapped approver: nothing changed")
    (reply,) = fake.thread(CHANNEL, ts)
    assert reply["blocks"][0]["elements"][0]["elements"][0] == {"type": "user", "user_id": "U0EVE"}


async def test_a_failing_workflow_does_not_stop_the_receiver(slack: Any, make_card: Any) -> None:
    adapter, sink = slack
    ts = await posted(adapter, make_card())
    sink.fail_next = True
    for user in ("U0ALICE", "U0BOB"):
        body = block_action(user, CHANNEL, ts, "approve", "ap-0123456789ab")
        assert (await post_signed(adapter.url, body, SECRET))[0] == 200
        assert (await sink.next()).chat_user == user


def test_a_missing_or_empty_secret_is_refused_naming_its_setting(tmp_path: Path) -> None:
    configured = settings(tmp_path, "http://127.0.0.1:9/api/")
    (tmp_path / "slack_signing_secret_file").write_text("\n", encoding="utf-8")
    with pytest.raises(ValueError, match="EFFECTGATE_CHATOPS_SLACK_SIGNING_SECRET_FILE=.*: the file is empty"):
        slack_chat(configured, MENTIONS)
    missing = configured.model_copy(update={"slack_signing_secret_file": None, "slack_bot_token_file": None})
    expected = "needs EFFECTGATE_CHATOPS_SLACK_BOT_TOKEN_FILE, EFFECTGATE_CHATOPS_SLACK_SIGNING_SECRET_FILE"
    with pytest.raises(ValueError, match=expected):
        slack_chat(missing, MENTIONS)
    socket = configured.model_copy(update={"slack_mode": "socket"})
    with pytest.raises(ValueError, match="socket mode.* needs EFFECTGATE_CHATOPS_SLACK_APP_TOKEN_FILE"):
        slack_chat(socket, MENTIONS)
    gone = configured.model_copy(update={"slack_bot_token_file": tmp_path / "nope"})
    with pytest.raises(ValueError, match="EFFECTGATE_CHATOPS_SLACK_BOT_TOKEN_FILE=.*nope: No such file"):
        slack_chat(gone, MENTIONS)
