"""Secrets: resolved at call time, a missing one refuses the call, every value is scrubbed from the answer."""

from __future__ import annotations

from pathlib import Path

import pytest

from effectgate.contracts.vocabulary import RiskTier, SideEffectClass
from effectgate.tools import (
    REDACTED,
    DeclarationError,
    Dispatcher,
    Effect,
    EnvironmentSecrets,
    Fault,
    FileSecrets,
    Refusal,
    Secrets,
    Toolbox,
    tool,
)
from tools.tests.support import Progress, call_of

ran: list[str] = []


@tool(side_effect=SideEffectClass.REVERSIBLE_WRITE, risk=RiskTier.LOW, secrets=("API_KEY",))
async def leaky(secrets: Secrets, fail: bool = False) -> Effect[dict[str, str]]:
    ran.append("leaky")
    key = secrets["API_KEY"]
    if fail:
        raise RuntimeError(f"the server refused key {key}")
    return Effect({"echo": f"used {key}", key: "as a key"}, effect_id=f"id-{key}")


@tool(side_effect=SideEffectClass.REVERSIBLE_WRITE, risk=RiskTier.LOW, secrets=("API_KEY",))
async def coded(secrets: Secrets, refuse: bool = False) -> str:
    key = secrets["API_KEY"]
    raise Refusal(f"bad_{key}", "refused") if refuse else Fault(key, "failed")


BOX = Toolbox([leaky, coded], worker="w")
KEY = "sk-live-1234"


async def test_every_resolved_value_is_scrubbed_from_the_result_the_reason_and_the_effect_id() -> None:
    dispatcher = Dispatcher(BOX, secrets=EnvironmentSecrets(environ={"EFFECTGATE_SECRET_API_KEY": KEY}))
    ok = await dispatcher.answer(call_of(BOX, "leaky"), Progress())
    failed = await dispatcher.answer(call_of(BOX, "leaky", fail=True), Progress())
    assert ok.result == {"echo": f"used {REDACTED}", REDACTED: "as a key"} and ok.effect_id == f"id-{REDACTED}"
    assert failed.outcome == "uncertain" and KEY not in failed.reason and REDACTED in failed.reason


async def test_a_secret_a_tool_puts_in_its_reason_code_leaves_no_answer() -> None:
    dispatcher = Dispatcher(BOX, secrets=EnvironmentSecrets(environ={"EFFECTGATE_SECRET_API_KEY": KEY}))
    for refuse in (False, True):
        answer = await dispatcher.answer(call_of(BOX, "coded", refuse=refuse), Progress())
        assert answer.outcome == ("refused" if refuse else "failed") and KEY not in answer.reason_code


async def test_a_missing_secret_refuses_the_call_before_anything_runs() -> None:
    ran.clear()
    for provider in (EnvironmentSecrets(environ={}), None):
        answer = await Dispatcher(BOX, secrets=provider).answer(call_of(BOX, "leaky"), Progress())
        assert (answer.outcome, answer.reason_code) == ("refused", "secret_unavailable")
        assert "'API_KEY'" in answer.reason
    assert ran == []


async def test_environment_secrets_take_a_prefix_and_the_upper_cased_name() -> None:
    provider = EnvironmentSecrets(prefix="LEDGER_", environ={"LEDGER_API_KEY": "v", "LEDGER_EMPTY": ""})
    assert (await provider.get("API_KEY"), await provider.get("empty"), await provider.get("other")) == (
        "v",
        None,
        None,
    )


async def test_file_secrets_read_one_file_per_name_at_each_call(tmp_path: Path) -> None:
    provider = FileSecrets(tmp_path)
    assert await provider.get("API_KEY") is None
    (tmp_path / "API_KEY").write_text("first\n")
    assert await provider.get("API_KEY") == "first"
    (tmp_path / "API_KEY").write_text("second")
    assert await provider.get("API_KEY") == "second"
    assert await provider.get("../API_KEY") is None


async def test_a_file_secret_is_resolved_for_the_call(tmp_path: Path) -> None:
    (tmp_path / "API_KEY").write_text(KEY)
    answer = await Dispatcher(BOX, secrets=FileSecrets(tmp_path)).answer(call_of(BOX, "leaky"), Progress())
    assert answer.outcome == "ok" and KEY not in str(answer.result)


def test_the_secrets_parameter_holds_only_declared_names() -> None:
    secrets = Secrets({"API_KEY": KEY})
    assert dict(secrets) == {"API_KEY": KEY} and KEY not in repr(secrets)
    with pytest.raises(KeyError):
        secrets["other"]


def test_a_secret_name_that_is_no_file_or_variable_name_is_refused() -> None:
    async def probe() -> int:
        return 0

    with pytest.raises(DeclarationError, match="secret name '../x'"):
        Toolbox([tool(side_effect=SideEffectClass.READ_ONLY, risk=RiskTier.LOW, secrets=("../x",))(probe)], worker="w")
