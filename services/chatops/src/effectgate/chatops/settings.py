"""Settings of the chat-ops bot (environment prefix ``EFFECTGATE_CHATOPS_``).

Secrets (the Matrix password or access token, the Slack bot token, signing secret and
app token) are read from files named here, never from the environment's values themselves
and never logged. The ``[chat]`` table of ``effectgate.toml`` sets the same fields (without the
``EFFECTGATE_CHATOPS_`` prefix); the environment overrides it.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, ValidationError
from pydantic_settings import SettingsConfigDict, SettingsError

from effectgate.contracts.errors import described
from effectgate.shared.config.effectgate_file import EffectgateConfig
from effectgate.shared.config.settings import ServiceSettings

__all__ = ["ChatopsSettings", "startup_problem"]

ENV_PREFIX = "EFFECTGATE_CHATOPS_"


class ChatopsSettings(ServiceSettings):
    """Which chat, which rooms, and how cards look."""

    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, extra="ignore")

    platform: Literal["matrix", "slack"] = Field(
        default="matrix", description="Chat platform: matrix or slack. Env: EFFECTGATE_CHATOPS_PLATFORM."
    )
    principals_file: Path = Field(
        default=Path("deploy/policy/principals.toml"),
        description="Principal directory; [approvers.<n>] matrix = / slack = map chat users to approvers. "
        "Env: EFFECTGATE_CHATOPS_PRINCIPALS_FILE.",
    )
    rooms: dict[str, str] = Field(
        default={},
        description='Approver role to Matrix room id or Slack channel id, as JSON: {"operator": "!abc:example.org"}. '
        "Env: EFFECTGATE_CHATOPS_ROOMS.",
    )
    default_room: str = Field(
        default="",
        description="Room or channel for a role not in rooms; empty: such approvals get no card (CLI only). "
        "Env: EFFECTGATE_CHATOPS_DEFAULT_ROOM.",
    )
    fold_chars: int = Field(
        default=200,
        ge=20,
        description="Argument strings longer than this are folded on the card and posted in full in its thread. "
        "Env: EFFECTGATE_CHATOPS_FOLD_CHARS.",
    )
    part_chars: int = Field(
        default=3000,
        ge=200,
        le=3000,
        description="Longest thread message, characters; longer text is posted in numbered parts. "
        "Env: EFFECTGATE_CHATOPS_PART_CHARS.",
    )
    resync_interval_s: float = Field(
        default=60.0,
        ge=1.0,
        description="Seconds between checks that every pending approval has a card (one chat refused for a while, "
        "e.g. before the bot was invited, is posted then). Env: EFFECTGATE_CHATOPS_RESYNC_INTERVAL_S.",
    )
    matrix_homeserver: str = Field(
        default="", description="Matrix homeserver URL. Env: EFFECTGATE_CHATOPS_MATRIX_HOMESERVER."
    )
    matrix_user: str = Field(
        default="", description="The bot's Matrix user id, @bot:example.org. Env: EFFECTGATE_CHATOPS_MATRIX_USER."
    )
    matrix_password_file: Path | None = Field(
        default=None,
        description="File holding the bot's Matrix password. Env: EFFECTGATE_CHATOPS_MATRIX_PASSWORD_FILE.",
    )
    matrix_device_id: str = Field(
        default="EFFECTGATEBOT",
        description="The bot's fixed Matrix device id (retried sends are deduplicated per device). "
        "Env: EFFECTGATE_CHATOPS_MATRIX_DEVICE_ID.",
    )
    matrix_state_dir: Path | None = Field(
        default=None,
        description="Directory where the bot keeps its Matrix sync position, so answers given while it was down "
        "are read when it starts again; unset: it starts from now. Env: EFFECTGATE_CHATOPS_MATRIX_STATE_DIR.",
    )
    slack_mode: Literal["http", "socket"] = Field(
        default="http",
        description="http: Slack posts interactions to our endpoint (signed); socket: Socket Mode, for "
        "deployments that cannot expose an endpoint. Env: EFFECTGATE_CHATOPS_SLACK_MODE.",
    )
    slack_bot_token_file: Path | None = Field(
        default=None, description="File holding the bot token xoxb-…. Env: EFFECTGATE_CHATOPS_SLACK_BOT_TOKEN_FILE."
    )
    slack_signing_secret_file: Path | None = Field(
        default=None,
        description="File holding the app's signing secret (HTTP mode). "
        "Env: EFFECTGATE_CHATOPS_SLACK_SIGNING_SECRET_FILE.",
    )
    slack_app_token_file: Path | None = Field(
        default=None,
        description="File holding the app-level token xapp-… (Socket Mode). "
        "Env: EFFECTGATE_CHATOPS_SLACK_APP_TOKEN_FILE.",
    )
    slack_api_url: str = Field(
        default="https://slack.com/api/",
        description="Slack Web API base URL, ending in /. Env: EFFECTGATE_CHATOPS_SLACK_API_URL.",
    )
    slack_host: str = Field(
        default="127.0.0.1", description="Address the HTTP endpoint listens on. Env: EFFECTGATE_CHATOPS_SLACK_HOST."
    )
    slack_port: int = Field(
        default=3000, ge=0, le=65535, description="Port of the HTTP endpoint. Env: EFFECTGATE_CHATOPS_SLACK_PORT."
    )
    slack_socket_fd: int | None = Field(
        default=None,
        ge=0,
        description="A listening socket handed down by the process that started the bot (`effectgate up`, the "
        "tests), served instead of binding slack_host:slack_port. Env: EFFECTGATE_CHATOPS_SLACK_SOCKET_FD.",
    )

    @classmethod
    def from_config(cls, config: EffectgateConfig) -> dict[str, Any]:
        """The ``[chat]`` keys that are set (file and directory paths resolved against the config file)."""
        return config.chat_settings()


def startup_problem(error: BaseException) -> str | None:
    """One line naming the setting that keeps the bot from starting, or ``None`` for another fault.

    Covers invalid values (pydantic ``ValidationError``), unparsable JSON (``SettingsError``),
    and the ``ValueError`` / ``OSError`` the adapters, the keys and the directory raise.
    """
    if isinstance(error, ValidationError):
        return "; ".join(f"{_env_of(issue['loc'])}: {issue['msg']}" for issue in error.errors())
    if isinstance(error, SettingsError):
        field = re.search(r'field "(\w+)"', str(error))
        cause = f" ({error.__cause__})" if error.__cause__ else ""
        return f"{ENV_PREFIX}{field[1].upper()}: not valid JSON{cause}" if field else str(error)
    return described(error) if isinstance(error, ValueError | OSError) else None


def _env_of(location: tuple[int | str, ...]) -> str:
    field = str(location[0]) if location else "?"
    named = ChatopsSettings.model_fields.get(field)
    alias = named.validation_alias if named else None
    return str(alias.choices[0]) if alias is not None else f"{ENV_PREFIX}{field.upper()}"  # type: ignore[union-attr]
