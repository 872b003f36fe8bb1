"""The rule of the house (docs/architecture.md), read from every service's source with ``ast``.

Each check is a function from one parsed module to the violations it finds, written as
``"<rule> <service>/<path>: <what>"``; each has a test that feeds it a bad module and sees it refused.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

SERVICES = Path(__file__).resolve().parents[2] / "services"

# The I/O a pure rule never touches: the broker, the stores, the network, the event loop.
IO_MODULES = ("faststream", "nats", "redis", "valkey", "aiohttp", "httpx", "sqlite3", "asyncio", "socket")
IO_MODULES += ("subprocess", "mcp", "nio", "slack_sdk", "slack_bolt")
VALUE_BASES = {"Struct", "Enum", "StrEnum", "IntEnum", "Flag", "IntFlag", "NamedTuple", "TypedDict"}
DECODERS = {"decode", "Decoder", "loads"}
TWIN_PREFIXES = ("InMemory", "Memory")

# Known exceptions, each "<rule> <service>/<path>" naming a real fault: none today.
ALLOWED: set[str] = set()


@dataclass(frozen=True)
class Module:
    """One parsed module of a service: its service, its path inside the package, its dotted name and tree."""

    service: str
    path: str
    name: str
    tree: ast.Module

    @property
    def room(self) -> str:
        """The room the module lives in: its first path part without ``.py`` (a concept folder is its own)."""
        return self.path.split("/")[0].removesuffix(".py")

    def fault(self, rule: str, what: str) -> str:
        return f"{rule} {self.service}/{self.path}: {what}"


def parse(service: str, root: Path, file: Path) -> Module:
    """The module at ``file`` of the package ``effectgate.<service>`` rooted at ``root``."""
    path = file.relative_to(root).as_posix()
    parts = path.removesuffix(".py").split("/")
    dotted = ".".join(["effectgate", service, *(parts[:-1] if parts[-1] == "__init__" else parts)])
    return Module(service, path, dotted, ast.parse(file.read_text(), filename=str(file)))


def modules_of(service: str, root: Path) -> list[Module]:
    """Every module of the package rooted at ``root``."""
    return [parse(service, root, file) for file in sorted(root.rglob("*.py"))]


def imports(module: Module) -> Iterator[list[str]]:
    """Per import statement, the dotted names it may bring in (``from a import b`` gives a and a.b), resolved."""
    package = module.name if module.path.endswith("__init__.py") else module.name.rsplit(".", 1)[0]
    for node in ast.walk(module.tree):
        if isinstance(node, ast.Import):
            yield [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package.rsplit(".", node.level - 1)[0] if node.level else ""
            source = ".".join(part for part in (base, node.module or "") if part)
            yield [source, *(f"{source}.{alias.name}" for alias in node.names)]


def imports_of(module: Module, prefixes: tuple[str, ...]) -> list[str]:
    """The first name of each import statement of ``module`` that falls under one of ``prefixes``."""
    found = (next((n for n in names if under_any(n, prefixes)), None) for names in imports(module))
    return sorted({name for name in found if name is not None})


def under(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def check_domain(module: Module) -> list[str]:
    """A domain imports no port, no adapter and no I/O module."""
    if module.room != "domain":
        return []
    own = tuple(f"effectgate.{module.service}.{room}" for room in ("ports", "adapters", "memory", "app"))
    return [module.fault("domain-imports", name) for name in imports_of(module, own + IO_MODULES)]


def kind_of(node: ast.ClassDef) -> str:
    """``protocol``, ``value`` (a msgspec struct, enum, named tuple, typed dict or dataclass) or ``other``."""
    bases = {b.attr if isinstance(b, ast.Attribute) else getattr(b, "id", "") for b in node.bases}
    decorators = {ast.unparse(d).split("(")[0].rsplit(".", 1)[-1] for d in node.decorator_list}
    if "Protocol" in bases:
        return "protocol"
    return "value" if bases & VALUE_BASES or "dataclass" in decorators else "other"


def check_ports(module: Module) -> list[str]:
    """A ports module declares Protocols, value types and aliases only: no twin, no function, no I/O."""
    if module.room != "ports":
        return []
    faults = [module.fault("ports-imports", name) for name in imports_of(module, IO_MODULES)]
    working = (node for node in module.tree.body if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef))
    others = (node for node in module.tree.body if isinstance(node, ast.ClassDef) and kind_of(node) == "other")
    return faults + [module.fault("ports-not-protocol", node.name) for node in [*others, *working]]


def under_any(name: str, prefixes: tuple[str, ...]) -> bool:
    return any(under(name, prefix) for prefix in prefixes)


def check_adapter_imports(module: Module) -> list[str]:
    """Only the adapters themselves and the composition root (``app.py``) import the service's adapters."""
    if module.room in ("adapters", "app"):
        return []
    adapters = (f"effectgate.{module.service}.adapters",)
    return [module.fault("adapter-import", name) for name in imports_of(module, adapters)]


