"""Which governed request an MCP call belongs to (the retry rule)."""

from __future__ import annotations

import pytest

from effectgate.surface.calls import arguments_digest, call_key, fresh_entry, reusable, settled

ARGS = {"path": "a.txt", "content": "x"}


def test_a_resend_with_a_new_json_rpc_id_is_the_same_call_and_argument_order_does_not_matter() -> None:
    assert call_key("p", "fs__write", ARGS, None) == call_key("p", "fs__write", {"content": "x", "path": "a.txt"}, None)


@pytest.mark.parametrize(
    "other",
    [("q", "fs__write", ARGS, None), ("p", "fs__read", ARGS, None), ("p", "fs__write", {"path": "b"}, None)],
)
def test_another_principal_tool_or_arguments_is_another_call(other: tuple) -> None:  # type: ignore[type-arg]
    assert call_key(*other) != call_key("p", "fs__write", ARGS, None)


def test_a_client_key_names_the_call_whatever_the_arguments() -> None:
    assert call_key("p", "fs__write", ARGS, "k") == call_key("p", "fs__read", {}, "k")
    assert call_key("p", "fs__write", ARGS, "k") != call_key("p", "fs__write", ARGS, "k2")
    assert call_key("p", "fs__write", ARGS, "k").startswith("p.")


@pytest.mark.parametrize("key", ["", "k" * 201])
def test_a_client_key_out_of_bounds_is_refused(key: str) -> None:
    with pytest.raises(ValueError, match="1-200"):
        call_key("p", "fs__write", ARGS, key)


def test_an_argument_without_canonical_form_is_refused() -> None:
    with pytest.raises(ValueError):
        arguments_digest("fs__read", {"n": 2**60})


def test_a_client_key_is_bound_to_the_tool_as_well_as_the_arguments() -> None:
    assert arguments_digest("fs__list", {"path": "a"}) != arguments_digest("fs__read", {"path": "a"})


def test_new_calls_get_their_own_idempotency_keys_a_client_key_keeps_one() -> None:
    key = call_key("p", "fs__write", ARGS, None)
    one, two = (fresh_entry(key, False, None, "d") for _ in range(2))
    assert one.idempotency_key != two.idempotency_key and one.request_id != two.request_id
    keyed = call_key("p", "fs__write", ARGS, "k")
    assert fresh_entry(keyed, False, "k", "d").idempotency_key == fresh_entry(keyed, False, "k", "d").idempotency_key


def test_an_unsettled_call_is_always_resent_to() -> None:
    entry = fresh_entry("p.x", False, None, "d")
    assert reusable(entry, now=10_000.0, grace_s=0.0, client_key=False)


@pytest.mark.parametrize(
    ("read_only", "outcome", "reason", "within", "after"),
    [
        (False, "succeeded", "ok", True, False),  # a write's outcome: re-sends get it during the grace
        (False, "uncertain", "timeout", True, False),
        (False, "denied", "withdrawn", False, False),  # nothing happened: a new call may run
        (False, "refused", "schema_invalid", False, False),
        (True, "succeeded", "ok", False, False),  # a read runs again: it has no effect
    ],
)
def test_after_the_outcome_only_a_possible_effect_is_kept_for_the_grace(
    read_only: bool, outcome: str, reason: str, within: bool, after: bool
) -> None:
    entry = settled(fresh_entry("p.x", read_only, None, "d"), outcome, reason, now=100.0)
    assert reusable(entry, now=150.0, grace_s=60.0, client_key=False) is within
    assert reusable(entry, now=161.0, grace_s=60.0, client_key=False) is after
    assert reusable(entry, now=10_000.0, grace_s=60.0, client_key=True)  # a client's key is for good
