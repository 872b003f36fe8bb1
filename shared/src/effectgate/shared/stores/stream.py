"""Publishing events on JetStream with deduplication, and reading them back.

Events on a per-request subject (decisions, approvals, receipts) are published with ``Nats-
Expected-Last-Subject-Sequence: 0``: the subject takes its first message only, forever, so a
redelivered handler's re-publish is refused and a request can never get a second decision or
receipt ("infinite deduplication", NATS docs on JetStream headers).
"""

from __future__ import annotations

import logging
from typing import Any

import msgspec
import nats.errors
from nats.aio.client import Client
from nats.js import JetStreamContext
from nats.js.api import PubAck, RawStreamMsg
from nats.js.errors import APIError, NotFoundError

from effectgate.contracts.bus import catalog
from effectgate.contracts.bus.catalog import Rpc
from effectgate.contracts.errors import Problem
from effectgate.contracts.events import AnyEvent, decode_event, encode
from effectgate.contracts.rpc.recheck import RecheckAnswer, RecheckQuery
from effectgate.shared.runtime.metrics import record_published
from effectgate.shared.runtime.tracing import carried

__all__ = ["AlreadyPublished", "fetch_last", "next_message", "publish_event", "publish_once", "request_recheck"]

log = logging.getLogger("effectgate")
_answer = msgspec.json.Decoder(RecheckAnswer)

WRONG_LAST_SEQUENCE = 10071
"""JetStream API error code of a failed ``Nats-Expected-Last-Subject-Sequence`` check."""


class AlreadyPublished(Problem):
    """The subject already holds a message: the event was published before."""


async def publish_event(
    js: JetStreamContext,
    subject: str,
    event: Any,
    *,
    first_on_subject: bool = False,
    after_seq: int = 0,
    timeout_s: float = 5.0,
) -> PubAck:
    """Publish ``event`` to the stream, deduplicated by its ``event_id``.

    Args:
        js: JetStream context.
        subject: a subject of :data:`catalog.STREAM`.
        event: a msgspec event with an ``event_id``.
        first_on_subject: require that nothing was ever published on ``subject``
            (and skip ``Nats-Msg-Id``); with ``after_seq``, that the subject's last message
            is the one at stream sequence ``after_seq``.
        after_seq: see ``first_on_subject`` (``Nats-Expected-Last-Subject-Sequence``).
        timeout_s: PubAck wait, seconds.

    Raises:
        AlreadyPublished: ``first_on_subject`` and the subject holds another message than expected.
        nats.errors.TimeoutError / nats.js.errors.APIError: the stream did not store it.
    """
    once = {"Nats-Expected-Last-Subject-Sequence": str(after_seq)}
    headers = carried(once if first_on_subject else {"Nats-Msg-Id": event.event_id})
    try:
        ack = await js.publish(subject, encode(event), timeout=timeout_s, stream=catalog.STREAM, headers=headers)
    except APIError as error:
        if error.err_code == WRONG_LAST_SEQUENCE:
            raise AlreadyPublished(subject) from error
        raise
    record_published(event)
    return ack


async def publish_once(js: JetStreamContext, subject: str, event: Any, after_seq: int = 0) -> bool:
    """Publish ``event`` as the only message ``subject`` will ever hold (after ``after_seq``, when given).

    Returns:
        ``True`` when stored now, ``False`` when the subject already held a message
        (a redelivered handler publishing again).

    Raises:
        nats.errors.TimeoutError / nats.js.errors.APIError: the stream did not answer.
    """
    try:
        await publish_event(js, subject, event, first_on_subject=True, after_seq=after_seq)
    except AlreadyPublished:
        return False
    return True


async def fetch_last(js: JetStreamContext, subject: str) -> AnyEvent | None:
    """Return the last event stored on ``subject``, or ``None`` when there is none.

    Uses JetStream direct get (``$JS.API.DIRECT.GET.<stream>.<subject>``), whose
    subject-in-the-API-subject form lets NATS permissions limit a client to its own subjects.

    Raises:
        msgspec.ValidationError / msgspec.DecodeError: the stored message is not an event.
    """
    try:
        message = await js.get_last_msg(catalog.STREAM, subject, direct=True)
    except NotFoundError:
        return None
    return decode_event(message.data or b"")


async def next_message(js: JetStreamContext, subject: str, seq: int = 1) -> RawStreamMsg | None:
    """The first message on ``subject`` (wildcards allowed) at or after stream sequence ``seq``, or ``None``.

    ``$JS.API.STREAM.MSG.GET`` with ``next_by_subj``: from ``seq=1`` it reads the *first*
    message of a subject, which for a first-on-subject event is the only one that counts.

    Raises:
        nats.errors.Error: the stream could not be read.
    """
    try:
        message: RawStreamMsg = await js.get_msg(catalog.STREAM, seq=seq, subject=subject, next=True)
    except NotFoundError:
        return None
    return message


async def request_recheck(nc: Client, query: RecheckQuery, timeout_s: float) -> RecheckAnswer | None:
    """Ask the policy service to re-check ``query`` (``tg.policy.recheck``); ``None`` without an answer.

    The answer is returned as received: the caller verifies it (``recheck.valid_answer``).
    """
    try:
        reply = await nc.request(Rpc.POLICY_RECHECK, msgspec.json.encode(query), timeout_s)
        return _answer.decode(reply.data)
    except (nats.errors.Error, msgspec.DecodeError) as error:
        log.warning("policy re-check failed: %s", type(error).__name__)
        return None
