"""The MCP edge: ``tools/list``, ``tools/call`` and ``subscriptions/listen`` for the principal of the request.

Thin: the principal is read from the transport (:func:`principal_of`), the work is the
:class:`~effectgate.surface.gateway.Gateway`'s. Besides the principal's tools, every listing holds
``effectgate_result``, which reads the rest of a result that was cut (the principal's own only).
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable
from typing import Any, TypeVar

from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.lowlevel import NotificationOptions, Server
from mcp.server.models import InitializationOptions
from mcp.shared.exceptions import MCPError
from mcp_types import (
    INVALID_PARAMS,
    INVALID_REQUEST,
    CallToolRequestParams,
    CallToolResult,
    ListToolsResult,
    PaginatedRequestParams,
    SubscriptionsListenRequestParams,
    SubscriptionsListenResult,
    Tool,
    ToolAnnotations,
)
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from effectgate.surface.calls import CLIENT_KEY
from effectgate.surface.cancels import CLIENT_ID, call_of
from effectgate.surface.errors import NotServed
from effectgate.surface.gateway import Gateway, UnknownName
from effectgate.surface.holding import Client
from effectgate.surface.notices import Notices
from effectgate.surface.ports import CancelRelaying
from effectgate.surface.results import problem_result

__all__ = ["RESULT_TOOL", "build_server", "principal_of"]

T = TypeVar("T")

RESULT_TOOL = Tool(
    name="effectgate_result",
    title="Read the rest of a cut result",
    description="Reads a part of the whole result of one of your earlier calls whose result was cut "
    "(the cut result names the request id and the offset to read from).",
    input_schema={
        "type": "object",
        "properties": {
            "request_id": {"type": "string", "pattern": "^[A-Za-z0-9_-]{1,64}$"},
            "offset_bytes": {"type": "integer", "minimum": 0},
        },
        "required": ["request_id"],
        "additionalProperties": False,
    },
    annotations=ToolAnnotations(read_only_hint=True, idempotent_hint=True, open_world_hint=False),
)


def principal_of(fixed: str | None) -> str:
    """The principal of the current request: the bearer token's, else the surface's fixed one (stdio).

    Raises:
        MCPError: neither (cannot happen behind the auth middleware).
    """
    token = get_access_token()
    if token is not None:
        return token.client_id
    if fixed is not None:
        return fixed
    raise MCPError(INVALID_REQUEST, "no principal: this surface needs a bearer token")


def build_server(
    gateway: Gateway, notices: Notices, relay: CancelRelaying, fixed: str | None, version: str
) -> Server[Any]:
    """The low-level MCP server of the surface (``fixed``: the principal of stdio or of an open surface)."""
    cancels = relay.cancels

    async def list_tools(ctx: ServerRequestContext[Any, Any], params: PaginatedRequestParams | None) -> ListToolsResult:
        principal = principal_of(fixed)
        if ctx.request is None and ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
            notices.remember(principal, ctx.session)  # stdio, legacy: told of changes on the session
        listing = await _served(gateway.listing(principal))
        return ListToolsResult(tools=[*listing.tools, RESULT_TOOL])

    async def call_tool(ctx: ServerRequestContext[Any, Any], params: CallToolRequestParams) -> CallToolResult:
        principal, arguments = principal_of(fixed), dict(params.arguments or {})
        if params.name == RESULT_TOOL.name:
            return await gateway.result_part(principal, arguments)
        key = (params.meta or {}).get(CLIENT_KEY)

        client = CLIENT_ID.get()
        with cancels.holding(call_of(principal, client, ctx.request_id)) if client else contextlib.nullcontext():
            try:
                asking = _asking(ctx, params)
                return await _served(gateway.call(principal, params.name, arguments, _key(key), asking))
            except UnknownName:
                raise MCPError(INVALID_PARAMS, f"Unknown tool: {params.name}") from None
        return problem_result("cancelled by the client: a call waiting for approval was withdrawn")

    async def listen(
        ctx: ServerRequestContext[Any, Any], params: SubscriptionsListenRequestParams
    ) -> SubscriptionsListenResult:
        return await notices.listen(principal_of(fixed), ctx, params)

    server: Server[Any] = _Surface(
        "effectgate",
        version=version,
        instructions="Tools governed by effectgate: a call may be denied, or wait for a person's approval "
        "(call again with the same arguments to get its outcome).",
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_subscriptions_listen=listen,
    )

    async def relay_cancellations(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        """A legacy HTTP client's cancellation, to the replica that holds the call.

        Only calls with a client id are relayed: stdio and 2026-07-28 calls are cancelled where
        they run (the connection, the request), and their JSON-RPC ids name no call elsewhere.
        """
        if ctx.method == "notifications/cancelled" and ctx.request_id is None and ctx.params and CLIENT_ID.get():
            await relay.cancel(principal_of(fixed), CLIENT_ID.get(), ctx.params.get("requestId"))
        return await call_next(ctx)

    server.middleware.append(relay_cancellations)
    return server


class _Surface(Server[Any]):
    """The SDK's low-level server, announcing ``tools.listChanged`` on the handshake era too.

    Legacy clients hear it on their stdio session or their HTTP GET stream
    (:mod:`effectgate.surface.notices`); 2026-07-28 capabilities come from the listen handler.
    """

    def create_initialization_options(
        self,
        notification_options: NotificationOptions | None = None,
        experimental_capabilities: dict[str, dict[str, Any]] | None = None,
        extensions: dict[str, dict[str, Any]] | None = None,
    ) -> InitializationOptions:
        """The SDK's options with ``tools_changed`` set unless the caller chose otherwise."""
        chosen = notification_options or NotificationOptions(tools_changed=True)
        return super().create_initialization_options(chosen, experimental_capabilities, extensions)


_KEEP_WAITING: dict[str, Any] = {
    "type": "object",
    "properties": {"keep_waiting": {"type": "boolean", "title": "Keep waiting for the approval", "default": True}},
    "required": ["keep_waiting"],
}


def _asking(ctx: ServerRequestContext[Any, Any], params: CallToolRequestParams) -> Client:
    """Progress when the call carries a progress token; a keep-waiting question for a stdio client that elicits.

    Over stateless HTTP a server request's answer would reach another request's transport, so
    only stdio (one connection) asks. Without a progress token nothing is reported, so a
    streaming call's progress is not even listened to.
    """

    async def progress(value: float, message: str) -> None:
        await ctx.session.report_progress(value, None, message)

    async def confirm(question: str) -> bool | None:
        try:
            answer = await ctx.session.elicit_form(question, _KEEP_WAITING, related_request_id=ctx.request_id)
        except Exception:  # a client that cannot answer has not answered: the call keeps waiting
            return None
        if answer.action != "accept":
            return False if answer.action == "decline" else None
        return bool((answer.content or {}).get("keep_waiting", True))

    capabilities = ctx.session.client_capabilities
    legacy = ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS
    asks = legacy and ctx.request is None and capabilities is not None and capabilities.elicitation is not None
    tokened = (params.meta or {}).get("progress_token") is not None  # _meta.progressToken
    return Client(progress=progress if tokened else None, confirm=confirm if asks else None)


def _key(value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise MCPError(INVALID_PARAMS, f"_meta[{CLIENT_KEY!r}] must be a string")
    return value


async def _served(work: Awaitable[T]) -> T:
    try:
        return await work
    except NotServed as error:
        raise MCPError(INVALID_REQUEST, str(error)) from None
