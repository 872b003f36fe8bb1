"""The Slack endpoint's edge over real HTTP: replays, Slack's retries, malformed, oversized and unreadable requests."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import logging
import time
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import urlencode

import pytest
import pytest_asyncio
from slack_sdk.web.async_client import AsyncWebClient

from effectgate.chatops.adapters.slack.edge import Body, SeenRequests, check_fresh
from effectgate.chatops.adapters.slack.receiver import Listen, SlackReceiver
from effectgate.chatops.answers import Action, ChatAnswer
from effectgate.chatops.errors import RequestRefused
from effectgate.contracts.security import SecurityKind, digest
from effectgate.devstack.fake_slack import FakeSlack
from effectgate.devstack.slack_requests import block_action, post_signed, slash_command
from effectgate.shared.runtime.reporting import SecurityReporter

SECRET = "edge-signing-secret-0123456789"
CHANNEL = "C0CARDS"
AP = "ap-0123456789ab"
FORM = "application/x-www-form-urlencoded"

Endpoint = tuple[str, "asyncio.Queue[ChatAnswer]"]


@pytest_asyncio.fixture
async def endpoint(reports: list[Any]) -> AsyncIterator[Endpoint]:
    """The receiver's HTTP endpoint (its URL) and the queue its answers reach; reports go to ``reports``."""
    fake = FakeSlack(channels=(CHANNEL,))
    await fake.start()
    reporter = SecurityReporter("chatops")

    def record(kind: SecurityKind, **fields: Any) -> bool:
        reports.append((kind, fields))
        return True

    reporter.report = record  # type: ignore[method-assign]
    receiver = SlackReceiver(
        AsyncWebClient(token=fake.token, base_url=fake.api_url), Listen(port=0, signing_secret=SECRET), reporter
    )
    answers: asyncio.Queue[ChatAnswer] = asyncio.Queue()
    await receiver.start(answers.put)
    yield receiver.url, answers
    await receiver.stop()
    await fake.stop()


async def next_answer(answers: asyncio.Queue[ChatAnswer]) -> ChatAnswer:
    return await asyncio.wait_for(answers.get(), 5)


async def still_works(endpoint: Endpoint) -> None:
    """An honest click is answered, and it is the next answer: nothing before it had an effect."""
    url, answers = endpoint
    probe = block_action("U0PROBE", CHANNEL, "1.000009", "approve", AP)
    assert (await post_signed(url, probe, SECRET))[0] == 200
    assert (await next_answer(answers)).chat_user == "U0PROBE"
    assert answers.empty()


def reported(reports: list[Any], code: str) -> list[dict[str, Any]]:
    assert all(kind is SecurityKind.APPROVAL_REFUSED for kind, _ in reports)
    return [fields for _, fields in reports if fields["reason_code"] == code]


def no_traceback(caplog: pytest.LogCaptureFixture) -> bool:
    return not [r for r in caplog.records if r.exc_info] and "Traceback" not in caplog.text


def signature(body: bytes, stamp: str, secret: str = SECRET) -> str:
    """Slack's signature over the raw bytes (``slack_sdk`` signs text only)."""
    return "v0=" + hmac.new(secret.encode(), f"v0:{stamp}:".encode() + body, hashlib.sha256).hexdigest()


async def test_a_replayed_signed_click_has_no_second_effect_even_after_a_withdrawal(
    endpoint: Endpoint, reports: list[Any]
) -> None:
    url, answers = endpoint
    click, stamp = block_action("U0ALICE", CHANNEL, "1.000001", "approve", AP), int(time.time())
    assert (await post_signed(url, click, SECRET, timestamp=stamp))[0] == 200
    withdraw = slash_command("U0ALICE", CHANNEL, f"withdraw {AP}")
    assert (await post_signed(url, withdraw, SECRET))[0] == 200
    assert [(await next_answer(answers)).action for _ in range(2)] == [Action.APPROVE, Action.WITHDRAW]

    for _ in range(2):  # the captured click, sent again within the window
        assert await post_signed(url, click, SECRET, timestamp=stamp) == (200, "")
    await still_works(endpoint)
    replays = reported(reports, "slack_request_replayed")
    assert len(replays) == 2 and all(r["payload_sha256"] == digest(click) for r in replays)
    assert len(reports) == 2


async def test_slacks_retry_of_a_delivered_request_has_no_second_effect(endpoint: Endpoint, reports: list[Any]) -> None:
    url, answers = endpoint
    click = block_action("U0ALICE", CHANNEL, "1.000001", "approve", AP)
    assert (await post_signed(url, click, SECRET))[0] == 200
    assert (await next_answer(answers)).chat_user == "U0ALICE"
    retry = {"X-Slack-Retry-Num": "1", "X-Slack-Retry-Reason": "http_timeout"}
    later = int(time.time()) + 1  # signed anew: only the header says it is a retry
    assert (await post_signed(url, click, SECRET, timestamp=later, headers=retry))[0] == 200
    await still_works(endpoint)
    (retried,) = reported(reports, "slack_request_replayed")
    assert retried["payload_sha256"] == digest(click) and "X-Slack-Retry-Num" in retried["detail"]


SHAPELESS = {"type": "block_actions", "user": {"id": "U0ALICE"}, "actions": "x"}
MALFORMED = {
    "payload not JSON": (b"payload=%7Bnot-json", FORM, "not JSON"),
    "JSON junk": (b'{"type": 1, ', "application/json", "not JSON"),
    "payload not an object": (b"payload=%5B1%2C2%5D", FORM, "not a JSON object"),
    "actions not a list": (urlencode({"payload": json.dumps(SHAPELESS)}).encode(), FORM, "wrong shape"),
    "payload a string": (b"payload=%22x%22", FORM, "not a JSON object"),
    "body not UTF-8": (b"payload=%7B%7D&text=\xff\xfe", FORM, "not UTF-8"),
}


