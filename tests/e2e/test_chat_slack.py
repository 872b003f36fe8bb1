"""Approving from Slack through the whole stack, against a loopback Slack Web API.

The chat-ops bot runs as a process with ``platform = slack``; its Web API calls go to a
:class:`~effectgate.devstack.fake_slack.FakeSlack` in this test process, and the approvers'
clicks are signed with the app's signing secret and posted over HTTP to the bot's endpoint,
as Slack would post them.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
import time
from collections.abc import Iterator
from typing import Any

import pytest

from effectgate.contracts.bus.catalog import Rpc, Subjects
from effectgate.devstack.fake_slack import FakeSlack, serving
from effectgate.devstack.slack_requests import block_action, post_signed, view_submission

pytestmark = pytest.mark.e2e

SECRET = "e2e-signing-secret-0123456789abcdef"
CHANNEL = "C0CARDS"
SLACK_IDS = {"alice": "U0ALICE", "bob": "U0BOB", "selfie": "U0SELFIE"}
"""Approvers' Slack user ids in the principal directory; anyone else is unmapped."""


@pytest.fixture(scope="module")
def fake_slack() -> Iterator[FakeSlack]:
    """Slack's Web API on loopback, on a loop of its own (it answers while a fixture starts the stack)."""
    with serving(FakeSlack(channels=(CHANNEL,))) as slack:
        yield slack


@pytest.fixture(scope="module")
def stack_env(e2e_paths: Any, fake_slack: FakeSlack, tmp_path_factory: Any) -> dict[str, str]:
    """The stack with the chat-ops bot on Slack: operator cards in ``C0CARDS``, approvers mapped to Slack ids."""
    secrets = tmp_path_factory.mktemp("slack-secrets")
    (secrets / "bot_token").write_text(fake_slack.token + "\n")
    (secrets / "signing_secret").write_text(SECRET + "\n")
    directory = e2e_paths.principals.read_text()
    for name, user in SLACK_IDS.items():
        directory = directory.replace(f"[approvers.{name}]\n", f'[approvers.{name}]\nslack = "{user}"\n')
    e2e_paths.principals.write_text(directory)
    return {
        "EFFECTGATE_CHATOPS_PLATFORM": "slack",
        "EFFECTGATE_CHATOPS_PRINCIPALS_FILE": str(e2e_paths.principals),
        "EFFECTGATE_CHATOPS_ROOMS": json.dumps({"operator": CHANNEL}),
        "EFFECTGATE_CHATOPS_SLACK_API_URL": fake_slack.api_url,
        "EFFECTGATE_CHATOPS_SLACK_BOT_TOKEN_FILE": str(secrets / "bot_token"),
        "EFFECTGATE_CHATOPS_SLACK_SIGNING_SECRET_FILE": str(secrets / "signing_secret"),
        "EFFECTGATE_CHATOPS_SLACK_PORT": "0",  # any: the stack binds it and hands the socket down
    }


@pytest.fixture(scope="module")
def endpoint(stack: Any) -> str:
    """The bot's Slack endpoint (the stack is running)."""
    return f"http://127.0.0.1:{stack.listeners.port('chatops', 'EFFECTGATE_CHATOPS_SLACK_PORT')}/slack/events"


def _is_card_of(approval_id: str) -> Any:
    return lambda params: (params.get("metadata") or {}).get("event_payload", {}).get("approval_id") == approval_id


async def _card(gate: Any, fake: FakeSlack, agent: str, name: str, content: str = "from slack") -> tuple[str, str]:
    """Submit a write needing approval; ``(request_id, card ts)`` once its card is in the channel."""
    request_id = await gate.submit(agent, "write", {"path": name, "content": content})
    pending = await gate.pending(request_id)
    await fake.wait_for("chat.postMessage", _is_card_of(pending["approval_id"]), timeout_s=20)
    ts = next(m["ts"] for m in fake.messages[CHANNEL] if _is_card_of(pending["approval_id"])(m))
    return request_id, ts


def _approval_of(fake: FakeSlack, ts: str) -> str:
    message = fake.message(CHANNEL, ts)
    assert message is not None
    return str(message["metadata"]["event_payload"]["approval_id"])


