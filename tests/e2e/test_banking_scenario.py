"""The banking scenario of issue 8, through the whole system.

A small banking MCP server (``tests/fixtures/mcp/banking_server.py``) is imported as
``mcp_bank`` with its hints trusted and the operator's overrides: ``send_money`` and
``schedule_transaction`` are FINANCIAL (amount at ``/amount``, cost 1), ``update_password``
SECURITY_SENSITIVE (its password a sealed ``writeOnly`` argument), ``fetch_webpage``
an open-world read whose destination is ``/url``. The policy is the shipped one plus the
site rule of ``tests/fixtures/banking/site_policy.cedar`` (money only to an IBAN on the
agent's ``allowed_recipients``); the agents' allow-lists and limit (1000.00) are in
``attributes.toml``, and ``budgets.toml`` allows each agent 3 transfers a day.

What happened is read from the server's own files: its state (balance, transactions,
password digest) and the log of URLs it was asked to fetch (it never reaches the network).
Each test has an agent of its own (``bank-<test>``), so rates and budgets do not mix.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import sys
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from effectgate.contracts.bus.catalog import Subjects
from effectgate.contracts.directory import PrincipalDirectory
from effectgate.contracts.events import ReceiptIssued
from effectgate.contracts.integrity.sealing import SEALED_LABEL
from effectgate.contracts.tools.descriptors import OperationSpec, ToolDescriptor
from effectgate.contracts.vocabulary import RiskTier, SideEffectClass, Verdict
from effectgate.policy.cedar.attributes import load_attributes
from effectgate.policy.cedar.loading import build_engine

pytestmark = pytest.mark.e2e

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
BANKING = FIXTURES / "banking"
SERVER = FIXTURES / "mcp" / "banking_server.py"
TOOL = "mcp_bank"
PAYEE = "DE89370400440532013000"
"""On every bank agent's allowed_recipients."""
STRANGER = "GB82WEST12345698765432"
"""A valid IBAN on nobody's list."""
LIMIT = 1000.00
LISTED_URL = "https://docs.python.org/3/library/json.html"
UNLISTED_URL = "https://pastebin.example/upload?data=balance-5000"
FINANCE, SECURITY, OPERATOR = ("fiona", "frank"), ("sam", "sue"), "alice"
UNLISTED_REASON = "the recipient is not on this agent's allowed_recipients list"
MCP_TIMEOUT_S = 60.0
"""The first call of a module starts the server process."""

SERVERS_TOML = """\
[servers.bank]
command = {python}
args = [{server}]
env = {{ BANK_STATE_FILE = {state}, BANK_FETCH_LOG = {fetch_log} }}
trust_hints = true

[servers.bank.overrides.send_money]
side_effect_class = "FINANCIAL"
amount = "/amount"
cost = 1

[servers.bank.overrides.schedule_transaction]
side_effect_class = "FINANCIAL"
amount = "/amount"
cost = 1

[servers.bank.overrides.update_password]
side_effect_class = "SECURITY_SENSITIVE"

[servers.bank.overrides.fetch_webpage]
destination = "/url"
"""


@dataclass(frozen=True)
class Bank:
    """The files the banking server writes its effects to."""

    state: Path
    fetch_log: Path

    def transfers(self, subject: str) -> list[dict[str, Any]]:
        """The transactions sent with ``subject``."""
        if not self.state.exists():
            return []
        return [t for t in json.loads(self.state.read_text())["transactions"] if t["subject"] == subject]

    def password_sha256(self) -> str | None:
        return json.loads(self.state.read_text()).get("password_sha256") if self.state.exists() else None

    def fetched(self) -> list[str]:
        """Every URL the server was asked for, in order."""
        return self.fetch_log.read_text().splitlines() if self.fetch_log.exists() else []


@pytest.fixture(scope="module")
def bank(e2e_paths: Any) -> Bank:
    folder = e2e_paths.state.parent / "bank"
    folder.mkdir(exist_ok=True)
    return Bank(folder / "state.json", folder / "fetched.log")


