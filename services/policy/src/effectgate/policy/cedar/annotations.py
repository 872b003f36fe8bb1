"""What each policy of a Cedar policy set says about itself: its ``@id`` and annotations."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

import cedarpy

from effectgate.policy.cedar.schema import ACTION_APPROVAL
from effectgate.policy.errors import PolicyInvalid

__all__ = ["MAX_APPROVALS", "PolicyInfo", "approvals_required", "policy_infos"]

MAX_APPROVALS: Final = 9
"""The largest quorum ``@approvals_required`` may ask for."""

_QUORUM = re.compile(r"[1-9]")
_CEDAR_ID = re.compile(r"policy(\d+)")


@dataclass(frozen=True, slots=True)
class PolicyInfo:
    """A policy's Cedar-assigned id (``policy<N>``), position, effect and annotations.

    Attributes:
        cedar_id: ``policy<N>``, as Cedar's diagnostics name it.
        position: 0-based position in the file.
        effect: ``permit`` or ``forbid``.
        annotations: annotation name to value.
        approvals_required: the policy's ``@approvals_required`` (1 when absent).
    """

    cedar_id: str
    position: int
    effect: str
    annotations: Mapping[str, str]
    approvals_required: int = 1

    @property
    def id(self) -> str:
        """The policy's ``@id``."""
        return self.annotations["id"]


def policy_infos(policy_text: str) -> dict[str, PolicyInfo]:
    """Every static policy of ``policy_text`` by Cedar id.

    Raises:
        PolicyInvalid: templates, a policy without ``@id`` or with one another policy uses,
            or an invalid ``@approvals_required``.
    """
    document = json.loads(cedarpy.policies_to_json_str(policy_text))
    if document.get("templates"):
        raise PolicyInvalid("policy templates (?principal / ?resource slots) are not supported")
    infos = [_policy_info(cedar_id, body) for cedar_id, body in document.get("staticPolicies", {}).items()]
    seen: dict[str, PolicyInfo] = {}
    for info in sorted(infos, key=lambda i: i.position):
        if info.id in seen:
            raise PolicyInvalid(
                f"@id({info.id!r}) is used by policies #{seen[info.id].position + 1} and #{info.position + 1}"
            )
        seen[info.id] = info
    return {info.cedar_id: info for info in infos}


def approvals_required(infos: Iterable[PolicyInfo]) -> int:
    """The quorum of a call that these approval permits apply to: the largest they ask for (at least 1)."""
    return max((info.approvals_required for info in infos), default=1)


def _policy_info(cedar_id: str, body: Mapping[str, Any]) -> PolicyInfo:
    if not (numbered := _CEDAR_ID.fullmatch(cedar_id)):
        raise PolicyInvalid(f"unexpected policy id {cedar_id!r}: use @id annotations, not explicit ids")
    position = int(numbered[1])
    annotations = {k: v for k, v in (body.get("annotations") or {}).items() if isinstance(v, str)}
    if not annotations.get("id"):
        raise PolicyInvalid(f'policy #{position + 1} in the file has no @id("...") annotation')
    effect = str(body["effect"])
    action = body.get("action") or {}
    quorum = _quorum(annotations, effect, action)
    names_approval = action.get("op") != "All" and _covers_approval(action)
    if effect == "permit" and names_approval and not annotations.get("approver_role"):
        where = f"policy {annotations['id']!r}"
        raise PolicyInvalid(f'{where}: a permit of Action::"{ACTION_APPROVAL}" needs @approver_role("...")')
    return PolicyInfo(cedar_id, position, effect, annotations, quorum)


def _quorum(annotations: Mapping[str, str], effect: str, action: Mapping[str, Any]) -> int:
    """The policy's ``@approvals_required`` (1 when absent), checked.

    Raises:
        PolicyInvalid: not an integer 1..9, or on a policy that is not a permit of the approval action.
    """
    raw = annotations.get("approvals_required")
    if raw is None:
        return 1
    where = f"policy {annotations['id']!r}"
    if not _QUORUM.fullmatch(raw):
        raise PolicyInvalid(f"{where}: @approvals_required must be an integer 1..{MAX_APPROVALS}, got {raw!r}")
    if effect != "permit" or not _covers_approval(action):
        raise PolicyInvalid(f'{where}: @approvals_required applies only to a permit of Action::"{ACTION_APPROVAL}"')
    return int(raw)


def _covers_approval(action: Mapping[str, Any]) -> bool:
    """Whether a policy's action scope (Cedar JSON: ``All``, ``==``, ``in``) includes the approval action."""
    if action.get("op") == "All":
        return True
    entities = action.get("entities") or [action.get("entity") or {}]
    return any(entity.get("id") == ACTION_APPROVAL for entity in entities)
