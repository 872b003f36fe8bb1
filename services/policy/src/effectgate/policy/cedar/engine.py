"""The policy decision core: Cedar policies evaluated over the principal directory.

Pure. An engine is built over the registered tools' argument vocabulary
(:mod:`effectgate.policy.cedar.vocabulary`) by :mod:`effectgate.policy.cedar.loading`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

import cedarpy
import msgspec

from effectgate.contracts.directory import PrincipalDirectory
from effectgate.contracts.tools.descriptors import ToolDescriptor, descriptor_digest
from effectgate.policy.cedar.annotations import PolicyInfo, policy_infos
from effectgate.policy.cedar.args_schema import CedarType, Vocabulary, operation_types, view
from effectgate.policy.cedar.attributes import Attributes
from effectgate.policy.cedar.context import Untypable, call_context, descriptor_context
from effectgate.policy.cedar.entities import entities, entities_digest, strangers
from effectgate.policy.cedar.outcomes import Evaluation, Outcomes, PolicyOutcome, deny, evaluation, ids_of
from effectgate.policy.cedar.schema import ACTION_APPROVAL, ACTION_EXECUTE, schema_text
from effectgate.policy.cedar.scoping import ScopedPolicies
from effectgate.policy.cedar.validation import parse, validate
from effectgate.policy.cedar.vocabulary import unfed_notes
from effectgate.policy.errors import PolicyInvalid
from effectgate.policy.what_if.preview import Preview

__all__ = [
    "ACTION_APPROVAL",
    "ACTION_EXECUTE",
    "PolicyEngine",
    "PolicyOutcome",
    "policy_version",
]


class PolicyEngine:
    """Decides tool requests with a schema-validated Cedar policy set.

    ``version`` names the policy text (:func:`policy_version`), ``entities_digest`` the
    principal directory and attributes it decides over (:func:`~effectgate.policy.cedar.entities.entities_digest`);
    every decision carries both.

    Args:
        policy_text: Cedar policies; each needs a unique ``@id("...")``.
        directory: the principals (Cedar ``Agent`` entities) and approvers.
        attributes: declared principal and tool attributes and their values.
        vocabulary: the ``context.args`` record (from the registered input schemas).

    Raises:
        PolicyInvalid: the text does not parse, fails validation against the generated
            schema, holds templates, lacks or repeats an ``@id``, or holds a policy that
            can never match (:mod:`effectgate.policy.cedar.never_match`); the attributes do not
            fit the schema.
    """

    def __init__(
        self,
        policy_text: str,
        directory: PrincipalDirectory,
        attributes: Attributes | None = None,
        vocabulary: Vocabulary | None = None,
    ) -> None:
        attributes, vocabulary = attributes or Attributes(), vocabulary or Vocabulary((), ())
        self.schema_text = schema_text(vocabulary.record(), attributes.agent_types, attributes.tool_types)
        self._schema = _schema(self.schema_text)
        self._policy_set = parse(policy_text)
        self._scoped = ScopedPolicies(policy_text)  # per (tool, action): only what can apply
        self._infos = policy_infos(policy_text)
        self._outcomes = Outcomes(self._infos)
        validate(policy_text, self._infos, self._schema, directory, dict(vocabulary.closed))
        self._directory, self._args = directory, vocabulary.record()
        self._entities = entities(directory, attributes, self._schema)
        self.entities_digest = entities_digest(directory, attributes)
        self.text, self.version = policy_text, policy_version(policy_text)
        self.notes = (*vocabulary.notes, *strangers(directory, attributes), *unfed_notes(policy_text, vocabulary.fed))
        self._views: dict[tuple[str, str], tuple[CedarType, tuple[str, ...]]] = {}
        self._own: dict[tuple[str, str], dict[str, Any]] = {}
        self._preview = Preview(self._policy_set, self._entities)

    @property
    def directory(self) -> PrincipalDirectory:
        """The principal directory the engine decides over."""
        return self._directory

    @property
    def policies(self) -> Mapping[str, PolicyInfo]:
        """Every policy by Cedar's positional id (``policy<N>``): its ``@id``, effect and annotations."""
        return self._infos

    def evaluate(self, principal: str, tool: str, context: dict[str, Any]) -> tuple[Evaluation, Evaluation]:
        """Cedar's answers for ``execute`` and ``execute_with_approval`` in ``context`` (for explaining)."""
        execute = self._evaluate(principal, ACTION_EXECUTE, tool, context)
        return execute, self._evaluate(principal, ACTION_APPROVAL, tool, context)

    @property
    def policy_ids(self) -> tuple[str, ...]:
        """``@id`` of every policy, in file order."""
        return ids_of(self._outcomes.known(self._infos))

    def decide(
        self, principal: str, descriptor: ToolDescriptor, operation: str, arguments: Mapping[str, Any]
    ) -> PolicyOutcome:
        """Decide whether ``principal`` may call ``descriptor``'s ``operation`` with ``arguments``.

        Args:
            principal: the caller, taken from the transport.
            descriptor: the resolved tool descriptor; ``operation`` must be one of its operations.
            operation: operation name.
            arguments: the call's arguments, valid against the operation's input schema.

        Returns:
            The outcome; every failure is a ``deny`` outcome, never an exception.
        """
        if self._directory.principal(principal) is None:
            return deny("unknown_principal", f"principal {principal!r} is not in the principal directory")
        try:
            context = self.context(descriptor, operation, arguments)
        except Untypable as error:
            return deny("argument_untypable", f"argument {error} (it cannot be given to the policy)")
        execute = self._evaluate(principal, ACTION_EXECUTE, descriptor.name, context)
        if execute.errors or execute.allowed:  # the common case: the second question is not asked
            return self._outcomes.errored(execute) if execute.errors else self._outcomes.permitted(execute)
        approval = self._evaluate(principal, ACTION_APPROVAL, descriptor.name, context)
        if approval.errors or approval.allowed:
            return self._outcomes.errored(approval) if approval.errors else self._outcomes.needs_approval(approval)
        spec = descriptor.operations[operation]
        call = f"{principal!r} to call {descriptor.name}@{descriptor.version} {operation}"
        call += f" ({spec.side_effect_class}, risk {spec.risk_tier})"
        return self._outcomes.denied(execute, approval, call)

    def context(self, descriptor: ToolDescriptor, operation: str, arguments: Mapping[str, Any]) -> dict[str, Any]:
        """The Cedar context of a call (:mod:`effectgate.policy.cedar.context`).

        Raises:
            Untypable: an argument the policy must see has no exact Cedar value.
        """
        spec = descriptor.operations[operation]
        shown, retyped = self._typed(descriptor, operation)
        if given := next((name for name in retyped if name in arguments), None):  # fail closed, never unseen
            raise Untypable(f"/{given}", "is typed otherwise by another registered tool, so the policy cannot see it")
        key = (descriptor_digest(descriptor), operation)
        if (own := self._own.get(key)) is None:  # the same for every call of the operation
            own = self._own[key] = descriptor_context(descriptor.name, descriptor.version, operation, spec)
        return {**own, **call_context(spec, shown, arguments)}

    def may_allow(self, principal: str, descriptor: ToolDescriptor, operation: str) -> bool:
        """Whether some arguments could let ``principal`` call ``operation`` (directly or with approval).

        :mod:`effectgate.policy.what_if.preview` (partial evaluation); a principal missing from the
        directory or an evaluation error: ``False``.
        """
        if principal not in self._directory.principals:
            return False
        return self._preview.may_allow(principal, descriptor, operation, self._view(descriptor, operation))

    def _view(self, descriptor: ToolDescriptor, operation: str) -> CedarType:
        return self._typed(descriptor, operation)[0]

    def _typed(self, descriptor: ToolDescriptor, operation: str) -> tuple[CedarType, tuple[str, ...]]:
        """The operation's argument types the vocabulary holds, and its names typed otherwise there."""
        key = (descriptor_digest(descriptor), operation)
        if (seen := self._views.get(key)) is None:
            own, _ = operation_types(descriptor.operations[operation].input_schema, operation)
            shown = view(CedarType("Record", attributes=tuple(sorted(own.items()))), self._args) or CedarType("Record")
            kept = dict(shown.attributes)
            seen = self._views[key] = (shown, tuple(n for n in own if n not in kept and self._args.attribute(n)))
        return seen

    def _evaluate(self, principal: str, action: str, tool: str, context: dict[str, Any]) -> Evaluation:
        request = _request(principal, action, tool, context)
        try:
            policies = self._scoped.for_call(tool, action)
            return evaluation(cedarpy.is_authorized(request, policies, self._entities, self._schema))
        except Exception as exc:  # any engine failure fails closed
            return Evaluation(allowed=False, determining=(), errors=(f"cedar failed: {exc!r}",))


def policy_version(policy_text: str) -> str:
    """The version of a policy text: ``sha256:<hex>`` of its UTF-8 bytes."""
    return "sha256:" + hashlib.sha256(policy_text.encode("utf-8")).hexdigest()


_CONTEXT_JSON = msgspec.json.Encoder()
"""The context as JSON text (cedarpy takes it as is; a dict it would ``json.dumps`` per call)."""


def _request(principal: str, action: str, tool: str, context: dict[str, Any]) -> dict[str, Any]:
    return {
        "principal": {"type": "Agent", "id": principal},
        "action": {"type": "Action", "id": action},
        "resource": {"type": "Tool", "id": tool},
        "context": _CONTEXT_JSON.encode(context).decode(),
    }


def _schema(text: str) -> cedarpy.Schema:
    try:
        return cedarpy.Schema.from_str(text)
    except ValueError as exc:  # a name the generator let through that Cedar cannot hold
        raise PolicyInvalid(f"the generated Cedar schema does not parse: {exc}") from exc
