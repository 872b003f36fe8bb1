"""One run of a tool: the call under its timeout and the shutdown abort, then the receipt."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

import msgspec

from effectgate.contracts.events import ApprovalGranted, DecisionMade, ReceiptIssued
from effectgate.contracts.failpoints import failpoint
from effectgate.contracts.integrity.canonical import unrepresentable
from effectgate.contracts.tools.descriptors import ToolDescriptor
from effectgate.contracts.tools.hosting import CallContext
from effectgate.contracts.tools.schemas import first_error
from effectgate.contracts.vocabulary import Outcome, SideEffectClass
from effectgate.executor.domain import effect_id, receipt
from effectgate.executor.effects.binding import ContentGuard, Guard
from effectgate.executor.effects.calling import Effected, call_context
from effectgate.executor.effects.unsealing import Opened, Unsealer, redact
from effectgate.executor.errors import ExecutorError, ToolFailed, ToolOutcomeUnknown, ToolRefused, ToolTimeout
from effectgate.executor.ports import ContentReading, Outlet

__all__ = ["Runner", "ToolHost"]

log = logging.getLogger("effectgate.executor")


class ToolHost(Protocol):
    """Runs one operation of a tool (file system, MCP server, …)."""

    async def call(
        self,
        descriptor: ToolDescriptor,
        operation: str,
        arguments: dict[str, Any],
        guard: Guard | None = None,
        *,
        context: CallContext | None = None,
    ) -> Any:
        """Return the operation's result (or an :class:`Effected`); raise :class:`ExecutorError` subclasses on failure.

        ``guard``, when given, is called right before the effect; what it raises ends the call.
        ``context`` is who the call runs for, as the executor vouches (:func:`call_context`).
        """
        ...


class _Aborted(Exception):
    """The executor is shutting down and the grace period ended before the call did."""


@dataclass
class Runner:
    """Runs calls and turns what happened into receipts.

    Attributes:
        tools: the tool host.
        bus: where large results are kept; it scrubs results of secrets.
        clock: current UTC time.
        inline_result_bytes: largest result JSON carried in the receipt itself, bytes.
        max_result_bytes: largest result JSON kept at all, bytes.
        unsealer: opens sealed secret arguments (default: no key, so a call with one is refused).
        contents: reads what a granted call's file references name, for its
            :class:`~effectgate.executor.effects.binding.ContentGuard` (keyword only; the composition
            root passes :class:`~effectgate.executor.adapters.contents.ContentReader`).
    """

    tools: ToolHost
    bus: Outlet
    clock: Callable[[], datetime]
    inline_result_bytes: int = 262_144
    max_result_bytes: int = 16_777_216
    unsealer: Unsealer = field(default_factory=lambda: Unsealer(None))
    contents: ContentReading = field(kw_only=True)
    _abort: asyncio.Event = field(default_factory=asyncio.Event, init=False)

    def abort(self) -> None:
        """End every call still running now: each ends ``uncertain`` (writes) or ``failed`` (reads)."""
        self._abort.set()

    async def run(
        self, decision: DecisionMade, descriptor: ToolDescriptor, grant: ApprovalGranted | None = None
    ) -> ReceiptIssued:
        """Run the decided call once and return its receipt (never raises for the tool's behaviour).

        Sealed secret arguments are opened here, at the moment of effect (after the decision,
        the grant and the request hash were verified); a secret string the tool echoes is
        kept out of the receipt (:mod:`effectgate.executor.effects.unsealing`). A call run on ``grant``
        takes its content guard to the adapter.
        """
        assert decision.request is not None
        bound = decision.request
        try:
            opened = self.unsealer.open(descriptor, bound.operation, bound.arguments)
        except ToolRefused as error:
            return receipt(decision, self.clock(), Outcome.REFUSED, error.reason_code, error.reason)
        guard = None
        if grant is not None:
            guard = ContentGuard(self.contents, descriptor, bound.operation, bound.arguments, grant.contents)
        context = call_context(decision, grant, self.clock(), descriptor.timeout_s)
        issued = await self._run_opened(decision, descriptor, opened, guard, context)
        return (
            msgspec.structs.replace(issued, reason=redact(issued.reason, opened.secrets)) if opened.secrets else issued
        )

    async def _run_opened(
        self,
        decision: DecisionMade,
        descriptor: ToolDescriptor,
        opened: Opened,
        guard: Guard | None,
        context: CallContext,
    ) -> ReceiptIssued:
        """Call the tool and turn its answer into the receipt, which says how long the tool ran (``duration_ms``).

        Every receipt of a call that started carries it, whatever the call ended as: the
        time from the call's start to its answer (or its timeout, abort or fault).
        """
        assert decision.request is not None
        started = time.perf_counter()
        try:
            answer: Any = await self._call(context, descriptor, decision.request.operation, opened.arguments, guard)
        except (ToolRefused, ToolFailed, ToolTimeout, ToolOutcomeUnknown, _Aborted) as error:
            answer = error
        elapsed_ms = round((time.perf_counter() - started) * 1000, 3)
        issued = await self._answered(decision, descriptor, answer, opened.secrets)
        return msgspec.structs.replace(issued, duration_ms=elapsed_ms)

    async def _answered(
        self, decision: DecisionMade, descriptor: ToolDescriptor, answer: Any, secrets: tuple[str, ...]
    ) -> ReceiptIssued:
        """The receipt of the tool's ``answer``: its result, or the error it raised (module docstring)."""
        assert decision.request is not None
        side_effect = descriptor.operations[decision.request.operation].side_effect_class
        if isinstance(answer, ToolRefused):
            return receipt(decision, self.clock(), Outcome.REFUSED, answer.reason_code, answer.reason)
        if isinstance(answer, ToolFailed):
            return self._ended(decision, Outcome.FAILED, answer.reason_code, answer.reason)
        if isinstance(answer, ToolTimeout | ToolOutcomeUnknown):
            return self._unknown(decision, side_effect, answer.reason_code, answer.reason)
        if isinstance(answer, _Aborted):
            return self._unknown(decision, side_effect, "executor_shutdown", "the executor stopped during the call")
        return await self._finished(decision, descriptor, answer, secrets)

    async def _call(
        self,
        context: CallContext,
        descriptor: ToolDescriptor,
        operation: str,
        arguments: dict[str, Any],
        guard: Guard | None,
    ) -> Any:
        call = asyncio.ensure_future(self._tool(context, descriptor, operation, arguments, guard))
        stop = asyncio.ensure_future(self._abort.wait())
        try:
            await asyncio.wait({call, stop}, timeout=descriptor.timeout_s, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            call.cancel()
            raise
        finally:
            stop.cancel()
        if call.done():
            return _outcome(call)
        call.cancel()
        await asyncio.gather(call, return_exceptions=True)
        if self._abort.is_set():
            raise _Aborted()
        raise ToolTimeout(reason=f"no answer in {descriptor.timeout_s:g}s")

    async def _tool(
        self,
        context: CallContext,
        descriptor: ToolDescriptor,
        operation: str,
        arguments: dict[str, Any],
        guard: Guard | None,
    ) -> Any:
        await failpoint("executor.run", context.request_id)  # inert unless EFFECTGATE_FAILPOINTS names it
        return await self.tools.call(descriptor, operation, arguments, guard, context=context)

    async def _finished(
        self,
        decision: DecisionMade,
        descriptor: ToolDescriptor,
        result: Any,
        secrets: tuple[str, ...],
    ) -> ReceiptIssued:
        assert decision.request is not None
        spec = descriptor.operations[decision.request.operation]
        target = {"target_effect_id": result.target_effect_id} if isinstance(result, Effected) else {}
        result = result.result if isinstance(result, Effected) else result
        if problem := unrepresentable(result):
            return self._unknown(decision, spec.side_effect_class, "output_unrepresentable", f"output at {problem}")
        if problem := first_error(spec.output_schema, result):
            return self._unknown(decision, spec.side_effect_class, "output_invalid", f"output invalid at {problem}")
        if secrets:  # a secret argument the tool echoed stays out of the receipt
            result = await asyncio.to_thread(redact, result, secrets)
        clean, redactions = await self.bus.scrub_result(result)  # off the event loop when large
        data = msgspec.json.encode(clean)
        fields: dict[str, Any] = {"result": clean, "redactions": redactions, **target}
        if len(data) > self.max_result_bytes:
            why = f"its result is {len(data)} bytes, over the limit of {self.max_result_bytes}"
            return self._not_kept(decision, spec.side_effect_class, why, **target)
        if len(data) > self.inline_result_bytes:
            try:
                ref = await self.bus.store_result(decision.principal, decision.request_id, data)
            except Exception:  # the tool ran: its receipt must still say so
                log.exception("%s: the result could not be stored", decision.request_id)
                return self._not_kept(decision, spec.side_effect_class, "it could not be stored", **target)
            fields = {"result_ref": ref, "redactions": redactions, **target}
        return self._ended(decision, Outcome.SUCCEEDED, "ok", "the tool ran", **fields)

    def _not_kept(self, decision: DecisionMade, side_effect: SideEffectClass, why: str, **target: str) -> ReceiptIssued:
        """The tool ran but its result is not kept: a read failed, a write succeeded (result withheld)."""
        if side_effect is SideEffectClass.READ_ONLY:
            return self._ended(decision, Outcome.FAILED, "output_too_large", f"the tool ran; {why}", **target)
        reason = f"the tool ran; {why}, so its result was not kept"
        return self._ended(decision, Outcome.SUCCEEDED, "output_withheld", reason, **target)

    def _ended(self, decision: DecisionMade, outcome: Outcome, code: str, reason: str, **fields: Any) -> ReceiptIssued:
        effect = effect_id(decision.principal, decision.idempotency_key or "")
        return receipt(decision, self.clock(), outcome, code, reason, effect_id=effect, **fields)

    def _unknown(self, decision: DecisionMade, side_effect: SideEffectClass, code: str, reason: str) -> ReceiptIssued:
        if side_effect is SideEffectClass.READ_ONLY:
            return self._ended(decision, Outcome.FAILED, code, reason)
        suffix = "; whether the write happened is unknown — reconcile it"
        return self._ended(decision, Outcome.UNCERTAIN, code, reason + suffix)


def _outcome(call: asyncio.Future[Any]) -> Any:
    """The call's result; a fault that is not the tool's own answer becomes an unknown outcome."""
    try:
        return call.result()
    except ExecutorError:
        raise
    except asyncio.CancelledError:
        log.error("a tool call was cancelled from inside its adapter")
        raise ToolOutcomeUnknown("interrupted", "the call was interrupted inside its adapter") from None
    except Exception as error:
        log.exception("a tool adapter failed unexpectedly")
        raise ToolOutcomeUnknown("adapter_fault", f"the tool adapter failed: {type(error).__name__}") from None
