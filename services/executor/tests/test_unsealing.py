"""The executor opens sealed secret arguments at the moment of effect, and nowhere else keeps them."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import msgspec
import pytest
from nacl.public import PrivateKey

from effectgate.contracts.integrity.sealing import SEALED_LABEL, seal
from effectgate.contracts.tools.descriptors import ToolDescriptor
from effectgate.contracts.vocabulary import Outcome
from effectgate.executor.adapters.file_system import FileSystemTool
from effectgate.executor.adapters.tool_host import LocalToolHost
from effectgate.executor.effects.unsealing import Unsealer, redact
from effectgate.executor.errors import ToolFailed
from effectgate.shared.consumer.acks import Settle

from .conftest import Harness, ScriptedTool

KEY = PrivateKey.generate()
SENTINEL = "s3cr3t-SENTINEL-value"


def _secret_write(repo_root: Path) -> ToolDescriptor:
    data = msgspec.json.decode((repo_root / "deploy/tools/file_system.json").read_bytes())
    data["operations"]["write"]["input_schema"]["properties"]["content"] = {
        "type": "string",
        "maxLength": 64,
        "writeOnly": True,
    }
    return msgspec.convert(data, ToolDescriptor)


@pytest.fixture
def sealed_harness(repo_root: Path, sandbox: Path) -> Harness:
    harness = Harness(_secret_write(repo_root), LocalToolHost(FileSystemTool(sandbox), None))
    harness.runner.unsealer = Unsealer(KEY)
    return harness


def _everything_kept(harness: Harness) -> str:
    """Every receipt, claim, decision and index record the executor left, as text."""
    return repr(harness.bus.__dict__) + repr(harness.store.__dict__)


async def test_a_sealed_secret_reaches_the_tool_in_clear_and_nothing_kept_holds_it(
    sealed_harness: Harness, sandbox: Path
) -> None:
    decision = sealed_harness.decision("write", {"path": "s.txt", "content": seal(SENTINEL, KEY.public_key)})
    assert await sealed_harness.executor.on_decision(decision) is Settle.ACK
    assert sealed_harness.receipt("r1") == (Outcome.SUCCEEDED, "ok")
    assert (sandbox / "s.txt").read_text() == SENTINEL
    kept = _everything_kept(sealed_harness)
    assert SENTINEL not in kept and base64.b64encode(SENTINEL.encode()).decode() not in kept


def _tampered(envelope: dict[str, str]) -> dict[str, str]:
    raw = bytearray(base64.b64decode(envelope["$sealed"]))
    raw[60] ^= 0x01
    return {"$sealed": base64.b64encode(bytes(raw)).decode()}


@pytest.mark.parametrize(
    "envelope",
    [
        seal(SENTINEL, PrivateKey.generate().public_key),  # sealed to another executor
        _tampered(seal(SENTINEL, KEY.public_key)),  # one bit changed
        seal("x" * 65, KEY.public_key),  # opens, but breaks the original maxLength
        seal(12345, KEY.public_key),  # opens, but is not a string
    ],
    ids=["wrong-key", "tampered", "too-long", "wrong-type"],
)
async def test_an_envelope_that_cannot_run_is_refused_naming_the_pointer_and_runs_nothing(
    sealed_harness: Harness, sandbox: Path, envelope: dict[str, str]
) -> None:
    decision = sealed_harness.decision("write", {"path": "s.txt", "content": envelope})
    assert await sealed_harness.executor.on_decision(decision) is Settle.ACK
    issued = sealed_harness.bus.receipts["r1"]
    assert (issued.outcome, issued.reason_code) == (Outcome.REFUSED, "sealed_argument_invalid")
    assert "/content" in issued.reason
    assert SENTINEL not in issued.reason and "xxxx" not in issued.reason and "12345" not in issued.reason
    assert not (sandbox / "s.txt").exists()


async def test_an_executor_without_a_sealing_key_refuses_a_secret(sealed_harness: Harness, sandbox: Path) -> None:
    sealed_harness.runner.unsealer = Unsealer(None)
    decision = sealed_harness.decision("write", {"path": "s.txt", "content": seal(SENTINEL, KEY.public_key)})
    await sealed_harness.executor.on_decision(decision)
    assert sealed_harness.receipt("r1") == (Outcome.REFUSED, "sealed_argument_invalid")
    assert not (sandbox / "s.txt").exists()


async def test_a_tool_that_echoes_the_secret_does_not_put_it_into_the_receipt(repo_root: Path) -> None:
    def echo(arguments: dict[str, Any]) -> Any:
        raise ToolFailed("tool_error", f"the server said: bad password {arguments['content']}!")

    tool = ScriptedTool(echo)
    harness = Harness(_secret_write(repo_root), tool)
    harness.runner.unsealer = Unsealer(KEY)
    await harness.executor.on_decision(
        harness.decision("write", {"path": "s", "content": seal(SENTINEL, KEY.public_key)})
    )
    issued = harness.bus.receipts["r1"]
    assert tool.calls == 1 and issued.outcome == Outcome.FAILED
    assert SENTINEL not in issued.reason and SEALED_LABEL in issued.reason


def test_redact_replaces_every_occurrence_in_keys_values_and_lists() -> None:
    value = {"a": f"x{SENTINEL}y", SENTINEL: [SENTINEL, 1, None], "b": "kept"}
    shown = redact(value, (SENTINEL,))
    assert SENTINEL not in repr(shown) and shown["b"] == "kept" and shown[SEALED_LABEL][1:] == [1, None]


async def test_a_result_that_echoes_the_secret_is_kept_out_of_the_receipt(repo_root: Path) -> None:
    def echo(arguments: dict[str, Any]) -> Any:
        return {"path": f"notes/{arguments['content']}.txt", "size_bytes": 1, "sha256": "0" * 64, "created": True}

    harness = Harness(_secret_write(repo_root), ScriptedTool(echo))
    harness.runner.unsealer = Unsealer(KEY)
    await harness.executor.on_decision(
        harness.decision("write", {"path": "s", "content": seal(SENTINEL, KEY.public_key)})
    )
    issued = harness.bus.receipts["r1"]
    assert issued.outcome == Outcome.SUCCEEDED, issued.reason
    assert issued.result["path"] == f"notes/{SEALED_LABEL}.txt"
    assert SENTINEL not in _everything_kept(harness)


async def test_a_schema_with_a_secret_where_none_can_be_runs_nothing(repo_root: Path, sandbox: Path) -> None:
    descriptor = _secret_write(repo_root)
    schema = descriptor.operations["write"].input_schema
    schema["properties"]["content"] = {"type": "string", "allOf": [{"writeOnly": True}]}
    harness = Harness(descriptor, LocalToolHost(FileSystemTool(sandbox), None))
    harness.runner.unsealer = Unsealer(KEY)
    await harness.executor.on_decision(harness.decision("write", {"path": "s.txt", "content": SENTINEL}))
    assert harness.receipt("r1") == (Outcome.REFUSED, "schema_unusable")
    assert not (sandbox / "s.txt").exists()
