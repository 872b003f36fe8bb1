"""The example ledger on a test stack: its worker declared, its tools published and served, its file read.

A module that uses it lists ``[workers.ledger]`` in its principals file (:func:`declare_worker`),
gives its agents a ``max_amount`` (:func:`attributes_toml`, for the refunds' policy), publishes the
tools with the CLI (:func:`publish`) and runs the worker as :class:`WorkerProcess` on a SQLite file
of its own (:func:`worker_env`, :func:`seed_orders`). Used by ``test_python_tools.py`` and the chaos test.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import msgspec
from nats.js.errors import NotFoundError

from effectgate.contracts.bus import catalog
from effectgate.contracts.bus.catalog import Subjects
from effectgate.contracts.bus.nats_permissions import OPERATOR, worker_user
from effectgate.contracts.events import UncertainResolved

from .support import Gate

ROOT = Path(__file__).resolve().parents[2]
LEDGER = ROOT / "examples" / "ledger"
WORKER = "ledger"
MODULE = "ledger.tools"
TOOLS = ("refunds", "lookup_order", "export_report", "journal")
FINANCE = ("dora", "erin")
"""The two finance approvers a refund needs (policy ``financial-within-limit-approval``)."""


def declare_worker(principals: Path, *workers: str) -> None:
    """Add ``[workers.<name>]`` for the ledger (and each of ``workers``) to the principals file ``principals``."""
    sections = "".join(f"\n[workers.{name}]\n" for name in (WORKER, *workers))
    principals.write_text(principals.read_text() + sections)


def attributes_toml(principals: str, max_amount: str = "500.00") -> str:
    """An attributes file giving every principal of the directory ``principals`` a ``max_amount``."""
    agents = [line[len("[principals.") : -1] for line in principals.splitlines() if line.startswith("[principals.")]
    return "\n".join(f'[agents.{agent}]\nmax_amount = "{max_amount}"\n' for agent in agents)


def cli(gate: Gate, *args: str) -> subprocess.CompletedProcess[str]:
    """``effectgate ARGS`` as the operator of ``gate``'s stack (its output captured)."""
    env = {**os.environ, "NATS_URL": gate.stack.url_for(OPERATOR), "COLUMNS": "200"}
    env["EFFECTGATE_STATE_DIR"] = str(gate.paths.state / "no-cli")
    if prefix := gate.stack.connect_options(OPERATOR).get("inbox_prefix"):
        env["EFFECTGATE_INBOX_PREFIX"] = prefix.decode()
    command = [sys.executable, "-m", "effectgate.cli", *args]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)


def publish(gate: Gate) -> str:
    """``effectgate tools publish --from-module ledger.tools``; its output.

    Raises:
        AssertionError: the command failed.
    """
    key = str(gate.stack.keys_dir("operator") / "operator.key")
    args = ("tools", "publish", "--from-module", MODULE, "--worker", WORKER, "--app-dir", str(LEDGER))
    done = cli(gate, *args, "--key", key)
    assert done.returncode == 0, done.stderr + done.stdout
    return done.stdout


def worker_env(gate: Gate, ledger_db: Path, failpoints: str = "") -> dict[str, str]:
    """The ledger worker's environment on ``gate``'s stack, on the SQLite file ``ledger_db``."""
    return {
        **gate.stack.nats_env(worker_user(WORKER)),
        "EFFECTGATE_PUBLIC_KEYS_DIR": str(gate.stack.public_keys),
        "PYTHONPATH": str(LEDGER),
        "LEDGER_DB": str(ledger_db),
        "EFFECTGATE_FAILPOINTS": failpoints,
    }


def seed_orders(ledger_db: Path, orders: list[tuple[str, str, float]]) -> None:
    """Put ``(order_id, customer, total)`` rows in the ledger's orders."""
    with sqlite3.connect(ledger_db) as db:
        db.execute("CREATE TABLE IF NOT EXISTS orders (order_id TEXT PRIMARY KEY, customer TEXT NOT NULL, total REAL)")
        db.executemany("INSERT OR REPLACE INTO orders VALUES (?, ?, ?)", orders)


def rows(ledger_db: Path, sql: str) -> list[tuple[object, ...]]:
    """The rows ``sql`` reads from the ledger file (none when the table was never made)."""
    with sqlite3.connect(ledger_db) as db:
        try:
            return list(db.execute(sql))
        except sqlite3.OperationalError as error:
            if "no such table" in str(error):
                return []
            raise


async def tool_state(gate: Gate, tool: str, state: str, saying: str = "", timeout_s: float = 30.0) -> str:
    """Wait until the registry records ``tool`` in ``state`` for a reason holding ``saying``; that reason.

    Raises:
        TimeoutError: not within ``timeout_s``.
    """
    bucket = await gate.js.key_value(catalog.TOOLS_BUCKET)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            entry = await bucket.get(f"state.{tool}")
            recorded = msgspec.json.decode(entry.value or b"{}")
            if recorded.get("state") == state and saying in recorded.get("reason", ""):
                return str(recorded.get("reason", ""))
        except Exception:
            pass
        await asyncio.sleep(0.2)
    raise TimeoutError(f"{tool} never became {state} ({saying!r})")


async def last_resolution(gate: Gate, principal: str, request_id: str) -> UncertainResolved | None:
    """The last resolution stored on ``tg.resolution.<principal>.<request_id>``, ``None`` when there is none."""
    try:
        stored = await gate.js.get_last_msg(catalog.STREAM, Subjects.resolution(principal, request_id))
    except NotFoundError:
        return None
    return msgspec.json.decode(stored.data or b"", type=UncertainResolved)


async def resolution(gate: Gate, principal: str, request_id: str, timeout_s: float = 60.0) -> UncertainResolved:
    """The last resolution of ``request_id``, waiting up to ``timeout_s``.

    Raises:
        TimeoutError: none came.
    """
    deadline = time.monotonic() + timeout_s
    while (found := await last_resolution(gate, principal, request_id)) is None:
        if time.monotonic() > deadline:
            raise TimeoutError(f"no resolution of {request_id}")
        await asyncio.sleep(0.3)
    return found