@pytest.mark.parametrize("case", list(MALFORMED))
async def test_a_signed_malformed_body_gets_400_a_report_and_no_traceback(
    endpoint: Endpoint, reports: list[Any], caplog: pytest.LogCaptureFixture, case: str
) -> None:
    body, content_type, why = MALFORMED[case]
    stamp = str(int(time.time()))
    status, text = await post_signed(
        endpoint[0], body, SECRET, stamp, signature(body, stamp), content_type=content_type
    )
    assert (status, why in text) == (400, True), text
    (report,) = reported(reports, "slack_request_malformed")
    assert report["payload_sha256"] == digest(body) and why in report["detail"]
    assert no_traceback(caplog)
    await still_works(endpoint)


@pytest.mark.parametrize("case", [c for c in MALFORMED if c != "body not UTF-8"])
async def test_an_unsigned_malformed_body_gets_401_and_a_report(
    endpoint: Endpoint, reports: list[Any], caplog: pytest.LogCaptureFixture, case: str
) -> None:
    body, content_type, _ = MALFORMED[case]
    status, _ = await post_signed(endpoint[0], body, "not-the-secret", content_type=content_type)
    assert status == 401
    (report,) = reported(reports, "slack_signature_invalid")
    assert report["payload_sha256"] == digest(body)
    assert no_traceback(caplog)
    await still_works(endpoint)


@pytest.mark.parametrize(
    ("timestamp", "sent"),
    [("soon", None), ("1e9", None), ("", None), (None, "")],
    ids=["word", "float", "empty", "no signature"],
)
async def test_signature_headers_that_cannot_be_read_are_refused(
    endpoint: Endpoint, reports: list[Any], timestamp: str | None, sent: str | None
) -> None:
    click = block_action("U0ALICE", CHANNEL, "1.000001", "approve", AP)
    status, _ = await post_signed(endpoint[0], click, SECRET, timestamp, sent)
    code = "slack_signature_invalid" if sent == "" else "slack_request_malformed"
    assert status == (401 if sent == "" else 400)
    assert [r["payload_sha256"] for r in reported(reports, code)] == [digest(click)]
    await still_works(endpoint)


async def test_an_oversized_body_gets_413_and_a_report_of_its_digest(
    endpoint: Endpoint, reports: list[Any], caplog: pytest.LogCaptureFixture
) -> None:
    body = b"payload=" + b"A" * 2_000_000
    assert (await post_signed(endpoint[0], body, "not-the-secret"))[0] == 413
    (report,) = reported(reports, "slack_request_oversized")
    assert report["payload_sha256"] == digest(body) and "2000008 bytes" in report["detail"]
    assert no_traceback(caplog)
    await still_works(endpoint)


async def test_a_signed_command_under_the_limit_is_answered(endpoint: Endpoint, reports: list[Any]) -> None:
    command = slash_command("U0ALICE", CHANNEL, "approve ap-" + "a" * 900_000)
    status, text = await post_signed(endpoint[0], command, SECRET)
    assert (status, "usage: /effectgate" in text, reports) == (200, True, [])


async def test_a_request_whose_headers_cannot_be_read_gets_400_and_a_report(
    endpoint: Endpoint, reports: list[Any], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="effectgate.chatops.slack.http")
    click = block_action("U0ALICE", CHANNEL, "1.000001", "approve", AP)
    status, _ = await post_signed(endpoint[0], click, SECRET, headers={"X-Junk": "j" * 65_000})
    assert status == 400
    (report,) = reported(reports, "slack_request_malformed")
    assert report["payload_sha256"] is None and "LineTooLong" in report["detail"]
    assert no_traceback(caplog)
    await still_works(endpoint)


def test_signatures_are_remembered_until_their_timestamp_leaves_the_window_and_are_bounded() -> None:
    now = [1000.0]
    seen = SeenRequests(keep_s=360, max_entries=2, clock=lambda: now[0])
    assert [seen.remember("a", 1000), seen.remember("a", 1000), seen.remember("b", 1100)] == ["new", "seen", "new"]
    assert seen.remember("c", 1000) == "full"
    now[0] = 1360.5  # "a" is out of the window, "b" is not
    assert [seen.remember("c", 1300), seen.remember("b", 1100), len(seen)] == ["new", "seen", 2]
    now[0] = 5000.0
    assert (seen.remember("a", 4990), len(seen)) == ("new", 1)


def test_a_request_that_cannot_be_remembered_is_refused() -> None:
    body = Body(b"x", 1, digest(b"x"))
    with pytest.raises(RequestRefused) as refused:
        check_fresh(SeenRequests(max_entries=0), {"X-Slack-Signature": "v0=00"}, int(time.time()), body)
    assert (refused.value.status, refused.value.reason_code, refused.value.digest) == (
        503,
        "slack_replay_memory_full",
        digest(b"x"),
    )


def test_a_request_signed_before_the_memory_began_cannot_count() -> None:
    """After a restart the memory is empty: a request signed earlier may be a replay of a captured one."""
    now = [1000.0]
    seen = SeenRequests(keep_s=360, max_entries=10, clock=lambda: now[0])
    assert [seen.remember("old", 900), seen.remember("fresh", 1000)] == ["before", "new"]
    body = Body(b"x", 1, digest(b"x"))
    with pytest.raises(RequestRefused) as refused:
        check_fresh(seen, {"X-Slack-Signature": "v0=11"}, 950, body)
    assert (refused.value.status, refused.value.reason_code) == (200, "slack_request_before_start")
