"""``effectgate call``: one governed call as an agent, through the SDK, and its receipt.

The command connects as the agent ``--as`` names (default ``demo-agent``): its credentials file
``<state dir>/credentials/agent-<principal>.json`` (when the stack is secured), and the
gateway's public keys in ``$EFFECTGATE_PUBLIC_KEYS_DIR`` or ``<state dir>/keys/public``
(receipts are verified, secret arguments sealed).
"""

from __future__ import annotations

import asyncio
import json
import os
import uuid
from pathlib import Path
from typing import Annotated, Any

import msgspec
import nats
import typer
from rich.console import Group, RenderableType
from rich.markup import escape
from rich.padding import Padding
from rich.text import Text

from effectgate.cli.client.identity import state_dir
from effectgate.cli.client.rpc import BusError
from effectgate.cli.client.session import NatsUrl, console, err_console, stack_url
from effectgate.cli.render.output import AsJson, did_you_mean, print_json
from effectgate.cli.render.views import OUTCOME_STYLE, plain_text
from effectgate.contracts.bus.catalog import TOKEN
from effectgate.contracts.bus.nats_credentials import CredentialsInvalid, credentials_file
from effectgate.contracts.bus.nats_permissions import agent_user
from effectgate.contracts.errors import Problem, described
from effectgate.contracts.events import ReceiptIssued, decode_untrusted
from effectgate.contracts.integrity.canonical import unrepresentable
from effectgate.contracts.json_flaws import flaw_of
from effectgate.contracts.replays import ended_as, outcome_label, replay_note
from effectgate.sdk import DuplicateRequest, GatewayStoreFull, SealingKeyMissing, ToolClient, UnknownTool
from effectgate.sdk.errors import RegistryUnavailable
from effectgate.sdk.receipts import ReceiptKeyMissing
from effectgate.shared.runtime.connections import CA_FILE_ENV, NatsUnreachable, redact, tls_options

__all__ = ["EXIT_CODES", "NOT_ACCEPTED", "NO_RECEIPT", "agent_options", "call", "exit_code"]

EXIT_CODES = {"succeeded": 0, "replayed": 0, "denied": 3, "refused": 4, "failed": 5, "uncertain": 6}
"""Exit code of ``effectgate call`` by how the call ended: a replay exits as the outcome it replays
(:func:`~effectgate.contracts.replays.ended_as`)."""

NO_RECEIPT = 7
"""Exit code when no receipt came in time (the request may be waiting for an approval)."""

NOT_ACCEPTED = 8
"""Exit code when the gateway's store is full: the request was not accepted (nothing runs)."""


def exit_code(receipt: ReceiptIssued) -> int:
    """The exit code of ``receipt`` (:data:`EXIT_CODES`): a replay exits as the outcome it replays."""
    return EXIT_CODES.get(ended_as(receipt).value, 1)


class CallRefused(Problem):
    """The call was not sent: bad input, or a tool or operation this principal does not have."""


Args = Annotated[str, typer.Option("--args", help='The arguments as one JSON object, e.g. \'{"path": "a.txt"}\'.')]
Principal = Annotated[
    str,
    typer.Option("--as", envvar="EFFECTGATE_AGENT", help="The agent (principal) to call as (env EFFECTGATE_AGENT)."),
]
Version = Annotated[str | None, typer.Option("--version", help="An exact tool version (default: the latest).")]
Key = Annotated[str | None, typer.Option("--key", help="Idempotency key (default: a fresh one; reuse it to replay).")]
Wait = Annotated[float, typer.Option("--wait", help="Seconds to wait for the receipt.", min=0.1)]

_any_json: msgspec.json.Decoder[Any] = msgspec.json.Decoder()


def _arguments(text: str) -> dict[str, Any]:
    """``--args`` decoded; :class:`CallRefused` naming the JSON Pointer of a value no request can carry."""
    data = _as_given(text)
    try:
        value = decode_untrusted(_any_json, data)
    except msgspec.DecodeError as error:
        where = flaw_of(data)  # the decoder names a byte or a path without object keys
        raise CallRefused(f"--args value at {where}" if where else f"--args is not JSON: {error}") from None
    if not isinstance(value, dict):
        raise CallRefused(f"--args must be a JSON object, not {type(value).__name__}")
    if problem := unrepresentable(value):
        raise CallRefused(f"--args value at {problem}")
    return value


def _as_given(text: str) -> bytes:
    """The bytes of an argument: undecodable bytes of the command line come back as they were (PEP 383)."""
    try:
        return text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogatepass")


def agent_options(principal: str) -> dict[str, Any]:
    """``ToolClient.connect`` keyword arguments for ``principal`` on the local stack.

    Raises:
        CallRefused: the stack is secured and has no credentials file for ``principal``.
    """
    folder = state_dir() / "credentials"
    keys = os.environ.get("EFFECTGATE_PUBLIC_KEYS_DIR") or str(state_dir() / "keys" / "public")
    options: dict[str, Any] = {"public_keys": Path(keys), **tls_options(os.environ.get(CA_FILE_ENV))}
    if folder.is_dir():
        path = credentials_file(folder, agent_user(principal))
        if not path.exists():
            raise CallRefused(f"no credentials for agent {principal!r}: {path} does not exist")
        options["credentials"] = path
    return options