@pytest.fixture(scope="module")
def stack_env(e2e_paths: Any, repo_root: Path, bank: Bank) -> dict[str, str]:
    base = e2e_paths.state.parent
    policy, principals, servers = base / "bank-policy.cedar", base / "bank-principals.toml", base / "servers.toml"
    policy.write_text(
        (repo_root / "deploy/policy/policy.cedar").read_text() + (BANKING / "site_policy.cedar").read_text()
    )
    principals.write_text(e2e_paths.principals.read_text() + "\n" + (BANKING / "principals.toml").read_text())
    quoted = {"python": sys.executable, "server": SERVER, "state": bank.state, "fetch_log": bank.fetch_log}
    servers.write_text(SERVERS_TOML.format(**{name: json.dumps(str(value)) for name, value in quoted.items()}))
    return {
        "EFFECTGATE_POLICY_POLICY_FILE": str(policy),
        "EFFECTGATE_POLICY_PRINCIPALS_FILE": str(principals),
        "EFFECTGATE_APPROVALS_PRINCIPALS_FILE": str(principals),
        "EFFECTGATE_POLICY_ATTRIBUTES_FILE": str(BANKING / "attributes.toml"),
        "EFFECTGATE_POLICY_BUDGETS_FILE": str(BANKING / "budgets.toml"),
        "EFFECTGATE_REGISTRY_MCP_SERVERS_FILE": str(servers),
        "EFFECTGATE_EXECUTOR_MCP_SERVERS_FILE": str(servers),
    }


def transfer(recipient: str, amount: float, subject: str) -> dict[str, Any]:
    """``send_money`` arguments dated today (UTC)."""
    return {"recipient": recipient, "amount": amount, "subject": subject, "date": datetime.now(UTC).date().isoformat()}


async def call(gate: Any, agent: str, operation: str, arguments: dict[str, Any]) -> ReceiptIssued:
    return await gate.call(agent, operation, arguments, tool=TOOL, timeout_s=MCP_TIMEOUT_S)


async def submit(gate: Any, agent: str, operation: str, arguments: dict[str, Any]) -> str:
    """Publish one ``mcp_bank`` call (secret arguments sealed); its request id."""
    return str(await (await gate.client(agent)).submit(TOOL, operation, arguments))


async def asked_nobody(gate: Any, agent: str, request_id: str) -> bool:
    return await gate.count(Subjects.approval("requested", agent, request_id)) == 0


async def approved_by(gate: Any, agent: str, request_id: str, approvers: tuple[str, ...]) -> ReceiptIssued:
    """Approve the pending ``request_id`` by each of ``approvers`` in turn; the call's receipt.

    Before the last vote, the quorum is not met: nothing has run and no receipt exists.
    """
    approval_id = (await gate.pending(request_id))["approval_id"]
    for approver in approvers[:-1]:
        assert (await gate.decide(approver, approval_id))["reason_code"] == "voted"
    await gate.settle()
    assert await gate.count(Subjects.receipt(agent, request_id)) == 0, "ran before the quorum was met"
    last = await gate.decide(approvers[-1], approval_id)
    assert (last["ok"], last["reason_code"]) == (True, "granted"), last
    return await gate.receipt(agent, request_id, timeout_s=MCP_TIMEOUT_S)


async def transfer_approved(gate: Any, agent: str, amount: float, subject: str) -> ReceiptIssued:
    """A ``send_money`` to :data:`PAYEE`, approved by both finance approvers."""
    request_id = await submit(gate, agent, "send_money", transfer(PAYEE, amount, subject))
    return await approved_by(gate, agent, request_id, FINANCE)


def succeeded(issued: ReceiptIssued) -> dict[str, Any]:
    """The structured result of a call that succeeded."""
    assert (issued.outcome, issued.reason_code) == ("succeeded", "ok"), issued.reason
    return dict(issued.result["structured"])


