"""The first steps of the policy pipeline: a raw request message to a readable tool request.

Order (each step can end the request, :class:`Ended`): the message must be a request its
principal sent (not a stored message's copy), fit the size limit, decode as a tool
request, hold only values with a canonical form (RFC 8785), and carry valid identifiers.
A refusal of a value names its RFC 6901 JSON Pointer, whether the decoder refused it
(``1e400``, a lone surrogate, invalid UTF-8, nesting too deep: :func:`flaw_of`) or the
canonical check did (an integer beyond ±(2**53 − 1)).
Pure: no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass

import msgspec

from toolgate.contracts.canonical import unrepresentable
from toolgate.contracts.catalog import TOKEN
from toolgate.contracts.descriptors import SEMVER, TOOL_NAME
from toolgate.contracts.errors import Problem
from toolgate.contracts.events import ToolRequested, decode_untrusted
from toolgate.contracts.json_flaws import flaw_of
from toolgate.contracts.vocabulary import Verdict
from toolgate.policy.outcomes import PolicyOutcome
from toolgate.shared.invisible import is_invisible

__all__ = ["MAX_IDEMPOTENCY_KEY_CHARS", "Ended", "Envelope", "parse_request"]

MAX_IDEMPOTENCY_KEY_CHARS = 255
"""Longest accepted idempotency key, as Stripe's and the IETF Idempotency-Key draft's."""

_request_decoder = msgspec.json.Decoder(ToolRequested)


@dataclass(frozen=True)
class Envelope:
    """What the transport says about one request message.

    Attributes:
        principal: the subject token (the transport-authenticated principal).
        data: the raw body.
        request_id: the id the message is known by (``request_identity``), used for
            requests whose body cannot be read.
        copied_from: the stream named by the message's ``Nats-Stream`` header: the server
            adds it to a direct get's reply, so a message carrying it is a stored message
            someone aimed at a request subject (the reply subject of a direct get), not a
            request its principal sent.
    """

    principal: str
    data: bytes
    request_id: str
    copied_from: str | None = None


class Ended(Problem):
    """The request ends here with this verdict and reason (a refusal or a denial)."""

    def __init__(
        self,
        verdict: Verdict,
        reason_code: str,
        reason: str,
        hidden: PolicyOutcome | None = None,
        retry_after_s: float | None = None,
        policy_verdict: Verdict | None = None,
    ) -> None:
        super().__init__(reason)
        self.verdict, self.reason_code, self.reason, self.hidden = verdict, reason_code, reason, hidden
        self.retry_after_s, self.policy_verdict = retry_after_s, policy_verdict


def parse_request(env: Envelope, max_bytes: int) -> ToolRequested:
    """The tool request in ``env``; :class:`Ended` with a refusal naming what is wrong."""
    if env.copied_from is not None:
        reason = f"a copy of a message of stream {env.copied_from!r} (a direct get's reply), not a request"
        raise Ended(Verdict.REFUSE, "copied_stream_message", reason)
    if len(env.data) > max_bytes:
        raise Ended(Verdict.REFUSE, "oversized", f"request is {len(env.data)} bytes; the limit is {max_bytes}")
    try:
        request = decode_untrusted(_request_decoder, env.data)
    except msgspec.DecodeError as error:
        where = flaw_of(env.data)  # the decoder's own message names a byte or a path without keys
        reason = f"request value at {where}" if where else f"request is not a tool request: {error}"
        raise Ended(Verdict.REFUSE, "malformed", reason) from None
    if problem := unrepresentable(msgspec.to_builtins(request)):
        raise Ended(Verdict.REFUSE, "unrepresentable_value", f"request value at {problem}")
    if not TOKEN.match(request.request_id):
        raise Ended(Verdict.REFUSE, "invalid_request_id", "request_id must match [A-Za-z0-9_-]{1,64}")
    key = request.idempotency_key
    if not 0 < len(key) <= MAX_IDEMPOTENCY_KEY_CHARS or not key.isprintable() or any(map(is_invisible, key)):
        reason = "idempotency_key must have 1 to 255 printable characters (none invisible or direction-changing)"
        raise Ended(Verdict.REFUSE, "invalid_idempotency_key", reason)
    if not TOOL_NAME.match(request.tool):
        raise Ended(Verdict.REFUSE, "invalid_tool", f"tool must match {TOOL_NAME.pattern}")
    if request.version is not None and not SEMVER.match(request.version):
        raise Ended(Verdict.REFUSE, "invalid_version", "version must be a semantic version (SemVer 2.0.0)")
    return request
