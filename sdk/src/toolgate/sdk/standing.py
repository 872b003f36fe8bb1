"""Where a call stands: its stored decision, and withdrawing it while it awaits approval.

- :func:`stored_decision` reads the decision of one of the principal's requests from the
  stream by direct get of ``tg.decision.<principal>.<request_id>`` (NATS lets agent ``<p>``
  read only ``tg.decision.<p>.*``). The policy publishes a decision subject's first and only
  message (``Nats-Expected-Last-Subject-Sequence: 0``), so the subject's last message is
  the decision. It is believed when the policy's key signed it (``policy.pub`` in the public
  keys directory; verified over the fields as sent, as receipts are) and it is about this
  principal's request; anything else reads as no decision.
- :func:`withdraw` asks the approvals service, on ``tg.approvals.withdraw.<principal>``, to
  end the request's pending approval (the principal is the subject token, never the body).
- :func:`approval_status` asks it, on ``tg.approvals.status.<principal>``, which approval
  the request waits on (its own, or the one it joined) and where that stands.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import TypeVar

import msgspec
import nats
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from nats.aio.client import Client
from nats.js import JetStreamContext

from toolgate.contracts import catalog
from toolgate.contracts.catalog import Rpc, Subjects
from toolgate.contracts.events import DecisionMade, decode_untrusted
from toolgate.contracts.rpc.approvals import ApprovalStatus, WithdrawReply
from toolgate.contracts.signing import load_public_key, verify_body
from toolgate.sdk.errors import ApprovalsNoAnswer

__all__ = ["DecisionVerifier", "approval_status", "stored_decision", "withdraw"]

T = TypeVar("T")
log = logging.getLogger("toolgate.sdk")

_decision = msgspec.json.Decoder(DecisionMade)
_withdrawn = msgspec.json.Decoder(WithdrawReply)
_status = msgspec.json.Decoder(ApprovalStatus)


class DecisionVerifier:
    """Turns a stored message into a decision the policy's key signed, or nothing.

    Args:
        key: the policy's ``policy.pub``; ``None`` believes every well-formed decision
            about the principal's request (no key in the public keys directory; logged).
    """

    def __init__(self, key: Ed25519PublicKey | None) -> None:
        self._key = key

    @classmethod
    def from_directory(cls, public_keys: Path | None) -> DecisionVerifier:
        """The verifier of ``<public_keys>/policy.pub`` (default ``$TOOLGATE_PUBLIC_KEYS_DIR``), if it is there.

        Raises:
            ValueError: ``policy.pub`` is not a base64 Ed25519 public key.
        """
        directory = public_keys or (Path(found) if (found := os.environ.get("TOOLGATE_PUBLIC_KEYS_DIR")) else None)
        if directory is not None and (directory / "policy.pub").exists():
            return cls(load_public_key(directory / "policy.pub"))
        log.warning("stored decisions are NOT verified: no policy.pub in the public keys directory")
        return cls(None)

    def verified(self, data: bytes, principal: str, request_id: str) -> DecisionMade | None:
        """The decision in ``data`` when it is one about ``principal``'s ``request_id`` and verifies; else ``None``."""
        try:
            body, decision = msgspec.json.decode(data), decode_untrusted(_decision, data)
        except msgspec.DecodeError:
            return None
        if (decision.principal, decision.request_id) != (principal, request_id):
            return None
        if self._key is None or (isinstance(body, dict) and verify_body(body, self._key)):
            return decision
        log.warning("decision for %s ignored: not signed by the policy's key", request_id)
        return None


async def stored_decision(
    js: JetStreamContext, principal: str, request_id: str, verifier: DecisionVerifier
) -> DecisionMade | None:
    """The decision stored for ``principal``'s ``request_id``, or ``None`` (none yet, unknown, unbelievable).

    A request id that is not one subject token has no decision subject: ``None``.

    Raises:
        nats.errors.TimeoutError: the stream did not answer.
    """
    if not catalog.TOKEN.match(request_id):
        return None
    try:
        stored = await js.get_last_msg(catalog.STREAM, Subjects.decision(principal, request_id), direct=True)
    except nats.js.errors.NotFoundError:
        return None
    return verifier.verified(stored.data or b"", principal, request_id)


async def withdraw(nc: Client, principal: str, request_id: str, timeout_s: float) -> WithdrawReply:
    """Ask the approvals service to withdraw ``principal``'s pending ``request_id``; its answer.

    Raises:
        ApprovalsNoAnswer: no answer within ``timeout_s`` seconds (nobody listening, or the
            publish refused by the server's permissions), or an answer that is not a withdraw reply.
    """
    return await _ask(nc, Rpc.approvals_withdraw(principal), request_id, timeout_s, _withdrawn)


async def approval_status(nc: Client, principal: str, request_id: str, timeout_s: float) -> ApprovalStatus:
    """Ask the approvals service which approval ``principal``'s ``request_id`` waits on; its answer.

    Raises:
        ApprovalsNoAnswer: as :func:`withdraw`.
    """
    return await _ask(nc, Rpc.approvals_status(principal), request_id, timeout_s, _status)


async def _ask(nc: Client, subject: str, request_id: str, timeout_s: float, decoder: msgspec.json.Decoder[T]) -> T:
    try:
        reply = await nc.request(subject, msgspec.json.encode({"request_id": request_id}), timeout=timeout_s)
        return decode_untrusted(decoder, reply.data)
    except (nats.errors.TimeoutError, nats.errors.NoRespondersError) as error:
        raise ApprovalsNoAnswer(f"no answer on {subject} within {timeout_s:g} s: {error!r}") from None
    except msgspec.DecodeError as error:
        raise ApprovalsNoAnswer(f"the answer on {subject} is not the approvals service's reply: {error}") from None
