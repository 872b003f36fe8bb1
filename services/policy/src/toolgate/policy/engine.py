"""The policy decision core: Cedar policies evaluated over the principal directory.

Pure apart from :func:`load_policy`, which reads the two files and hands their text to
the pure :class:`PolicyEngine` constructor. Cedar (``cedarpy``, over the Rust
``cedar-policy`` 4.x) does the evaluation: a ``forbid`` overrides every ``permit`` and
no matching ``permit`` means deny (https://docs.cedarpolicy.com/auth/authorization.html).

Decision algorithm (guarantee 1, docs/architecture.md: default deny, fail closed):

1. a principal missing from the directory → ``deny`` / ``unknown_principal``;
2. Cedar allows action ``execute`` → ``execute`` / ``permitted``;
3. Cedar allows action ``execute_with_approval`` → ``needs_approval`` /
   ``approval_required``, the approver role taken from the determining policy's
   ``@approver_role("...")`` annotation (missing or ambiguous → ``deny`` /
   ``policy_invalid``), the quorum the largest ``@approvals_required("N")`` of the
   applying approval permits (:mod:`toolgate.policy.annotations`; default 1);
4. otherwise ``deny``: ``forbidden`` (a ``forbid`` matched; reason from its
   ``@reason("...")``) or ``no_permit`` (nothing permitted).

Any Cedar evaluation error (``deny`` / ``policy_error``) ends the decision, even when
other policies would have allowed. Every policy must carry a unique ``@id("...")``;
decisions name policies by it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import cedarpy

from toolgate.policy.annotations import PolicyInfo, approvals_required, policy_infos
from toolgate.policy.cedar_schema import ACTION_APPROVAL, ACTION_EXECUTE, SCHEMA_TEXT
from toolgate.policy.errors import PolicyInvalid
from toolgate.policy.never_match import never_matching
from toolgate.shared.descriptors import OperationSpec
from toolgate.shared.directory import DirectoryInvalid, PrincipalDirectory
from toolgate.shared.vocabulary import Verdict

__all__ = ["ACTION_APPROVAL", "ACTION_EXECUTE", "SCHEMA_TEXT", "PolicyEngine", "PolicyOutcome", "load_policy"]

_SCHEMA = cedarpy.Schema.from_str(SCHEMA_TEXT)
_POLICY_REF = re.compile(r"`(policy\d+)`")


@dataclass(frozen=True, slots=True)
class PolicyOutcome:
    """What the policy says about one tool request.

    Attributes:
        verdict: ``execute``, ``needs_approval`` or ``deny``.
        reason_code: ``permitted``, ``approval_required``, ``forbidden``, ``no_permit``,
            ``unknown_principal``, ``policy_error`` or ``policy_invalid``.
        reason: human-readable reason naming the policies involved.
        approver_role: role entitled to approve (``needs_approval`` only).
        policy_ids: ``@id`` of the determining policies, in file order.
        approvals_required: distinct entitled approvers needed (``needs_approval`` only).
    """

    verdict: Verdict
    reason_code: str
    reason: str
    approver_role: str | None = None
    policy_ids: tuple[str, ...] = ()
    approvals_required: int = 1


@dataclass(frozen=True, slots=True)
class _Evaluation:
    """One Cedar answer: allowed, determining policies (Cedar ids), evaluation errors."""

    allowed: bool
    determining: tuple[str, ...]
    errors: tuple[str, ...]


class PolicyEngine:
    """Decides tool requests with a schema-validated Cedar policy set.

    Args:
        policy_text: Cedar policies; each needs a unique ``@id("...")``.
        directory: the principals (Cedar ``Agent`` entities) and approvers.

    Raises:
        PolicyInvalid: the text does not parse, fails validation against
            :data:`SCHEMA_TEXT`, holds templates, lacks or repeats an ``@id``, or holds a
            policy that can never match (:mod:`toolgate.policy.never_match`).
    """

    def __init__(self, policy_text: str, directory: PrincipalDirectory) -> None:
        self._policy_set = _parse(policy_text)
        self._infos = policy_infos(policy_text)
        _validate(policy_text, self._infos)
        self._directory = directory
        self._entities = _agent_entities(directory)

    @property
    def directory(self) -> PrincipalDirectory:
        """The principal directory the engine decides over."""
        return self._directory

    @property
    def policy_ids(self) -> tuple[str, ...]:
        """``@id`` of every policy, in file order."""
        return _ids(self._known(self._infos))

    def decide(self, principal: str, tool: str, version: str, operation: str, spec: OperationSpec) -> PolicyOutcome:
        """Decide whether ``principal`` may call ``tool@version`` ``operation``.

        Args:
            principal: the caller, taken from the transport.
            tool: tool name.
            version: resolved tool version.
            operation: operation name.
            spec: the operation's descriptor (side-effect class, risk tier).

        Returns:
            The outcome; every failure is a ``deny`` outcome, never an exception.
        """
        if self._directory.principal(principal) is None:
            return _deny("unknown_principal", f"principal {principal!r} is not in the principal directory")
        execute, approval = self._evaluate(principal, tool, _context(tool, version, operation, spec))
        if execute.errors or execute.allowed:
            return self._errored(execute) if execute.errors else self._permitted(execute)
        if approval.errors or approval.allowed:
            return self._errored(approval) if approval.errors else self._needs_approval(approval)
        call = f"{principal!r} to call {tool}@{version} {operation}"
        call += f" ({spec.side_effect_class}, risk {spec.risk_tier})"
        return self._denied(execute, approval, call)

    def _evaluate(self, principal: str, tool: str, context: dict[str, Any]) -> tuple[_Evaluation, _Evaluation]:
        requests = [_request(principal, action, tool, context) for action in (ACTION_EXECUTE, ACTION_APPROVAL)]
        try:
            results = cedarpy.is_authorized_batch(requests, self._policy_set, self._entities, _SCHEMA)
            execute, approval = (_evaluation(result) for result in results)
        except Exception as exc:  # any engine failure fails closed
            failed = _Evaluation(allowed=False, determining=(), errors=(f"cedar failed: {exc!r}",))
            return failed, failed
        return execute, approval

    def _permitted(self, evaluation: _Evaluation) -> PolicyOutcome:
        ids = _ids(self._known(evaluation.determining))
        return PolicyOutcome(Verdict.EXECUTE, "permitted", f"permitted by policy {', '.join(ids)}", None, ids)

    def _needs_approval(self, evaluation: _Evaluation) -> PolicyOutcome:
        infos = self._known(evaluation.determining)
        ids = _ids(infos)
        if missing := [info.id for info in infos if not info.annotations.get("approver_role")]:
            reason = f"policy {', '.join(missing)} permits {ACTION_APPROVAL} without @approver_role"
            return _deny("policy_invalid", reason, ids)
        roles = sorted({info.annotations["approver_role"] for info in infos})
        if len(roles) != 1:  # several roles, or no determining policy at all
            return _deny("policy_invalid", f"policies {', '.join(ids)} name approver roles {roles}", ids)
        quorum = approvals_required(infos)
        by = f"{quorum} approvers with role {roles[0]!r}" if quorum > 1 else f"role {roles[0]!r}"
        reason = f"approval by {by} required by policy {', '.join(ids)}"
        return PolicyOutcome(Verdict.NEEDS_APPROVAL, "approval_required", reason, roles[0], ids, quorum)

    def _denied(self, execute: _Evaluation, approval: _Evaluation, call: str) -> PolicyOutcome:
        determining = self._known((*execute.determining, *approval.determining))
        forbids = [info for info in determining if info.effect == "forbid"]
        if not forbids:
            return _deny("no_permit", f"default deny: no policy permits {call}")
        reason = forbids[0].annotations.get("reason") or f"forbidden by policy {forbids[0].id}"
        return _deny("forbidden", reason, _ids(forbids))

    def _errored(self, evaluation: _Evaluation) -> PolicyOutcome:
        message = "; ".join(evaluation.errors)
        ids = _ids(self._known(_POLICY_REF.findall(message)))
        return _deny("policy_error", f"policy evaluation failed: {_readable(message, self._infos)}", ids)

    def _known(self, cedar_ids: Iterable[str]) -> list[PolicyInfo]:
        """The policies behind Cedar ids, once each, in file order."""
        unique = {c: self._infos[c] for c in cedar_ids if c in self._infos}
        return sorted(unique.values(), key=lambda info: info.position)


def load_policy(policy_path: Path, directory_path: Path) -> PolicyEngine:
    """Read the Cedar policy file and the principal directory, and build the engine.

    Args:
        policy_path: Cedar policy text, e.g. ``deploy/policy/policy.cedar``.
        directory_path: principal directory TOML, e.g. ``deploy/policy/principals.toml``.

    Raises:
        PolicyInvalid: a file is missing, unreadable, not UTF-8 or invalid; ``path``
            names it.
    """
    directory_text, policy_text = _read(directory_path), _read(policy_path)
    try:
        directory = PrincipalDirectory.from_toml(directory_text)
    except DirectoryInvalid as exc:
        raise PolicyInvalid(f"{directory_path}: {exc.reason}", path=str(directory_path)) from exc
    try:
        return PolicyEngine(policy_text, directory)
    except PolicyInvalid as exc:
        raise PolicyInvalid(f"{policy_path}: {exc.reason}", path=str(policy_path)) from exc


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise PolicyInvalid(f"cannot read {path}: {exc}", path=str(path)) from exc


def _ids(infos: Iterable[PolicyInfo]) -> tuple[str, ...]:
    return tuple(info.id for info in infos)


def _readable(message: str, infos: Mapping[str, PolicyInfo]) -> str:
    """Replace Cedar's positional ids (`` `policy3` ``) in ``message`` with ``@id`` values."""
    return _POLICY_REF.sub(lambda m: f"`{infos[m[1]].id}`" if m[1] in infos else m[0], message)


