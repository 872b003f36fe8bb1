"""The consumers on a call's path are served fair by principal, keyed by the principal each event subject names."""

from __future__ import annotations

from typing import Any

import pytest

from effectgate.contracts.bus import catalog
from effectgate.contracts.bus.catalog import Subjects, principal_of_event
from effectgate.executor.handlers import consumers as executor_consumers
from effectgate.policy.handlers.decisions import consumers as policy_consumers


def _never() -> Any:
    raise AssertionError("no handler runs here")


def test_the_consumers_on_a_calls_path_are_served_fair_by_principal() -> None:
    built = [*policy_consumers(_never), *executor_consumers(_never)]
    fair = {consumer.spec.durable for consumer in built if consumer.fair_by is principal_of_event}
    on_the_path = (catalog.POLICY_CONSUMER, catalog.EXECUTOR_DECISIONS, catalog.EXECUTOR_APPROVALS)
    assert fair == {spec.durable for spec in on_the_path}
    assert all(spec.max_ack_pending == catalog.FAIR_ACK_PENDING for spec in on_the_path[:2])


@pytest.mark.parametrize(
    "subject",
    [
        Subjects.request("a1-00"),
        Subjects.decision("a1-00", "r1"),
        Subjects.needs_approval("a1-00", "r1"),
        Subjects.approval("granted", "a1-00", "r1"),
        Subjects.receipt("a1-00", "r1"),
    ],
)
def test_every_event_subject_of_a_call_names_its_principal(subject: str) -> None:
    assert principal_of_event(subject) == "a1-00"


@pytest.mark.parametrize("subject", ["tg.tool.state.fs", "tg.req.", "tg.req.a b", "tg.decision.a1-00", "x.req.a"])
def test_any_other_subject_has_no_principal(subject: str) -> None:
    assert principal_of_event(subject) is None
