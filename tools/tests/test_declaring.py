"""Declaring tools: a class's options are its methods' defaults, which a method narrows; @ignore is honoured."""

from __future__ import annotations

import pytest

from effectgate.contracts.tools.descriptors import RetryPolicy
from effectgate.contracts.tools.hosting import ReconcileAnswer
from effectgate.contracts.vocabulary import RiskTier, SideEffectClass
from effectgate.registry.domain import validate_descriptor
from effectgate.tools import DeclarationError, Reconciled, Retry, Toolbox, ignore, operation, tool

READ, WRITE = SideEffectClass.READ_ONLY, SideEffectClass.REVERSIBLE_WRITE


@tool(
    name="ledger", version="2.1.0", side_effect=WRITE, risk=RiskTier.MEDIUM, timeout_s=12.0, rate_limit=(10, 60.0),
    secrets=("LEDGER_TOKEN",), concurrency_safe=False, serialize_by="/account",
)  # fmt: skip
class Ledger:
    """A ledger of accounts.

    More text that is no summary.
    """

    @operation(reconcile="find", idempotent_at_target=True, retry=Retry(attempts=4, on=("busy",)))
    async def post(self, account: str, amount: int) -> str:
        """Post an amount."""
        return account

    @operation(side_effect=READ, risk=RiskTier.HIGH, rate_limit=(100, 1.0), secrets=("READER_KEY",))
    async def find(self, account: str, amount: int) -> Reconciled:
        """Say whether a posting ran."""
        return ReconcileAnswer(resolution="unknown")

    @ignore
    @operation(side_effect=READ, risk=RiskTier.LOW)
    async def hidden(self) -> int:
        return 0

    @operation(side_effect=READ, risk=RiskTier.LOW)
    @ignore
    async def hidden_too(self) -> int:
        return 0

    async def helper(self) -> int:
        return 1


def test_a_class_s_options_are_the_defaults_of_its_methods() -> None:
    descriptor = Toolbox([Ledger], worker="books").descriptors()[0]
    post = descriptor.operations["post"]
    assert (descriptor.name, descriptor.version, descriptor.adapter) == ("ledger", "2.1.0", "python:books")
    assert (descriptor.timeout_s, descriptor.rate_limit.calls, descriptor.rate_limit.period_s) == (12.0, 10, 60.0)
    assert descriptor.description == "A ledger of accounts."
    assert (post.side_effect_class, post.risk_tier, post.concurrency_safe, post.serialize_by) == (
        WRITE, RiskTier.MEDIUM, False, "/account",
    )  # fmt: skip
    assert (
        post.retry == RetryPolicy(attempts=4, on=("busy",)) and post.idempotent_at_target and post.reconcile == "find"
    )
    assert post.rate_limit is None and post.description == "Post an amount."


def test_a_method_narrows_its_class_s_side_effect_and_raises_its_risk() -> None:
    find = Toolbox([Ledger], worker="books").descriptors()[0].operations["find"]
    assert (find.side_effect_class, find.risk_tier) == (READ, RiskTier.HIGH)
    assert find.rate_limit is not None and find.rate_limit.calls == 100


def test_secrets_are_the_class_s_and_its_methods() -> None:
    assert Toolbox([Ledger], worker="books").descriptors()[0].secrets == ("LEDGER_TOKEN", "READER_KEY")


def test_ignored_methods_and_undecorated_ones_are_no_operations() -> None:
    assert set(Toolbox([Ledger], worker="books").descriptors()[0].operations) == {"post", "find"}


def test_the_generated_descriptor_passes_the_registry_s_publish_check() -> None:
    validate_descriptor(Toolbox([Ledger], worker="books").descriptors()[0])


def test_a_method_may_not_lower_its_class_s_risk() -> None:
    @tool(side_effect=READ, risk=RiskTier.HIGH)
    class Risky:
        @operation(risk=RiskTier.LOW)
        async def peek(self) -> int:
            return 0

    with pytest.raises(DeclarationError, match=r"risky\.peek: risk 'low' is below its class's 'high'"):
        Toolbox([Risky], worker="w")


def test_a_method_may_not_widen_a_class_s_concurrency() -> None:
    @tool(side_effect=READ, risk=RiskTier.LOW, concurrency_safe=False)
    class Serial:
        @operation(concurrency_safe=True)
        async def peek(self) -> int:
            return 0

    with pytest.raises(DeclarationError, match="concurrency_safe=True widens"):
        Toolbox([Serial], worker="w")


def test_a_function_tool_is_one_operation_named_after_the_function_unless_named() -> None:
    @tool(side_effect=READ, risk=RiskTier.LOW)
    async def read_file(path: str) -> str:
        """Read a file."""
        return path

    @tool(name="mail", operation="send", side_effect=WRITE, risk=RiskTier.HIGH)
    def send_mail(to: str) -> None:
        """Send a mail."""

    first, second = Toolbox([read_file, send_mail], worker="w").descriptors()
    assert (first.name, list(first.operations)) == ("mail", ["send"])
    assert (second.name, list(second.operations), second.description) == ("read_file", ["read_file"], "Read a file.")


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"risk": RiskTier.LOW}, "side_effect is not declared"),
        ({"side_effect": READ}, "risk is not declared"),
        ({"side_effect": WRITE, "risk": RiskTier.LOW, "retry": Retry()}, "retry on a write needs idempotent_at_target"),
        ({"side_effect": READ, "risk": RiskTier.LOW, "secrets": ("Bad-Name",)}, "secret name 'Bad-Name'"),
        ({"side_effect": READ, "risk": RiskTier.LOW, "name": "Bad Name"}, "name: 'Bad Name' must match"),
        ({"side_effect": READ, "risk": RiskTier.LOW, "version": "1"}, "version: '1' is not a semantic version"),
    ],
)
def test_a_contradictory_or_incomplete_declaration_is_refused_naming_the_option(
    options: dict[str, object], message: str
) -> None:
    async def probe() -> int:
        return 0

    with pytest.raises(DeclarationError, match=message):
        Toolbox([tool(**options)(probe)], worker="w")


def test_reconcile_must_name_a_read_only_operation_returning_reconciled() -> None:
    @tool(side_effect=WRITE, risk=RiskTier.LOW)
    class Wrong:
        @operation(reconcile="other")
        async def post(self) -> int:
            return 0

        @operation(side_effect=READ)
        async def other(self) -> int:
            return 0

    with pytest.raises(DeclarationError, match="reconcile names 'other'"):
        Toolbox([Wrong], worker="w")


def test_an_ignored_tool_or_an_undeclared_one_cannot_be_listed() -> None:
    @ignore
    @tool(side_effect=READ, risk=RiskTier.LOW)
    async def off() -> int:
        return 0

    async def plain() -> int:
        return 0

    with pytest.raises(DeclarationError, match="is marked @ignore"):
        Toolbox([off], worker="w")
    with pytest.raises(DeclarationError, match="is not declared with @tool"):
        Toolbox([plain], worker="w")


def test_an_unknown_option_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="unknown options: colour"):
        tool(colour="red")


def test_an_unknown_operation_option_is_named() -> None:
    from effectgate.tools import operation

    with pytest.raises(TypeError, match="unknown options: retries"):
        operation(retries=3)  # type: ignore[call-overload]