def _deny(reason_code: str, reason: str, policy_ids: tuple[str, ...] = ()) -> PolicyOutcome:
    return PolicyOutcome(Verdict.DENY, reason_code, reason, None, policy_ids)


def _context(tool: str, version: str, operation: str, spec: OperationSpec) -> dict[str, Any]:
    return {
        "operation": operation,
        "side_effect": spec.side_effect_class.value,
        "side_effect_rank": spec.side_effect_class.rank,
        "risk": spec.risk_tier.value,
        "risk_rank": spec.risk_tier.rank,
        "tool": tool,
        "version": version,
    }


def _request(principal: str, action: str, tool: str, context: dict[str, Any]) -> dict[str, Any]:
    return {
        "principal": {"type": "Agent", "id": principal},
        "action": {"type": "Action", "id": action},
        "resource": {"type": "Tool", "id": tool},
        "context": context,
    }


def _evaluation(result: cedarpy.AuthzResult) -> _Evaluation:
    diagnostics = result.diagnostics
    allowed = result.decision is cedarpy.Decision.Allow
    return _Evaluation(allowed=allowed, determining=tuple(diagnostics.reasons), errors=tuple(diagnostics.errors))


def _parse(policy_text: str) -> cedarpy.PolicySet:
    try:
        return cedarpy.PolicySet.from_str(policy_text)
    except ValueError as exc:
        raise PolicyInvalid(f"policy does not parse: {exc}") from exc


def _validate(policy_text: str, infos: Mapping[str, PolicyInfo]) -> None:
    result = cedarpy.validate_policies(policy_text, _SCHEMA)
    if not result.validation_passed:
        problems = "; ".join(_readable(str(error.error), infos) for error in result.errors)
        raise PolicyInvalid(f"policy fails validation against the toolgate Cedar schema: {problems}")
    if impossible := never_matching(policy_text, _SCHEMA):
        raise PolicyInvalid(f"policy can never match: {'; '.join(impossible)}")


def _agent_entities(directory: PrincipalDirectory) -> cedarpy.Entities:
    entities = [
        {
            "uid": {"type": "Agent", "id": p.name},
            "attrs": {"autonomy": p.autonomy, "roles": sorted(p.roles)},
            "parents": [],
        }
        for p in directory.principals.values()
    ]
    try:
        return cedarpy.Entities.from_json_str(json.dumps(entities), _SCHEMA)
    except ValueError as exc:
        raise PolicyInvalid(f"principal directory does not fit the Cedar schema: {exc}") from exc
