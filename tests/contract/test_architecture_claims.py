"""Claims of the docs (docs/**/*.md) that the code can answer: subjects, consumers, defaults.

The citations test proves that what the document names exists; this one proves that what it
says about some of those names is still true. The subject table lists every subject of the
catalog and no other; every consumer the catalog lets deliver without limit is named as such;
a setting cited with its default in parentheses (``EFFECTGATE_X`` (10 s)) has that default; every
reason code, field or type quoted by name occurs in the code (a renamed one fails here); each
guarantee an end-to-end module's docstring says it proves lists that module in the guarantee table.
"""

from __future__ import annotations

import ast
import importlib
import itertools
import re
from functools import cache
from pathlib import Path

import pytest
from pydantic_settings import BaseSettings

from effectgate.contracts.bus import catalog

ROOT = Path(__file__).resolve().parents[2]
PAGES = sorted((ROOT / "docs").rglob("*.md"))
DOC = "\n\n".join(page.read_text() for page in PAGES)
SETTINGS = {
    "EFFECTGATE_POLICY_": ("effectgate.policy.settings", "PolicySettings"),
    "EFFECTGATE_APPROVALS_": ("effectgate.approvals.settings", "ApprovalsSettings"),
    "EFFECTGATE_EXECUTOR_": ("effectgate.executor.settings", "ExecutorSettings"),
    "EFFECTGATE_CHATOPS_": ("effectgate.chatops.settings", "ChatopsSettings"),
    "EFFECTGATE_REGISTRY_": ("effectgate.registry.settings", "RegistrySettings"),
    "EFFECTGATE_AUDIT_": ("effectgate.audit.settings", "AuditSettings"),
    "EFFECTGATE_UP_": ("effectgate.cli.stack.supervise", "SupervisionSettings"),
    "EFFECTGATE_WORKER_": ("effectgate.tools.serving.connection", "WorkerSettings"),
    "EFFECTGATE_": ("effectgate.shared.config.settings", "ServiceSettings"),  # every service's; last: the fallback
}
DURATIONS_S = {"s": 1.0, "hour": 3600.0, "hours": 3600.0, "day": 86400.0, "days": 86400.0}
CITED_DEFAULT = re.compile(r"`(EFFECTGATE_[A-Z0-9_]+)` \((an|\d+(?:\.\d+)?) (s|hours?|days?)\)")


def _expand(subject: str) -> list[str]:
    """``tg.audit.{trail,verify}`` → both subjects, with every ``<name>`` as ``*``."""
    parts = re.split(r"\{([^}]*)\}", re.sub(r"<[^>]+>", "*", subject))
    choices = [[p] if i % 2 == 0 else p.split(",") for i, p in enumerate(parts)]
    return ["".join(combination) for combination in itertools.product(*choices)]


def table_subjects() -> list[str]:
    """Every subject in the first column of the document's subject table."""
    table = DOC.split("| subject | event | producer → consumers |", 1)[1].split("\n\n", 1)[0]
    cells = [row.split("|")[1] for row in table.splitlines()[2:]]
    return [s for cell in cells for cited in re.findall(r"`([^`]+)`", cell) for s in _expand(cited)]


def catalog_subjects() -> list[str]:
    """Every subject pattern of the catalog: stream subjects, event subjects, request/reply subjects."""
    constants = [v for holder in (catalog.Subjects, catalog.Rpc) for k, v in vars(holder).items() if k.isupper()]
    return sorted({*catalog.STREAM_SUBJECTS, *catalog.RESULTS_SUBJECTS, *constants})


def covers(pattern: str, subject: str) -> bool:
    """Whether two subject patterns can name the same subject (``*`` is any one token)."""
    a, b = pattern.split("."), subject.split(".")
    return len(a) == len(b) and all("*" in (x, y) or x == y for x, y in zip(a, b, strict=True))


@pytest.mark.parametrize("subject", catalog_subjects())
def test_the_subject_table_lists_every_catalog_subject(subject: str) -> None:
    assert any(covers(cited, subject) for cited in table_subjects()), f"the subject table lacks {subject}"


@pytest.mark.parametrize("cited", table_subjects())
def test_every_subject_of_the_table_is_in_the_catalog(cited: str) -> None:
    assert any(covers(cited, subject) for subject in catalog_subjects()), f"the catalog has no {cited}"


