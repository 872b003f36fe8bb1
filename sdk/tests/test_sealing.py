"""The SDK seals secret arguments before they leave the process, and reuses an envelope on a retry."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import msgspec
import pytest
from nacl.public import PrivateKey

from effectgate.contracts.integrity.sealing import generate_sealing_keypair, is_envelope, unseal
from effectgate.contracts.tools.descriptors import ToolDescriptor
from effectgate.sdk.sealing import Sealer, SealingKeyMissing, find_sealing_key

KEY = PrivateKey.generate()
SENTINEL = "s3cr3t-SENTINEL-value"


@pytest.fixture
def descriptor(repo_root: Path) -> ToolDescriptor:
    data = msgspec.json.decode((repo_root / "deploy/tools/file_system.json").read_bytes())
    properties = data["operations"]["write"]["input_schema"]["properties"]
    properties["content"]["writeOnly"] = True
    properties["auth"] = {"type": "object", "properties": {"token": {"type": "string", "x-effectgate-secret": True}}}
    return msgspec.convert(data, ToolDescriptor)


def test_each_secret_is_sealed_to_the_executor_and_nothing_else_changes(descriptor: ToolDescriptor) -> None:
    arguments = {"path": "a.txt", "content": SENTINEL, "auth": {"token": "tok-" + SENTINEL}}
    sealed = Sealer(KEY.public_key).seal_arguments(descriptor, "write", arguments, None)
    assert sealed["path"] == "a.txt" and is_envelope(sealed["content"]) and is_envelope(sealed["auth"]["token"])
    assert unseal(sealed["content"], KEY) == SENTINEL and unseal(sealed["auth"]["token"], KEY) == "tok-" + SENTINEL
    assert SENTINEL not in msgspec.json.encode(sealed).decode()
    assert arguments["content"] == SENTINEL  # the caller's dict is not changed


def test_an_operation_without_secrets_is_sent_as_is_even_without_a_key(descriptor: ToolDescriptor) -> None:
    arguments = {"path": "a.txt"}
    assert Sealer(None).seal_arguments(descriptor, "read", arguments, None) is arguments
    assert Sealer(None).seal_arguments(descriptor, "no-such-operation", arguments, None) is arguments


def test_without_a_key_a_secret_argument_raises_before_anything_is_sent(descriptor: ToolDescriptor) -> None:
    with pytest.raises(SealingKeyMissing, match="/content"):
        Sealer(None).seal_arguments(descriptor, "write", {"path": "a", "content": SENTINEL}, "k1")


def test_a_retry_with_the_same_key_and_plaintext_reuses_the_envelope(descriptor: ToolDescriptor) -> None:
    sealer = Sealer(KEY.public_key)

    def sealed(content: str, key: str | None) -> Any:
        return sealer.seal_arguments(descriptor, "write", {"path": "a", "content": content}, key)["content"]

    assert sealed(SENTINEL, "k1") == sealed(SENTINEL, "k1")
    assert sealed(SENTINEL, "k1") != sealed(SENTINEL, "k2")
    assert sealed(SENTINEL, "k1") != sealed(SENTINEL + "!", "k1")
    assert sealed(SENTINEL, None) != sealed(SENTINEL, None)  # a fresh key each time: nothing to replay


def test_an_envelope_given_by_the_caller_is_kept(descriptor: ToolDescriptor) -> None:
    envelope = Sealer(KEY.public_key).seal_arguments(descriptor, "write", {"content": SENTINEL}, None)["content"]
    again = Sealer(KEY.public_key).seal_arguments(descriptor, "write", {"content": envelope}, None)
    assert again["content"] == envelope


def test_the_key_is_found_explicitly_then_in_the_directory_then_in_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("EFFECTGATE_SEALING_KEY", raising=False)
    monkeypatch.delenv("EFFECTGATE_PUBLIC_KEYS_DIR", raising=False)
    assert find_sealing_key() is None
    generate_sealing_keypair(tmp_path / "dir")
    from_dir = find_sealing_key(tmp_path / "dir")
    assert from_dir is not None and bytes(from_dir) == base64.b64decode((tmp_path / "dir/sealing.pub").read_text())
    explicit = base64.b64encode(bytes(KEY.public_key)).decode()
    assert find_sealing_key(tmp_path / "dir", explicit) == KEY.public_key
    monkeypatch.setenv("EFFECTGATE_PUBLIC_KEYS_DIR", str(tmp_path / "dir"))
    assert find_sealing_key() == from_dir
    monkeypatch.setenv("EFFECTGATE_SEALING_KEY", explicit)
    assert find_sealing_key() == KEY.public_key
    with pytest.raises(ValueError, match="32 bytes"):
        find_sealing_key(key=base64.b64encode(b"short").decode())
