"""``effectgate tools publish --from-module``: a module's declarations are checked before anything is signed or sent."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from effectgate.cli.app import app

GOOD = '''
from effectgate.contracts.vocabulary import RiskTier, SideEffectClass
from effectgate.tools import tool

@tool(side_effect=SideEffectClass.READ_ONLY, risk=RiskTier.LOW)
async def greet(name: str) -> str:
    """Greet someone."""
    return name
'''

NO_BUS = ["--nats-url", "nats://127.0.0.1:1"]


def _publish(tmp_path: Path, *arguments: str) -> tuple[int, str]:
    printed = CliRunner().invoke(
        app,
        ["tools", "publish", *arguments, "--app-dir", str(tmp_path), "--key", str(tmp_path / "none.key"), *NO_BUS],
        env={"COLUMNS": "300"},
    )
    return printed.exit_code, printed.output


@pytest.mark.parametrize(
    ("source", "arguments", "said"),
    [
        (GOOD, ["--from-module", "mod_a"], "--from-module needs --worker NAME"),
        (GOOD, ["--from-module", "mod_missing", "--worker", "w"], "mod_missing cannot be imported (ModuleNot"),
        (GOOD, ["--from-module", "mod_b", "--worker", "Bad.Name"], "declaration_refused"),
        ("VALUE = 1\n", ["--from-module", "mod_c", "--worker", "w"], "mod_c declares no tool"),
        (GOOD, ["--from-module", "mod_d", "--worker", "w", "deploy/tools/file_system.json"], "one of them"),
    ],
    ids=["no-worker", "not-importable", "bad-worker-name", "no-tools", "both-sources"],
)
def test_a_module_that_cannot_be_published_is_refused_before_signing_or_sending(
    source: str, arguments: list[str], said: str, tmp_path: Path
) -> None:
    for name in ("mod_a", "mod_b", "mod_c", "mod_d"):
        (tmp_path / f"{name}.py").write_text(source)
    code, output = _publish(tmp_path, *arguments)
    assert code in (1, 2) and said in output, output


UNDERIVABLE = """
import socket
from effectgate.contracts.vocabulary import RiskTier, SideEffectClass
from effectgate.tools import tool

@tool(side_effect=SideEffectClass.READ_ONLY, risk=RiskTier.LOW)
async def plug(into: socket.socket) -> str:
    \"\"\"Plug in.\"\"\"
    return ""
"""


@pytest.mark.parametrize(
    ("source", "code", "said"),
    [
        ("raise RuntimeError('no database')\n", 2, "cannot be imported (RuntimeError: no database)"),
        ("import sys\nsys.exit(0)\n", 2, "cannot be imported (it called sys.exit(0))"),
        (UNDERIVABLE, 1, "plug: parameter 'into': type <class 'socket.socket'> has no JSON Schema"),
    ],
    ids=["import-raises", "import-exits", "no-schema"],
)
def test_a_module_that_breaks_on_import_or_declares_an_underivable_type_is_one_clear_refusal(
    source: str, code: int, said: str, tmp_path: Path
) -> None:
    (tmp_path / "mod_broken.py").write_text(source)
    exit_code, output = _publish(tmp_path, "--from-module", "mod_broken", "--worker", "w")
    assert (exit_code, said in output, "Traceback" in output) == (code, True, False), output


def test_a_module_rule_refusal_names_the_tool_and_sends_nothing(tmp_path: Path) -> None:
    (tmp_path / "mod_rules.py").write_text(GOOD + "\nfrom effectgate.tools import naming_convention\n"
                                                  'VALIDATORS = [naming_convention(r"^ledger_")]\n')  # fmt: skip
    code, output = _publish(tmp_path, "--from-module", "mod_rules", "--worker", "w")
    assert code == 1 and "declaration_refused" in output and "greet" in output, output


def test_a_publishable_module_gets_as_far_as_the_key(tmp_path: Path) -> None:
    (tmp_path / "mod_ok.py").write_text(GOOD)
    code, output = _publish(tmp_path, "--from-module", "mod_ok", "--worker", "w")
    assert code == 2 and "none.key" in output, output  # checked, then signing needs the operator key
