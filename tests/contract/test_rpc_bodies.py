"""Every request/reply subject of the catalog has its request and reply bodies declared in contracts."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, get_origin

import msgspec
import pytest

from effectgate.contracts.bus.catalog import Rpc
from effectgate.contracts.bus.paging import PageQuery
from effectgate.contracts.rpc.bodies import RPC_BODIES, Bodies


def rpc_subjects() -> set[str]:
    """Every request/reply subject pattern the catalog declares."""
    return {value for name, value in vars(Rpc).items() if name.isupper() and isinstance(value, str)}


def unbodied(bodies: Mapping[str, Bodies]) -> list[str]:
    """The catalog's request/reply subjects that ``bodies`` gives no entry."""
    return sorted(rpc_subjects() - set(bodies))


def _struct(kind: Any) -> type:
    return get_origin(kind) or kind


def test_every_request_reply_subject_of_the_catalog_has_its_bodies() -> None:
    assert len(rpc_subjects()) > 15
    assert unbodied(RPC_BODIES) == []
    assert sorted(set(RPC_BODIES) - rpc_subjects()) == [], "an entry names a subject the catalog does not"


@pytest.mark.parametrize("subject", sorted(RPC_BODIES))
def test_removing_an_entry_is_caught(subject: str) -> None:
    assert unbodied({s: b for s, b in RPC_BODIES.items() if s != subject}) == [subject]


@pytest.mark.parametrize("subject", sorted(RPC_BODIES))
def test_each_body_is_a_struct_declared_in_the_contracts(subject: str) -> None:
    for kind in RPC_BODIES[subject]:
        struct = _struct(kind)
        assert issubclass(struct, msgspec.Struct), (subject, kind)
        assert struct.__module__.startswith("effectgate.contracts.rpc.") or struct is PageQuery, (subject, kind)
        msgspec.json.schema(kind)  # a wire type msgspec can describe (and so decode)


def test_a_paged_approval_listing_is_read_as_typed_approvals() -> None:
    page = b'{"ok": true, "reason_code": "found", "reason": "", "approvals": [{"approval_id": "ap-1"}]}'
    with pytest.raises(msgspec.ValidationError, match="missing required field"):
        msgspec.json.decode(page, type=RPC_BODIES[Rpc.APPROVALS_LIST].reply)
