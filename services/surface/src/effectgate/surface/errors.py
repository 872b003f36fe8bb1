"""Errors of the MCP surface."""

from __future__ import annotations

__all__ = ["NotServed"]


class NotServed(Exception):
    """The surface holds no credentials for this principal, or the name is no principal."""
