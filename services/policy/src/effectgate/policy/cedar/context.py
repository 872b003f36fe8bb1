"""The Cedar context of one call: what the descriptor says, and what its arguments say."""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping
from decimal import Decimal
from typing import Any
from urllib.parse import urlsplit

from effectgate.contracts.errors import Problem
from effectgate.contracts.tools.descriptors import OperationSpec
from effectgate.contracts.tools.pointers import MISSING, resolve
from effectgate.policy.cedar.args_schema import CedarType

__all__ = ["DERIVED", "Untypable", "call_context", "canonical_host", "cedar_decimal", "descriptor_context"]

_LONG = (-(2**63), 2**63 - 1)
_DECIMAL_LIMIT = Decimal("922337203685477.5807")
_QUANTUM = Decimal("0.0001")
_PLAIN_NUMBER = re.compile(r"-?[0-9]+(\.[0-9]+)?")
_DNS_NAME = re.compile(r"(?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.)*[a-z](?:[a-z0-9-]{0,61}[a-z0-9])?")
_PLAIN = re.compile(r"[!-\[\]-~]+")  # printable ASCII, no space, no backslash


DERIVED = {"destination_host": "destination", "amount": "amount"}
"""Context fields fed by a descriptor pointer: context name to ``OperationSpec`` field."""


class Untypable(Problem, ValueError):
    """An argument the policy must see has no exact Cedar value.

    Attributes:
        pointer: its JSON Pointer (RFC 6901) in the arguments.
        why: what is wrong with it.
    """

    def __init__(self, pointer: str, why: str) -> None:
        super().__init__(f"{pointer}: {why}")
        self.pointer, self.why = pointer, why


def descriptor_context(tool: str, version: str, operation: str, spec: OperationSpec) -> dict[str, Any]:
    """The part of the context that holds for every call of ``tool@version`` ``operation``."""
    return {
        "operation": operation,
        "side_effect": spec.side_effect_class.value,
        "side_effect_rank": spec.side_effect_class.rank,
        "risk": spec.risk_tier.value,
        "risk_rank": spec.risk_tier.rank,
        "tool": tool,
        "version": version,
        "open_world": spec.open_world or spec.destination is not None,  # a destination is outside
    }


def call_context(spec: OperationSpec, args_type: CedarType, arguments: Mapping[str, Any]) -> dict[str, Any]:
    """The argument-derived part of the context: ``args``, ``destination_host``, ``amount``.

    Args:
        spec: the operation (its ``destination`` and ``amount`` pointers).
        args_type: the record of the operation's argument types the vocabulary holds.
        arguments: the call's arguments, already valid against the input schema.

    Raises:
        Untypable: a value the policy must see has no exact Cedar value.
    """
    context: dict[str, Any] = {"args": _value(arguments, args_type, "")}
    if spec.destination is not None and (host := _host(resolve(spec.destination, arguments))):
        context["destination_host"] = host
    if spec.amount is not None and (amount := resolve(spec.amount, arguments)) is not MISSING:
        context["amount"] = cedar_decimal(amount, spec.amount)
    return context


def _host(url: Any) -> str | None:
    r"""The host of ``url``, or ``None`` when it has none or clients could reach another one.

    Only printable ASCII without backslashes and without userinfo is read: WHATWG URL
    parsers (browsers, Node's ``fetch``) take ``\`` for ``/`` in ``https://evil\@good/``,
    where RFC 3986 finds the host ``good``. The host must then be in canonical form
    (:func:`canonical_host`): resolvers and URL parsers read ``2852039166``, ``0xa9.0xfe.…``,
    ``169%2e254…`` or a trailing dot as another spelling of some address, and a policy must
    not allow what the tool would reach under another name. Without a host the call needs
    whatever a host-less call needs.
    """
    if not isinstance(url, str) or not _PLAIN.fullmatch(url):
        return None
    try:
        parts = urlsplit(url)
        host = parts.hostname
    except ValueError:  # e.g. an unclosed IPv6 bracket
        return None
    if not host or "@" in parts.netloc or ("[" in parts.netloc and not _is_address(host)):
        return None  # userinfo, or a bracketed literal that is no address ("IPvFuture")
    return canonical_host(host)


def _is_address(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def canonical_host(host: str) -> str | None:
    """``host`` when it is written canonically; else ``None``.

    Canonical: a lower-case DNS name (RFC 1123 labels, the last starting with a letter, no
    trailing dot), or an address in its canonical text (dotted-quad IPv4 without leading
    zeros; compressed IPv6 that is not IPv4-mapped).
    """
    if "%" in host:  # an IPv6 zone id (fe80::1%eth0): clients drop it and reach the address
        return None
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return host if _DNS_NAME.fullmatch(host) else None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return None
    return host if str(address) == host else None


def cedar_decimal(number: Any, pointer: str) -> dict[str, Any]:
    """``number`` as a Cedar ``decimal`` extension value (``{"__extn": …}``).

    A JSON number, or a string written plainly (``-?digits[.digits]``, ASCII): no exponent,
    separators, spaces or other digits, which tools may read another way.

    Raises:
        Untypable: not a finite number, more than 4 decimal places, or beyond
            ±922337203685477.5807.
    """
    if isinstance(number, bool) or not isinstance(number, int | float | str):
        raise Untypable(pointer, "is not a number")
    if isinstance(number, str) and not _PLAIN_NUMBER.fullmatch(number):
        raise Untypable(pointer, "is not a number written plainly (digits, an optional sign and decimal point)")
    exact = Decimal(str(number)) if not isinstance(number, float) else Decimal(repr(number))
    if not exact.is_finite():
        raise Untypable(pointer, "is not a finite number")
    if abs(exact) > _DECIMAL_LIMIT:
        raise Untypable(pointer, "is beyond the range of a Cedar decimal")
    if exact != exact.quantize(_QUANTUM, rounding="ROUND_DOWN"):
        raise Untypable(pointer, "has more than 4 decimal places (a Cedar decimal holds 4)")
    return {"__extn": {"fn": "decimal", "arg": format(exact.quantize(_QUANTUM), "f")}}


def _value(value: Any, typed: CedarType, pointer: str) -> Any:
    if typed.kind == "Record":
        fields = value if isinstance(value, Mapping) else {}
        return {
            name: _value(fields[name], inner, f"{pointer}/{_escape(name)}")
            for name, inner in typed.attributes
            if name in fields
        }
    if typed.kind == "Set" and typed.element is not None:
        items = value if isinstance(value, list) else []
        return [_value(item, typed.element, f"{pointer}/{index}") for index, item in enumerate(items)]
    if typed.kind == "decimal":
        return cedar_decimal(value, pointer)
    if typed.kind == "Long" and isinstance(value, float) and value.is_integer():
        value = int(value)  # JSON Schema's "integer" admits 5.0
    if typed.kind == "Long" and (isinstance(value, bool) or not isinstance(value, int) or not _fits(value)):
        raise Untypable(pointer, "is not an integer of at most 64 bits")
    return value


def _fits(value: int) -> bool:
    return _LONG[0] <= value <= _LONG[1]


def _escape(name: str) -> str:
    return name.replace("~", "~0").replace("/", "~1")
