"""What an approval binds beyond its request hash: the content behind the call's file references."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import msgspec
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from effectgate.contracts.events import decode_untrusted, request_hash
from effectgate.contracts.integrity.canonical import unrepresentable
from effectgate.contracts.integrity.signing import sign_event
from effectgate.contracts.rpc.contents import MAX_QUERY_BYTES, ContentAnswer, ContentQuery
from effectgate.contracts.tools.contents import ContentState, first_change
from effectgate.contracts.tools.descriptors import DescriptorSource, ToolDescriptor, descriptor_digest
from effectgate.contracts.tools.schemas import SchemaUnusable
from effectgate.executor.errors import ToolRefused
from effectgate.executor.ports import ContentReading

__all__ = ["ContentGuard", "ContentReporter", "Guard"]

log = logging.getLogger("effectgate.executor")
Guard = Callable[[], None]
"""Called by an adapter right before the effect; raises :class:`ToolRefused` to stop it (blocking)."""
_query = msgspec.json.Decoder(ContentQuery)


@dataclass(frozen=True)
class ContentGuard:
    """The dispatch check of one granted call: its references must name what the grant bound.

    Attributes:
        reader: reads the references' states.
        descriptor: the descriptor the call runs under.
        operation: the operation.
        arguments: the bound request's arguments (the references, as the approval saw them).
        bound: the grant's ``contents``.
    """

    reader: ContentReading
    descriptor: ToolDescriptor
    operation: str
    arguments: dict[str, Any]
    bound: tuple[ContentState, ...]

    def __call__(self) -> None:
        """Read the references again (blocking) and refuse on any difference.

        Raises:
            ToolRefused: ``content_changed`` naming the path and what changed;
                ``schema_unusable`` for a file marker where none can be.
        """
        try:
            now = self.reader.read(self.descriptor, self.operation, self.arguments)
        except SchemaUnusable as error:
            raise ToolRefused("schema_unusable", f"the input schema cannot be used: {error}") from None
        if (why := first_change(self.bound, now)) is not None:
            raise ToolRefused("content_changed", f"{why}: nothing ran")


@dataclass
class ContentReporter:
    """Answers ``tg.executor.contents``: what a call's file references name now, signed.

    Attributes:
        descriptors: the registry's descriptors (the one the call was decided under).
        reader: reads the references' states.
        key: the receipts key (signs the answer).
        clock: current UTC time.
    """

    descriptors: DescriptorSource
    reader: ContentReading
    key: Ed25519PrivateKey
    clock: Callable[[], datetime]

    async def answer_bytes(self, data: bytes) -> ContentAnswer:
        """Decode one query and answer it; an oversized or malformed one is refused, never raised."""
        if len(data) > MAX_QUERY_BYTES:
            return _refused("oversized", f"query is {len(data)} bytes; the limit is {MAX_QUERY_BYTES}")
        try:
            query = decode_untrusted(_query, data)
        except msgspec.DecodeError as error:
            return _refused("malformed", f"not a content query: {error}")
        return await self.answer(query)

    async def answer(self, query: ContentQuery) -> ContentAnswer:
        """Read the references of ``query``'s request under the descriptor it was decided with."""
        bound = query.request
        if unrepresentable(msgspec.to_builtins(bound)) or bound.principal != query.principal:
            return _refused("malformed", "the query's request has no canonical form or another principal")
        if request_hash(bound) != query.request_hash:
            return _refused("hash_mismatch", "the request does not hash to the query's request hash")
        descriptor = await self._descriptor(bound.tool, bound.version)
        if descriptor is None or descriptor_digest(descriptor) != bound.descriptor_digest:
            return _refused("descriptor_mismatch", f"{bound.tool}@{bound.version} is not the descriptor decided")
        try:
            contents = await asyncio.to_thread(self.reader.read, descriptor, bound.operation, bound.arguments)
        except SchemaUnusable as error:
            return _refused("schema_unusable", f"the input schema cannot be used: {error}")
        answer = ContentAnswer(
            ok=True,
            reason_code="read",
            reason=f"{len(contents)} file references read",
            request_hash=query.request_hash,
            contents=contents,
            checked_at=self.clock(),
        )
        return sign_event(answer, self.key)

    async def _descriptor(self, tool: str, version: str) -> ToolDescriptor | None:
        try:
            return await self.descriptors.get(tool, version)
        except Exception:  # an unreadable registry reads nothing: the approvals service asks again
            log.warning("descriptor %s@%s unreadable for a content query", tool, version, exc_info=True)
            return None


def _refused(code: str, reason: str) -> ContentAnswer:
    return ContentAnswer(ok=False, reason_code=code, reason=reason)
