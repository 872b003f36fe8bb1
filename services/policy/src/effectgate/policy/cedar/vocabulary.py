"""The ``context.args`` vocabulary an engine is built over: the registered operations' arguments.

:func:`vocabulary_of` gathers the argument types of every registered operation (and which
descriptor-fed fields, ``amount`` and ``destination_host``, some operation declares);
:func:`unfed_notes` names a fed field a policy reads that no operation declares. Pure.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable

from effectgate.contracts.tools.descriptors import ToolDescriptor
from effectgate.policy.cedar.args_schema import Vocabulary
from effectgate.policy.cedar.closed_sets import argument_values

__all__ = ["READS", "unfed_notes", "vocabulary_of"]

READS = {
    "amount": re.compile(r"context\s*(\.\s*amount|has\s+amount)\b"),
    "destination": re.compile(r"context\s*(\.\s*destination_host|has\s+destination_host)\b"),
}
"""How a policy text reads each descriptor-fed field, by the descriptor's field name."""


def vocabulary_of(descriptors: Iterable[ToolDescriptor]) -> Vocabulary:
    """The ``context.args`` vocabulary of ``descriptors``' operations (and the pointers they declare)."""
    listed = list(descriptors)
    fed = frozenset(f for d in listed for spec in d.operations.values() for f in READS if getattr(spec, f))
    operations = (
        (f"{d.name}@{d.version}.{op}", spec.input_schema) for d in listed for op, spec in d.operations.items()
    )
    closed = argument_values(spec.input_schema for d in listed for spec in d.operations.values())
    return dataclasses.replace(Vocabulary.of(operations), fed=fed, closed=tuple(sorted(closed.items())))


def unfed_notes(policy_text: str, declared: frozenset[str]) -> list[str]:
    """A note for each descriptor-fed field the policy reads but no registered operation declares."""
    return [
        f"the policy reads context.{'amount' if field == 'amount' else 'destination_host'} but no registered "
        f"operation declares `{field}`: those rules never hold until one does"
        for field, reads in READS.items()
        if field not in declared and reads.search(policy_text)
    ]
