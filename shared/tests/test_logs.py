"""The log a service writes: plain text lines or JSON lines, fields as keys, one line per request."""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterator
from typing import Any

import pytest

from effectgate.contracts.errors import EffectgateError
from effectgate.contracts.vocabulary import Verdict
from effectgate.shared.consumer.request_log import MAX_VALUE_CHARS, REQUESTS, note, request_scope
from effectgate.shared.runtime.assembly import run_service
from effectgate.shared.runtime.logs import LogSettings, configure_logging

QUIET = ("httpx", "httpcore", "httpx2", "httpcore2", "mcp.client.streamable_http")
TEXT_LINE = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z executor (DEBUG|INFO|WARNING|ERROR|CRITICAL) \S")


@pytest.fixture(autouse=True)
def restored() -> Iterator[None]:
    """Each test configures logging; the process's logging is put back afterwards."""
    root, framework = logging.getLogger(), logging.getLogger("faststream")
    saved = (list(root.handlers), root.level, list(framework.handlers), framework.propagate, REQUESTS.level)
    quiet = {name: logging.getLogger(name).level for name in QUIET}
    yield
    for name, level in quiet.items():
        logging.getLogger(name).setLevel(level)
    root.handlers[:], framework.handlers[:] = saved[0], saved[2]
    root.setLevel(saved[1])
    framework.propagate = saved[3]
    REQUESTS.setLevel(saved[4])


def _lines(capsys: pytest.CaptureFixture[str]) -> list[str]:
    return capsys.readouterr().err.splitlines()


def _fail_twice() -> None:
    try:
        raise KeyError("first")
    except KeyError as error:
        raise RuntimeError("second") from error


