"""The image holds what the configured MCP servers run: `mcp-server-git` needs the `git` binary."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = (ROOT / "Dockerfile").read_text()


def workspace_dependencies() -> set[str]:
    """The names every workspace package depends on (the image installs them all)."""
    names: set[str] = set()
    for pyproject in ROOT.glob("*/**/pyproject.toml"):
        if ".venv" in pyproject.parts or ".tools" in pyproject.parts:
            continue
        for requirement in tomllib.loads(pyproject.read_text()).get("project", {}).get("dependencies", []):
            names.add(re.split(r"[<>=!~\[ ;]", requirement, maxsplit=1)[0].lower())
    return names


def apt_installed() -> set[str]:
    """Packages named after ``apt-get install`` in the Dockerfile (options skipped)."""
    found: set[str] = set()
    for line in re.findall(r"apt-get install ([^&\n]+)", DOCKERFILE):
        found.update(word for word in line.replace("\\", " ").split() if not word.startswith("-"))
    return found


def test_the_image_has_git_when_mcp_server_git_is_a_dependency() -> None:
    assert "mcp-server-git" in workspace_dependencies(), "the check below would guard nothing"
    assert "git" in apt_installed()


def test_apt_stays_slim() -> None:
    assert "--no-install-recommends" in DOCKERFILE
    assert "rm -rf /var/lib/apt/lists/*" in DOCKERFILE
