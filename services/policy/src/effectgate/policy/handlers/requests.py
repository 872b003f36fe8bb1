"""Reading a tool request message: the first step of the pipeline, at the broker edge.

Order (each step can end the request, :class:`~effectgate.policy.pipeline.intake.Ended`): the
message must be a request its principal sent (not a stored message's copy), fit the size limit,
decode as a tool request and hold only values with a canonical form (RFC 8785).
"""

from __future__ import annotations

import msgspec

from effectgate.contracts.events import DecisionMade, ToolRequested, decode_untrusted
from effectgate.contracts.integrity.canonical import unrepresentable
from effectgate.contracts.json_flaws import flaw_of
from effectgate.contracts.vocabulary import Verdict
from effectgate.policy.pipeline.intake import Ended, Envelope
from effectgate.policy.service import PolicyPorts, decide_request, decide_unread

__all__ = ["decide", "read_request"]

_request_decoder = msgspec.json.Decoder(ToolRequested)


async def decide(env: Envelope, ports: PolicyPorts) -> DecisionMade:
    """Decide one raw request message; never raises for anything the request contains.

    Returns:
        An unsigned :class:`DecisionMade` addressed to ``env.principal``.
    """
    try:
        request = read_request(env, ports.max_request_bytes)
    except Ended as ended:
        return decide_unread(env, ended, ports)
    return await decide_request(env, request, ports)


def read_request(env: Envelope, max_bytes: int) -> ToolRequested:
    """The tool request in ``env``; :class:`Ended` with a refusal naming what is wrong."""
    if env.copied_from is not None:
        reason = f"a copy of a message of stream {env.copied_from!r} (a direct get's reply), not a request"
        raise Ended(Verdict.REFUSE, "copied_stream_message", reason)
    if len(env.data) > max_bytes:
        raise Ended(Verdict.REFUSE, "oversized", f"request is {len(env.data)} bytes; the limit is {max_bytes}")
    request = _decoded(env.data)
    if problem := unrepresentable(msgspec.to_builtins(request)):
        raise Ended(Verdict.REFUSE, "unrepresentable_value", f"request value at {problem}")
    return request


def _decoded(data: bytes) -> ToolRequested:
    try:
        return decode_untrusted(_request_decoder, data)
    except msgspec.DecodeError as error:
        where = flaw_of(data)  # the decoder's own message names a byte or a path without keys
        reason = f"request value at {where}" if where else f"request is not a tool request: {error}"
        raise Ended(Verdict.REFUSE, "malformed", reason) from None
