"""What an MCP tool's annotations say about its side-effect class, risk tier and open world (pure).

Side-effect class and risk tier. Tool annotations are hints: the MCP specification
(revision 2025-11-25, schema ``ToolAnnotations``) says clients must consider them
untrusted unless they come from a trusted server. So each server is untrusted unless its
configuration sets ``trust_hints = true``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from effectgate.contracts.vocabulary import RiskTier, SideEffectClass
from effectgate.shared.mcp.servers import McpServerConfig, Override

if TYPE_CHECKING:
    from effectgate.shared.mcp.mapping import McpToolInfo

__all__ = ["admitted", "classify", "effect_and_tier", "open_world"]


def open_world(config: McpServerConfig, tool: McpToolInfo, override: Override) -> bool:
    """The operator's word; else a trusted server's ``openWorldHint`` (default true); else true."""
    if override.open_world is not None:
        return override.open_world
    hints = tool.annotations or {}
    return _hint(hints, "openWorldHint", True) if config.trust_hints else True


def effect_and_tier(config: McpServerConfig, tool: McpToolInfo) -> tuple[SideEffectClass, RiskTier]:
    """The class and tier of ``tool`` on server ``config`` (the tables of the module doc).

    Raises:
        ValueError: the server's hints are trusted and the tool's override is looser than they are.
    """
    override = config.overrides.get(tool.name) or Override()
    if config.trust_hints:
        return _apply(override, *classify(tool.annotations), f"servers.{config.name}.overrides.{tool.name}")
    floor_effect, floor_tier = admitted(tool.annotations)
    effect = override.side_effect_class or config.default_side_effect_class
    tier = override.risk_tier or config.default_risk_tier
    return max(effect, floor_effect, key=_rank), max(tier, floor_tier, key=_rank)


def _rank(value: SideEffectClass | RiskTier) -> int:
    return value.rank


def classify(annotations: dict[str, bool | None] | None) -> tuple[SideEffectClass, RiskTier]:
    """Map the annotations of a trusted server to a class and tier (first table of the module doc).

    Missing or ``None`` fields take the specification's defaults.
    """
    hints = annotations or {}
    read_only = _hint(hints, "readOnlyHint", False)
    if read_only:
        open_world = _hint(hints, "openWorldHint", True)
        return SideEffectClass.READ_ONLY, RiskTier.LOW if open_world else RiskTier.TRIVIAL
    if _hint(hints, "destructiveHint", True):
        return SideEffectClass.IRREVERSIBLE_WRITE, RiskTier.HIGH
    return SideEffectClass.REVERSIBLE_WRITE, RiskTier.MEDIUM


def admitted(annotations: dict[str, bool | None] | None) -> tuple[SideEffectClass, RiskTier]:
    """The least class and tier an untrusted server's hints admit (second table of the module doc).

    Only hints that are present count: a missing hint admits nothing, so the operator's
    default stands.
    """
    hints = annotations or {}
    tier = RiskTier.LOW if hints.get("openWorldHint") is True else RiskTier.TRIVIAL
    if hints.get("readOnlyHint") is True:
        return SideEffectClass.READ_ONLY, tier
    if hints.get("destructiveHint") is True:
        return SideEffectClass.IRREVERSIBLE_WRITE, RiskTier.HIGH
    if hints.get("readOnlyHint") is False or hints.get("destructiveHint") is False:
        return SideEffectClass.REVERSIBLE_WRITE, RiskTier.MEDIUM
    return SideEffectClass.READ_ONLY, tier


def _hint(hints: dict[str, bool | None], key: str, default: bool) -> bool:
    value = hints.get(key)
    return default if value is None else bool(value)


def _apply(override: Override, effect: SideEffectClass, tier: RiskTier, where: str) -> tuple[SideEffectClass, RiskTier]:
    if override.side_effect_class is not None:
        if override.side_effect_class.rank < effect.rank:
            raise ValueError(f"{where}.side_effect_class: {override.side_effect_class} is looser than {effect}")
        effect = override.side_effect_class
    if override.risk_tier is not None:
        if override.risk_tier.rank < tier.rank:
            raise ValueError(f"{where}.risk_tier: {override.risk_tier} is looser than {tier}")
        tier = override.risk_tier
    return effect, tier
