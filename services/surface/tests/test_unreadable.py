"""The MCP surface names the JSON Pointer of what no request can carry: in a body, on a stdin line, in arguments."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, cast

import msgspec
import pytest

from effectgate.contracts.tools.descriptors import ToolDescriptor
from effectgate.surface.adapters.envelopes import Envelopes, unreadable
from effectgate.surface.gateway import Gateway
from effectgate.surface.listings import Listing

ROOT = Path(__file__).resolve().parents[3]


def _call(arguments: bytes) -> bytes:
    head = b'{"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "file_system__read", '
    return head + b'"arguments": ' + arguments + b"}}"


UNPARSABLE = {
    "lone-surrogate": (b'{"path": "a\\ud800.txt"}', "/params/arguments/path: string is not valid Unicode"),
    "lone-surrogate-deep": (b'{"path": "a", "o": [1, {"\\udfff": 1}]}', "/params/arguments/o/1: object key is not"),
    "invalid-utf8": (b'{"path": "\xff\xfe.txt"}', "/params/arguments/path: invalid UTF-8 (byte "),
    "invalid-utf8-key": (b'{"path": "a", "k": {"\xc3(": 1}}', "/params/arguments/k: invalid UTF-8 (byte "),
    "too-deep": (b'{"x": ' + b"[" * 5000 + b"]" * 5000 + b"}", "/params/arguments/x/0/0/0"),
}


@pytest.mark.parametrize("name", list(UNPARSABLE))
def test_a_body_the_sdk_cannot_parse_is_named_by_its_pointer(name: str) -> None:
    arguments, said = UNPARSABLE[name]
    assert str(unreadable(_call(arguments))).startswith(f"Parse error: value at {said}")


@pytest.mark.parametrize(
    "arguments",
    [b'{"path": NaN}', b'{"path": 1e400}', b'{"n": 123456789012345678901234567890}', b'{"a": 1, "a": 2}'],
)
def test_a_body_the_sdk_parses_is_left_to_it_and_to_the_gateway(arguments: bytes) -> None:
    assert unreadable(_call(arguments)) is None


async def test_the_body_check_answers_a_parse_error_naming_the_pointer_and_passes_the_rest() -> None:
    served: list[bytes] = []

    async def sdk(scope: Any, receive: Any, send: Any) -> None:
        served.append((await receive())["body"])

    async def post(body: bytes) -> list[dict[str, Any]]:
        sent: list[dict[str, Any]] = []

        async def receive() -> dict[str, Any]:
            return {"type": "http.request", "body": body, "more_body": False}

        async def send(message: dict[str, Any]) -> None:
            sent.append(message)

        await Envelopes(sdk, 1_000_000)({"type": "http", "method": "POST"}, receive, send)
        return sent

    refused = await post(_call(UNPARSABLE["lone-surrogate"][0]))
    assert refused[0]["status"] == 400
    error = json.loads(refused[1]["body"])["error"]
    assert error["code"] == -32700 and "/params/arguments/path" in error["message"]
    assert served == [] and await post(_call(b'{"path": "a.txt"}')) == [] and len(served) == 1


class _Listings:
    def __init__(self) -> None:
        data = (ROOT / "deploy" / "tools" / "file_system.json").read_bytes()
        self.listing = Listing([msgspec.json.decode(data, type=ToolDescriptor)], frozenset())

    async def of(self, principal: str) -> Listing:
        return self.listing


@pytest.mark.parametrize(
    ("arguments", "pointer"),
    [
        ({"path": "a", "opts": {"list": [1, math.inf]}}, "/opts/list/1: NaN and infinity"),
        ({"path": math.nan}, "/path: NaN and infinity"),
        ({"path": "a", "n": 2**70}, "/n: integer beyond"),
        ({"path": "a", "d": json.loads("[" * 80 + "]" * 80)}, "/d" + "/0" * 63 + ": nested deeper"),
        ({"path": "a", "k~/": "\ud800"}, "/k~0~1: string is not valid Unicode"),
    ],
    ids=["infinity", "nan", "big-integer", "too-deep", "lone-surrogate"],
)
async def test_a_call_whose_arguments_have_no_canonical_form_is_refused_naming_the_pointer(
    arguments: dict[str, Any], pointer: str
) -> None:
    listings = _Listings()
    name = next(n for n, target in listings.listing.targets.items() if target.operation == "read")
    gateway = Gateway(cast(Any, None), cast(Any, listings), cast(Any, None), cast(Any, None))

    result = await gateway.call("p", name, arguments, None, cast(Any, None))

    assert result.is_error and f"refused: argument value at {pointer}" in result.content[0].text  # type: ignore[union-attr]