@pytest.mark.parametrize("spec", [s for s in catalog.CONSUMERS if s.max_deliver == -1], ids=lambda s: s.durable)
def test_each_consumer_with_unlimited_deliveries_is_named_as_unlimited(spec: catalog.ConsumerSpec) -> None:
    paragraph = DOC.split("`max_deliver` 20 (unlimited for", 1)[1].split(")", 1)[0]
    assert f"`{spec.durable}`" in paragraph, f"{spec.durable} delivers without limit; the document does not say so"


def cited_defaults() -> list[tuple[str, float]]:
    return sorted({(v, (1.0 if n == "an" else float(n)) * DURATIONS_S[u]) for v, n, u in CITED_DEFAULT.findall(DOC)})


def test_the_document_cites_defaults() -> None:
    assert len(cited_defaults()) >= 4


@pytest.mark.parametrize(("variable", "seconds"), cited_defaults())
def test_a_cited_default_is_the_settings_default(variable: str, seconds: float) -> None:
    prefix = next(p for p in SETTINGS if variable.startswith(p))
    module, name = SETTINGS[prefix]
    settings: type[BaseSettings] = getattr(importlib.import_module(module), name)
    field = settings.model_fields[variable.removeprefix(prefix).lower()]
    assert field.default == seconds, f"the docs give {variable} {seconds:g} s; the default is {field.default}"


def quoted_names() -> list[str]:
    """Every ``snake_case`` name the document quotes (reason codes, fields) and every ``CamelCase`` one (types)."""
    snake = re.findall(r"`([a-z][a-z0-9]*(?:_[a-z0-9]+)+)`", DOC)
    camel = re.findall(r"`([A-Z][a-z]+[A-Z][A-Za-z]*)(?:\.\w+)?[`(]", DOC)
    return sorted({*snake, *camel})


EXTERNAL = {
    "FastMCP": "the MCP SDK 1.x's server class, which 2.x's MCPServer replaced",
    "target_info": "the series the OpenTelemetry Prometheus exporter adds to every scrape",
}
"""Names the docs quote that belong to a library, not to effectgate's code."""


@cache
def code_and_configuration() -> str:
    """The workspace's Python sources (tests excluded), every file under ``deploy/`` and the audit test vector."""
    parts = ("services", "contracts", "shared", "devstack", "sdk", "tools/src", "cli")
    sources = [p for part in parts for p in (ROOT / part).rglob("*.py")]
    configuration = [p for p in (ROOT / "deploy").rglob("*") if p.is_file()]
    vector = [ROOT / "docs" / "reference" / "audit-record-vector.json"]  # pinned to the code by its own test
    return "\n".join(path.read_text() for path in sources + configuration + vector)


@pytest.mark.parametrize("name", [n for n in quoted_names() if n not in EXTERNAL])
def test_a_quoted_name_occurs_in_the_code(name: str) -> None:
    assert name in code_and_configuration(), f"the docs quote {name}, which no source or configuration has"


def guarantee_rows() -> dict[int, str]:
    """Guarantee number → the cell of the guarantee table naming the tests that prove it."""
    rows = re.findall(r"^\| (\d) [^|]+ \| (.+) \|$", DOC, re.M)
    return {int(number): tests for number, tests in rows}


def claimed_guarantees() -> list[tuple[str, int]]:
    """``(e2e module, guarantee)`` for every guarantee an e2e module's docstring says it proves."""
    claims = []
    for path in sorted((ROOT / "tests" / "e2e").glob("test_*.py")):
        docstring = ast.get_docstring(ast.parse(path.read_text())) or ""
        for listed in re.findall(r"guarantees? ((?:\d(?:, | and )?)+)", docstring):
            claims += [(f"tests/e2e/{path.name}", int(n)) for n in re.findall(r"\d", listed)]
    return sorted(set(claims))


def test_the_guarantee_table_has_eight_rows() -> None:
    assert sorted(guarantee_rows()) == list(range(1, 9))


@pytest.mark.parametrize(("module", "guarantee"), [c for c in claimed_guarantees() if "chaos" not in c[0]])
def test_an_e2e_module_is_listed_for_each_guarantee_its_docstring_claims(module: str, guarantee: int) -> None:
    assert f"`{module}`" in guarantee_rows()[guarantee], (
        f"{module} says it proves guarantee {guarantee}; the table omits it"
    )


def test_the_chaos_sentence_names_the_guarantees_the_chaos_test_checks() -> None:
    checked = sorted({n for module, n in claimed_guarantees() if module.endswith("test_chaos.py")})
    sentence = DOC.split("`tests/e2e/test_chaos.py` checks guarantees ", 1)[1].split(" and the audit chain", 1)[0]
    assert sorted(int(n) for n in re.findall(r"\d", sentence)) == checked