def test_text_is_one_plain_line_per_record_with_fields_as_key_value(capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging("executor", LogSettings(format="text"))
    logging.getLogger("effectgate.x").info("ran %s", "it", extra={"request_id": "r1", "principal": "an agent"})
    [line] = _lines(capsys)
    assert TEXT_LINE.match(line), line
    assert line.endswith(' INFO ran it request_id=r1 principal="an agent"'), line


def test_text_escapes_control_characters_and_quotes_values_that_would_break_the_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    configure_logging("executor", LogSettings(format="text"))
    hostile = "a\nb\x1b[31mred"
    logging.getLogger("effectgate.x").warning("saw %s", hostile, extra={"tool": hostile, "note": 'x="y"'})
    [line] = _lines(capsys)
    assert "\x1b" not in line
    assert "saw a\\nb\\x1b[31mred" in line
    assert 'tool="a\\nb\\u001b[31mred"' in line and 'note="x=\\"y\\""' in line


@pytest.mark.parametrize("character", ["\x85", "\x9b", "\u2028", "\u2029", "\u202e", "\u2066", "\u202a"])
def test_c1_controls_separators_and_bidi_overrides_are_written_escaped(
    capsys: pytest.CaptureFixture[str], character: str
) -> None:
    configure_logging("executor", LogSettings(format="text"))
    logging.getLogger("effectgate.x").warning("saw %s", f"evil{character}name")
    [line] = _lines(capsys)
    assert character not in line and f"saw evil{repr(character)[1:-1]}name" in line


def test_a_traceback_follows_on_indented_lines_without_blank_ones(capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging("executor", LogSettings(format="text"))
    try:
        _fail_twice()
    except RuntimeError:
        logging.getLogger("effectgate.x").exception("failed")
    first, *trace = _lines(capsys)
    assert TEXT_LINE.match(first) and first.endswith("ERROR failed")
    assert trace and all(line.startswith("    ") and line.strip() for line in trace)
    assert any("KeyError: 'first'" in line for line in trace) and trace[-1].strip() == "RuntimeError: second"


def test_a_record_with_no_text_writes_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging("executor", LogSettings(format="text"))
    logging.getLogger("effectgate.x").info("")
    logging.getLogger("effectgate.x").info("   ")
    assert capsys.readouterr().err == ""


def test_faststream_logs_through_the_same_handler_without_colour(capsys: pytest.CaptureFixture[str]) -> None:
    import faststream  # noqa: F401  (creates its logger with a colour formatter of its own)

    configure_logging("executor", LogSettings(format="text"))
    logging.getLogger("faststream").info("FastStream app starting...")
    [line] = _lines(capsys)
    assert TEXT_LINE.match(line) and "\x1b[" not in line
    assert line.endswith(" INFO [faststream] FastStream app starting..."), line


def test_json_lines_parse_with_the_fields_as_keys(capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging("executor", LogSettings(format="json"))
    logging.getLogger("effectgate.x").info("ran", extra={"request_id": "r1", "duration_ms": 1.5})
    try:
        _fail_twice()
    except RuntimeError:
        logging.getLogger("effectgate.x").exception("failed")
    first, second = (json.loads(line) for line in _lines(capsys))
    assert {key: first[key] for key in ("service", "level", "logger", "message")} == {
        "service": "executor",
        "level": "INFO",
        "logger": "effectgate.x",
        "message": "ran",
    }
    assert first["request_id"] == "r1" and first["duration_ms"] == 1.5
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", first["time"])
    assert second["level"] == "ERROR" and "RuntimeError: second" in second["exc_info"]


def test_the_level_setting_hides_what_is_below_it(capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging("executor", LogSettings(format="text", level="warning"))
    logging.getLogger("effectgate.x").info("hidden")
    logging.getLogger("effectgate.x").warning("shown")
    assert [line.rsplit(" ", 1)[-1] for line in _lines(capsys)] == ["shown"]


def test_configuring_again_replaces_the_handler_it_installed(capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging("executor", LogSettings(format="text"))
    configure_logging("executor", LogSettings(format="json"))
    logging.getLogger("effectgate.x").warning("once")
    [line] = _lines(capsys)
    assert json.loads(line)["message"] == "once"


@pytest.mark.parametrize(
    ("variable", "value", "named"),
    [("EFFECTGATE_LOG_FORMAT", "xml", "'text' or 'json'"), ("EFFECTGATE_LOG_LEVEL", "loud", "not 'loud'")],
)
def test_a_setting_it_does_not_know_is_refused_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch, variable: str, value: str, named: str
) -> None:
    monkeypatch.setenv(variable, value)
    with pytest.raises(EffectgateError) as refused:
        configure_logging("executor")
    assert refused.value.reason_code == "log_settings_invalid"
    assert variable in refused.value.reason and named in refused.value.reason


def test_a_scope_writes_one_line_with_what_was_noted_and_its_duration(capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging("executor", LogSettings(format="json"))
    with request_scope(consumer="c"):
        note("decision", request_id="r1", verdict=Verdict.EXECUTE, tool=None)
        note("decision", reason_code="permitted")
    [line] = [json.loads(text) for text in _lines(capsys)]
    assert line["message"] == "decision" and line["logger"] == "effectgate.requests"
    fields = {key: line[key] for key in ("request_id", "verdict", "reason_code", "consumer")}
    assert fields == {"request_id": "r1", "verdict": "execute", "reason_code": "permitted", "consumer": "c"}
    assert "tool" not in line and isinstance(line["duration_ms"], float) and line["duration_ms"] >= 0


def test_a_scope_with_nothing_noted_writes_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging("executor", LogSettings(format="json"))
    with request_scope(consumer="c"):
        pass
    assert capsys.readouterr().err == ""


def test_a_note_outside_a_scope_is_written_at_once(capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging("executor", LogSettings(format="json"))
    note("approval", approval="expired", approval_id="ap-1")
    [line] = [json.loads(text) for text in _lines(capsys)]
    assert (line["message"], line["approval"], "duration_ms" in line) == ("approval", "expired", False)


def test_a_long_value_is_cut(capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging("executor", LogSettings(format="json"))
    note("decision", tool="t" * 10_000)
    [line] = [json.loads(text) for text in _lines(capsys)]
    assert len(line["tool"]) == MAX_VALUE_CHARS and line["tool"].endswith("…")


def test_with_request_lines_off_nothing_is_recorded(capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging("executor", LogSettings(format="json"))
    REQUESTS.setLevel(logging.WARNING)
    made: list[Any] = []
    with request_scope(consumer="c"):
        note("decision", request_id=_Spy(made))
    note("decision", request_id=_Spy(made))
    assert capsys.readouterr().err == "" and made == []


class _Spy:
    """A value that records whether anything looked at it."""

    def __init__(self, made: list[Any]) -> None:
        self._made = made

    def __str__(self) -> str:
        self._made.append(self)
        return "looked"


def _broken_app() -> Any:
    raise FileNotFoundError("no keys/receipts.key")


def test_an_error_that_ends_a_service_is_one_critical_record_naming_it(capsys: pytest.CaptureFixture[str]) -> None:
    assert run_service("executor", _broken_app) == 1
    first, *trace = _lines(capsys)
    assert TEXT_LINE.match(first) and first.endswith("CRITICAL executor stopped by an error: no keys/receipts.key")
    assert trace and all(line.startswith("    ") for line in trace) and "FileNotFoundError" in trace[-1]


def test_an_unknown_log_setting_ends_a_service_with_one_line(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EFFECTGATE_LOG_FORMAT", "xml")
    assert run_service("executor", _broken_app) == 2
    assert _lines(capsys) == ["executor cannot start: EFFECTGATE_LOG_FORMAT: Input should be 'text' or 'json'"]


def test_a_field_named_like_a_record_attribute_never_breaks_the_request(capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging("executor", LogSettings(format="json"))
    with request_scope(consumer="c"):
        note("answered", name="file_system", message="hi", module="m")
    [line] = [json.loads(text) for text in _lines(capsys)]
    assert (line["message"], line["name_"], line["message_"], line["module_"]) == ("answered", "file_system", "hi", "m")


@pytest.mark.parametrize("level", ["DEBUG", "INFO"])
def test_http_request_lines_with_their_urls_are_not_logged(capsys: pytest.CaptureFixture[str], level: str) -> None:
    import httpx2  # the HTTP client the MCP SDK reaches an upstream with

    configure_logging("executor", LogSettings(format="text", level=level))
    transport = httpx2.MockTransport(lambda request: httpx2.Response(200, json={}))
    with httpx2.Client(transport=transport) as client:
        client.post("https://api.example/mcp?api_key=S3cret", json={})
    logging.getLogger("mcp.client.streamable_http").debug("Connecting to StreamableHTTP endpoint: ?api_key=S3cret")
    for name in ("httpx", "httpcore", "httpcore2.http11"):
        logging.getLogger(name).info("GET https://api.example/mcp?api_key=S3cret")
    logging.getLogger("httpx2").warning("shown")

    assert [line.rsplit(" ", 1)[-1] for line in _lines(capsys)] == ["shown"]
