"""The redaction rules: pointers, secret keys, secret-named members, configured values, cost, the outlet."""

from __future__ import annotations

import hashlib
import logging
import re
import time
from datetime import UTC, datetime
from typing import Any

import pytest

from effectgate.contracts.events import ReceiptIssued
from effectgate.contracts.vocabulary import Outcome
from effectgate.executor.memory import InMemoryBus
from effectgate.executor.receipts.outlet import INLINE_SCRUB_BYTES, ScrubbingBus
from effectgate.shared.secrets.detectors import find_secrets
from effectgate.shared.secrets.log_scrubbing import ScrubbingLogFilter
from effectgate.shared.secrets.redaction import Redactor, placeholder, pointer

CONFIGURED = "Zq9-configured-value"
"""An operator-configured secret no detector recognises."""

REDACTOR = Redactor(find_secrets, [CONFIGURED, "short"])
GHP = "ghp_" + "k7Qm2" * 7 + "x"
PLACEHOLDER = re.compile(r"\[redacted:[a-z_]+ sha256:[0-9a-f]{12}\]")


def test_the_placeholder_names_the_kind_and_a_digest_never_the_value() -> None:
    digest = hashlib.sha256(b"hunter2").hexdigest()[:12]

    assert placeholder("url_password", "hunter2") == f"[redacted:url_password sha256:{digest}]"
    cleaned = REDACTOR.text("postgres://admin:hunter2@db/x")
    assert cleaned == f"postgres://admin:[redacted:url_password sha256:{digest}]@db/x"


@pytest.mark.parametrize(
    ("parent", "token", "expected"),
    [("/result", "rows", "/result/rows"), ("/result/rows", 3, "/result/rows/3"), ("", "a/b~c", "/a~1b~0c")],
)
def test_pointers_follow_rfc_6901(parent: str, token: str | int, expected: str) -> None:
    assert pointer(parent, token) == expected


def test_each_redacted_string_is_named_by_its_pointer_in_document_order() -> None:
    result = {
        "rows": [{"dsn": "postgres://u:p4ssw0rd@h/db"}, {"dsn": "sqlite:///tmp/x.db"}],
        "log": ["fine", "auth with token=Ab12Cd34Ef56"],
        "a/b": "key AKIAIOSFODNN7EXAMPLE",
    }

    cleaned, found = REDACTOR.value(result, "/result")

    assert found == ("/result/rows/0/dsn", "/result/log/1", "/result/a~1b")
    assert cleaned["rows"][1] == {"dsn": "sqlite:///tmp/x.db"} and cleaned["log"][0] == "fine"
    assert "p4ssw0rd" not in str(cleaned) and "Ab12Cd34Ef56" not in str(cleaned) and "AKIA" not in str(cleaned)


@pytest.mark.parametrize(
    "key", [GHP, "AKIAIOSFODNN7EXAMPLE", f"token={GHP[4:]}", CONFIGURED, "https://u:Pw9xYz12@host/"]
)
def test_a_key_that_is_a_secret_is_replaced_and_its_parent_named(key: str) -> None:
    cleaned, found = REDACTOR.value({"outer": {key: "repo", "plain": 1}}, "/result")

    assert found == ("/result/outer",)
    assert list(cleaned["outer"].values()) == ["repo", 1]
    (name,) = [k for k in cleaned["outer"] if k != "plain"]
    assert PLACEHOLDER.search(name) and key not in name


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("password", "hunter"),
        ("db_password", "correcthorsebatterystaple"),
        ("X-Api-Key", "k-1"),
        ("Authorization", "Bearer abc"),
        ("aws_secret_access_key", "wJalrXUtnFEMI/K7MDENG"),
        ("client_secret", "x"),
        ("refresh_token", "refresh_on_expiry"),
        ("pin_password", 123456),
    ],
)
def test_a_secret_named_member_is_redacted_whatever_its_shape(name: str, value: Any) -> None:
    cleaned, found = REDACTOR.value({"config": {name: value, "region": "eu"}}, "/result")

    assert found == (f"/result/config/{name}",)
    assert cleaned["config"][name].startswith("[redacted:secret_field sha256:")
    assert cleaned["config"]["region"] == "eu"


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("token_type", "bearer"),
        ("max_tokens", 4096),
        ("password_policy", "strict"),
        ("primary_key", "id"),
        ("password", "********"),
        ("password", "${DB_PASSWORD}"),
        ("api_key", None),
        ("secret", True),
        ("password", "please choose one with 12 characters"),
    ],
)
def test_a_member_that_only_sounds_secret_is_kept(name: str, value: Any) -> None:
    assert REDACTOR.value({name: value}, "/result") == ({name: value}, ())


@pytest.mark.parametrize(
    "text",
    [
        CONFIGURED,
        f"prefix{CONFIGURED}suffix",
        f"two: {CONFIGURED} and {CONFIGURED}",
        f'{{"note": "{CONFIGURED}"}}',
    ],
)
def test_a_configured_value_is_redacted_wherever_it_appears(text: str) -> None:
    cleaned = REDACTOR.text(text)

    assert CONFIGURED not in cleaned
    assert cleaned.count("[redacted:configured sha256:") == text.count(CONFIGURED)


