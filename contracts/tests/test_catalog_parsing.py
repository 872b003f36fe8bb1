"""The catalog reads back the subjects it builds, and nothing else: foreign and hostile subjects are None."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from effectgate.contracts.bus.catalog import (
    APPROVAL_KINDS,
    RESULTS_STREAM,
    STREAM,
    RequestSubject,
    Rpc,
    StoredRecord,
    Subjects,
    matches,
    names_its_request,
    names_request,
    principal_of_request,
    request_id_of,
    request_subject_of,
    security_of,
    stored_record_of,
    token_of,
)

HOSTILE_REQUEST_SUBJECTS = [
    "tg.req",  # no principal
    "tg.req.",  # an empty principal
    "tg.req.*",  # a wildcard
    "tg.req.>",
    "tg.req.a.b",  # an extra token
    "tg.req..a",
    "tg.reqx.a",
    "xx.req.a",
    "tg.req.a\n",
    "tg.req." + "a" * 65,  # longer than a token
    "tg.decision.a",
    "",
]


@dataclass(frozen=True)
class _About:
    principal: str
    request_id: str


def test_the_principal_of_a_request_subject_it_built() -> None:
    assert principal_of_request(Subjects.request("agent-1")) == "agent-1"
    assert Subjects.principal_of_request(Subjects.request("a_b")) == "a_b"


@pytest.mark.parametrize("subject", HOSTILE_REQUEST_SUBJECTS)
def test_a_foreign_or_hostile_subject_names_no_principal(subject: str) -> None:
    assert principal_of_request(subject) is None
    assert Subjects.principal_of_request(subject) is None


@pytest.mark.parametrize(
    ("subject", "named"),
    [
        (Subjects.decision("p", "r1"), RequestSubject("decision", "p", "r1")),
        (Subjects.needs_approval("p", "r1"), RequestSubject("needs_approval", "p", "r1")),
        (Subjects.receipt("p", "r1"), RequestSubject("receipt", "p", "r1")),
        *[(Subjects.approval(k, "p", "r1"), RequestSubject(f"approval.{k}", "p", "r1")) for k in APPROVAL_KINDS],
    ],
)
def test_every_per_request_subject_is_read_back(subject: str, named: RequestSubject) -> None:
    assert request_subject_of(subject) == named
    assert request_id_of(subject) == "r1"
    assert names_request(subject, "p", "r1")
    assert names_its_request(subject, _About("p", "r1"))
    assert not names_its_request(subject, _About("p", "r2")) and not names_its_request(subject, _About("q", "r1"))


@pytest.mark.parametrize(
    "subject",
    [
        "tg.decision.p",  # a token short
        "tg.decision.p.r.x",  # an extra token
        "tg.decision..r",  # an empty principal
        "tg.decision.p.",  # an empty request id
        "tg.decision.*.r",  # wildcards
        "tg.decision.p.*",
        "tg.decision.p.>",
        "tg.receipt.p.r\n",
        "tg.approval.granted.p",
        "tg.approval.forged.p.r",  # no such approval kind
        "tg.approval.p.r",
        "tg.claim.p.r",  # a claim names a key digest, not a request
        "tg.req.p",
        "tg.tool.state.t",
        "tg.policy.published",
        "xx.decision.p.r",
        "tg.decision.p.r.",
        ".tg.decision.p.r",
    ],
)
def test_a_foreign_or_hostile_subject_names_no_request(subject: str) -> None:
    assert request_subject_of(subject) is None
    assert request_id_of(subject) is None
    assert not names_request(subject, "p", "r")
    assert not names_its_request(subject, _About("p", "r"))


def test_the_last_tokens_alone_do_not_name_a_request() -> None:
    """An event about p/r on a subject ending ``p.r`` that is no per-request subject is not its request's."""
    assert not names_its_request("tg.security.p.r", _About("p", "r"))
    assert not names_its_request("tg.result.x.p.r", _About("p", "r"))


