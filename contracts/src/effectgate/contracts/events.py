"""Wire events: frozen, tagged msgspec Structs, JSON on the wire.

Each event type has exactly one subject pattern (see :mod:`effectgate.contracts.bus.catalog`).
Events evolve only by adding fields with defaults; a breaking change is a new tag
with a ``.v2`` suffix. The requesting principal of a :class:`ToolRequested` is never
in its body: it is the subject token the transport authorised.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal, TypeVar

import msgspec

from effectgate.contracts.integrity.canonical import sha256_hex
from effectgate.contracts.security import SecurityKind
from effectgate.contracts.tools.contents import ContentState
from effectgate.contracts.tools.tool_states import ToolState
from effectgate.contracts.vocabulary import Outcome, RiskTier, SideEffectClass, Verdict

__all__ = [
    "AnyEvent",
    "ApprovalGranted",
    "ApprovalRejected",
    "ApprovalRequested",
    "ApprovalVoted",
    "BoundRequest",
    "DecisionMade",
    "EffectClaimed",
    "Event",
    "PolicyPublished",
    "ReceiptIssued",
    "Resolution",
    "ResultRef",
    "SecurityEvent",
    "ToolPublished",
    "ToolRequested",
    "ToolStateChanged",
    "UncertainResolved",
    "decode_event",
    "decode_untrusted",
    "encode",
    "request_hash",
    "request_identity",
]


class Event(msgspec.Struct, frozen=True, kw_only=True, tag_field="type"):
    """Base of every event.

    Attributes:
        event_id: unique id of this event; doubles as the ``Nats-Msg-Id`` header.
        occurred_at: when the producer created the event, UTC.
    """

    event_id: str
    occurred_at: datetime


class ToolRequested(Event, frozen=True, kw_only=True, tag="tool.requested", forbid_unknown_fields=True):
    """An agent asks for one tool call. Published on ``tg.req.<principal>``.

    Attributes:
        request_id: the agent's id for this request, ``[A-Za-z0-9_-]{1,64}``.
        tool: tool name.
        version: exact semantic version, or ``None`` for the latest.
        operation: operation name of the tool.
        arguments: JSON object validated against the operation's input schema.
        idempotency_key: the agent's key; the same key with the same arguments
            replays the stored receipt, with other arguments is refused.
    """

    request_id: str
    tool: str
    operation: str
    arguments: dict[str, Any]
    idempotency_key: str
    version: str | None = None


class BoundRequest(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Exactly what would run: the content an approval and a decision bind to."""

    principal: str
    tool: str
    version: str
    descriptor_digest: str
    operation: str
    arguments: dict[str, Any]


def request_hash(bound: BoundRequest) -> str:
    """Return ``sha256:<hex>`` of the RFC 8785 canonical JSON of ``bound``."""
    return sha256_hex(msgspec.to_builtins(bound))


