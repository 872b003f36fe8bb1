"""A configuration the bot cannot start with ends it at once with one line naming the setting."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from toolgate.shared.keyring import lay_out_keys

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize(
    ("setting", "said"),
    [
        ({"TOOLGATE_CHATOPS_ROOMS": '{operator: "!a"}'}, "TOOLGATE_CHATOPS_ROOMS: not valid JSON"),
        ({"TOOLGATE_CHATOPS_ROOMS": '["!a"]'}, "TOOLGATE_CHATOPS_ROOMS: Input should be a valid dictionary"),
        ({"TOOLGATE_CHATOPS_PLATFORM": "teams"}, "TOOLGATE_CHATOPS_PLATFORM: Input should be 'matrix' or 'slack'"),
        ({"TOOLGATE_CHATOPS_PLATFORM": "slack"}, "needs TOOLGATE_CHATOPS_SLACK_BOT_TOKEN_FILE"),
        (
            {"TOOLGATE_CHATOPS_MATRIX_PASSWORD_FILE": "/nonexistent"},
            "TOOLGATE_CHATOPS_MATRIX_PASSWORD_FILE=/nonexistent",
        ),
        ({"TOOLGATE_CHATOPS_MATRIX_HOMESERVER": ""}, "the Matrix chat needs TOOLGATE_CHATOPS_MATRIX_HOMESERVER"),
    ],
    ids=["rooms not json", "rooms a list", "unknown platform", "slack without secrets", "no password", "no server"],
)
def test_a_bad_setting_is_named_in_one_line(tmp_path: Path, setting: dict[str, str], said: str) -> None:
    lay_out_keys(tmp_path / "keys")
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOOLGATE_")}
    env |= {
        "TOOLGATE_KEYS_DIR": str(tmp_path / "keys" / "chatops"),
        "TOOLGATE_CHATOPS_PRINCIPALS_FILE": str(ROOT / "deploy/policy/principals.toml"),
        "TOOLGATE_CHATOPS_MATRIX_HOMESERVER": "http://127.0.0.1:9",
        "TOOLGATE_CHATOPS_MATRIX_USER": "@bot:localhost",
        **setting,
    }
    done = subprocess.run(
        [sys.executable, "-m", "toolgate.chatops"], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [done.stderr.strip()]
    assert done.stderr.startswith("chatops cannot start: ") and said in done.stderr