def test_a_configured_value_shorter_than_eight_characters_is_ignored() -> None:
    assert REDACTOR.text("a short note") == "a short note"


@pytest.mark.parametrize(
    "text",
    [
        "-----BEGIN PRIVATE KEY-----" * 40_000,
        "-----BEGIN RSA PRIVATE KEY-----\n" + "A" * 500_000,
        "-" * 500_000,
        "token: " * 60_000,
        "eyJ" * 150_000,
        "eyJa." * 100_000,
        "a-" * 250_000,
        "a://b:" * 80_000,
        "xoxb-1-" * 70_000,
        "AKIA" * 120_000,
        "ghp_" * 120_000,
        "[redacted:keyword sha256:0123456789ab] token=Ab12Cd34Ef56 " * 12_000,
        "We use a token bucket. " * 25_000,
        "https://e.com/a?token=Ab12Cd34Ef56&x=1 " * 12_000,
        "a+b.c-" * 100_000 + "://",
    ],
    ids=[
        "many-begins",
        "no-end",
        "dashes",
        "assignments",
        "jwt-heads",
        "jwt-dots",
        "words",
        "userinfo",
        "slack",
        "aws",
        "ghp",
        "placeholders",
        "prose",
        "links",
        "scheme-run",
    ],
)
def test_scrubbing_a_hostile_text_takes_linear_time(text: str) -> None:
    started = time.process_time()  # CPU time: a loaded machine does not stretch it as it does the wall clock
    REDACTOR.value({"content": text}, "/result")
    assert time.process_time() - started < 5.0, "scrubbing is not linear in the size of the text"


def _receipt(reason: str, result: Any = None, redactions: tuple[str, ...] | None = None) -> ReceiptIssued:
    return ReceiptIssued(
        event_id="receipt:p:r1",
        occurred_at=datetime.now(UTC),
        request_id="r1",
        principal="p",
        outcome=Outcome.FAILED,
        reason_code="tool_error",
        reason=reason,
        result=result,
        redactions=redactions,
    )


async def test_publishing_seals_the_receipt_and_sealing_twice_changes_nothing() -> None:
    memory = InMemoryBus()
    outlet = ScrubbingBus(memory, REDACTOR)
    issued = _receipt("failed: postgres://admin:hunter2@db/x", {"out": f"key {CONFIGURED}"})

    sealed = await outlet.seal(issued)
    await outlet.publish_receipt(sealed)

    published = memory.receipts["r1"]
    assert published == sealed and await outlet.seal(sealed) == sealed
    assert published.redactions == ("/reason", "/result/out")
    assert "hunter2" not in published.reason and CONFIGURED not in str(published.result)


async def test_a_result_already_scrubbed_is_not_scanned_again_but_the_reason_always_is() -> None:
    outlet = ScrubbingBus(InMemoryBus(), REDACTOR)
    issued = _receipt("token=Ab12Cd34Ef56", {"out": "[redacted:keyword sha256:000000000000]"}, ("/result/out",))

    sealed = await outlet.seal(issued)

    assert sealed.result == issued.result
    assert sealed.redactions == ("/result/out", "/reason") and "Ab12Cd34Ef56" not in sealed.reason


def test_a_log_record_is_scrubbed_in_its_message_arguments_and_traceback() -> None:
    record = logging.LogRecord(
        "t", logging.ERROR, __file__, 1, "call failed: %s", (f"dsn redis://:{CONFIGURED}@h",), None
    )
    try:
        raise RuntimeError(f"token={GHP}")
    except RuntimeError:
        import sys

        record.exc_info = sys.exc_info()

    assert ScrubbingLogFilter(REDACTOR).filter(record)
    text = logging.Formatter().format(record)

    assert CONFIGURED not in text and GHP not in text
    assert "call failed: dsn redis://:[redacted:" in text and "RuntimeError: token=[redacted:" in text


def test_the_string_fields_of_a_log_record_are_scrubbed_too() -> None:
    record = logging.makeLogRecord({"msg": "receipt", "tool": f"t-{CONFIGURED}", "reason_code": "ok", "tool_ms": 2.5})

    assert ScrubbingLogFilter(REDACTOR).filter(record)

    assert CONFIGURED not in record.tool and record.tool.startswith("t-[redacted:configured sha256:")
    assert (record.reason_code, record.tool_ms) == ("ok", 2.5)


@pytest.mark.parametrize(("filler_bytes", "threaded"), [(0, False), (INLINE_SCRUB_BYTES, True)])
async def test_a_small_result_is_scrubbed_on_the_loop_a_large_one_in_a_thread_and_both_alike(
    monkeypatch: pytest.MonkeyPatch, filler_bytes: int, threaded: bool
) -> None:
    handed: list[object] = []

    async def to_thread(work: Any, *args: Any) -> Any:
        handed.append(work)
        return work(*args)

    monkeypatch.setattr("effectgate.executor.receipts.outlet.asyncio.to_thread", to_thread)
    outlet = ScrubbingBus(InMemoryBus(), REDACTOR)
    clean, redactions = await outlet.scrub_result({"out": f"key {CONFIGURED}", "filler": "x" * filler_bytes})
    assert redactions == ("/result/out",) and CONFIGURED not in str(clean)
    assert bool(handed) is threaded
