"""One error root: every public exception of every effectgate package derives from EffectgateError."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest

from effectgate.contracts.errors import EffectgateError, StoreUnavailable

PACKAGES = ["contracts", "shared", "devstack", "sdk", "cli", "registry", "policy", "approvals", "executor", "audit"]
PACKAGES += ["chatops", "tools"]


def public_exceptions() -> dict[str, type[BaseException]]:
    """Every exception class an effectgate module defines under a public name, by ``module.Name``."""
    found: dict[str, type[BaseException]] = {}
    for package in PACKAGES:
        root = importlib.import_module(f"effectgate.{package}")
        for info in pkgutil.walk_packages(root.__path__, f"effectgate.{package}."):
            if info.name.endswith("__main__"):
                continue
            module = importlib.import_module(info.name)
            for name, cls in inspect.getmembers(module, inspect.isclass):
                if issubclass(cls, BaseException) and cls.__module__ == info.name and not name.startswith("_"):
                    found[f"{info.name}.{name}"] = cls
    return found


def test_the_walk_finds_the_exceptions_of_every_package() -> None:
    found = public_exceptions()
    assert len(found) > 40
    assert {name.split(".")[1] for name in found} >= {"contracts", "shared", "sdk", "cli", "executor", "policy"}


def test_every_public_exception_derives_from_the_root() -> None:
    outside = sorted(name for name, cls in public_exceptions().items() if not issubclass(cls, EffectgateError))
    assert outside == []


def test_one_store_unavailable_class_is_caught_for_every_store() -> None:
    stores = [n for n, cls in public_exceptions().items() if cls.__name__.endswith("StoreUnavailable")]
    assert [n for n in stores if n.endswith(".StoreUnavailable")] == ["effectgate.contracts.errors.StoreUnavailable"]
    assert all(issubclass(public_exceptions()[n], StoreUnavailable) for n in stores)


def test_one_index_lost_class_is_raised_by_every_index() -> None:
    lost = sorted(n for n, cls in public_exceptions().items() if cls.__name__ == "IndexLost")
    assert lost == ["effectgate.contracts.errors.IndexLost"]
    assert issubclass(public_exceptions()[lost[0]], StoreUnavailable)


@pytest.mark.parametrize("name", ["CredentialsInvalid", "NatsUnreachable"])
def test_a_message_error_keeps_its_message_and_names_its_code(name: str) -> None:
    cls = next(cls for n, cls in public_exceptions().items() if n.endswith(f".{name}"))
    error = cls("the file is missing")
    assert str(error) == "the file is missing"
    assert error.reason == "the file is missing"
    assert (
        error.reason_code == {"CredentialsInvalid": "credentials_invalid", "NatsUnreachable": "nats_unreachable"}[name]
    )
