"""Which version an imported MCP listing is published under, and what changed (pure)."""

from __future__ import annotations

import msgspec

from effectgate.contracts.tools.descriptors import ToolDescriptor, semver_key
from effectgate.shared.mcp.mapping import operation_changes

__all__ = ["descriptor_changes", "listing_version", "next_patch", "same_content"]


def same_content(stored: ToolDescriptor, imported: ToolDescriptor) -> bool:
    """Whether the two descriptors are equal in everything but their version."""
    return msgspec.structs.replace(imported, version=stored.version) == stored


def listing_version(reported: str, highest: str | None) -> str:
    """The version for a changed listing: ``reported`` if above ``highest``, else the next patch above it.

    Args:
        reported: the server's version, already a semantic version.
        highest: the highest stored version of the tool, or ``None``.

    Raises:
        ValueError: a version is not a semantic version.
    """
    if highest is None or semver_key(reported) > semver_key(highest):
        return reported
    return next_patch(highest)


def next_patch(version: str) -> str:
    """``major.minor.(patch + 1)`` of a semantic version, pre-release and build dropped.

    Raises:
        ValueError: ``version`` is not a semantic version.
    """
    major, minor, patch, _, _ = semver_key(version)
    return f"{major}.{minor}.{patch + 1}"


def descriptor_changes(stored: ToolDescriptor, imported: ToolDescriptor) -> list[str]:
    """Name what differs, e.g. ``["touch: input schema, side-effect class READ_ONLY -> IRREVERSIBLE_WRITE"]``.

    Returns:
        One item per added, removed or changed operation, then ``description``,
        ``timeout_s``, ``rate_limit`` or ``adapter`` when those differ.
    """
    changes = [f"operation {name} added" for name in sorted(set(imported.operations) - set(stored.operations))]
    changes += [f"operation {name} removed" for name in sorted(set(stored.operations) - set(imported.operations))]
    for name in sorted(set(stored.operations) & set(imported.operations)):
        old, new = stored.operations[name], imported.operations[name]
        differences = operation_changes(old, new) + (["rate limit"] if old.rate_limit != new.rate_limit else [])
        if differences:
            changes.append(f"{name}: {', '.join(differences)}")
    fields = ("description", "timeout_s", "rate_limit", "adapter")
    return changes + [field for field in fields if getattr(stored, field) != getattr(imported, field)]
