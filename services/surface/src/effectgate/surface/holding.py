"""How a ``tools/call`` is held for its receipt, and what the client is told or asked meanwhile.

A held call sends progress notifications when the client asked for them (its own while it
waits, and a streaming call's items: :mod:`effectgate.surface.progress`); a call that
waits for an approval may ask the person at the client once whether to keep waiting or
withdraw it (never a grant), while its receipt is still watched for.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import anyio

from effectgate.contracts.events import ReceiptIssued
from effectgate.sdk import ToolClient

__all__ = ["Client", "Confirm", "Declined", "Progress", "Waiting", "asked_while_waiting", "waiting_for"]

Progress = Callable[[float, str], Awaitable[None]]
"""``progress(value, message)``: one progress notification to the client (:mod:`effectgate.surface.progress`
keeps the values of one call increasing)."""

Confirm = Callable[[str], Awaitable[bool | None]]
"""``confirm(message)``: ask the person at the client whether to keep waiting for an approval:
``True`` keep waiting, ``False`` withdraw the call, ``None`` no answer. Never a grant."""


@dataclass(frozen=True)
class Client:
    """What the MCP client can be sent while its call is held (each optional)."""

    progress: Progress | None = None
    confirm: Confirm | None = None


class Declined(Exception):
    """The person at the client chose to withdraw a call waiting for approval."""


@dataclass(frozen=True)
class Waiting:
    """How a call waits for its receipt.

    Attributes:
        hold_s: the longest a call is held before a pending result, seconds.
        progress_s: seconds between progress notifications.
        grace_s: how long an outcome that may have had an effect is returned to re-sends, seconds.
        limit_bytes: the largest result returned whole, bytes of JSON.
    """

    hold_s: float = 20.0
    progress_s: float = 5.0
    grace_s: float = 600.0
    limit_bytes: int = 262_144


async def asked_while_waiting(
    client: ToolClient, request_id: str, asking: Client, approval_id: str, left_s: float
) -> ReceiptIssued | None:
    """Ask "keep waiting or withdraw?" while still watching for the receipt, at most ``left_s`` seconds.

    The receipt arriving first ends the question (cancelled within the same cancel scope,
    so the client is told and the call answers at once); so does the end of the hold.

    Returns:
        The receipt when it arrived meanwhile, else ``None`` (kept waiting, no answer, no client form).

    Raises:
        Declined: the person chose to withdraw the call.
    """
    found: list[ReceiptIssued] = []
    declined = False
    async with anyio.create_task_group() as group:

        async def watch() -> None:
            with contextlib.suppress(Exception):
                found.append(await client.receipt(request_id, timeout_s=left_s))
                group.cancel_scope.cancel()

        group.start_soon(watch)
        with anyio.move_on_after(left_s):
            declined = await keep_waiting(asking, approval_id) is False
        group.cancel_scope.cancel()
    if declined and not found:
        raise Declined(approval_id)
    return found[0] if found else None


async def keep_waiting(asking: Client, approval_id: str) -> bool | None:
    """The person's answer to "keep waiting or withdraw?" (``False``: withdraw), ``None`` when not asked."""
    if asking.confirm is None:
        return None
    question = (
        f"This call waits for approval {approval_id} by a person entitled to approve it. "
        "Keep waiting for it, or withdraw the call? (Your answer here is not an approval.)"
    )
    return await asking.confirm(question)


def waiting_for(request_id: str, approval: str | None, elapsed_s: float) -> str:
    """The progress message of a call held ``elapsed_s`` seconds (for approval ``approval``, when it waits for one)."""
    if approval is not None:
        return f"waiting for approval {approval} of request {request_id} ({elapsed_s:.0f} s)"
    return f"waiting for the outcome of request {request_id} ({elapsed_s:.0f} s)"
