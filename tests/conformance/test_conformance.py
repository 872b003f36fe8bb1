"""The official MCP conformance suite, run for both protocol revisions through effectgate's MCP surface.

Every scenario a revision requires runs against the surface of a whole stack whose upstream
``everything`` is the fixture server; what the surface does differently from a plain MCP
server, because it governs calls, is listed in ``baseline-<revision>.yml``: one entry per
failing check, under a comment naming the difference. The suite fails the run on a failure
the baseline does not list and on a listed one that now passes. The same fixture run alone
must pass every scored scenario: so a failure through the surface is the surface's, not a
missing fixture.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from mcp import Client
from mcp.client.stdio import StdioServerParameters

pytestmark = [pytest.mark.conformance, pytest.mark.e2e]

HERE = Path(__file__).resolve().parent
FIXTURE = HERE.parent / "fixtures" / "mcp" / "everything_server.py"
REVISIONS = ("2025-11-25", "2026-07-28")


@pytest.mark.parametrize("revision", REVISIONS)
def test_the_fixture_alone_passes_every_scored_scenario(
    suite: Any, fixture_url: str, revision: str, tmp_path: Path
) -> None:
    run = suite(fixture_url, revision, tmp_path)
    print(run.summary())

    assert run.returncode == 0, run.output


async def test_the_registry_imports_every_fixture_tool_and_a_call_runs_without_approval(agent: Any) -> None:
    params = StdioServerParameters(command=sys.executable, args=[str(FIXTURE)])
    async with Client(params) as upstream:
        listed = {tool.name for tool in (await upstream.list_tools()).tools}
    descriptor = await agent.describe("mcp_everything")

    issued = await agent.invoke("mcp_everything", "test_simple_text", {}, timeout_s=20.0)

    assert set(descriptor.operations) == listed
    assert issued.outcome == "succeeded", issued.reason
    assert issued.principal == "conformance"


@pytest.mark.parametrize("revision", REVISIONS)
def test_the_suite_through_the_surface_fails_only_as_the_baseline_says(
    suite: Any, surface_url: str, revision: str, tmp_path: Path
) -> None:
    baseline = HERE / f"baseline-{revision}.yml"
    run = suite(surface_url, revision, tmp_path, baseline)
    print(run.summary())
    assert run.returncode == 0, run.output
    failing = failing_checks(tmp_path)
    stale = [entry for entry in yaml.safe_load(baseline.read_text())["server"] if entry not in failing]
    assert not stale, f"baseline entries whose check no longer fails (remove them): {stale}"


def failing_checks(out_dir: Path) -> set[str]:
    """``<scenario>:<check id>`` of every check the run did not pass (the suite writes one directory per scenario).

    The suite itself flags a listed check that passes, but not one it no longer reports at all.
    """
    found = set()
    for checks in out_dir.glob("server-*/checks.json"):
        scenario = re.sub(r"^server-|-\d{4}-\d\d-\d\dT[\d-]+Z$", "", checks.parent.name)
        found |= {f"{scenario}:{c['id']}" for c in json.loads(checks.read_text()) if c["status"] != "SUCCESS"}
    return found