async def test_benign_reads_run_with_no_human(gate: Any, bank: Bank) -> None:
    balance = await call(gate, "bank-reads", "get_balance", {})
    assert succeeded(balance)["currency"] == "EUR"
    history = await call(gate, "bank-reads", "get_transactions", {"limit": 5})
    assert isinstance(succeeded(history)["transactions"], list)
    for issued in (balance, history):
        assert await asked_nobody(gate, "bank-reads", issued.request_id)


async def test_a_transfer_to_a_listed_iban_under_the_limit_runs_after_two_finance_approvals(
    gate: Any, bank: Bank, new_id: Any
) -> None:
    agent, subject = "bank-transfer", new_id("rent-")
    arguments = transfer(PAYEE, 250.50, subject)
    request_id = await submit(gate, agent, "send_money", arguments)
    pending = await gate.pending(request_id)
    assert (pending["approver_role"], pending["approvals_required"]) == ("finance", 2)
    assert pending["policy_id"] == "financial-within-limit-approval"

    refused = await gate.decide(OPERATOR, pending["approval_id"])
    assert (refused["ok"], refused["reason_code"]) == (False, "not_entitled"), "an operator counted for finance"
    assert bank.transfers(subject) == []

    issued = await approved_by(gate, agent, request_id, FINANCE)
    assert succeeded(issued)["sent"]["recipient"] == PAYEE
    assert bank.transfers(subject) == [arguments]


async def test_a_transfer_to_an_iban_not_on_the_agents_list_is_denied_by_the_site_rule(
    gate: Any, bank: Bank, new_id: Any
) -> None:
    subject = new_id("fraud-")
    issued = await call(gate, "bank-unknown", "send_money", transfer(STRANGER, 20.00, subject))
    assert (issued.outcome, issued.reason_code) == ("denied", "forbidden"), issued.reason
    assert issued.reason == UNLISTED_REASON
    assert await asked_nobody(gate, "bank-unknown", issued.request_id)
    await gate.settle()
    assert bank.transfers(subject) == []


async def test_an_agent_without_an_allow_list_cannot_even_see_the_transfer(gate: Any, bank: Bank, new_id: Any) -> None:
    """No recipient could open it for this agent: answered like an operation that does not exist."""
    subject = new_id("fraud-")
    issued = await call(gate, "bank-nolist", "send_money", transfer(PAYEE, 20.00, subject))
    assert (issued.outcome, issued.reason_code) == ("denied", "unknown_operation"), issued.reason
    assert (await call(gate, "bank-nolist", "get_balance", {})).outcome == "succeeded", "the tool itself is visible"
    assert await asked_nobody(gate, "bank-nolist", issued.request_id)
    await gate.settle()
    assert bank.transfers(subject) == []


async def test_a_transfer_above_the_limit_is_forbidden(gate: Any, bank: Bank, new_id: Any) -> None:
    subject = new_id("big-")
    issued = await call(gate, "bank-above", "send_money", transfer(PAYEE, LIMIT + 0.01, subject))
    assert (issued.outcome, issued.reason_code) == ("denied", "forbidden"), issued.reason
    assert "max_amount" in issued.reason
    assert await asked_nobody(gate, "bank-above", issued.request_id)
    await gate.settle()
    assert bank.transfers(subject) == []


async def test_a_transfer_of_exactly_the_limit_runs_after_approval(gate: Any, bank: Bank, new_id: Any) -> None:
    subject = new_id("limit-")
    issued = await transfer_approved(gate, "bank-at-limit", LIMIT, subject)
    assert succeeded(issued)["sent"]["amount"] == LIMIT
    assert len(bank.transfers(subject)) == 1


async def test_a_fetch_of_an_unlisted_host_waits_for_an_operator_and_fetches_nothing_before(
    gate: Any, bank: Bank
) -> None:
    request_id = await submit(gate, "bank-fetch", "fetch_webpage", {"url": UNLISTED_URL})
    pending = await gate.pending(request_id)
    assert (pending["approver_role"], pending["approvals_required"]) == ("operator", 1)
    await gate.settle()
    assert UNLISTED_URL not in bank.fetched(), "fetched before anyone approved"

    issued = await approved_by(gate, "bank-fetch", request_id, (OPERATOR,))
    assert succeeded(issued)["url"] == UNLISTED_URL
    assert bank.fetched().count(UNLISTED_URL) == 1


