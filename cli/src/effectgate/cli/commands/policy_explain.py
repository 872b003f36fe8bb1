"""``effectgate policy explain REQUEST_ID``: a recorded decision evaluated again, and why each policy applied.

The request's records come from the audit trail (``tg.audit.trail``): its first decision and
its call (the bound request, or for a hidden call the recorded ``ToolRequested``).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rich.console import RenderableType
from rich.text import Text

from effectgate.cli.client import policy_reads
from effectgate.cli.client.rpc import Bus
from effectgate.cli.render.policy import explanation_panel
from effectgate.contracts.events import DecisionMade
from effectgate.contracts.tools.descriptors import ToolDescriptor
from effectgate.contracts.tools.secret_arguments import redact_sealed
from effectgate.policy.cedar.engine import PolicyEngine
from effectgate.policy.errors import PolicyInvalid
from effectgate.policy.what_if.explain import explain
from effectgate.policy.what_if.simulation import Call, call_of, recorded
from effectgate.shared.stores.policy_kv import PublishedPolicy

__all__ = ["Read", "explain_request"]

Build = Callable[[str, list[ToolDescriptor]], PolicyEngine]
Shown = tuple[list[RenderableType], str | None]


@dataclass(frozen=True)
class Read:
    """What the command read to evaluate with.

    Attributes:
        line: which principal directory and attributes files (one line).
        digest: their :func:`~effectgate.policy.cedar.entities.entities_digest`.
    """

    line: str
    digest: str


def _inert(text: str) -> Text:
    return Text("".join(c if c.isprintable() else repr(c)[1:-1] for c in text))


async def explain_request(bus: Bus, request_id: str, principal: str | None, build: Build, read: Read) -> Shown:
    """What to print for ``request_id`` (``principal``: whose, when several agents used the id), or the problem."""
    found = recorded(await policy_reads.trail(bus, request_id))
    made = [d for (p, rid), d in found.decisions.items() if rid == request_id and principal in (None, p)]
    if len(made) != 1:
        return [], _not_one(request_id, sorted(d.principal for d in made))
    decision, call = made[0], call_of(made[0], found.requests)
    shown: list[RenderableType] = [_header(decision, call), _files(read, decision)]
    if call is None:
        return [*shown, Text("its call is not in the audit log: nothing to evaluate")], None
    descriptor = await policy_reads.descriptor(bus, call[0], call[1])
    if descriptor is None or call[2] not in descriptor.operations:
        return [*shown, _inert(f"{call[0]}@{call[1] or 'latest'} {call[2]} is no longer registered")], None
    listing = await policy_reads.registered(bus)
    versions = await _versions(bus, decision)
    for title, policy in versions:
        shown.append(_evaluated(title, policy, build, listing, descriptor, decision.principal, call))
    return shown, None


def _files(read: Read, decision: DecisionMade) -> RenderableType:
    """The files read, and whether the deciding replica decided over the same (its ``entities_digest``)."""
    said = decision.entities_digest
    if said is None:
        note = _inert("the decision does not name the principal directory and attributes it was made over")
    elif said == read.digest:
        note = _inert("the deciding replica decided over the same principal directory and attributes")
    else:
        note = _inert(
            f"warning: these differ from the principal directory and attributes the deciding replica used "
            f"({said} there, {read.digest} here): the evaluations below use the files read here"
        )
        note.stylize("yellow")
    return Text("\n").join([_inert(read.line), note])


def _not_one(request_id: str, principals: list[str]) -> str:
    if principals:
        return f"agents {', '.join(principals)} all used request id {request_id!r}: choose one with --principal"
    hint = " (that is an approval id: `approvals list` shows its request id)" if request_id.startswith("ap-") else ""
    return f"no recorded decision for request {request_id!r}{hint}"


def _header(decision: DecisionMade, call: Call | None) -> RenderableType:
    said = decision.policy_verdict.value if decision.policy_verdict else "not asked (the request ended before)"
    lines = [
        f"request {decision.request_id} of agent {decision.principal}",
        f"decided {decision.occurred_at.isoformat(timespec='seconds')}: {decision.verdict.value} "
        f"({decision.reason_code}) — {decision.reason}",
        f"the policy said: {said}; decided under version {decision.policy_version or 'unknown (not recorded)'}",
    ]
    if decision.hidden_reason_code:
        lines.append(f"hidden from the agent; the policy said {decision.hidden_reason_code}: {decision.hidden_reason}")
    if call is not None:
        tool, version, operation, arguments, _, _ = call
        shown = json.dumps(redact_sealed(arguments), sort_keys=True, ensure_ascii=False)
        lines.append(f"call: {tool}@{version or 'latest'} {operation} {shown}")
    return Text("\n").join(_inert(line) for line in lines)  # each line inert, the breaks real


async def _versions(bus: Bus, decision: DecisionMade) -> list[tuple[str, PublishedPolicy | str]]:
    """``(title, policy or why it is missing)`` for the deciding version and the one in force."""
    now = await policy_reads.in_force(bus)
    made_by: PublishedPolicy | str = "the decision names no policy version"
    if decision.policy_version is not None:
        made_by = await policy_reads.published(bus, decision.policy_version) or (
            f"version {decision.policy_version} is not in the policy bucket"
        )
    if isinstance(made_by, PublishedPolicy) and now is not None and now.version == made_by.version:
        return [(f"version {now.version}: decided this request, and is in force now", now)]
    in_force: PublishedPolicy | str = now or "no policy is in force"
    version = now.version if now else "none"
    return [("the version that decided this request", made_by), (f"in force now: {version}", in_force)]


def _evaluated(
    title: str,
    policy: PublishedPolicy | str,
    build: Build,
    listing: list[ToolDescriptor],
    descriptor: ToolDescriptor,
    principal: str,
    call: Call,
) -> RenderableType:
    if isinstance(policy, str):
        return _inert(f"{title}: {policy}")
    try:
        engine = build(policy.text, listing)
    except PolicyInvalid as error:
        return _inert(f"{title}: {policy.version} does not build here: {error.reason}")
    arguments: dict[str, Any] = call[3]
    explained = explain(engine, principal, descriptor, call[2], arguments)
    published = f"published {policy.published_at:%Y-%m-%d %H:%M} from {policy.source}"
    return explanation_panel(f"{title} ({published})", explained)
