"""Tools of one module: a class, a function, an ignored class and an import."""

from __future__ import annotations

from effectgate.contracts.vocabulary import RiskTier, SideEffectClass
from effectgate.tools import ignore, operation, tool
from tools.tests.sample_tools.mail import send  # noqa: F401 - imported, so not this module's tool


@tool(side_effect=SideEffectClass.READ_ONLY, risk=RiskTier.LOW)
class Accounts:
    """Accounts."""

    @operation
    async def balance(self, account: str) -> int:
        """The balance."""
        return 0


@tool(side_effect=SideEffectClass.READ_ONLY, risk=RiskTier.LOW)
async def audit_trail(account: str) -> list[str]:
    """The trail."""
    return []


@ignore
@tool(side_effect=SideEffectClass.FINANCIAL, risk=RiskTier.CRITICAL)
class Experimental:
    """Not served."""

    @operation
    async def wire(self, amount: int) -> int:
        return amount
