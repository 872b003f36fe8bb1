"""A module with a curated list: only what TOOLS names is served."""

from __future__ import annotations

from effectgate.contracts.vocabulary import RiskTier, SideEffectClass
from effectgate.tools import tool


@tool(side_effect=SideEffectClass.IRREVERSIBLE_WRITE, risk=RiskTier.MEDIUM)
async def send(to: str) -> None:
    """Send a mail."""


@tool(side_effect=SideEffectClass.READ_ONLY, risk=RiskTier.LOW)
async def draft(to: str) -> str:
    """Draft a mail (declared but not curated)."""
    return to


TOOLS = [send]
