"""The chat-ops workflow over its ports: cards follow the approval events; answers go to the approvals service."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import msgspec

from effectgate.chatops.answers import ChatAnswer
from effectgate.chatops.domain import (
    APPROVAL_ID,
    Card,
    CardRecord,
    card_for,
    listed_card,
    outcome_text,
    reply_text,
    thread_parts,
    updated_card,
)
from effectgate.chatops.errors import ChatRefused, ChatUnavailable
from effectgate.chatops.folding import visible
from effectgate.chatops.ports import ApprovalsPort, CardStore, ChatPort
from effectgate.contracts.events import (
    ApprovalGranted,
    ApprovalRejected,
    ApprovalRequested,
    ApprovalVoted,
    ReceiptIssued,
)
from effectgate.contracts.security import SecurityKind
from effectgate.shared.consumer.request_log import note
from effectgate.shared.runtime.reporting import SecurityReporter

__all__ = ["ApprovalEvent", "ChatOps"]

log = logging.getLogger("effectgate.chatops")

REFUSALS_PER_MINUTE = 3
"""Refusals told to one unmapped chat user per minute; more are only reported."""

ApprovalEvent = ApprovalRequested | ApprovalVoted | ApprovalGranted | ApprovalRejected

ApproverOf = Callable[[str, str], "str | None"]
"""``approver_of(platform, chat_user)``: the approver a chat user is, or ``None``."""


@dataclass
class ChatOps:
    """The chat-ops workflow.

    Attributes:
        chat: the chat platform.
        cards: the bot's card records.
        approvals: the approvals service and the stream.
        approver_of: maps a chat user to an approver name (principal directory).
        rooms: approver role to room or channel id.
        default_room: room for a role not in ``rooms``; ``""``: no card (CLI only).
        fold_chars: argument strings longer than this are folded into the thread.
        part_chars: longest thread message, characters.
        reporter: reports refused chat answers (``approval_refused``).
    """

    chat: ChatPort
    cards: CardStore
    approvals: ApprovalsPort
    approver_of: ApproverOf
    rooms: Mapping[str, str]
    default_room: str = ""
    fold_chars: int = 200
    part_chars: int = 3000
    reporter: SecurityReporter = field(default_factory=lambda: SecurityReporter("chatops"))
    _posting: asyncio.Lock = field(default_factory=asyncio.Lock, init=False, repr=False)
    _refused: dict[str, list[float]] = field(default_factory=dict, init=False, repr=False)

    async def on_event(self, event: ApprovalEvent) -> None:
        """Bring the card of the event's approval up to date.

        Raises:
            ChatUnavailable: chat cannot take it now (the consumer retries with back-off).
        """
        if isinstance(event, ApprovalRequested):
            await self.on_requested(event)
            return
        record = await self.cards.get(event.approval_id)
        if record is None or not record.message_id:
            return  # no card (no room for the role, or refused by chat): nothing to edit
        card = updated_card(record.card, event)
        if card != record.card:
            await self.chat.edit_card(record.room, record.message_id, card)
            await self.cards.put(msgspec.structs.replace(record, card=card))
            _note_card("updated", card, event.request_id, record.room)

    async def on_requested(self, event: ApprovalRequested) -> None:
        """Post the approval's card once; note a request that joined an approval already carded.

        Raises:
            ChatUnavailable: chat cannot take it now.
        """
        async with self._posting:  # the consumer and the re-sync never post the same card at once
            await self._ensure(card_for(event, self.fold_chars), event.approver_role, event.request_id)

    async def _ensure(self, card: Card, role: str, request_id: str) -> None:
        """Post ``card`` unless its approval has one; finish what a failed earlier attempt left."""
        record = await self.cards.get(card.approval_id)
        if record is None:
            room = self.rooms.get(role, self.default_room)
            if not room:
                log.warning("no room for role %r: %s has no card", role, card.approval_id)
                return
            record = CardRecord(card=card, room=room)
            await self.cards.put(record)  # before posting: a lost answer is found again by find_card
        if not record.message_id:
            record = await self._post(record)
        elif record.card.folded and not record.folded_posted:
            await self._post_folded(record)  # the card went out, a folded value did not
        if record.message_id and request_id not in record.card.request_ids:
            await self._joined(record, request_id)

    async def _post(self, record: CardRecord) -> CardRecord:
        card = record.card
        try:
            found = await self.chat.find_card(record.room, card.approval_id)
            message_id = found or await self.chat.post_card(record.room, card, f"card-{card.approval_id}")
        except ChatRefused as refused:
            log.error("chat refused the card of %s in %s: %s", card.approval_id, record.room, refused.reason)
            record = msgspec.structs.replace(record, refused=refused.reason)
            await self.cards.put(record)
            return record
        record = msgspec.structs.replace(record, message_id=message_id)
        await self.cards.put(record)
        await self._post_folded(record)
        _note_card("posted", card, card.request_ids[0] if card.request_ids else None, record.room)
        return record

    async def _post_folded(self, record: CardRecord) -> None:
        card = record.card
        for folded in card.folded:
            parts = thread_parts(folded.text, self.part_chars)
            for number, part in enumerate(parts, 1):
                where = folded.pointer or "all arguments"
                head = f"folded {folded.number} ({where}), part {number} of {len(parts)}:\n"
                txn = f"fold-{card.approval_id}-{folded.number}-{number}"
                await self.chat.post_in_thread(record.room, record.message_id, head + part, txn)
        if card.folded:
            await self.cards.put(msgspec.structs.replace(record, folded_posted=True))

    async def _joined(self, record: CardRecord, request_id: str) -> None:
        text = f"the same call was sent again as request {request_id}: it joins this approval (one effect)"
        await self.chat.post_in_thread(record.room, record.message_id, text, f"join-{request_id}")
        card = msgspec.structs.replace(record.card, request_ids=(*record.card.request_ids, request_id))
        await self.cards.put(msgspec.structs.replace(record, card=card))
        _note_card("joined", card, request_id, record.room)

    async def on_receipt(self, receipt: ReceiptIssued) -> None:
        """Post the receipt's outcome in the thread of its request's card, once.

        Raises:
            ChatUnavailable: chat cannot take it now, or the card is not posted yet.
        """
        approval_id = await self.cards.approval_of_request(receipt.request_id)
        record = await self.cards.get(approval_id) if approval_id else None
        if record is None or record.refused or receipt.request_id in record.outcomes:
            return
        if not record.message_id:  # the card is still being posted (chat down): the outcome waits for it
            raise ChatUnavailable(f"the card of {record.card.approval_id} is not posted yet")
        txn = f"outcome-{receipt.request_id}"
        await self.chat.post_in_thread(record.room, record.message_id, outcome_text(receipt), txn)
        await self.cards.put(msgspec.structs.replace(record, outcomes=(*record.outcomes, receipt.request_id)))
        _note_card("outcome", record.card, receipt.request_id, record.room, outcome=receipt.outcome)

    async def on_answer(self, answer: ChatAnswer) -> None:
        """Carry out one answer given in chat; every refusal is told to the approver. Never raises."""
        try:
            await self._answer(answer)
        except Exception:  # the receive loop must go on; the approver is told
            log.exception("answer from %s could not be carried out", answer.chat_user)
            await self._tell(answer, "your answer could not be carried out; try again, or use the CLI")

    async def _answer(self, answer: ChatAnswer) -> None:
        approver = self.approver_of(answer.platform, answer.chat_user)
        approval_id = answer.approval_id
        if approval_id is None:  # a reaction or a click: the card it was given on says which
            approval_id = await self.cards.approval_of_message(answer.room, answer.message_id)
        if approval_id is None:
            return  # a reaction on a message that is no card: not an answer
        if approver is None:
            who = visible(answer.chat_user)[:200]
            self._report(
                answer, approval_id, "unmapped_chat_user", f"{answer.platform} user {who} is not a mapped approver"
            )
            if self._may_tell(answer.chat_user):
                await self._tell(answer, f"{who} is not a mapped approver: nothing changed")
            return
        if not APPROVAL_ID.match(approval_id):
            await self._tell(answer, "that is not an approval id (ap- and 12 hex digits): nothing changed")
            return
        command: dict[str, object] = {"approval_id": approval_id, "approve": answer.action == "approve"}
        command |= {"withdraw": True} if answer.action == "withdraw" else {"note": answer.note}
        reply = await self.approvals.decide(approver, command)
        await self._tell(answer, reply_text(approver, approval_id, reply))

    def _may_tell(self, chat_user: str) -> bool:
        """At most :data:`REFUSALS_PER_MINUTE` refusals per minute to one unmapped chat user (no room flooding)."""
        now = time.monotonic()
        recent = [t for t in self._refused.get(chat_user, ()) if now - t < 60.0]
        self._refused[chat_user] = (recent + [now])[-REFUSALS_PER_MINUTE:]
        if len(self._refused) > 10_000:  # bounded memory under a flood of made-up users
            self._refused = {chat_user: self._refused[chat_user]}
        return len(recent) < REFUSALS_PER_MINUTE

    async def _tell(self, answer: ChatAnswer, text: str) -> None:
        try:
            await self.chat.reply(answer, text)
        except Exception:  # chat is down: the approver sees the card unchanged
            log.warning("could not reply to %s: %s", answer.chat_user, text)

    def _report(self, answer: ChatAnswer, approval_id: str, code: str, detail: str) -> None:
        self.reporter.report(
            SecurityKind.APPROVAL_REFUSED,
            actor=f"{answer.platform}:{answer.chat_user}",
            approval_id=approval_id,
            reason_code=code,
            detail=detail,
        )

    async def resync(self) -> int:
        """Post a card for every pending approval that has none (a refused or lost post, a cleared bucket).

        The cards are built from the approvals service's own answer to ``tg.approvals.list``
        (its record, votes and joined requests included), never from the stream.

        Returns:
            How many cards were posted.

        Raises:
            ChatUnavailable: chat cannot take it now (resync runs again at the next start).
        """
        posted = 0
        for listed in await self.approvals.pending():
            record = await self.cards.get(listed.approval_id)
            if record is not None and record.message_id:
                continue
            async with self._posting:
                await self._ensure(listed_card(listed, self.fold_chars), listed.approver_role, listed.request_id)
            posted += 1
        return posted


def _note_card(card_state: str, card: Card, request_id: str | None, room: str, outcome: str | None = None) -> None:
    """The request line (:mod:`effectgate.shared.consumer.request_log`): what was done to the card in chat."""
    note(
        "card",
        request_id=request_id,
        principal=card.principal,
        approval_id=card.approval_id,
        card=card_state,
        outcome=outcome,
        room=room,
    )
