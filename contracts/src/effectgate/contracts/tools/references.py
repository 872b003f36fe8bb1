"""What a descriptor refers to must exist: the adapter that reaches the tool, the arguments its pointers name."""

from __future__ import annotations

from collections.abc import Collection

from effectgate.contracts.tools.adapters import adapter_problem
from effectgate.contracts.tools.descriptors import ToolDescriptor
from effectgate.contracts.tools.pointers import spec_problem

__all__ = ["reference_problem"]


def reference_problem(descriptor: ToolDescriptor, mcp_servers: Collection[str] | None = None) -> tuple[str, str] | None:
    """The first dangling reference of ``descriptor`` as ``(reason_code, "<field>: …")``; ``None``: none.

    Args:
        descriptor: the descriptor.
        mcp_servers: the configured MCP server names (``None``: any well-formed name is taken).

    Returns:
        ``("invalid_adapter", "adapter: …")`` (:func:`~effectgate.contracts.tools.adapters.adapter_problem`)
        or ``("invalid_pointer", "operations.<op>.<field>: …")``
        (:func:`~effectgate.contracts.tools.pointers.spec_problem`), or ``None``.
    """
    if problem := adapter_problem(descriptor.adapter, mcp_servers):
        return "invalid_adapter", problem
    for name, spec in descriptor.operations.items():
        if problem := spec_problem(spec):
            return "invalid_pointer", f"operations.{name}.{problem}"
    return None
