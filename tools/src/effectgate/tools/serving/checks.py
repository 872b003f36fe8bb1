"""What a worker checks of a call before anything runs: its shape and size, the executor's signature, its subject.

Pure: bytes, a subject and a key in; a verified :class:`WorkerCall` or the refusal to answer out.
A refusal names what was wrong (guarantee 8); nothing of the call runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

import msgspec
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from effectgate.contracts.events import decode_untrusted
from effectgate.contracts.integrity.signing import verify_body
from effectgate.contracts.tools.hosting import WorkerAnswer, WorkerCall, WorkerSubjects

__all__ = ["MAX_CALL_BYTES", "Refused", "checked_call", "refusal"]

MAX_CALL_BYTES: Final = 1024 * 1024
"""The largest call a worker reads by default, bytes (the shipped nats-server's ``max_payload``)."""

_call = msgspec.json.Decoder(WorkerCall)
_body = msgspec.json.Decoder(dict[str, Any])


@dataclass(frozen=True)
class Refused:
    """Why a call is answered ``refused`` unrun.

    Attributes:
        call_id: the call's id when it could be read, else ``""``.
        reason_code: ``call_too_large``, ``malformed_call``, ``unsigned_call`` or ``tool_mismatch``.
        reason: what was wrong, for the executor's receipt.
        security: a forged or unsigned call: logged as a security matter.
    """

    call_id: str
    reason_code: str
    reason: str
    security: bool = False


def checked_call(
    data: bytes, subject: str, worker: str, key: Ed25519PublicKey, max_bytes: int = MAX_CALL_BYTES
) -> WorkerCall | Refused:
    """The call in ``data`` received on ``subject``, when it may run; else why not.

    Checks, in order: at most ``max_bytes`` bytes; a :class:`WorkerCall` (bounded nesting); a valid
    Ed25519 signature of the executor's ``key`` over the fields sent
    (:func:`effectgate.contracts.integrity.signing.verify_body`); the subject's ``<tool>`` token
    (:meth:`WorkerSubjects.tool_of_call`) equal to ``call.tool``. Never raises.
    """
    if len(data) > max_bytes:
        return Refused("", "call_too_large", f"the call is {len(data)} bytes, above {max_bytes}")
    try:
        body, call = decode_untrusted(_body, data), decode_untrusted(_call, data)
    except msgspec.DecodeError as error:
        return Refused(_id_of(data), "malformed_call", f"not a worker call: {error}")
    if not verify_body(body, key):
        said = "carries no signature" if not call.signature else "is not signed by the executor's key"
        return Refused(call.call_id, "unsigned_call", f"the call {said}: nothing ran", security=True)
    tool = WorkerSubjects.tool_of_call(worker, subject)
    if tool != call.tool:
        return Refused(call.call_id, "tool_mismatch", f"the call names tool {call.tool!r} but came on {subject}")
    return call


def _id_of(data: bytes) -> str:
    """The ``call_id`` of a body that is no valid call, when it holds one as a short string; else ``""``."""
    try:
        found = decode_untrusted(_body, data).get("call_id")
    except msgspec.DecodeError:
        return ""
    return found if isinstance(found, str) and len(found) <= 128 else ""


def refusal(refused: Refused, worker: str, instance: str) -> WorkerAnswer:
    """The ``refused`` answer telling the executor why nothing ran."""
    return WorkerAnswer(
        call_id=refused.call_id,
        outcome="refused",
        reason_code=refused.reason_code,
        reason=refused.reason,
        worker=worker,
        instance=instance,
    )
