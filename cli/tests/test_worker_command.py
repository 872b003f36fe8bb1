"""``effectgate worker``: the module's dispatcher comes from one factory; bad input is one line and exit code 2."""

from __future__ import annotations

import sys
from pathlib import Path
from types import ModuleType

import pytest
from typer.testing import CliRunner

import effectgate.tools
from effectgate.cli.app import app
from effectgate.contracts.integrity.signing import generate_keypair
from effectgate.contracts.tools.hosting import ServedTool, WorkerAnswer, WorkerCall
from effectgate.tools.answering import Answering, Progress


class Served:
    def __init__(self, tools: tuple[ServedTool, ...]) -> None:
        self.tools = tools

    def served(self) -> tuple[ServedTool, ...]:
        return self.tools

    async def answer(self, call: WorkerCall, progress: Progress) -> WorkerAnswer:
        return WorkerAnswer(call_id=call.call_id, outcome="ok")


@pytest.fixture
def asked(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> list[tuple[str, str]]:
    """The factory's calls; a module ``acme_tools`` to import; keys; a NATS nobody answers (fast)."""
    calls: list[tuple[str, str]] = []

    def factory(module: str, worker: str) -> Answering:
        calls.append((module, worker))
        return Served(() if module == "acme_empty" else (ServedTool(tool="pay", version="1.0.0", digest="d" * 64),))

    monkeypatch.setattr(effectgate.tools, "dispatcher_for_module", factory, raising=False)
    for name in ("acme_tools", "acme_empty"):
        monkeypatch.setitem(sys.modules, name, ModuleType(name))
    generate_keypair(tmp_path, "receipts")
    monkeypatch.setenv("EFFECTGATE_PUBLIC_KEYS_DIR", str(tmp_path))
    monkeypatch.setenv("NATS_URL", "nats://127.0.0.1:9")  # the discard port: nothing listens
    monkeypatch.setenv("EFFECTGATE_WORKER_CONNECT_S", "0.5")
    return calls


def test_the_dispatcher_is_built_by_the_factory_from_module_and_name(asked: list[tuple[str, str]]) -> None:
    result = CliRunner().invoke(app, ["worker", "acme_tools", "--name", "payments"])
    assert asked == [("acme_tools", "payments")]
    assert result.exit_code == 2 and "cannot reach NATS at nats://127.0.0.1:9" in result.output


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["no_such_module_xyz", "--name", "payments"], "module no_such_module_xyz cannot be imported"),
        (["acme_empty", "--name", "payments"], "module acme_empty declares no tools"),
        (["acme_tools", "--name", "Pay-Ments"], "worker name 'Pay-Ments' must match"),
        (["acme_tools", "--name", "payments", "--max-concurrent", "0"], "--max-concurrent must be 1 or more"),
    ],
    ids=["not-importable", "no-tools", "bad-name", "bad-bound"],
)
def test_bad_input_is_refused_in_one_line_with_exit_code_2(
    asked: list[tuple[str, str]], args: list[str], said: str
) -> None:
    result = CliRunner().invoke(app, ["worker", *args])
    assert result.exit_code == 2
    assert said in result.output and len(result.output.strip().splitlines()) == 1


def test_without_the_executor_s_key_it_is_refused(asked: list[tuple[str, str]], tmp_path: Path) -> None:
    result = CliRunner().invoke(
        app, ["worker", "acme_tools", "--name", "payments", "--public-keys", str(tmp_path / "none")]
    )
    assert result.exit_code == 2 and "receipts.pub cannot be used" in result.output


def test_the_module_is_imported_from_the_app_dir(asked: list[tuple[str, str]], tmp_path: Path) -> None:
    (tmp_path / "acme_here.py").write_text("VALUE = 1\n")
    result = CliRunner().invoke(app, ["worker", "acme_here", "--name", "payments", "--app-dir", str(tmp_path)])
    assert asked == [("acme_here", "payments")], result.output  # imported, then handed to the factory
