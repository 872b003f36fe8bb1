"""``effectgate policy …``: publish a policy into the bus, check a file, simulate a change, explain a decision.

``publish`` goes through the policy service (``tg.policy.publish``), which validates the text
with its own build before anything changes. ``check`` works offline: the file is built against
the local principal directory and attributes (and, when a stack is reachable, the registry's
tools).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape

from effectgate.cli.client import policy_reads
from effectgate.cli.client.rpc import Bus
from effectgate.cli.client.session import NatsUrl, console, err_console, on_bus, on_bus_if_up
from effectgate.cli.commands.policy_explain import Read, explain_request
from effectgate.cli.render.policy import changes_table, report_json, summary_line
from effectgate.cli.stack.files import ATTRIBUTES_ENV, PRINCIPALS_ENV, AttributesOption, PrincipalsOption, service_file
from effectgate.contracts.directory import DirectoryInvalid, PrincipalDirectory
from effectgate.contracts.tools.descriptors import ToolDescriptor
from effectgate.policy.cedar.attributes import Attributes, load_attributes
from effectgate.policy.cedar.engine import PolicyEngine
from effectgate.policy.cedar.entities import entities_digest
from effectgate.policy.cedar.loading import build_engine
from effectgate.policy.errors import PolicyInvalid
from effectgate.policy.what_if.simulation import Case, Report, Wanted, cases_from, replay, wanted

__all__ = ["Local", "policy_app"]

policy_app = typer.Typer(
    help="The policy: publish it into the bus, check a file, simulate a change, explain a decision.",
    no_args_is_help=True,
)


@dataclass(frozen=True)
class Local:
    """The principal directory and attributes a policy is built over on this machine, and their files."""

    directory: PrincipalDirectory
    attributes: Attributes
    principals_file: Path
    attributes_file: Path

    def build(self, text: str, descriptors: list[ToolDescriptor]) -> PolicyEngine:
        """The engine of ``text`` (raises :class:`PolicyInvalid`)."""
        return build_engine(text, self.directory, self.attributes, descriptors)

    @property
    def digest(self) -> str:
        """The files' :func:`~effectgate.policy.cedar.entities.entities_digest` (a decision's ``entities_digest``)."""
        return entities_digest(self.directory, self.attributes)

    def read(self) -> str:
        """``read: principal directory <file>, attributes <file>``: the files this command built over."""
        missing = "" if self.attributes_file.exists() else " (not there: no attributes)"
        return f"read: principal directory {self.principals_file}, attributes {self.attributes_file}{missing}"


def _read(file: Path) -> str:
    try:
        return file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        err_console.print(f"[red]error:[/red] cannot read {escape(str(file))}:", escape(str(error)))
        raise typer.Exit(2) from None


def _local(principals: Path | None, attributes: Path | None) -> Local:
    """The files ``up`` gives the policy service unless named (:func:`~effectgate.cli.stack.files.service_file`)."""
    principals_file = service_file(PRINCIPALS_ENV, principals)
    attributes_file = service_file(ATTRIBUTES_ENV, attributes)
    try:
        directory = PrincipalDirectory.from_toml(principals_file.read_text(encoding="utf-8"))
        return Local(directory, load_attributes(attributes_file), principals_file, attributes_file)
    except (OSError, UnicodeDecodeError, DirectoryInvalid, PolicyInvalid) as error:
        reason = getattr(error, "reason", None) or str(error)
        err_console.print("[red]error:[/red]", escape(f"{principals_file} / {attributes_file}: {reason}"))
        raise typer.Exit(2) from None


def _built(file: Path, text: str, local: Local, descriptors: list[ToolDescriptor]) -> PolicyEngine:
    try:
        return local.build(text, descriptors)
    except PolicyInvalid as error:
        headline = error.reason.removesuffix(": " + "; ".join(error.problems)) if error.problems else error.reason
        err_console.print(f"[red]{escape(str(file))}[/red]:", escape(headline))
        for problem in error.problems:  # "<line>:<column>: <message>", as compilers print them
            err_console.print(f"[red]{escape(str(file))}:{escape(problem)}[/red]", soft_wrap=True)
        raise typer.Exit(1) from None


@policy_app.command("publish")
def policy_publish(file: Path, nats_url: NatsUrl = "") -> None:
    """Put the Cedar policy in FILE in force on every policy replica (validated by the policy service first)."""
    text = _read(file)
    reply = on_bus(nats_url, lambda bus: policy_reads.publish(bus, text))
    if not reply.ok:
        err_console.print(f"[red]refused[/red] ({escape(str(file))}):", escape(reply.reason))
        raise typer.Exit(1)
    console.print("[green]published[/green]:", escape(reply.reason))


@policy_app.command("check")
def policy_check(
    file: Path, principals: PrincipalsOption = None, attributes: AttributesOption = None, nats_url: NatsUrl = ""
) -> None:
    """Validate FILE against the schema (principals, attributes and, when a stack is up, the registered tools)."""
    text, local = _read(file), _local(principals, attributes)
    console.print(escape(local.read()), soft_wrap=True)
    listed, why = on_bus_if_up(nats_url, policy_reads.registered)
    if listed is None:
        err_console.print(
            "[yellow]note:[/yellow] no registry reached, checked without the registered tools (a rule reading "
            "context.args is refused):",
            escape(why),
        )
    engine = _built(file, text, local, listed or [])
    for note in engine.notes:
        console.print("note:", escape(note))
    if not engine.policy_ids:
        said = "it holds no policy: every request would be denied"
        err_console.print(f"[red]invalid[/red] ({escape(str(file))}): {said}")
        raise typer.Exit(1)
    console.print(f"[green]valid[/green]: {len(engine.policy_ids)} policies, version {engine.version}")


_DURATION = re.compile(r"^(\d+)([smhd])\Z")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def window_start(since: str, now: datetime) -> datetime:
    """The start of a window like ``90s``, ``30m``, ``24h``, ``7d`` ending ``now``.

    Raises:
        ValueError: ``since`` is not a whole number followed by s, m, h or d.
    """
    found = _DURATION.match(since.strip())
    if found is None:
        raise ValueError(f"--since {since!r}: give a whole number and s, m, h or d (e.g. 24h)")
    return now - timedelta(seconds=int(found[1]) * _UNITS[found[2]])


Gathered = tuple[list[ToolDescriptor], list[Case], dict[Wanted, ToolDescriptor | None], Report]


async def _gather(bus: Bus, since: datetime) -> Gathered:
    report = Report()
    cases = cases_from(await policy_reads.chain(bus), since, report)
    return await policy_reads.registered(bus), cases, await policy_reads.descriptors(bus, wanted(cases)), report


Since = Annotated[str, typer.Option(help="How far back to replay: a number and s, m, h or d.")]
AsJson = Annotated[bool, typer.Option("--json", help="Print the report as JSON.")]


@policy_app.command("simulate")
def policy_simulate(
    file: Path,
    since: Since = "24h",
    as_json: AsJson = False,
    principals: PrincipalsOption = None,
    attributes: AttributesOption = None,
    nats_url: NatsUrl = "",
) -> None:
    """Replay the audit log's recorded decisions through FILE and print what would change (nothing is published)."""
    try:
        start = window_start(since, datetime.now(UTC))
    except ValueError as error:
        err_console.print("[red]error:[/red]", escape(str(error)))
        raise typer.Exit(2) from None
    text, local = _read(file), _local(principals, attributes)
    (err_console if as_json else console).print(escape(local.read()), soft_wrap=True)
    listing, cases, descriptors, report = on_bus(nats_url, lambda bus: _gather(bus, start))
    engine = _built(file, text, local, listing)
    replay(engine, cases, descriptors, report)
    if as_json:
        typer.echo(report_json(report, start, engine.version))
        return
    if report.changes:
        console.print(changes_table(report))
    console.print(escape(summary_line(report, start)))


@policy_app.command("explain")
def policy_explain(
    request_id: str,
    principal: Annotated[str | None, typer.Option(help="The requesting agent, when several used this id.")] = None,
    principals: PrincipalsOption = None,
    attributes: AttributesOption = None,
    nats_url: NatsUrl = "",
) -> None:
    """Show which policies matched REQUEST_ID's call and why: under the version that decided it and the one in force.

    Says which principal directory and attributes it read, and when they differ from those
    the deciding replica used (the decision's ``entities_digest``).
    """
    local = _local(principals, attributes)

    async def work(bus: Bus) -> Any:
        return await explain_request(bus, request_id, principal, local.build, Read(local.read(), local.digest))

    shown, problem = on_bus(nats_url, work)
    if problem:
        err_console.print("[red]error:[/red]", escape(problem))
        raise typer.Exit(1)
    for renderable in shown:
        console.print(renderable)