class DecisionMade(Event, frozen=True, kw_only=True, tag="decision.made"):
    """The policy service's decision. Signed by the policy key.

    Attributes:
        request_id: id of the decided request.
        principal: principal taken from the request's subject.
        verdict: execute, needs_approval, deny or refuse.
        reason_code: machine-readable reason, e.g. ``schema_invalid``.
        reason: human-readable reason.
        idempotency_key: the request's key, when it could be read.
        request: the resolved call, when the tool was resolved.
        request_hash: :func:`request_hash` of ``request``.
        side_effect_class: of the resolved operation.
        approver_role: role entitled to approve (``needs_approval`` only).
        timeout_s: the descriptor's per-call timeout, seconds.
        version_pinned: the request named its version (``False``: it asked for the
            latest, so a newer version published before the call runs supersedes it).
        hidden_reason_code: set when the policy hides the tool or operation from the
            principal: ``reason_code``/``reason`` (what the agent's receipt says) are then
            exactly those of a tool or operation that does not exist, and this field and
            ``hidden_reason`` keep what the policy said (e.g. ``no_permit``) for the audit.
        hidden_reason: the policy's own reason, with ``hidden_reason_code``.
        retry_after_s: for a ``rate_limited`` denial, seconds until the call would fit
            the rate again; else ``None``.
        risk_tier: of the resolved tool, when it was resolved.
        policy_id: the ``@id`` of the policy that asked for approval (``needs_approval``
            only; several are joined with ``", "``).
        approvals_required: distinct entitled approvers who must approve
            (``needs_approval`` only; the policy's ``@approvals_required``, default 1).
        policy_version: the version (``sha256:<hex>`` of its text) of the policy in force
            when the decision was made; ``None`` when none was.
        policy_verdict: what the policy itself said about the call, before idempotent
            replays and admission (rate limits) had their say: ``deny`` for a call the
            policy hides, ``refuse`` for an argument it cannot be given
            (``argument_untypable``), else Cedar's verdict; ``None`` when the request ended
            before the policy was asked (malformed, unknown tool, invalid arguments, …).
            ``effectgate policy simulate`` compares a candidate policy against it.
        entities_digest: ``sha256:<hex>`` of the principal directory and attributes the
            policy was evaluated over (``effectgate.policy.cedar.entities.entities_digest``), with
            ``policy_version``; ``None`` when no policy was in force, or from a policy
            service older than this field. ``effectgate policy explain`` says when the files
            it reads give another digest.
        signature: base64 Ed25519 signature over the canonical event without it.
    """

    request_id: str
    principal: str
    verdict: Verdict
    reason_code: str
    reason: str
    idempotency_key: str | None = None
    request: BoundRequest | None = None
    request_hash: str | None = None
    side_effect_class: SideEffectClass | None = None
    approver_role: str | None = None
    timeout_s: float | None = None
    version_pinned: bool = False
    hidden_reason_code: str | None = None
    hidden_reason: str | None = None
    retry_after_s: float | None = None
    risk_tier: RiskTier | None = None
    policy_id: str | None = None
    approvals_required: int = 1
    policy_version: str | None = None
    policy_verdict: Verdict | None = None
    entities_digest: str | None = None
    signature: str = ""


