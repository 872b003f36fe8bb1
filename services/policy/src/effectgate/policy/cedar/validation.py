"""The checks a policy text passes before an engine is built, each problem placed at ``line:column``."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

import cedarpy

from effectgate.contracts.directory import PrincipalDirectory
from effectgate.policy.cedar.annotations import PolicyInfo
from effectgate.policy.cedar.closed_sets import (
    CONTEXT_VALUES,
    Value,
    annotation_findings,
    literal_findings,
    unread_annotations,
)
from effectgate.policy.cedar.locations import Finding, at, needles_of, parse_error_offset, policy_spans, position
from effectgate.policy.cedar.never_match import never_matching_findings, pst_of
from effectgate.policy.cedar.outcomes import readable
from effectgate.policy.errors import PolicyInvalid

__all__ = ["parse", "validate"]

_PER_ACTION = re.compile(r' for Action::"[^"]*"')
_ECHO = "unable to find an applicable action given the policy scope constraints"
_CAUSES = ("unrecognized entity type", "unrecognized action")
_FOR_POLICY = re.compile(r"^for policy `[^`]*`, ")
_CEDAR_ID = re.compile(r"policy(\d+)")


def parse(policy_text: str) -> cedarpy.PolicySet:
    """The parsed policy set, whose annotations are all ones effectgate reads.

    Raises:
        PolicyInvalid: ``policy does not parse: <line>:<column>: <Cedar's message>``, or
            ``policy annotation refused: …`` naming each annotation effectgate does not read.
    """
    try:
        parsed = cedarpy.PolicySet.from_str(policy_text)
    except ValueError as exc:
        message = str(exc)
        offset = parse_error_offset(policy_text, message)
        placed = f"{position(policy_text, offset)}: {message}" if offset is not None else message
        raise PolicyInvalid(f"policy does not parse: {placed}", problems=(placed,)) from exc
    if unread := unread_annotations(pst_of(policy_text).static_policies):  # before what a misspelling would miss
        _refuse("policy annotation refused", policy_text, unread)
    return parsed


def validate(
    policy_text: str,
    infos: Mapping[str, PolicyInfo],
    schema: cedarpy.Schema,
    directory: PrincipalDirectory,
    closed: Mapping[str, frozenset[Value]],
) -> None:
    """Steps 2 to 4 of the module docstring.

    Args:
        policy_text: text that parses.
        infos: its policies by Cedar id (:func:`effectgate.policy.cedar.annotations.policy_infos`).
        schema: the generated Cedar schema.
        directory: the principal directory (who holds which approver role).
        closed: the ``context.args`` paths with closed values (:data:`CONTEXT_VALUES` is added).

    Raises:
        PolicyInvalid: naming each problem at its position (module docstring).
    """
    result = cedarpy.validate_policies(policy_text, schema)
    if not result.validation_passed:
        found = _cedar_findings(((e.policy_id, str(e.error)) for e in result.errors), infos)
        _refuse("policy fails validation against the effectgate Cedar schema", policy_text, found)
    tree = pst_of(policy_text)
    ids = {cedar_id: info.id for cedar_id, info in infos.items()}
    impossible = never_matching_findings(tree, schema)
    impossible += literal_findings(tree.static_policies, ids, {**CONTEXT_VALUES, **closed})
    if impossible:
        _refuse("policy can never match", policy_text, impossible)
    if unanswerable := annotation_findings(tree.static_policies, directory):
        _refuse("policy annotation refused", policy_text, unanswerable)


def _cedar_findings(errors: Iterable[tuple[str, str]], infos: Mapping[str, PolicyInfo]) -> list[Finding]:
    """Cedar's validation errors, each mistake once (module docstring, step 2)."""
    seen: dict[tuple[str, str], Finding] = {}
    for cedar_id, error in errors:
        message = readable(_PER_ACTION.sub("", error), infos)
        needles = needles_of(_FOR_POLICY.sub("", message))
        seen.setdefault((cedar_id, message), Finding(cedar_id, message, needles[0] if needles else None))
    caused = {cedar_id for cedar_id, message in seen if any(cause in message for cause in _CAUSES)}
    return [f for (cedar_id, message), f in seen.items() if not (cedar_id in caused and _ECHO in message)]


def _index(cedar_id: str) -> int:
    """The file position Cedar's ``policy<N>`` stands for (Cedar numbers policies in file order); -1: none."""
    numbered = _CEDAR_ID.fullmatch(cedar_id)
    return int(numbered[1]) if numbered else -1


def _refuse(what: str, text: str, found: list[Finding]) -> None:
    spans = policy_spans(text, needed=max((_index(f.cedar_id) for f in found), default=-1) + 1)
    placed: list[tuple[tuple[int, int], str]] = []
    for finding in found:
        index = _index(finding.cedar_id)
        span = spans[index] if 0 <= index < len(spans) else None
        where = at(text, span, finding.needle)
        key = tuple(int(n) for n in where.split(":")) if where else (10**9, 0)
        placed.append(((key[0], key[1]), f"{where}: {finding.message}" if where else finding.message))
    problems = tuple(dict.fromkeys(line for _, line in sorted(placed)))
    raise PolicyInvalid(f"{what}: {'; '.join(problems)}", problems=problems)
