"""The policy decision core: Cedar policies evaluated over the principal directory.

Pure apart from :func:`load_policy`, which reads the files and hands their text to
:func:`build_engine`. Cedar (``cedarpy``, over the Rust ``cedar-policy`` 4.x) does the
evaluation: a ``forbid`` overrides every ``permit`` and no matching ``permit`` means deny
(https://docs.cedarpolicy.com/auth/authorization.html).

Decision algorithm (guarantee 1, docs/architecture.md: default deny, fail closed):

1. a principal missing from the directory → ``deny`` / ``unknown_principal``;
2. an argument the policy must see without an exact Cedar value → ``deny`` /
   ``argument_untypable`` (:mod:`toolgate.policy.context`; the pipeline refuses it);
3. Cedar allows action ``execute`` → ``execute`` / ``permitted``;
4. Cedar allows action ``execute_with_approval`` → ``needs_approval`` /
   ``approval_required``, the approver role taken from the determining policy's
   ``@approver_role("...")`` annotation (missing or ambiguous → ``deny`` /
   ``policy_invalid``), the quorum the largest ``@approvals_required("N")`` of the
   applying approval permits (:mod:`toolgate.policy.annotations`; default 1);
5. otherwise ``deny``: ``forbidden`` (a ``forbid`` matched; reason from its
   ``@reason("...")``) or ``no_permit`` (nothing permitted).

Any Cedar evaluation error (``deny`` / ``policy_error``) ends the decision, even when
other policies would have allowed. Cedar is handed only the policies whose scope can
match the call's tool and action (:mod:`toolgate.policy.scoping`): the same answer, the
same determining policies and errors, at the cost of those policies alone.

Every policy must carry a unique ``@id("...")``; decisions name policies by it, and the
engine by its :attr:`PolicyEngine.version`.

The schema is generated (:mod:`toolgate.policy.cedar_schema`): ``context.args`` from the
registered input schemas, principal and tool attributes from the attributes file. Whether
a principal may *see* an operation (:meth:`PolicyEngine.may_allow`) is asked with the
argument-derived context unknown, by Cedar's partial evaluation: some arguments could
make the call allowed.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import cedarpy
import msgspec

from toolgate.contracts.descriptors import ToolDescriptor, descriptor_digest
from toolgate.contracts.directory import DirectoryInvalid, PrincipalDirectory
from toolgate.policy.annotations import PolicyInfo, policy_infos
from toolgate.policy.args_schema import CedarType, Vocabulary, operation_types, view
from toolgate.policy.attributes import Attributes, load_attributes
from toolgate.policy.cedar_schema import ACTION_APPROVAL, ACTION_EXECUTE, schema_text
from toolgate.policy.closed_sets import argument_values
from toolgate.policy.context import Untypable, call_context, descriptor_context
from toolgate.policy.entities import entities, entities_digest, strangers
from toolgate.policy.errors import PolicyInvalid
from toolgate.policy.outcomes import Evaluation, Outcomes, PolicyOutcome, deny, evaluation, ids_of
from toolgate.policy.preview import Preview
from toolgate.policy.scoping import ScopedPolicies
from toolgate.policy.validation import parse, validate

__all__ = [
    "ACTION_APPROVAL",
    "ACTION_EXECUTE",
    "PolicyEngine",
    "PolicyOutcome",
    "build_engine",
    "load_policy",
    "policy_version",
    "vocabulary_of",
]


class PolicyEngine:
    """Decides tool requests with a schema-validated Cedar policy set.

    ``version`` names the policy text (:func:`policy_version`), ``entities_digest`` the
    principal directory and attributes it decides over (:func:`~toolgate.policy.entities.entities_digest`);
    every decision carries both.

    Args:
        policy_text: Cedar policies; each needs a unique ``@id("...")``.
        directory: the principals (Cedar ``Agent`` entities) and approvers.
        attributes: declared principal and tool attributes and their values.
        vocabulary: the ``context.args`` record (from the registered input schemas).

    Raises:
        PolicyInvalid: the text does not parse, fails validation against the generated
            schema, holds templates, lacks or repeats an ``@id``, or holds a policy that
            can never match (:mod:`toolgate.policy.never_match`); the attributes do not
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
        self.notes = (*vocabulary.notes, *strangers(directory, attributes), *_unfed(policy_text, vocabulary.fed))
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
        """The Cedar context of a call (:mod:`toolgate.policy.context`).

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

        :mod:`toolgate.policy.preview` (partial evaluation); a principal missing from the
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


def vocabulary_of(descriptors: Iterable[ToolDescriptor]) -> Vocabulary:
    """The ``context.args`` vocabulary of ``descriptors``' operations (and the pointers they declare)."""
    listed = list(descriptors)
    fed = frozenset(f for d in listed for spec in d.operations.values() for f in _READS if getattr(spec, f))
    operations = (
        (f"{d.name}@{d.version}.{op}", spec.input_schema) for d in listed for op, spec in d.operations.items()
    )
    closed = argument_values(spec.input_schema for d in listed for spec in d.operations.values())
    return dataclasses.replace(Vocabulary.of(operations), fed=fed, closed=tuple(sorted(closed.items())))


