"""The hash chain built and verified in memory."""

from __future__ import annotations

import hashlib

import msgspec
import pytest

from effectgate.audit.domain import (
    GENESIS,
    AuditEntry,
    AuditRecord,
    ChainFault,
    chain_hash,
    next_record,
    raise_if_broken,
    verify_chain,
)
from effectgate.audit.errors import ChainBroken
from effectgate.contracts.integrity.canonical import sha256_hex


def _event(i: int) -> dict[str, object]:
    return {
        "stream_seq": 100 + i,
        "subject": f"tg.req.agent{i % 2}",
        "event_type": "tool.requested",
        "request_id": f"req-{i % 2}",
        "principal": f"agent{i % 2}",
        "occurred_at": f"2026-01-01T00:00:0{i}Z",
        "payload": f'{{"type":"tool.requested","n":{i}}}',
    }


def _chain(n: int = 5) -> list[AuditRecord]:
    records: list[AuditRecord] = []
    for i in range(1, n + 1):
        records.append(next_record(records[-1] if records else None, AuditEntry(**_event(i))))  # type: ignore[arg-type]
    return records


def test_next_record_links_and_numbers() -> None:
    chain = _chain(3)
    assert [r.sequence for r in chain] == [1, 2, 3]
    assert chain[0].prev_hash == GENESIS
    assert chain[1].prev_hash == chain[0].hash
    assert chain[2].prev_hash == chain[1].hash
    assert len({r.hash for r in chain}) == 3


def test_chain_hash_is_sha256_of_canonical_fields() -> None:
    first = _chain(1)[0]
    body = {
        "prev_hash": GENESIS,
        "sequence": 1,
        "stream_seq": first.stream_seq,
        "subject": first.subject,
        "event_type": first.event_type,
        "request_id": first.request_id,
        "principal": first.principal,
        "occurred_at": first.occurred_at,
        "payload_sha256": "sha256:" + hashlib.sha256(first.payload.encode()).hexdigest(),
    }
    assert first.hash == sha256_hex(body)
    assert chain_hash(GENESIS, msgspec.structs.asdict(first)) == first.hash


def test_a_chain_of_five_verifies() -> None:
    result = verify_chain(_chain(5))
    assert result.ok
    assert result.checked == 5
    assert result.first_broken is None
    assert result.reason_code is None
    raise_if_broken(result)


def test_empty_chain_verifies() -> None:
    result = verify_chain([])
    assert result.ok and result.checked == 0


@pytest.mark.parametrize(
    "change",
    [
        {"payload": '{"type":"tool.requested","n":999}'},
        {"request_id": "req-forged"},
        {"hash": "sha256:" + "f" * 64},
        {"principal": None},
        {"stream_seq": 9999},
        {"occurred_at": "2020-01-01T00:00:00Z"},
    ],
    ids=lambda c: next(iter(c)),
)
def test_edited_record_three_is_named(change: dict[str, object]) -> None:
    chain = _chain(5)
    chain[2] = msgspec.structs.replace(chain[2], **change)
    result = verify_chain(chain)
    assert not result.ok
    assert result.first_broken == 3
    assert result.reason_code is ChainFault.HASH_MISMATCH
    assert "record 3" in result.reason
    assert result.checked == 3


def test_edited_record_rehashed_breaks_the_next_link() -> None:
    chain = _chain(5)
    forged = msgspec.structs.replace(chain[2], payload='{"forged":true}')
    chain[2] = msgspec.structs.replace(forged, hash=chain_hash(forged.prev_hash, msgspec.structs.asdict(forged)))
    result = verify_chain(chain)
    assert result.first_broken == 4
    assert result.reason_code is ChainFault.PREV_LINK


def test_deleted_record_two_breaks_at_three() -> None:
    chain = _chain(5)
    del chain[1]
    result = verify_chain(chain)
    assert not result.ok
    assert result.first_broken == 3
    assert result.reason_code is ChainFault.SEQUENCE_GAP
    assert "expected sequence 2" in result.reason


def test_deleted_first_record_is_a_gap() -> None:
    result = verify_chain(_chain(3)[1:])
    assert result.first_broken == 2
    assert result.reason_code is ChainFault.SEQUENCE_GAP


def test_swapped_records_break() -> None:
    chain = _chain(5)
    chain[1], chain[2] = chain[2], chain[1]
    result = verify_chain(chain)
    assert not result.ok
    assert result.first_broken == 3
    assert result.reason_code is ChainFault.SEQUENCE_GAP


def test_duplicated_record_is_out_of_order() -> None:
    chain = _chain(3)
    result = verify_chain([*chain, chain[1]])
    assert result.first_broken == 2
    assert result.reason_code is ChainFault.OUT_OF_ORDER


def test_renumbered_swap_breaks_the_link() -> None:
    chain = _chain(5)
    a, b = chain[1], chain[2]
    chain[1] = msgspec.structs.replace(b, sequence=2)
    chain[2] = msgspec.structs.replace(a, sequence=3)
    result = verify_chain(chain)
    assert result.first_broken == 2
    assert result.reason_code is ChainFault.PREV_LINK


def test_forged_prev_hash_on_first_record() -> None:
    chain = _chain(2)
    chain[0] = msgspec.structs.replace(chain[0], prev_hash="sha256:" + "1" * 64)
    result = verify_chain(chain)
    assert result.first_broken == 1
    assert result.reason_code is ChainFault.PREV_LINK


def test_raise_if_broken_carries_the_fields() -> None:
    chain = _chain(5)
    chain[2] = msgspec.structs.replace(chain[2], payload="{}")
    with pytest.raises(ChainBroken) as info:
        raise_if_broken(verify_chain(chain))
    assert info.value.sequence == 3
    assert info.value.reason_code == "hash_mismatch"
    assert "record 3" in info.value.reason


def test_verify_accepts_a_lazy_iterator() -> None:
    result = verify_chain(iter(_chain(4)))
    assert result.ok and result.checked == 4