def _thread_texts(fake: FakeSlack, ts: str) -> list[str]:
    shown = []
    for reply in fake.thread(CHANNEL, ts):
        parts = reply["blocks"][0]["elements"][0]["elements"]
        shown.append("".join(part.get("text", "") for part in parts))
    return shown


async def _thread_says(fake: FakeSlack, ts: str, words: str, timeout_s: float = 20) -> str:
    """The first post in the card's thread that says ``words``, waiting up to ``timeout_s``."""
    says = lambda params: params.get("thread_ts") == ts and words in json.dumps(params)  # noqa: E731
    try:
        await fake.wait_for("chat.postMessage", says, timeout_s)
    except TimeoutError:
        raise AssertionError(f"the thread never said {words!r}: {_thread_texts(fake, ts)}") from None
    return next(text for text in _thread_texts(fake, ts) if words in text)


async def _security_event(gate: Any, code: str, body: bytes, timeout_s: float = 20) -> dict[str, Any]:
    """The chat-ops bot's security event with ``code`` about ``body``, as the audit recorded it."""
    digest = "sha256:" + hashlib.sha256(body).hexdigest()
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        reply = await gate.rpc(Rpc.AUDIT_ALARMS, {"limit": 500})
        for alarm in reply["alarms"]:
            event = alarm["event"]
            if (alarm["service"], event["reason_code"], event["payload_sha256"]) == ("chatops", code, digest):
                return dict(alarm)
        await asyncio.sleep(0.2)
    raise AssertionError(f"no chatops security event {code} in the audit")


async def test_a_signed_click_by_a_mapped_approver_runs_the_call_and_the_card_follows(
    gate: Any, fake_slack: FakeSlack, endpoint: str, new_id: Any
) -> None:
    agent, name, content = gate.agent(), new_id("slack-") + ".txt", "hi <!channel> <@U0EVE> <https://evil.example|x>"
    request_id, ts = await _card(gate, fake_slack, agent, name, content)
    approval_id = _approval_of(fake_slack, ts)
    card = fake_slack.message(CHANNEL, ts)
    assert card is not None and "<@U0ALICE>" in card["text"] and name not in card["text"]
    shown = json.dumps(card["blocks"], ensure_ascii=False)
    assert json.dumps(content, ensure_ascii=False)[1:-1] in shown, "the arguments are not on the card as sent"
    assert '"broadcast"' not in shown and '"link"' not in shown and "mrkdwn" not in shown
    assert set(re.findall(r'"user_id": "(\w+)"', shown)) == {"U0ALICE", "U0BOB", "U0SELFIE"}, "only approvers"

    status, _ = await post_signed(endpoint, block_action("U0ALICE", CHANNEL, ts, "approve", approval_id), SECRET)
    assert status == 200
    receipt = await gate.receipt(agent, request_id)
    assert (receipt.outcome, receipt.reason_code) == ("succeeded", "ok"), receipt.reason
    assert (gate.paths.sandbox / name).read_text() == content

    edited = await fake_slack.wait_for("chat.update", lambda p: p["ts"] == ts and "approved" in p["text"])
    assert not [block for block in edited["blocks"] if block["type"] == "actions"], "buttons left on an answered card"
    outcome = await _thread_says(fake_slack, ts, receipt.event_id)
    assert f"{request_id}: succeeded" in outcome


async def test_a_click_by_an_unmapped_user_is_refused_in_the_thread_and_changes_nothing(
    gate: Any, fake_slack: FakeSlack, endpoint: str, new_id: Any
) -> None:
    agent, name = gate.agent(), new_id("slack-unmapped-") + ".txt"
    request_id, ts = await _card(gate, fake_slack, agent, name)
    approval_id = _approval_of(fake_slack, ts)

    status, _ = await post_signed(endpoint, block_action("U0EVE", CHANNEL, ts, "approve", approval_id), SECRET)
    assert status == 200
    refusal = await _thread_says(fake_slack, ts, "not a mapped approver")
    assert "nothing changed" in refusal
    assert await gate.is_pending(request_id)
    assert not [u for u in fake_slack.called("chat.update") if u["ts"] == ts], "the card changed"
    assert not (gate.paths.sandbox / name).exists()