def check_service_decodes(module: Module) -> list[str]:
    """The service orchestrates over decoded values: it calls no decoder on raw bytes (the handlers do)."""
    if module.room != "service":
        return []
    calls = (node.func for node in ast.walk(module.tree) if isinstance(node, ast.Call))
    names = {ast.unparse(func) for func in calls if decodes(func)}
    return [module.fault("service-decodes", name) for name in sorted(names)]


def decodes(func: ast.expr) -> bool:
    """Whether calling ``func`` decodes (``decode``, ``Decoder``, ``loads``, ``decode_…``); not ``encode(…).decode``."""
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Call):
        return not ast.unparse(func.value.func).endswith("encode") and name in DECODERS
    return name in DECODERS or name.startswith("decode_")


def check_settings_readers(module: Module) -> list[str]:
    """Settings are read by the composition root alone (``app.py``, ``__main__.py``, settings itself)."""
    if module.room in ("app", "__main__", "settings"):
        return []
    settings = (f"effectgate.{module.service}.settings",)
    return [module.fault("settings-import", name) for name in imports_of(module, settings)]


def check_twins(module: Module) -> list[str]:
    """An in-memory twin (a class named ``InMemory…`` or ``Memory…``) lives in ``memory.py`` alone."""
    if module.room == "memory":
        return []
    classes = (node for node in ast.walk(module.tree) if isinstance(node, ast.ClassDef))
    return [module.fault("twin-outside-memory", c.name) for c in classes if c.name.startswith(TWIN_PREFIXES)]


CHECKS: list[Callable[[Module], list[str]]] = [check_domain, check_ports, check_adapter_imports]
CHECKS += [check_service_decodes, check_settings_readers, check_twins]


def violations(service: str, root: Path) -> list[str]:
    """Every violation of the rule in the package rooted at ``root``."""
    return [fault for module in modules_of(service, root) for check in CHECKS for fault in check(module)]


def service_roots() -> dict[str, Path]:
    return {d.name: d / "src" / "effectgate" / d.name for d in sorted(SERVICES.iterdir()) if d.is_dir()}


def allowed(fault: str) -> bool:
    return fault.split(":", 1)[0] in ALLOWED


def test_the_walk_reads_every_service() -> None:
    roots = service_roots()
    assert set(roots) >= {"approvals", "audit", "chatops", "executor", "policy", "registry", "surface"}
    assert all(len(modules_of(name, root)) > 5 for name, root in roots.items())


@pytest.mark.parametrize("service", sorted(service_roots()))
def test_every_service_keeps_the_rule_of_the_house(service: str) -> None:
    faults = violations(service, service_roots()[service])
    assert [fault for fault in faults if not allowed(fault)] == []


