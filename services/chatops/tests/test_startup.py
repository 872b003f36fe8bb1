"""A configuration the bot cannot start with ends it at once with one line naming the setting."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from effectgate.shared.config.keyring import lay_out_keys

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize(
    ("setting", "said"),
    [
        ({"EFFECTGATE_CHATOPS_ROOMS": '{operator: "!a"}'}, "EFFECTGATE_CHATOPS_ROOMS: not valid JSON"),
        ({"EFFECTGATE_CHATOPS_ROOMS": '["!a"]'}, "EFFECTGATE_CHATOPS_ROOMS: Input should be a valid dictionary"),
        ({"EFFECTGATE_CHATOPS_PLATFORM": "teams"}, "EFFECTGATE_CHATOPS_PLATFORM: Input should be 'matrix' or 'slack'"),
        ({"EFFECTGATE_CHATOPS_PLATFORM": "slack"}, "needs EFFECTGATE_CHATOPS_SLACK_BOT_TOKEN_FILE"),
        (
            {"EFFECTGATE_CHATOPS_MATRIX_PASSWORD_FILE": "/nonexistent"},
            "EFFECTGATE_CHATOPS_MATRIX_PASSWORD_FILE=/nonexistent",
        ),
        ({"EFFECTGATE_CHATOPS_MATRIX_HOMESERVER": ""}, "the Matrix chat needs EFFECTGATE_CHATOPS_MATRIX_HOMESERVER"),
    ],
    ids=["rooms not json", "rooms a list", "unknown platform", "slack without secrets", "no password", "no server"],
)
def test_a_bad_setting_is_named_in_one_line(tmp_path: Path, setting: dict[str, str], said: str) -> None:
    lay_out_keys(tmp_path / "keys")
    env = {k: v for k, v in os.environ.items() if not k.startswith("EFFECTGATE_")}
    env |= {
        "EFFECTGATE_KEYS_DIR": str(tmp_path / "keys" / "chatops"),
        "EFFECTGATE_CHATOPS_PRINCIPALS_FILE": str(ROOT / "deploy/policy/principals.toml"),
        "EFFECTGATE_CHATOPS_MATRIX_HOMESERVER": "http://127.0.0.1:9",
        "EFFECTGATE_CHATOPS_MATRIX_USER": "@bot:localhost",
        **setting,
    }
    done = subprocess.run(
        [sys.executable, "-m", "effectgate.chatops"], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [done.stderr.strip()]
    assert done.stderr.startswith("chatops cannot start: ") and said in done.stderr