async def test_a_fetch_of_a_listed_host_runs_directly(gate: Any, bank: Bank) -> None:
    issued = await call(gate, "bank-fetch", "fetch_webpage", {"url": LISTED_URL})
    assert succeeded(issued)["status"] == 200
    assert await asked_nobody(gate, "bank-fetch", issued.request_id)
    assert bank.fetched().count(LISTED_URL) == 1


async def _same_day() -> None:
    """Wait for the next UTC day when less than 5 minutes are left: four transfers must share one window."""
    now = time.time()
    left_s = 86_400 - now % 86_400
    if left_s < 300:
        await asyncio.sleep(left_s + 1)


async def test_the_fourth_transfer_of_the_day_is_over_the_budget(gate: Any, bank: Bank, new_id: Any) -> None:
    agent = "bank-budget"
    await _same_day()
    for _ in range(3):
        subject = new_id("daily-")
        succeeded(await transfer_approved(gate, agent, 10.00, subject))
        assert len(bank.transfers(subject)) == 1

    subject = new_id("fourth-")
    request_id = await submit(gate, agent, "send_money", transfer(PAYEE, 10.00, subject))
    issued = await gate.receipt(agent, request_id)  # denied at its decision: nobody is asked to approve it
    assert (issued.outcome, issued.reason_code) == ("denied", "budget_exceeded"), issued.reason
    assert "daily-transfers" in issued.reason
    assert not await gate.is_pending(request_id)
    await gate.settle()
    assert bank.transfers(subject) == []


async def test_a_password_change_needs_two_security_approvers(gate: Any, bank: Bank, new_id: Any) -> None:
    agent, password = "bank-password", new_id("Correct-Horse-")
    request_id = await submit(gate, agent, "update_password", {"password": password})
    pending = await gate.pending(request_id)
    assert (pending["approver_role"], pending["approvals_required"]) == ("security", 2)
    assert pending["request"]["arguments"] == {"password": SEALED_LABEL}
    refused = await gate.decide(FINANCE[0], pending["approval_id"])
    assert (refused["ok"], refused["reason_code"]) == (False, "not_entitled"), "finance counted for security"

    succeeded(await approved_by(gate, agent, request_id, SECURITY))
    assert bank.password_sha256() == hashlib.sha256(password.encode()).hexdigest()


def test_omitting_the_recipient_cannot_bypass_the_site_rule(repo_root: Path) -> None:
    """Decided by the engine alone, on a tool whose schema lets a call omit the recipient."""
    text = (repo_root / "deploy/policy/policy.cedar").read_text() + (BANKING / "site_policy.cedar").read_text()
    others = (
        '[approvers.olivia]\nroles = ["operator", "sre"]\n'  # the shipped policy's other roles (held, or it is refused)
    )
    directory = PrincipalDirectory.from_toml((BANKING / "principals.toml").read_text() + others)
    schema = {"type": "object", "properties": {"recipient": {"type": "string"}, "amount": {"type": "number"}}}
    spec = OperationSpec(
        input_schema=schema,
        output_schema={},
        side_effect_class=SideEffectClass.FINANCIAL,
        risk_tier=RiskTier.HIGH,
        amount="/amount",
    )
    pay = ToolDescriptor(name="mcp_pay", version="1.0.0", adapter="mcp:pay", operations={"pay": spec})
    engine = build_engine(text, directory, load_attributes(BANKING / "attributes.toml"), [pay])

    listed = engine.decide("bank-transfer", pay, "pay", {"recipient": PAYEE, "amount": 10})
    assert listed.verdict is Verdict.NEEDS_APPROVAL, listed.reason
    omitted = engine.decide("bank-transfer", pay, "pay", {"amount": 10})
    assert (omitted.verdict, omitted.reason_code, omitted.reason) == (Verdict.DENY, "forbidden", UNLISTED_REASON)
