"""Receipts as MCP tool results: what the model reads, and what it may do next.

Pure. A tool's failure, including every governance outcome, is a result with
``isError: true`` and readable text (MCP 2025-11-25, Tools, "Error Handling"); JSON-RPC
errors are left to malformed requests and unknown tools. Every result carries the receipt's
identity in ``_meta["io.effectgate/receipt"]``.
"""

from __future__ import annotations

import json
from typing import Any

from mcp_types import CallToolResult, ContentBlock, TextContent
from pydantic import TypeAdapter, ValidationError

from effectgate.contracts.events import ReceiptIssued
from effectgate.contracts.replays import ended_as, outcome_label, replay_note, resolution_note
from effectgate.contracts.vocabulary import Outcome

__all__ = ["RECEIPT_META", "as_result", "boundary", "cut_text", "pending_result", "problem_result"]

RECEIPT_META = "io.effectgate/receipt"
PENDING_META = "io.effectgate/pending"
_BLOCK: TypeAdapter[ContentBlock] = TypeAdapter(ContentBlock)

_ADVICE = {
    "denied": "Do not retry this call unchanged: the policy does not allow it as it stands.",
    "refused": "The call itself was not acceptable; fix what the reason names before calling again.",
    "failed": "The tool ran and failed. Calling again is a new call.",
    "uncertain": (
        "The effect MAY HAVE HAPPENED: the outcome is unknown. Do not retry blindly; "
        "check the effect first, or ask a person to resolve request {request_id}."
    ),
}
_REPLAYED_FAILURE = "The tool ran once and failed; under this idempotency key it is not run again."


def as_result(receipt: ReceiptIssued, mcp_envelope: bool, has_schema: bool, limit_bytes: int) -> CallToolResult:
    """The MCP result of ``receipt`` (module docstring)."""
    ended = ended_as(receipt)
    if ended is Outcome.SUCCEEDED and receipt.result is not None:
        return _success(receipt, mcp_envelope, has_schema, limit_bytes)
    if ended is Outcome.SUCCEEDED:
        note = f"The result is kept out of band and could not be read here: read request {receipt.request_id}."
        return _error(receipt, note, limit_bytes)
    advice = _ADVICE.get(ended.value, "").format(request_id=receipt.replay_of or receipt.request_id)
    if ended is Outcome.FAILED and receipt.replay_of:
        advice = _REPLAYED_FAILURE
    return _error(receipt, advice, limit_bytes)


def _meta(receipt: ReceiptIssued) -> dict[str, Any]:
    fields = {
        "request_id": receipt.request_id,
        "outcome": receipt.outcome.value,
        "reason_code": receipt.reason_code,
        "effect_id": receipt.effect_id,
        "replay_of": receipt.replay_of,
        "replay_outcome": receipt.replay_outcome.value if receipt.replay_outcome else None,
        "resolution": receipt.resolution,
        "resolution_id": receipt.resolution_id,
    }
    return {RECEIPT_META: {key: value for key, value in fields.items() if value is not None}}


def _error(receipt: ReceiptIssued, advice: str, limit_bytes: int) -> CallToolResult:
    head = f"effectgate: {outcome_label(receipt)} ({receipt.reason_code}): {receipt.reason}"
    if len(head.encode()) > limit_bytes:
        data = head.encode()
        head = f"{data[: boundary(data, limit_bytes)].decode()} [effectgate: reason cut at {limit_bytes} bytes]"
    if receipt.retry_after_s is not None:
        advice = f"Rate limited: the same call fits again in {receipt.retry_after_s:.0f} s."
    if note := replay_note(receipt):
        advice = f"This is a {note}. {advice}"
    if resolved := resolution_note(receipt):  # a replayed uncertain call that was resolved since
        advice = f"{advice} It was {resolved}." if receipt.resolution != "unknown" else f"{advice} It is {resolved}."
    text = f"{head}\n{advice}".strip()
    return CallToolResult(content=[TextContent(text=text)], is_error=True, _meta=_meta(receipt))


def _success(receipt: ReceiptIssued, mcp_envelope: bool, has_schema: bool, limit_bytes: int) -> CallToolResult:
    text = json.dumps(receipt.result, ensure_ascii=False, separators=(",", ":"))
    if len(text.encode()) > limit_bytes:
        cut = cut_text(text, limit_bytes, receipt.request_id)
        return CallToolResult(content=[TextContent(text=cut)], is_error=has_schema, _meta=_meta(receipt))
    content, structured = _parts(receipt.result, mcp_envelope)
    return CallToolResult(content=content, structured_content=structured, _meta=_meta(receipt))


def _parts(result: Any, mcp_envelope: bool) -> tuple[list[ContentBlock], dict[str, Any] | None]:
    if mcp_envelope and isinstance(result, dict):
        items = result.get("content")
        blocks = [_block(item) for item in (items if isinstance(items, list) else [])]
        structured = result.get("structured")
        return blocks, structured if isinstance(structured, dict) else None
    text = json.dumps(result, ensure_ascii=False)
    return [TextContent(text=text)], result if isinstance(result, dict) else None


def _block(item: Any) -> ContentBlock:
    """One upstream content block; one whose binary payload the receipt does not carry becomes a note."""
    try:
        return _BLOCK.validate_python(item)
    except ValidationError:
        kind = item.get("type", "?") if isinstance(item, dict) else type(item).__name__
        mime = item.get("mimeType", "") if isinstance(item, dict) else ""
        return TextContent(text=f"[effectgate: a {kind} block {mime} was returned; receipts do not carry binary data]")


def boundary(data: bytes, index: int) -> int:
    """The largest index ``<= index`` that does not split a UTF-8 character of ``data`` (RFC 3629 §3)."""
    while 0 < index < len(data) and data[index] & 0xC0 == 0x80:
        index -= 1
    return index


def cut_text(text: str, limit_bytes: int, request_id: str) -> str:
    """``text`` cut to at most ``limit_bytes`` UTF-8 bytes (whole characters), and a marker naming the rest."""
    data = text.encode()
    cut = boundary(data, limit_bytes)
    return (
        f"{data[:cut].decode()}\n[effectgate: result cut at {cut} of {len(data)} bytes. The whole result is kept: "
        f'call effectgate_result with {{"request_id": "{request_id}", "offset_bytes": {cut}}} for the rest]'
    )


def pending_result(request_id: str, approval_id: str | None, expires_at: str | None) -> CallToolResult:
    """A call still waiting, returned before the client's timeout (``isError``: no output yet).

    Args:
        request_id: the governed request.
        approval_id: the approval it waits for, when it waits for one.
        expires_at: when that approval expires (ISO 8601), when known.
    """
    if approval_id is None:
        head = f"effectgate: pending: request {request_id} is still running."
    else:
        until = f" It expires at {expires_at}." if expires_at else ""
        head = f"effectgate: pending approval {approval_id}: a person must approve this call first.{until}"
    text = (
        f"{head}\nCall this tool again with the same arguments to get the outcome: the call will not run "
        "twice and no second approval is asked."
    )
    meta = {PENDING_META: {"request_id": request_id, "approval_id": approval_id}}
    return CallToolResult(content=[TextContent(text=text)], is_error=True, _meta=meta)


def problem_result(text: str) -> CallToolResult:
    """A call that could not be sent through the gateway (``isError``), e.g. the bus is unreachable."""
    return CallToolResult(content=[TextContent(text=f"effectgate: {text}")], is_error=True)