def build_engine(
    policy_text: str, directory: PrincipalDirectory, attributes: Attributes, descriptors: Iterable[ToolDescriptor]
) -> PolicyEngine:
    """The engine for ``policy_text`` over the registered ``descriptors``' argument vocabulary.

    When the text does not build and some argument name is typed differently by two
    operations, it is tried again with that name typed the other way (each such name in
    turn): the rules, not one registered schema, decide which type the name has.

    Raises:
        PolicyInvalid: see :class:`PolicyEngine` (the first attempt's reason); a rule
            reading an argument no registered tool provides fails schema validation here.
    """
    vocabulary = vocabulary_of(descriptors)
    try:
        return PolicyEngine(policy_text, directory, attributes, vocabulary)
    except PolicyInvalid as first:
        for other in vocabulary.alternatives():
            with contextlib.suppress(PolicyInvalid):
                return PolicyEngine(policy_text, directory, attributes, other)
        raise first


def load_policy(
    policy_path: Path,
    directory_path: Path,
    attributes_path: Path | None = None,
    descriptors: Iterable[ToolDescriptor] = (),
) -> PolicyEngine:
    """Read the Cedar policy file, the principal directory and the attributes, and build the engine.

    Args:
        policy_path: Cedar policy text, e.g. ``deploy/policy/policy.cedar``.
        directory_path: principal directory TOML, e.g. ``deploy/policy/principals.toml``.
        attributes_path: attributes TOML, e.g. ``deploy/policy/attributes.toml`` (missing:
            no attributes).
        descriptors: the registered tools whose arguments policies may read.

    Raises:
        PolicyInvalid: a file is missing, unreadable, not UTF-8 or invalid; ``path``
            names it.
    """
    directory_text, policy_text = _read(directory_path), _read(policy_path)
    attributes = load_attributes(attributes_path) if attributes_path is not None else Attributes()
    try:
        directory = PrincipalDirectory.from_toml(directory_text)
    except DirectoryInvalid as exc:
        raise PolicyInvalid(f"{directory_path}: {exc.reason}", path=str(directory_path)) from exc
    try:
        return build_engine(policy_text, directory, attributes, descriptors)
    except PolicyInvalid as exc:
        raise PolicyInvalid(f"{policy_path}: {exc.reason}", path=str(policy_path), problems=exc.problems) from exc


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise PolicyInvalid(f"cannot read {path}: {exc}", path=str(path)) from exc


_CONTEXT_JSON = msgspec.json.Encoder()
"""The context as JSON text (cedarpy takes it as is; a dict it would ``json.dumps`` per call)."""


def _request(principal: str, action: str, tool: str, context: dict[str, Any]) -> dict[str, Any]:
    return {
        "principal": {"type": "Agent", "id": principal},
        "action": {"type": "Action", "id": action},
        "resource": {"type": "Tool", "id": tool},
        "context": _CONTEXT_JSON.encode(context).decode(),
    }


_READS = {
    "amount": re.compile(r"context\s*(\.\s*amount|has\s+amount)\b"),
    "destination": re.compile(r"context\s*(\.\s*destination_host|has\s+destination_host)\b"),
}


def _unfed(policy_text: str, declared: frozenset[str]) -> list[str]:
    """A note for each descriptor-fed field the policy reads but no registered operation declares."""
    return [
        f"the policy reads context.{'amount' if field == 'amount' else 'destination_host'} but no registered "
        f"operation declares `{field}`: those rules never hold until one does"
        for field, reads in _READS.items()
        if field not in declared and reads.search(policy_text)
    ]


def _schema(text: str) -> cedarpy.Schema:
    try:
        return cedarpy.Schema.from_str(text)
    except ValueError as exc:  # a name the generator let through that Cedar cannot hold
        raise PolicyInvalid(f"the generated Cedar schema does not parse: {exc}") from exc
