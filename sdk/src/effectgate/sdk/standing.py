"""Where a call stands: its stored decision, and withdrawing it while it awaits approval."""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import TypeVar

import msgspec
import nats
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from nats.aio.client import Client

from effectgate.contracts.approval_ids import approval_id_for
from effectgate.contracts.bus import catalog
from effectgate.contracts.bus.catalog import Rpc, Subjects
from effectgate.contracts.events import DecisionMade, decode_untrusted
from effectgate.contracts.integrity.signing import load_public_key, verify_body
from effectgate.contracts.rpc.approvals import ApprovalStatus, WithdrawReply
from effectgate.sdk.errors import ApprovalsNoAnswer
from effectgate.sdk.records import RecordReader

__all__ = ["DecisionVerifier", "Standing", "approval_status", "stored_decision", "withdraw"]

T = TypeVar("T")
log = logging.getLogger("effectgate.sdk")

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
        """The verifier of ``<public_keys>/policy.pub`` (default ``$EFFECTGATE_PUBLIC_KEYS_DIR``), if it is there.

        Raises:
            ValueError: ``policy.pub`` is not a base64 Ed25519 public key.
        """
        directory = public_keys or (Path(found) if (found := os.environ.get("EFFECTGATE_PUBLIC_KEYS_DIR")) else None)
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


async def stored_decision(records: RecordReader, request_id: str, verifier: DecisionVerifier) -> DecisionMade | None:
    """The decision stored for ``records.principal``'s ``request_id``, or ``None`` (none yet, unknown, unbelievable).

    A request id that is not one subject token has no decision subject: ``None``.

    Raises:
        RecordsNoAnswer: the executor did not read it back now (a ``nats.errors.TimeoutError``).
    """
    if not catalog.TOKEN.match(request_id):
        return None
    stored = await records.read(Subjects.decision(records.principal, request_id))
    return None if stored is None else verifier.verified(stored, records.principal, request_id)


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


class Standing:
    """Where a client's calls stand: the methods of :class:`~effectgate.sdk.ToolClient` over this module.

    Attributes:
        principal: whose calls.
    """

    principal: str
    _nc: Client
    _records: RecordReader
    _decisions: DecisionVerifier

    def approval_id(self, request_id: str) -> str:
        """The id ``ap-<12 hex>`` of the approval ``request_id`` opens when it needs one.

        A request that joined another pending approval of the same call (same idempotency
        key and arguments) is answered by that approval instead; an answer given on this id
        still reaches it. :meth:`approval` names the approval the request waits on, and the
        receipt names it too (``approval_id``).
        """
        return approval_id_for(self.principal, request_id)

    async def approval(self, request_id: str, timeout_s: float = 5.0) -> ApprovalStatus:
        """The approval ``request_id`` waits on (or waited on), as the approvals service holds it.

        Returns:
            ``ok`` with its state, ``approval_id`` (its own, or the one it ``joined``), votes and
            quorum; else why not (:class:`~effectgate.contracts.rpc.approvals.StatusCode`).

        Raises:
            ApprovalsNoAnswer: no answer within ``timeout_s`` seconds.
        """
        return await approval_status(self._nc, self.principal, request_id, timeout_s)

    async def decision(self, request_id: str) -> DecisionMade | None:
        """The policy's decision on ``request_id`` of this principal, as stored (read back by the executor).

        Returns:
            The decision (``verdict`` ``needs_approval``: the call waits for
            :meth:`approval_id`), or ``None``: not decided yet, unknown, or not signed by the
            policy's key (when ``policy.pub`` is in the public keys directory).

        Raises:
            RecordsNoAnswer: the executor did not answer in time, or could not read the stream now.
        """
        return await stored_decision(self._records, request_id, self._decisions)

    async def withdraw(self, request_id: str, timeout_s: float = 5.0) -> WithdrawReply:
        """Withdraw ``request_id`` while its approval is pending: it then ends ``denied`` (``withdrawn``).

        Returns:
            ``ok`` with ``withdrawn`` (its receipt follows), else why not
            (:class:`~effectgate.contracts.rpc.approvals.WithdrawCode`; a running call is not interrupted).

        Raises:
            ApprovalsNoAnswer: no answer within ``timeout_s`` seconds.
        """
        return await withdraw(self._nc, self.principal, request_id, timeout_s)
