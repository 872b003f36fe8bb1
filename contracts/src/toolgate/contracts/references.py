"""What a descriptor refers to must exist: the adapter that reaches the tool, the arguments its pointers name.

One check for every place a descriptor enters or is read: the registry refuses a
descriptor that fails it (``invalid_adapter`` / ``invalid_pointer``), ``toolgate tools
publish`` and ``toolgate config check`` say so before anything is sent, and a stored
descriptor that fails it (published before the check) is unavailable: the policy service
neither lists it nor lets it be called (fail closed).
"""

from __future__ import annotations

from collections.abc import Collection

from toolgate.contracts.adapters import adapter_problem
from toolgate.contracts.descriptors import ToolDescriptor
from toolgate.contracts.pointers import spec_problem

__all__ = ["reference_problem"]


def reference_problem(descriptor: ToolDescriptor, mcp_servers: Collection[str] | None = None) -> tuple[str, str] | None:
    """The first dangling reference of ``descriptor`` as ``(reason_code, "<field>: …")``; ``None``: none.

    Args:
        descriptor: the descriptor.
        mcp_servers: the configured MCP server names (``None``: any well-formed name is taken).

    Returns:
        ``("invalid_adapter", "adapter: …")`` (:func:`~toolgate.contracts.adapters.adapter_problem`)
        or ``("invalid_pointer", "operations.<op>.<field>: …")``
        (:func:`~toolgate.contracts.pointers.spec_problem`), or ``None``.
    """
    if problem := adapter_problem(descriptor.adapter, mcp_servers):
        return "invalid_adapter", problem
    for name, spec in descriptor.operations.items():
        if problem := spec_problem(spec):
            return "invalid_pointer", f"operations.{name}.{problem}"
    return None