def test_every_allowed_exception_is_still_there() -> None:
    found = {fault.split(":", 1)[0] for name, root in service_roots().items() for fault in violations(name, root)}
    assert sorted(ALLOWED - found) == []


def bad_package(tmp_path: Path, files: dict[str, str]) -> Path:
    """A package ``effectgate.svc`` written under ``tmp_path`` from ``{path: source}``."""
    root = tmp_path / "svc"
    for path, source in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(source)
    return root


@pytest.mark.parametrize(
    ("path", "source", "rule"),
    [
        ("domain.py", "from .ports import Store\n", "domain-imports"),
        ("domain/rules.py", "from ..adapters.redis import Box\n", "domain-imports"),
        ("domain.py", "import redis.asyncio\n", "domain-imports"),
        ("domain.py", "from faststream.nats import NatsBroker\n", "domain-imports"),
        ("domain.py", "import asyncio\n", "domain-imports"),
        ("ports.py", "class Box:\n    def put(self) -> None:\n        self.n = 1\n", "ports-not-protocol"),
        ("ports.py", "def helper() -> int:\n    return 1\n", "ports-not-protocol"),
        ("ports.py", "import sqlite3\n", "ports-imports"),
        ("service.py", "from effectgate.svc.adapters.sqlite import Store\n", "adapter-import"),
        ("handlers.py", "from .adapters import stream\n", "adapter-import"),
        ("rebuild/replay.py", "from ..adapters.stream import read\n", "adapter-import"),
        ("service.py", "def f(b: bytes) -> object:\n    return msgspec.json.decode(b)\n", "service-decodes"),
        ("service/opening.py", "def f(b: bytes) -> object:\n    return decode(b, type=int)\n", "service-decodes"),
        ("service.py", "def f(b: bytes) -> object:\n    return decode_untrusted(D, b)\n", "service-decodes"),
        ("service.py", "from .settings import Settings\n", "settings-import"),
        ("handlers.py", "from effectgate.svc import settings\n", "settings-import"),
        ("adapters/sqlite.py", "from ..settings import Settings\n", "settings-import"),
        ("ports.py", "class InMemoryStore:\n    pass\n", "twin-outside-memory"),
        ("service.py", "class MemoryBox:\n    pass\n", "twin-outside-memory"),
    ],
)
def test_the_checker_refuses_a_bad_module(tmp_path: Path, path: str, source: str, rule: str) -> None:
    faults = violations("svc", bad_package(tmp_path, {path: source}))
    assert rule in [fault.split(" ", 1)[0] for fault in faults]
    assert all(fault.split(" ", 1)[1].startswith(f"svc/{path}: ") for fault in faults)


def test_the_checker_lets_each_room_do_its_own_work(tmp_path: Path) -> None:
    files = {
        "domain.py": "import msgspec\nfrom effectgate.contracts.events import Event\n",
        "ports.py": (
            "from enum import StrEnum\nfrom typing import Protocol\nfrom dataclasses import dataclass\nimport msgspec\n"
            "class Store(Protocol):\n    async def put(self) -> None: ...\n"
            "class Kind(StrEnum):\n    A = 'a'\n"
            "@dataclass(frozen=True)\nclass Page:\n    n: int\n"
            "class Row(msgspec.Struct):\n    n: int\n"
            "Key = tuple[str, int]\n"
        ),
        "memory.py": "class InMemoryStore:\n    async def put(self) -> None:\n        self.n = 1\n",
        "adapters/sqlite.py": "import sqlite3\n",
        "handlers.py": "import msgspec\n\ndef f(b: bytes) -> object:\n    return msgspec.json.decode(b)\n",
        "service.py": "import msgspec\n\ndef f(n: int) -> str:\n    return msgspec.json.encode(n).decode()\n",
        "app.py": "from .adapters.sqlite import Store\nfrom .settings import Settings\n",
        "__main__.py": "from .settings import Settings\n",
    }
    assert violations("svc", bad_package(tmp_path, files)) == []
