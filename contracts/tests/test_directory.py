"""The principal directory's operators and approvers' chat identities: validated, one owner per chat id."""

from __future__ import annotations

import re

import pytest

from effectgate.contracts.directory import ChatIds, DirectoryInvalid, PrincipalDirectory

DIRECTORY = """
[principals.demo-agent]
autonomy = 1
roles = ["agent"]
operator = "alice"

[principals.ops-agent]
autonomy = 2

[approvers.alice]
roles = ["operator"]
matrix = "@alice:example.org"
slack = "U0123ABC"

[approvers.bob]
roles = ["operator", "sre"]
matrix = "@bob:matrix.example.org:8448"
slack = "W0ABCDEF1"

[approvers.carol]
roles = ["sre"]
"""


def test_chat_users_map_to_their_approver_and_nobody_else() -> None:
    directory = PrincipalDirectory.from_toml(DIRECTORY)
    assert directory.approver_for_chat("matrix", "@alice:example.org") == "alice"
    assert directory.approver_for_chat("slack", "U0123ABC") == "alice"
    assert directory.approver_for_chat("matrix", "@bob:matrix.example.org:8448") == "bob"
    assert directory.approver_for_chat("slack", "W0ABCDEF1") == "bob"
    assert directory.approver_for_chat("slack", "@alice:example.org") is None  # another platform's id
    assert directory.approver_for_chat("matrix", "@mallory:example.org") is None
    assert directory.approver_for_chat("irc", "alice") is None


def test_an_approvers_chat_ids_are_there_for_mentions() -> None:
    directory = PrincipalDirectory.from_toml(DIRECTORY)
    assert directory.chat_ids("alice") == ChatIds(matrix="@alice:example.org", slack="U0123ABC")
    assert directory.chat_ids("carol") == ChatIds()
    assert directory.chat_ids("nobody") == ChatIds()


def test_the_operator_of_an_agent_is_not_entitled_to_approve_it() -> None:
    directory = PrincipalDirectory.from_toml(DIRECTORY)
    assert directory.operator_of("demo-agent") == "alice"
    assert directory.operator_of("ops-agent") is None
    assert directory.entitled("operator", "demo-agent") == ("bob",)
    assert directory.entitled("operator", "ops-agent") == ("alice", "bob")


@pytest.mark.parametrize(
    ("table", "fragment"),
    [
        ('matrix = "alice"', "[approvers.zed]: matrix must be a Matrix user id"),
        ('matrix = "@Alice:example.org"', "matrix must be a Matrix user id"),  # upper case is not a localpart
        ('matrix = "@alice"', "matrix must be a Matrix user id"),
        ('matrix = "@alice:exa mple.org"', "matrix must be a Matrix user id"),
        ('matrix = "@alice:example.org\\n"', "matrix must be a Matrix user id"),
        (f'matrix = "@{"a" * 250}:example.org"', "matrix must be a Matrix user id"),
        ("matrix = 7", "matrix must be a Matrix user id"),
        ('slack = "alice"', "[approvers.zed]: slack must be a Slack user id"),
        ('slack = "u0123abc"', "slack must be a Slack user id"),
        ('slack = "C0123ABC"', "slack must be a Slack user id"),  # a channel, not a user
        ('slack = "<@U0123ABC>"', "slack must be a Slack user id"),
        ('teams = "x"', "[approvers.zed]: unknown key(s) teams; allowed: matrix, roles, slack"),
    ],
)
def test_invalid_chat_ids_are_refused_naming_the_approver_and_the_rule(table: str, fragment: str) -> None:
    with pytest.raises(DirectoryInvalid) as refused:
        PrincipalDirectory.from_toml(f'[approvers.zed]\nroles = ["operator"]\n{table}\n')
    assert fragment in refused.value.reason


@pytest.mark.parametrize("platform", ["matrix", "slack"])
def test_one_chat_id_belongs_to_one_approver_only(platform: str) -> None:
    chat_id = "@alice:example.org" if platform == "matrix" else "U0123ABC"
    text = f'[approvers.alice]\n{platform} = "{chat_id}"\n[approvers.bob]\n{platform} = "{chat_id}"\n'
    with pytest.raises(DirectoryInvalid) as refused:
        PrincipalDirectory.from_toml(text)
    assert refused.value.reason == (
        f"[approvers.alice] and [approvers.bob] both have {platform} = {chat_id!r}: "
        "a chat id may belong to one approver only"
    )


@pytest.mark.parametrize(
    ("operator", "fragment"),
    [
        ('"alcie"', "[principals.p]: operator 'alcie' is not listed under [approvers]"),
        ('"a.b"', "[principals.p]: operator must be an approver's name, got 'a.b'"),
        ("1", "[principals.p]: operator must be an approver's name, got 1"),
    ],
)
def test_an_operator_must_be_a_listed_approver(operator: str, fragment: str) -> None:
    text = f'[principals.p]\nautonomy = 1\noperator = {operator}\n[approvers.alice]\nroles = ["operator"]\n'
    with pytest.raises(DirectoryInvalid) as refused:
        PrincipalDirectory.from_toml(text)
    assert fragment in refused.value.reason


def test_the_shipped_directory_loads() -> None:
    from pathlib import Path

    from effectgate.contracts.directory import load_directory

    shipped = load_directory(Path(__file__).parents[2] / "deploy/policy/principals.toml")
    assert set(shipped.approvers) >= {"alice", "bob"}


def test_workers_are_declared_by_empty_tables() -> None:
    directory = PrincipalDirectory.from_toml("[workers.payments]\n[workers.refunds_2]\n")
    assert directory.workers == {"payments", "refunds_2"}


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("[workers.Pay-Ments]\n", "[workers.Pay-Ments]: a worker name must match"),
        ("[workers.pay]\nmodule = 'x'\n", "[workers.pay]: unknown key(s) module; allowed: none"),
        ("workers = 1\n", "[workers] must be a table of tables"),
    ],
)
def test_a_bad_worker_declaration_is_refused_naming_it(text: str, said: str) -> None:
    with pytest.raises(DirectoryInvalid, match=re.escape(said)):
        PrincipalDirectory.from_toml(text)
