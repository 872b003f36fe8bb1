"""``effectgate tools publish``: a descriptor file, or every tool a Python module declares, signed by the operator."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any, NoReturn

import msgspec
import typer
from rich.markup import escape

from effectgate.cli.client import rpc
from effectgate.cli.client.identity import state_dir
from effectgate.cli.client.session import NatsUrl, console, err_console, on_bus
from effectgate.cli.commands.tools import publish_refusal
from effectgate.contracts.bus.catalog import Rpc
from effectgate.contracts.errors import Problem

__all__ = ["OperatorKey", "tools_publish"]

OperatorKey = Annotated[
    Path | None,
    typer.Option(
        "--key",
        envvar="EFFECTGATE_OPERATOR_KEY",
        help="The operator's private key (default <state dir>/keys/operator/operator.key).",
    ),
]
File = Annotated[Path | None, typer.Argument(help="A descriptor JSON file (or use --from-module).")]
FromModule = Annotated[
    str | None, typer.Option("--from-module", help="A Python module whose tools to publish (pkg.tools).")
]
Worker = Annotated[str | None, typer.Option("--worker", help="With --from-module: the worker that serves them.")]
AppDir = Annotated[Path, typer.Option("--app-dir", help="With --from-module: the directory to import the module from.")]


def tools_publish(
    file: File = None,
    from_module: FromModule = None,
    worker: Worker = None,
    app_dir: AppDir = Path("."),
    key: OperatorKey = None,
    nats_url: NatsUrl = "",
) -> None:
    """Publish the tool descriptor in FILE, or every tool of --from-module, signed with the operator's key.

    Versions are immutable. A refusal names every mistake of the descriptor, a mistyped key with
    the key meant; success prints the registry's own line per tool (``refunds@1.0.0 published`` or
    ``… unchanged``). Exit codes: 0 published, 1 refused, 2 bad input.
    """
    descriptors = _descriptors(file, from_module, worker, app_dir)
    bodies = [_signed(descriptor, key, str(file or from_module)) for descriptor in descriptors]
    refused = sum(not _published(body, nats_url) for body in bodies)
    if refused:
        raise typer.Exit(1)


def _descriptors(file: Path | None, module: str | None, worker: str | None, app_dir: Path) -> list[Any]:
    if (file is None) == (module is None):
        _bad_input("give a descriptor FILE or --from-module MODULE (one of them)")
    if module is None:
        assert file is not None
        try:
            return [msgspec.json.decode(file.read_bytes())]
        except (OSError, msgspec.DecodeError) as error:
            _bad_input(f"{file}: {error}")
    if worker is None:
        _bad_input("--from-module needs --worker NAME: the worker that will serve its tools")
    return _module_descriptors(module, worker, app_dir)


def _module_descriptors(module: str, worker: str, app_dir: Path) -> list[Any]:
    """The descriptors ``module`` declares, after its rules and the registry's descriptor checks ran."""
    from effectgate.tools import publishable, toolbox_for_module
    from effectgate.tools.modules import ModuleUnimportable, imported

    sys.path.insert(0, str(app_dir.resolve()))
    try:
        loaded = imported(module)
    except ModuleUnimportable as error:
        _bad_input(str(error))
    try:
        return [msgspec.to_builtins(descriptor) for descriptor in publishable(toolbox_for_module(loaded, worker))]
    except Problem as error:
        err_console.print("[red]declaration_refused[/red]:", escape(f"{module}: {error}; nothing was sent"))
        raise typer.Exit(1) from None


def _signed(descriptor: Any, key: Path | None, source: str) -> dict[str, Any]:
    from effectgate.contracts.integrity.signing import load_private_key, sign_value

    if refusal := publish_refusal(descriptor):
        err_console.print(f"[red]{refusal[0]}[/red]:", escape(f"{source}: {refusal[1]}; nothing was sent"))
        raise typer.Exit(1)
    try:
        private = load_private_key(key or state_dir() / "keys" / "operator" / "operator.key")
    except (OSError, ValueError) as error:
        _bad_input(str(error))
    return {"descriptor": descriptor, "signature": sign_value(descriptor, private)}


def _published(body: dict[str, Any], nats_url: str) -> bool:
    reply: dict[str, Any] = on_bus(nats_url, lambda bus: rpc.request(bus, Rpc.REGISTRY_PUBLISH, body))
    code, reason = escape(str(reply.get("reason_code"))), escape(str(reply.get("reason")))
    if not reply.get("ok"):
        err_console.print(f"[red]{code}[/red]:", reason)
        return False
    console.print(f"[green]{reason}[/green]")
    return True


def _bad_input(why: str) -> NoReturn:
    err_console.print("[red]error:[/red]", escape(why))
    raise typer.Exit(2)
