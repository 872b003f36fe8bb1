"""The copy of a decision that needs approval, on ``tg.needs_approval.<p>.<rid>``: what the approvals service consumes.

The copy is the request's *first* decision (the one the executor goes by), signed as it is, and
only when that decision is genuine (signed by the policy key), names the request its subject
names and needs approval.
"""

from __future__ import annotations

import logging
from typing import Any

import msgspec
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from nats.js import JetStreamContext

from effectgate.contracts.bus.catalog import Subjects
from effectgate.contracts.events import DecisionMade, decode_event
from effectgate.contracts.integrity.signing import signed_by
from effectgate.contracts.vocabulary import Verdict
from effectgate.policy.adapters.stream import MAX_EVENTS_PER_SUBJECT
from effectgate.shared.stores.stream import next_message, publish_once

__all__ = ["ask_for_approval"]

log = logging.getLogger("effectgate.policy")


async def ask_for_approval(js: JetStreamContext, decision: DecisionMade, stored: bool, key: Ed25519PublicKey) -> None:
    """Copy the request's first decision to ``tg.needs_approval.<p>.<rid>`` when it needs approval.

    Args:
        js: the JetStream context.
        decision: the signed decision just published on the request's decision subject.
        stored: whether it was stored there; when not (a redelivered request, decided
            before) the decision stored first is read and copied instead, so the approvals
            service sees the decision the executor goes by, also when the policy stopped
            between publishing a decision and its copy.
        key: the policy's public key (only a genuine decision is copied).

    Raises:
        nats.errors.Error: the stream could not be read or did not store the copy.
        RuntimeError: the copy's subject still held only junk after
            ``MAX_EVENTS_PER_SUBJECT`` attempts.
    """
    first: Any = decision if stored else await _first_decision(js, decision, key)
    if isinstance(first, DecisionMade) and first.verdict is Verdict.NEEDS_APPROVAL:
        await _copy(js, first, key)


async def _first_decision(js: JetStreamContext, decision: DecisionMade, key: Ed25519PublicKey) -> DecisionMade | None:
    """The genuine decision stored first on the request's subject, ``None`` when the first is junk or another's."""
    message = await next_message(js, Subjects.decision(decision.principal, decision.request_id))
    data = message.data if message is not None else None
    return _genuine(data, decision.principal, decision.request_id, key)


async def _copy(js: JetStreamContext, decision: DecisionMade, key: Ed25519PublicKey) -> None:
    """Publish ``decision`` on its copy subject, after any junk there; nothing when a genuine copy is stored."""
    subject, after = Subjects.needs_approval(decision.principal, decision.request_id), 0
    for _ in range(MAX_EVENTS_PER_SUBJECT):
        if await publish_once(js, subject, decision, after_seq=after):
            return
        found, after = await _copy_on(js, subject, decision, key)
        if found:
            return
        log.error("%s holds only messages that are not real: publishing after them", subject)
    raise RuntimeError(f"{subject}: not published after {MAX_EVENTS_PER_SUBJECT} attempts")


async def _copy_on(
    js: JetStreamContext, subject: str, decision: DecisionMade, key: Ed25519PublicKey
) -> tuple[bool, int]:
    """Whether ``subject`` holds a genuine copy of ``decision``'s request, and its last stream sequence."""
    seq, last = 1, 0
    for _ in range(MAX_EVENTS_PER_SUBJECT):
        message = await next_message(js, subject, seq)
        if message is None:
            break
        if _genuine(message.data, decision.principal, decision.request_id, key) is not None:
            return True, message.seq or 0
        last = seq = message.seq or 0
        seq += 1
    return False, last


def _genuine(data: bytes | None, principal: str, request_id: str, key: Ed25519PublicKey) -> DecisionMade | None:
    """The decision ``data`` holds when it is signed by ``key`` and about ``principal``/``request_id``."""
    try:
        event = decode_event(data or b"")
    except msgspec.DecodeError:
        return None
    if not isinstance(event, DecisionMade) or (event.principal, event.request_id) != (principal, request_id):
        return None
    return event if signed_by(data, key) else None