class Related(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Another approval or call for the same request hash (shown so nobody grants a second effect).

    Attributes:
        approval_id: the other approval.
        request_id: its request.
        state: ``pending``, ``granted``, ``rejected`` or ``expired``.
        same_key: it was sent under the same idempotency key (approving again runs nothing new).
        receipt_id: the event id of its receipt, once it has one.
        outcome: the receipt's outcome, once it has one.
    """

    approval_id: str
    request_id: str
    state: str
    same_key: bool
    receipt_id: str | None = None
    outcome: str | None = None


class ApprovalRequested(Event, frozen=True, kw_only=True, tag="approval.requested"):
    """A pending approval was opened for a ``needs_approval`` decision.

    Carries everything the approval needs, so a lost approval store is rebuilt from it;
    ``version_pinned``, ``idempotency_key``, ``side_effect_class``, ``risk_tier``,
    ``policy_id`` and ``approvals_required`` as on the decision.

    Attributes:
        approvers: the approvers entitled to answer (role holders, minus the requester
            and its operator), for chat mentions.
        related: other approvals with the same request hash when this one opened.
        contents: what each declared file reference of the call named when the approval
            opened, as the executor read it (:mod:`effectgate.contracts.tools.contents`); ``()``
            when the call names no file.
        signature: base64 Ed25519 signature by the approvals key (the chat-ops bot shows
            only a signed card).
    """

    request_id: str
    principal: str
    approval_id: str
    request_hash: str
    approver_role: str
    expires_at: datetime
    request: BoundRequest
    version_pinned: bool = False
    idempotency_key: str | None = None
    side_effect_class: SideEffectClass | None = None
    risk_tier: RiskTier | None = None
    policy_id: str | None = None
    approvals_required: int = 1
    approvers: tuple[str, ...] = ()
    related: tuple[Related, ...] = ()
    contents: tuple[ContentState, ...] = ()
    signature: str = ""


class ApprovalVoted(Event, frozen=True, kw_only=True, tag="approval.voted"):
    """One entitled approver approved (or withdrew a vote) and the quorum is not yet met.

    Published on ``tg.approval.voted.<principal>.<request_id>`` for the audit and the
    chat cards; grants nothing (the executor ignores it). Signed by the approvals key.

    Attributes:
        approver: who voted.
        withdrawn: the approver withdrew an earlier vote.
        votes: every approver whose vote counts now, in vote order.
        approvals_required: the quorum.
    """

    request_id: str
    principal: str
    approval_id: str
    request_hash: str
    approver: str
    withdrawn: bool = False
    votes: tuple[str, ...] = ()
    approvals_required: int = 1
    signature: str = ""


class ApprovalGranted(Event, frozen=True, kw_only=True, tag="approval.granted"):
    """An entitled approver granted one pending approval. Signed by the approvals key.

    Attributes:
        contents: the approval's ``contents`` (:class:`ApprovalRequested`): what the file
            references named when it opened; the executor reads them again right before the
            effect and refuses ``content_changed`` on any difference.
    """

    request_id: str
    principal: str
    approval_id: str
    request_hash: str
    approver: str
    expires_at: datetime
    approvers: tuple[str, ...] = ()
    contents: tuple[ContentState, ...] = ()
    signature: str = ""


class ApprovalRejected(Event, frozen=True, kw_only=True, tag="approval.rejected"):
    """A pending approval ended without a grant (rejected or expired). Signed."""

    request_id: str
    principal: str
    approval_id: str
    reason_code: str
    reason: str
    approver: str | None = None
    signature: str = ""


class ResultRef(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Where a result too large for one message is kept (in :data:`catalog.RESULTS_STREAM`).

    The result's JSON is gzip-compressed (RFC 1952) and cut into ``chunks`` messages on
    ``<subject_prefix>.0`` … ``<subject_prefix>.<chunks - 1>``.

    Attributes:
        subject_prefix: ``tg.result.<principal>.<request id of the run>``.
        chunks: number of chunk messages.
        size_bytes: length of the result's JSON, uncompressed.
        stored_bytes: total length of the compressed chunks.
        sha256: ``sha256:<hex>`` of the uncompressed JSON bytes.
        encoding: ``gzip``.
    """

    subject_prefix: str
    chunks: int
    size_bytes: int
    stored_bytes: int
    sha256: str
    encoding: str = "gzip"


Resolution = Literal["ran", "not_run", "unknown"]
"""What became of an ``uncertain`` call: its effect happened, did not, or is still unknown."""


class ReceiptIssued(Event, frozen=True, kw_only=True, tag="receipt.issued"):
    """The one receipt a request ends with.

    Attributes:
        outcome: how the request ended.
        reason_code / reason: why (``ok`` for a success).
        result: the tool's validated, secret-scrubbed output, when it ran and fits in
            the receipt; else ``None`` and ``result_ref`` says where it is kept.
        result_ref: where a large result is kept, when it did not fit.
        effect_id: identity of the effect (``<principal>:<idempotency_key>``), when it ran.
        resolution / resolution_id: a replay of an ``uncertain`` receipt: what became of the call
            (:class:`UncertainResolved`, its ``event_id``), when it was resolved.
        target_effect_id: the target system's own id for the effect (a payment id, a commit
            sha), when a Python tool returned one (:class:`effectgate.contracts.tools.hosting.WorkerAnswer`).
        replay_of: request id whose stored receipt this one replays.
        duration_ms: how long the tool ran, milliseconds: on every receipt of a call that
            started, whatever it ended as; ``None`` when no call started (and on a replay).
        signature: base64 Ed25519 signature by the executor's receipts key over the canonical
            event without it (:mod:`effectgate.contracts.integrity.signing`); the SDK and the audit verify it.
        retry_after_s: for a ``rate_limited`` receipt, seconds until the same call would
            fit the rate again (at the decision, or at the re-check of a granted call).
        redactions: RFC 6901 JSON Pointers into this receipt of every text from which the
            executor removed a secret (``/reason``, ``/result/rows/3/dsn``; an object key that
            was a secret names its parent object), each replaced by
            ``[redacted:<kind> sha256:<12 hex>]``; a result kept out of band is named under
            ``/result`` too. ``()`` when nothing was redacted; ``None`` only before the
            executor sealed the receipt.
        replay_outcome: on a ``replayed`` receipt, the outcome of the stored receipt it
            replays (``succeeded``, ``failed``, ``denied``, ``refused``, ``uncertain``); its
            ``reason_code``, ``reason``, ``result`` / ``result_ref``, ``effect_id`` and
            ``redactions`` are then that receipt's, whole (:mod:`effectgate.contracts.replays`).
            ``None`` on every other receipt.
        detail_ref: where the whole ``reason`` and ``redactions`` are kept when the receipt
            would not fit in one bus message with them (a
            :class:`~effectgate.contracts.receipt_detail.ReceiptDetail`, stored like a large
            result); the receipt then carries the reason cut and the redactions collapsed to
            their top-level members. ``None`` when nothing was cut.
        approval_id: the approval the request waited on, when it needed one: its own, or
            the one it joined (same principal, idempotency key and arguments).
    """

    request_id: str
    principal: str
    outcome: Outcome
    reason_code: str
    reason: str
    tool: str | None = None
    version: str | None = None
    operation: str | None = None
    idempotency_key: str | None = None
    request_hash: str | None = None
    result: Any = None
    result_ref: ResultRef | None = None
    effect_id: str | None = None
    target_effect_id: str | None = None
    replay_of: str | None = None
    duration_ms: float | None = None
    signature: str = ""
    retry_after_s: float | None = None
    redactions: tuple[str, ...] | None = None
    replay_outcome: Outcome | None = None
    detail_ref: ResultRef | None = None
    approval_id: str | None = None
    resolution: Resolution | None = None
    resolution_id: str | None = None


class EffectClaimed(Event, frozen=True, kw_only=True, tag="effect.claimed"):
    """The executor is about to run a write: the durable claim of its idempotency key.

    Published as the first and only message on ``tg.claim.<principal>.<key digest>``,
    before the effect, so a claim survives the loss of the idempotency index (Redis).

    Attributes:
        request_id: the request that owns the key.
        principal: its principal.
        key_digest: SHA-256 hex of the idempotency key (the key itself is not repeated).
        request_hash: the request hash the key is bound to.
        effect_id: identity of the effect.
        instance: the executor instance that runs it.
    """

    request_id: str
    principal: str
    key_digest: str
    request_hash: str
    effect_id: str
    instance: str


class UncertainResolved(Event, frozen=True, kw_only=True, tag="uncertain.resolved"):
    """What became of an ``uncertain`` call, found by its reconcile operation or said by the operator.

    Published by the executor on ``tg.resolution.<principal>.<request_id>`` (only the executor may),
    signed by the executor key; a request may have several (``unknown`` then the operator's ``ran``):
    the last ``ran`` or ``not_run`` holds. Budgets settle from it.

    Attributes:
        request_id / principal / idempotency_key / tool / version / operation: the uncertain call's.
        receipt_id: the ``event_id`` of its ``uncertain`` receipt.
        resolution: :data:`Resolution`.
        resolved_by: ``reconciler`` or ``operator``.
        note: why (the reconcile operation's answer, or the operator's note).
        effect_id: the target system's id for the effect, when it ran and the target said.
        attempts: reconcile calls made (0 for an operator's resolution).
        operator_signature: an operator's resolution: the operator key's signature over its request.
    """

    request_id: str
    principal: str
    receipt_id: str
    resolution: Resolution
    resolved_by: Literal["reconciler", "operator"]
    tool: str | None = None
    version: str | None = None
    operation: str | None = None
    idempotency_key: str | None = None
    note: str = ""
    effect_id: str | None = None
    attempts: int = 0
    operator_signature: str | None = None
    signature: str = ""


class ToolPublished(Event, frozen=True, kw_only=True, tag="tool.published"):
    """A tool descriptor version was published to the registry."""

    tool: str
    version: str
    digest: str


class ToolStateChanged(Event, frozen=True, kw_only=True, tag="tool.state.changed"):
    """A tool's state changed: its MCP server's, or its tool workers' (:mod:`effectgate.contracts.tools.tool_states`).

    Published by the executor on ``tg.tool.state.<tool>`` (only the executor may, by NATS
    permissions; like :class:`ToolPublished` it is not signed); the registry records it.

    Attributes:
        tool: the tool descriptor's name (``mcp_<server>``, or a ``python:<worker>`` tool's name).
        server: the MCP server's configured name, or the worker's name.
        state: its new state.
    """

    tool: str
    server: str
    state: ToolState


class PolicyPublished(Event, frozen=True, kw_only=True, tag="policy.published"):
    """A policy version was put in force. Published on ``tg.policy.published``, signed by the policy key.

    Attributes:
        version: ``sha256:<hex>`` of the policy text's UTF-8 bytes (the text is kept in the
            policy bucket under ``v.<hex>``).
        source: ``cli`` (``effectgate policy publish``) or ``file`` (a replica seeded its policy file).
        previous_version: the version it replaced; ``None`` when none was in force.
        revision: the policy bucket's revision of ``current`` that holds it.
        signature: base64 Ed25519 signature by the policy key.
    """

    version: str
    source: str
    previous_version: str | None = None
    revision: int = 0
    signature: str = ""


class SecurityEvent(Event, frozen=True, kw_only=True, tag="security.event"):
    """A refused attempt a service observed (``effectgate.contracts.security``).

    Published on ``tg.security.<service>.<kind>`` by :mod:`effectgate.shared.runtime.reporting`;
    the subject's service token, not ``service``, is what NATS permissions vouch for.

    Attributes:
        kind: what was attempted.
        service: the observing service.
        actor: who attempted it, when the transport says (an approver token, a NATS user).
        principal / request_id / approval_id: what it was about, when known.
        subject: where it was seen (the forged event's subject, the refused subject).
        reason_code: the refusal's code, e.g. ``self_approval``.
        detail: one line, at most 300 characters, never a secret.
        payload_sha256: ``sha256:<hex>`` of the refused body (never the body itself).
    """

    kind: SecurityKind
    service: str
    actor: str | None = None
    principal: str | None = None
    request_id: str | None = None
    approval_id: str | None = None
    subject: str | None = None
    reason_code: str | None = None
    detail: str = ""
    payload_sha256: str | None = None


AnyEvent = (
    ToolRequested
    | DecisionMade
    | ApprovalRequested
    | ApprovalGranted
    | ApprovalRejected
    | ApprovalVoted
    | ReceiptIssued
    | EffectClaimed
    | ToolPublished
    | ToolStateChanged
    | PolicyPublished
    | SecurityEvent
    | UncertainResolved
)


class _Identity(msgspec.Struct):
    request_id: Any = None


_identity = msgspec.json.Decoder(_Identity)
T = TypeVar("T")


def decode_untrusted(decoder: msgspec.json.Decoder[T], data: bytes) -> T:
    """Decode bytes from outside: too deep a nesting is a :class:`msgspec.DecodeError` too.

    msgspec raises ``RecursionError`` for JSON nested about a thousand levels deep; a
    hostile body must end in a refusal, not in a fault.

    Raises:
        msgspec.DecodeError: not JSON, not the expected shape, or nested too deeply.
    """
    try:
        return decoder.decode(data)
    except RecursionError:
        raise msgspec.DecodeError("JSON is nested too deeply") from None


def request_identity(data: bytes, msg_id: str | None, stream_seq: int) -> str:
    """The request id a message on ``tg.req.<principal>`` is known by, whatever its body.

    The body's ``request_id`` when the body is a JSON object holding a valid token there;
    else the ``Nats-Msg-Id`` header when it is a valid token (the SDK sets it to the
    request id); else ``seq<stream_seq>``. Policy, the backstop and audit use this rule, so a
    refused request's decision, receipt and raw message share one trail.
    """
    from effectgate.contracts.bus.catalog import TOKEN

    try:
        candidate = decode_untrusted(_identity, data).request_id
    except msgspec.DecodeError:
        candidate = None
    if isinstance(candidate, str) and TOKEN.match(candidate):
        return candidate
    if msg_id and TOKEN.match(msg_id):
        return msg_id
    return f"seq{stream_seq}"


_encoder = msgspec.json.Encoder()
_decoder: msgspec.json.Decoder[AnyEvent] = msgspec.json.Decoder(AnyEvent)


def encode(value: Any) -> bytes:
    """Encode an event (or any msgspec-encodable value) as JSON bytes."""
    return _encoder.encode(value)


def decode_event(data: bytes) -> AnyEvent:
    """Decode any event by its ``type`` tag.

    Raises:
        msgspec.ValidationError: the JSON does not match the tagged type.
        msgspec.DecodeError: the bytes are not JSON.
    """
    return decode_untrusted(_decoder, data)
