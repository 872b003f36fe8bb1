"""No log line or refusal ends in nothing: an error whose text is empty is described by what it means.

``TimeoutError()``, ``CancelledError()`` and many library errors have an empty ``str``. The
variants are generated: every exception class of the standard library raised with no
message, logged as a ``%s`` argument, must give a line that says something after the colon.
"""

from __future__ import annotations

import asyncio
import builtins
import logging
from collections.abc import Iterator

import pytest

from effectgate.contracts.errors import described
from effectgate.shared.runtime.health import not_ready
from effectgate.shared.runtime.logs import LogSettings, configure_logging
from effectgate.shared.secrets.detectors import find_secrets
from effectgate.shared.secrets.log_scrubbing import ScrubbingLogFilter
from effectgate.shared.secrets.redaction import Redactor


def _no_message_errors() -> list[BaseException]:
    """An instance, without a message, of every exception class of ``builtins`` and ``asyncio`` that takes none."""
    classes = [value for value in (*vars(builtins).values(), *vars(asyncio).values()) if isinstance(value, type)]
    found: dict[type[BaseException], BaseException] = {}
    for kind in classes:
        if issubclass(kind, BaseException) and not issubclass(kind, BaseExceptionGroup):
            try:
                found[kind] = kind()
            except TypeError:  # takes arguments (UnicodeDecodeError, IncompleteReadError …)
                continue
    return list(found.values())


EMPTY = [error for error in _no_message_errors() if not str(error).strip()]


def test_the_sweep_holds_the_errors_the_services_meet() -> None:
    kinds = {type(error) for error in EMPTY}
    assert {TimeoutError, asyncio.CancelledError, ConnectionResetError, OSError, Exception} <= kinds
    assert len(EMPTY) > 40


@pytest.mark.parametrize("error", EMPTY, ids=[type(error).__name__ for error in EMPTY])
def test_every_error_without_a_message_is_described(error: BaseException) -> None:
    assert described(error).strip()


@pytest.mark.parametrize(
    ("error", "said"),
    [
        (TimeoutError(), "timed out"),
        (asyncio.CancelledError(), "cancelled"),
        (ConnectionResetError(), "connection reset"),
        (ConnectionError(), "connection lost"),
        (Exception(), "Exception (no message)"),
        (TimeoutError("no answer within 5 s"), "no answer within 5 s"),
        (ExceptionGroup("group", [TimeoutError()]), "timed out"),
    ],
)
def test_an_error_says_its_text_or_what_its_class_means(error: BaseException, said: str) -> None:
    assert described(error) == said


@pytest.fixture
def logged(capsys: pytest.CaptureFixture[str]) -> Iterator[pytest.CaptureFixture[str]]:
    root = logging.getLogger()
    saved = (list(root.handlers), root.level)
    configure_logging("registry", LogSettings(format="text", level="INFO"))
    yield capsys
    root.handlers[:] = saved[0]
    root.setLevel(saved[1])


@pytest.mark.parametrize("error", EMPTY, ids=[type(error).__name__ for error in EMPTY])
def test_a_log_line_given_an_error_without_a_message_says_what_it_means(
    logged: pytest.CaptureFixture[str], error: BaseException
) -> None:
    logging.getLogger("effectgate.test").warning("store failed: %s: %s; kept %d%%", type(error).__name__, error, 5)

    line = logged.readouterr().err.strip()
    assert line.endswith(f"store failed: {type(error).__name__}: {described(error)}; kept 5%"), line


def test_a_repr_argument_is_left_as_it_is(logged: pytest.CaptureFixture[str]) -> None:
    logging.getLogger("effectgate.test").warning("not announced: %r (%s)", TimeoutError(), TimeoutError())

    assert logged.readouterr().err.strip().endswith("not announced: TimeoutError() (timed out)")


@pytest.mark.parametrize("error", [TimeoutError(), ConnectionResetError(), OSError()])
def test_a_ready_check_failing_without_a_message_says_what_it_means(error: BaseException) -> None:
    def check() -> str | None:
        raise error

    assert not_ready({"x": check})["x"] == f"the check failed: {type(error).__name__}: {described(error)}"


@pytest.mark.parametrize("error", [TimeoutError(), asyncio.CancelledError(), ConnectionResetError()])
def test_a_scrubbing_filter_that_runs_first_still_writes_what_the_error_means(
    logged: pytest.CaptureFixture[str], error: BaseException
) -> None:
    handler = next(h for h in logging.getLogger().handlers if h.get_name() == "effectgate")
    handler.filters.insert(0, ScrubbingLogFilter(Redactor(find_secrets, [])))  # before the handler's own filters

    logging.getLogger("effectgate.test").warning("store failed: %s", error)

    assert logged.readouterr().err.strip().endswith(f"store failed: {described(error)}")