async def test_a_replayed_click_has_no_effect_and_a_second_click_is_idempotent(
    gate: Any, fake_slack: FakeSlack, endpoint: str, new_id: Any
) -> None:
    agent, name = gate.agent(), new_id("slack-replay-") + ".txt"
    request_id, ts = await _card(gate, fake_slack, agent, name)
    approval_id = _approval_of(fake_slack, ts)
    click, stamp = block_action("U0BOB", CHANNEL, ts, "approve", approval_id), int(time.time())

    assert (await post_signed(endpoint, click, SECRET, timestamp=stamp))[0] == 200
    receipt = await gate.receipt(agent, request_id)
    assert receipt.outcome == "succeeded", receipt.reason
    await _thread_says(fake_slack, ts, receipt.event_id)
    assert (await post_signed(endpoint, click, SECRET, timestamp=stamp))[0] == 200  # the captured request, again
    alarm = await _security_event(gate, "slack_request_replayed", click.encode())
    assert alarm["event"]["kind"] == "approval_refused"
    again = block_action("U0BOB", CHANNEL, ts, "approve", approval_id)  # a second click: a new request
    assert (await post_signed(endpoint, again, SECRET))[0] == 200
    await _thread_says(fake_slack, ts, "already granted")
    assert len([text for text in _thread_texts(fake_slack, ts) if "already granted" in text]) == 1

    assert await gate.count(Subjects.receipt(agent, request_id)) == 1
    assert len([u for u in fake_slack.called("chat.update") if u["ts"] == ts]) == 1
    assert (gate.paths.sandbox / name).read_text() == "from slack"


@pytest.mark.parametrize(
    ("forgery", "code"),
    [
        ({"secret": "not-the-signing-secret"}, "slack_signature_invalid"),
        ({"timestamp": 1_000_000_000}, "slack_signature_stale"),
    ],
    ids=["bad signature", "stale timestamp"],
)
async def test_a_badly_signed_click_gets_401_changes_nothing_and_is_audited(
    gate: Any, fake_slack: FakeSlack, endpoint: str, new_id: Any, forgery: dict[str, Any], code: str
) -> None:
    agent, name = gate.agent(), new_id("slack-forged-") + ".txt"
    request_id, ts = await _card(gate, fake_slack, agent, name)
    click = block_action("U0ALICE", CHANNEL, ts, "approve", _approval_of(fake_slack, ts))

    status, _ = await post_signed(endpoint, click, **({"secret": SECRET} | forgery))
    assert status == 401
    alarm = await _security_event(gate, code, click.encode())
    assert alarm["event"]["kind"] == "approval_refused"
    await gate.settle()
    assert await gate.is_pending(request_id)
    assert not fake_slack.thread(CHANNEL, ts), "the forged click got an answer"
    assert not [u for u in fake_slack.called("chat.update") if u["ts"] == ts]
    assert not (gate.paths.sandbox / name).exists()


async def test_reject_with_a_reason_from_the_dialog(
    gate: Any, fake_slack: FakeSlack, endpoint: str, new_id: Any
) -> None:
    agent, name = gate.agent(), new_id("slack-reject-") + ".txt"
    request_id, ts = await _card(gate, fake_slack, agent, name)
    click = block_action("U0BOB", CHANNEL, ts, "reject", _approval_of(fake_slack, ts), trigger_id=new_id("trig-"))
    assert (await post_signed(endpoint, click, SECRET))[0] == 200
    view = (await fake_slack.wait_for("views.open", lambda p: p["view"]["private_metadata"].count(ts)))["view"]

    reason = "wrong file <!channel>"
    submitted = view_submission("U0BOB", view["callback_id"], view["private_metadata"], reason)
    assert (await post_signed(endpoint, submitted, SECRET))[0] == 200
    receipt = await gate.receipt(agent, request_id)
    assert receipt.outcome != "succeeded"
    edited = await fake_slack.wait_for("chat.update", lambda p: p["ts"] == ts and "rejected" in p["text"])
    assert reason in json.dumps(edited["blocks"], ensure_ascii=False) and "<!channel>" not in edited["text"]
    assert not (gate.paths.sandbox / name).exists()