def test_needs_approval_of_reads_its_subjects_only() -> None:
    assert Subjects.needs_approval_of(Subjects.needs_approval("p", "r")) == ("p", "r")
    assert Subjects.needs_approval_of(Subjects.decision("p", "r")) is None
    assert Subjects.needs_approval_of("tg.needs_approval.p.r.x") is None


def test_the_token_of_a_request_reply_subject() -> None:
    assert token_of(Rpc.APPROVALS_DECIDE, Rpc.approvals_decide("alice")) == "alice"
    assert token_of(Rpc.APPROVALS_WITHDRAW, Rpc.approvals_withdraw("a-1")) == "a-1"
    assert token_of(Rpc.TOOLS_LIST, Rpc.tools_list("p")) == "p"
    assert token_of(Subjects.MCP_CANCELS, Subjects.mcp_cancel("p")) == "p"


@pytest.mark.parametrize(
    "subject",
    [
        "tg.approvals.decide",
        "tg.approvals.decide.",
        "tg.approvals.decide.*",
        "tg.approvals.decide.>",
        "tg.approvals.decide.a.b",
        "tg.approvals.withdraw.a",  # another pattern's subject
        "tg.approvals.decide.a b",
        "tg.approvals.decide." + "a" * 65,
    ],
)
def test_a_foreign_or_hostile_subject_has_no_token(subject: str) -> None:
    assert token_of(Rpc.APPROVALS_DECIDE, subject) is None


def test_a_pattern_without_one_wildcard_is_refused() -> None:
    with pytest.raises(ValueError, match="wildcard"):
        token_of(Rpc.APPROVALS_LIST, Rpc.APPROVALS_LIST)
    with pytest.raises(ValueError, match="wildcard"):
        token_of(Subjects.DECISIONS, Subjects.decision("p", "r"))


def test_matching_is_by_whole_tokens() -> None:
    assert matches(Subjects.DECISIONS, Subjects.decision("p", "r"))
    assert not matches(Subjects.DECISIONS, "tg.decision.p")
    assert not matches(Subjects.DECISIONS, "tg.decision.p.r.x")
    assert not matches(Subjects.DECISIONS, "tg.decision..r")
    assert not matches(Subjects.POLICY_PUBLISHED, "tg.policy.published.x")
    assert matches(Subjects.POLICY_PUBLISHED, Subjects.POLICY_PUBLISHED)


def test_the_service_and_kind_of_a_security_subject() -> None:
    assert security_of(Subjects.security("executor", "decision_forged")) == ("executor", "decision_forged")
    for subject in ("tg.security.executor", "tg.security.executor.a.b", "tg.security..k", "tg.security.*.k"):
        assert security_of(subject) is None


def test_a_result_chunk_subject_is_its_prefix_and_index() -> None:
    assert Subjects.result_chunk("p", "r_1", 3) == Subjects.result_prefix("p", "r_1") + ".3" == "tg.result.p.r_1.3"


def test_every_record_an_agent_reads_back_is_read_back_with_its_principal_and_stream() -> None:
    run = "r" * 64 + "_0a1b2c3d"  # a run id: a request id and a nonce, longer than one principal token
    assert stored_record_of(Subjects.receipt("p", "r1")) == StoredRecord("receipt", "p", STREAM)
    assert stored_record_of(Subjects.decision("p", "r1")) == StoredRecord("decision", "p", STREAM)
    assert stored_record_of(Subjects.result_chunk("p", run, 12)) == StoredRecord("result", "p", RESULTS_STREAM)


@pytest.mark.parametrize(
    "subject",
    [
        Subjects.needs_approval("p", "r1"),
        Subjects.approval("granted", "p", "r1"),
        Subjects.claim("p", "k"),
        Subjects.request("p"),
        Subjects.receipts_of("p"),
        Subjects.results_of("p"),
        "tg.result.p.r1.*",
        "tg.result.*.r1.0",
        "tg.result.p.r1.01",
        "tg.result.p.r1.-1",
        "tg.result.p.r1.0.1",
        "tg.result.p..0",
        Rpc.records_get("p"),
        "",
    ],
)
def test_no_other_subject_is_a_record(subject: str) -> None:
    assert stored_record_of(subject) is None
