"""The chat-ops workflow over in-memory twins: one card per approval, edits, outcomes, answers."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import msgspec
import pytest

from effectgate.chatops.answers import Action, ChatAnswer
from effectgate.chatops.domain import CardState
from effectgate.chatops.errors import ChatRefused, ChatUnavailable
from effectgate.chatops.handlers import retry_delay_s
from effectgate.chatops.service import ChatOps
from effectgate.contracts.events import ApprovalGranted, ApprovalRejected, ApprovalVoted, ReceiptIssued
from effectgate.contracts.rpc.approvals import PendingApproval
from effectgate.contracts.vocabulary import Outcome

AP = "ap-0123456789ab"


def voted(votes: tuple[str, ...]) -> ApprovalVoted:
    return ApprovalVoted(
        event_id=f"voted:{len(votes)}",
        occurred_at=_now(),
        request_id="r1",
        principal="agent-a",
        approval_id=AP,
        request_hash="sha256:ab",
        approver=votes[-1],
        votes=votes,
        approvals_required=2,
    )


def granted(*approvers: str) -> ApprovalGranted:
    return ApprovalGranted(
        event_id="granted:1",
        occurred_at=_now(),
        request_id="r1",
        principal="agent-a",
        approval_id=AP,
        request_hash="sha256:ab",
        approver=approvers[-1],
        expires_at=_now() + timedelta(minutes=5),
        approvers=approvers,
    )


def rejected(code: str, approver: str | None) -> ApprovalRejected:
    return ApprovalRejected(
        event_id=f"rejected:{code}",
        occurred_at=_now(),
        request_id="r1",
        principal="agent-a",
        approval_id=AP,
        reason_code=code,
        reason="rejected by bob: not today" if approver else "the approval expired unanswered",
        approver=approver,
    )


def receipt(request_id: str, outcome: Outcome) -> ReceiptIssued:
    return ReceiptIssued(
        event_id=f"rc-{request_id}",
        occurred_at=_now(),
        request_id=request_id,
        principal="agent-a",
        outcome=outcome,
        reason_code="ok" if outcome is Outcome.SUCCEEDED else "timeout",
        reason="",
    )


def _now() -> Any:
    from datetime import UTC, datetime

    return datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


async def test_one_card_per_approval_however_often_delivered(chatops: ChatOps, chat: Any, make_requested: Any) -> None:
    event = make_requested()
    for _ in range(3):
        await chatops.on_requested(event)
    assert [(room, card.approval_id, txn) for room, card, txn in chat.posted] == [("!ops", AP, f"card-{AP}")]


async def test_a_post_whose_answer_was_lost_is_found_not_posted_again(
    chatops: ChatOps, chat: Any, make_requested: Any
) -> None:
    chat.lose_post_answer = True
    with pytest.raises(ChatUnavailable):
        await chatops.on_requested(make_requested())
    await chatops.on_requested(make_requested())  # the redelivery
    assert len(chat.posted) == 1
    record = await chatops.cards.get(AP)
    assert record is not None and record.message_id == "$m1"


async def test_chat_down_leaves_no_card_and_the_retry_posts_it(
    chatops: ChatOps, chat: Any, make_requested: Any
) -> None:
    chat.down = True
    with pytest.raises(ChatUnavailable) as raised:
        await chatops.on_requested(make_requested())
    assert retry_delay_s(raised.value, 1) == 3.0  # chat's own Retry-After
    assert retry_delay_s(ChatUnavailable("down"), 10) == 60.0  # bounded back-off
    chat.down = False
    await chatops.on_requested(make_requested())
    assert len(chat.posted) == 1


async def test_a_role_without_a_room_gets_no_card(chatops: ChatOps, chat: Any, make_requested: Any) -> None:
    await chatops.on_requested(make_requested(approver_role="sre"))
    assert chat.posted == [] and await chatops.cards.get(AP) is None


async def test_a_refused_card_does_not_block_the_others(chatops: ChatOps, chat: Any, make_requested: Any) -> None:
    async def refuse(room: str, card: Any, txn_id: str) -> str:
        raise ChatRefused("M_FORBIDDEN: not in room")

    chat.post_card = refuse
    await chatops.on_requested(make_requested())  # no exception: the consumer goes on
    record = await chatops.cards.get(AP)
    assert record is not None and record.message_id == ""


async def test_folded_values_are_posted_whole_in_the_thread(chatops: ChatOps, chat: Any, make_requested: Any) -> None:
    body = "".join(chr(97 + i % 26) for i in range(450))
    await chatops.on_requested(make_requested(arguments={"body": body}))
    parts = [text.split(":\n", 1)[1] for _, _, text, _ in chat.thread]
    assert "".join(parts) == body
    assert [txn for *_, txn in chat.thread] == [f"fold-{AP}-1-{n}" for n in (1, 2, 3)]


async def test_a_joined_request_is_noted_once_in_the_thread(chatops: ChatOps, chat: Any, make_requested: Any) -> None:
    await chatops.on_requested(make_requested("r1"))
    await chatops.on_requested(make_requested("r2"))
    await chatops.on_requested(make_requested("r2"))
    assert len(chat.posted) == 1
    assert [text for *_, text, _ in chat.thread if "r2" in text] == [
        "the same call was sent again as request r2: it joins this approval (one effect)"
    ]
    assert await chatops.cards.approval_of_request("r2") == AP


async def test_votes_then_grant_edit_the_card_and_a_final_state_stays(
    chatops: ChatOps, chat: Any, make_requested: Any
) -> None:
    await chatops.on_requested(make_requested(approvals_required=2))
    await chatops.on_event(voted(("alice",)))
    await chatops.on_event(granted("alice", "bob"))
    await chatops.on_event(rejected("approval_expired", None))  # late: changes nothing
    await chatops.on_event(granted("alice", "bob"))  # redelivered: no second edit
    states = [(card.state, card.status_line()) for _, _, card in chat.edits]
    assert states == [
        (CardState.PENDING, "pending: 1 of 2 approvals (alice)"),
        (CardState.GRANTED, "approved by alice, bob"),
    ]


@pytest.mark.parametrize(
    ("code", "approver", "state", "line"),
    [
        ("approval_rejected", "bob", CardState.REJECTED, "rejected by bob: not today"),
        ("policy_changed", None, CardState.REJECTED, "rejected: the approval expired unanswered"),
        ("approval_expired", None, CardState.EXPIRED, "expired unanswered"),
    ],
)
async def test_rejection_and_expiry_edit_the_card(
    chatops: ChatOps, chat: Any, make_requested: Any, code: str, approver: str | None, state: CardState, line: str
) -> None:
    await chatops.on_requested(make_requested())
    await chatops.on_event(rejected(code, approver))
    ((_, message_id, card),) = chat.edits
    assert (message_id, card.state, card.status_line()) == ("$m1", state, line)
    assert not card.answerable


async def test_each_outcome_is_posted_once_and_only_for_carded_requests(
    chatops: ChatOps, chat: Any, make_requested: Any
) -> None:
    await chatops.on_requested(make_requested())
    await chatops.on_receipt(receipt("r1", Outcome.UNCERTAIN))
    await chatops.on_receipt(receipt("r1", Outcome.UNCERTAIN))
    await chatops.on_receipt(receipt("r-other", Outcome.SUCCEEDED))
    outcomes = [text for *_, text, txn in chat.thread if txn.startswith("outcome-")]
    assert len(outcomes) == 1
    assert outcomes[0].startswith("request r1: uncertain (timeout); rc-r1") and "do not re-run" in outcomes[0]


def _answer(user: str, action: Action = Action.APPROVE, **fields: Any) -> ChatAnswer:
    base: dict[str, Any] = {"platform": "matrix", "chat_user": user, "action": action, "approval_id": None}
    return ChatAnswer(**{**base, "room": "!ops", "message_id": "$m1", **fields})


async def test_a_reaction_on_a_card_answers_as_the_mapped_approver(
    chatops: ChatOps, chat: Any, approvals: Any, make_requested: Any
) -> None:
    await chatops.on_requested(make_requested())
    await chatops.on_answer(_answer("@alice:example.org"))
    await chatops.on_answer(_answer("@bob:example.org", Action.REJECT, note="too risky"))
    await chatops.on_answer(_answer("@bob:example.org", Action.WITHDRAW))
    assert approvals.decided == [
        ("alice", {"approval_id": AP, "approve": True, "note": ""}),
        ("bob", {"approval_id": AP, "approve": False, "note": "too risky"}),
        ("bob", {"approval_id": AP, "approve": False, "withdraw": True}),
    ]


async def test_an_unmapped_user_is_refused_reported_and_changes_nothing(
    chatops: ChatOps, chat: Any, approvals: Any, reports: list[Any], make_requested: Any
) -> None:
    await chatops.on_requested(make_requested())
    await chatops.on_answer(_answer("@mallory:evil.example"))
    assert approvals.decided == []
    assert "not a mapped approver" in chat.replies[0][1]
    ((kind, fields),) = reports
    assert (kind, fields["reason_code"], fields["approval_id"]) == ("approval_refused", "unmapped_chat_user", AP)


async def test_refusals_of_the_approvals_service_are_told(chatops: ChatOps, chat: Any, approvals: Any) -> None:
    approvals.reply = {"ok": False, "reason_code": "self_approval", "reason": "the operator of agent-a"}
    await chatops.on_answer(_answer("@alice:example.org", approval_id=AP, message_id=""))
    assert chat.replies[-1][1] == f"{AP}: refused (self_approval): the operator of agent-a. Nothing changed."


@pytest.mark.parametrize("approval_id", ["", "ap-XYZ", "ap-0123456789ab.>", "x" * 5000])
async def test_a_command_with_a_bad_id_is_refused_without_asking(
    chatops: ChatOps, chat: Any, approvals: Any, approval_id: str
) -> None:
    await chatops.on_answer(_answer("@alice:example.org", approval_id=approval_id, message_id=""))
    assert approvals.decided == []
    assert "not an approval id" in chat.replies[-1][1]


async def test_a_reaction_on_another_message_is_no_answer(chatops: ChatOps, chat: Any, approvals: Any) -> None:
    await chatops.on_answer(_answer("@alice:example.org", message_id="$chatter"))
    assert approvals.decided == [] and chat.replies == []


async def test_an_answer_that_fails_is_told_and_never_raises(chatops: ChatOps, chat: Any, approvals: Any) -> None:
    async def no_service(approver: str, command: dict[str, Any]) -> dict[str, Any]:
        raise TimeoutError

    approvals.decide = no_service
    await chatops.on_answer(_answer("@alice:example.org", approval_id=AP))
    assert "could not be carried out" in chat.replies[-1][1]
    chat.down = True
    await chatops.on_answer(_answer("@alice:example.org", approval_id=AP))  # cannot even tell: still no raise


async def test_resync_posts_cards_for_pending_approvals_without_one(
    chatops: ChatOps, chat: Any, approvals: Any, make_requested: Any
) -> None:
    listed = msgspec.convert(
        msgspec.to_builtins(make_requested()) | {"votes": ["bob"], "joined": ["r9"]}, PendingApproval
    )
    approvals.pending_list = [listed]
    assert await chatops.resync() == 1
    assert await chatops.resync() == 0
    ((_, card, _),) = chat.posted
    assert (card.approval_id, card.request_ids, card.votes) == (AP, ("r1", "r9"), ("bob",))
    assert card.call == "files@1.0.0.write" and card.idempotency_key == "key-1"


async def test_a_folded_value_whose_post_failed_is_posted_at_the_next_delivery(
    chatops: ChatOps, chat: Any, make_requested: Any
) -> None:
    post_in_thread = chat.post_in_thread

    async def fails_once(room: str, message_id: str, text: str, txn_id: str) -> None:
        chat.post_in_thread = post_in_thread
        raise ChatUnavailable("timeout")

    chat.post_in_thread = fails_once
    event = make_requested(arguments={"body": "b" * 100})
    with pytest.raises(ChatUnavailable):
        await chatops.on_requested(event)
    await chatops.on_requested(event)
    assert len(chat.posted) == 1
    assert [text.split(":\n", 1)[1] for *_, text, _ in chat.thread] == ["b" * 100]


async def test_an_unmapped_user_flooding_commands_gets_a_few_replies_and_every_attempt_is_reported(
    chatops: ChatOps, chat: Any, approvals: Any, reports: list[Any]
) -> None:
    for _ in range(25):
        await chatops.on_answer(_answer("@mallory:evil.example", approval_id=AP, message_id=""))
    assert len(chat.replies) == 3 and approvals.decided == []
    assert len(reports) == 25
    assert "matrix user @mallory:evil.example is not a mapped approver" in reports[0][1]["detail"]


async def test_an_answer_to_an_approval_not_open_yet_is_told_to_answer_again_and_not_reported(
    chatops: ChatOps, chat: Any, approvals: Any, reports: list[Any]
) -> None:
    approvals.reply = {"ok": False, "reason_code": "approval_not_open", "reason": f"{AP} is not open yet: answer again"}
    await chatops.on_answer(_answer("@alice:example.org", approval_id=AP, message_id=""))
    assert approvals.decided == [("alice", {"approval_id": AP, "approve": True, "note": ""})]
    said = chat.replies[-1][1]
    assert "not open yet" in said and "answer again" in said and "refused" not in said
    assert reports == []


async def test_a_resynced_card_whose_arguments_the_listing_left_out_never_shows_them_empty(
    chatops: ChatOps, chat: Any, approvals: Any, make_requested: Any
) -> None:
    listed = msgspec.convert(
        msgspec.to_builtins(make_requested(arguments={})) | {"omitted": ["arguments"], "arguments_bytes": 2_000_000},
        PendingApproval,
    )
    approvals.pending_list = [listed]
    assert await chatops.resync() == 1
    ((_, card, _),) = chat.posted
    assert "2000000 bytes" in card.arguments and f"effectgate approvals show {AP}" in card.arguments
    assert card.arguments != "{}"