async def _checked(client: ToolClient, tool: str, operation: str, version: str | None) -> None:
    """Refuse, with a suggestion, a tool or operation this principal does not have."""
    try:
        descriptor = await client.describe(tool, version)
    except UnknownTool as unknown:
        names = [known.name for known in await client.list_tools()]
        raise CallRefused(f"unknown_tool: {unknown} for {client.principal}{did_you_mean(tool, names)}") from None
    if operation not in descriptor.operations:
        hint = did_you_mean(operation, descriptor.operations)
        raise CallRefused(f"unknown_operation: {tool} has no operation {operation!r} for {client.principal}{hint}")


Work = tuple[str, str, dict[str, Any], str | None, str | None]
"""A call: tool, operation, arguments, version (``None``: the latest), idempotency key (``None``: fresh)."""


async def _call(url: str, principal: str, work: Work, wait_s: float) -> ReceiptIssued:
    tool, operation, arguments, version, key = work
    client = await ToolClient.connect(url, principal, **agent_options(principal))
    try:
        await _checked(client, tool, operation, version)
        request_id = await client.submit(tool, operation, arguments, idempotency_key=key, version=version)
        try:
            return await client.receipt(request_id, timeout_s=wait_s)
        except TimeoutError:
            raise NoReceiptYet(request_id, wait_s) from None
    finally:
        await client.close()


class NoReceiptYet(Problem):
    """No receipt within the wait: the call may wait for an approval (it is neither lost nor run twice)."""

    def __init__(self, request_id: str, wait_s: float) -> None:
        super().__init__(f"no receipt for request {request_id} within {wait_s:g} s")
        self.request_id = request_id


def _no_receipt_yet(error: NoReceiptYet, key: str) -> str:
    return (
        f"{error}: it may be waiting for an approval (effectgate approvals list). Run the same command "
        f"with --key {key} to get its outcome once it is decided; with that key it never runs twice."
    )


def _shown(receipt: ReceiptIssued, tool: str, operation: str) -> Group:
    style = OUTCOME_STYLE.get(ended_as(receipt).value, "white")
    called = f"{receipt.tool or tool}.{receipt.operation or operation}"  # a call ended before its tool was resolved
    lines: list[RenderableType] = [
        Text.assemble((outcome_label(receipt), f"bold {style}"), "  ", plain_text(called)),
        Text.assemble(("reason: ", "bold"), plain_text(f"{receipt.reason_code}: {receipt.reason}")),
        Text.assemble(("request: ", "bold"), plain_text(receipt.request_id)),
    ]
    if note := replay_note(receipt):
        lines.append(Text.assemble(("replay: ", "bold"), plain_text(note)))
    if receipt.result is not None:
        result = json.dumps(receipt.result, indent=2, ensure_ascii=False, default=str)
        lines += [Text("result:", style="bold"), Padding(plain_text(result), (0, 0, 0, 2))]
    return Group(*lines)


_FAILURES = (
    *(CallRefused, BusError, NatsUnreachable, CredentialsInvalid, PermissionError, ValueError, OSError),
    *(RegistryUnavailable, ReceiptKeyMissing, SealingKeyMissing, DuplicateRequest, nats.errors.Error),
)


def call(
    tool: str,
    operation: str,
    args: Args = "{}",
    principal: Principal = "demo-agent",
    version: Version = None,
    key: Key = None,
    wait_s: Wait = 30.0,
    as_json: AsJson = False,
    nats_url: NatsUrl = "",
) -> None:
    """Call TOOL's OPERATION as an agent, through the gateway, and print its receipt (exit code by outcome)."""
    try:
        if not TOKEN.match(principal):
            raise CallRefused(f"--as {principal!r} must match {TOKEN.pattern}")
        key = key or uuid.uuid4().hex  # known here, so that a call still waiting can be asked for again
        work = (tool, operation, _arguments(args), version, key)
        receipt = asyncio.run(_call(stack_url(nats_url), principal, work, wait_s))
    except NoReceiptYet as waiting:
        if as_json:  # a script gets a document too: the request and the key to ask again with
            print_json({"outcome": None, "request_id": waiting.request_id, "idempotency_key": key})
        err_console.print(
            "[yellow]no receipt yet[/yellow]:", escape(_no_receipt_yet(waiting, str(key))), soft_wrap=True
        )
        raise typer.Exit(NO_RECEIPT) from None
    except TimeoutError as timeout:
        err_console.print("[yellow]no receipt[/yellow]:", escape(described(timeout)))
        raise typer.Exit(NO_RECEIPT) from None
    except GatewayStoreFull as full:
        err_console.print("[red]not accepted:[/red]", escape(str(full)))
        raise typer.Exit(NOT_ACCEPTED) from None
    except _FAILURES as error:
        err_console.print("[red]error:[/red]", escape(redact(described(error))))
        raise typer.Exit(2) from None
    if as_json:
        print_json(receipt)
    else:
        console.print(_shown(receipt, tool, operation))
    raise typer.Exit(exit_code(receipt))
