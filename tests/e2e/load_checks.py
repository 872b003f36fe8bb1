"""What the fault tests check once the load is over: receipts, effects at the tool, uncertain outcomes, audit.

Guarantee 2: every submitted request has exactly one receipt. Guarantee 3: no effect ran
twice, counted at the tool (each write replaces its own file with a unique content, and
inotify counts the replaces). Every ``uncertain`` receipt overlaps a fault that may cause one;
the audit chain verifies with no stream sequence missing, none before its first record either.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Collection
from pathlib import Path
from typing import Any

from .load_support import Call, Fault, Ledger, Sent

IN_MOVED_TO = 0x80
WRITE_ENDED_WITHOUT_RUN = {"denied", "failed", "refused"}
FILE_WRITE, FILE_READ = ("file_system", "write"), ("file_system", "read")


def receipt_problems(ledger: Ledger) -> list[str]:
    return [
        f"{s.call.principal}/{s.request_id} ({s.call.operation}): {s.copies} receipts"
        for s in ledger.sent
        if s.copies != 1 or s.receipt is None
    ]


def effect_problems(sandbox: Path, ledger: Ledger, moved: Counter[str]) -> list[str]:
    problems = []
    for sents in ledger.by_key().values():
        call = sents[0].call
        if (call.tool, call.operation) == FILE_WRITE:
            problems += write_problems(sandbox, call, sents, moved[Path(call.path).name])
        problems += replay_problems(sents)
    written = {Path(s.call.path).name for s in ledger.sent if (s.call.tool, s.call.operation) == FILE_WRITE}
    strangers = set(moved) - written
    return problems + [f"{name} was written though no call wrote it" for name in sorted(strangers)]


def replay_problems(sents: list[Sent]) -> list[str]:
    """A replay answers with a receipt of the same key."""
    ids = {s.request_id for s in sents}
    replays = [s.receipt for s in sents if s.receipt and s.receipt.outcome == "replayed"]
    return [
        f"{r.request_id} replays {r.replay_of}, not a request of its key" for r in replays if r.replay_of not in ids
    ]


def write_problems(sandbox: Path, call: Call, sents: list[Sent], runs: int) -> list[str]:
    outcomes = {s.receipt.outcome for s in sents if s.receipt}
    file = sandbox / call.path
    found = file.read_text() if file.exists() else None
    where = f"{call.path} (requests {', '.join(s.request_id for s in sents)}: {sorted(outcomes)})"
    problems = [f"{where} was written {runs} times"] if runs > 1 else []
    if found is not None and found != call.arguments["content"]:
        problems.append(f"{where} holds {found!r}")
    if "succeeded" in outcomes and (runs != 1 or found is None):
        problems.append(f"{where} succeeded but was written {runs} times, file {'present' if found else 'missing'}")
    if outcomes and outcomes <= WRITE_ENDED_WITHOUT_RUN and (runs or found is not None):
        problems.append(f"{where} ended without a run, yet was written {runs} times")
    return problems


def read_problems(sandbox: Path, ledger: Ledger) -> list[str]:
    problems = []
    for sent in ledger.sent:
        issued = sent.receipt
        if (sent.call.tool, sent.call.operation) != FILE_READ or issued is None:
            continue
        if issued.outcome not in ("succeeded", "replayed"):
            continue
        expected = (sandbox / sent.call.path).read_text()
        if not isinstance(issued.result, dict) or issued.result.get("content") != expected:
            problems.append(f"{sent.request_id} read {sent.call.path} as {issued.result!r}, the file is {expected!r}")
    return problems


def overlaps(sent: Sent, fault: Fault) -> bool:
    """Whether ``sent``'s window (submission to its receipt) overlaps ``fault``'s."""
    assert sent.receipt is not None
    return fault.start <= sent.receipt.occurred_at and sent.submitted <= fault.end


def explained(sent: Sent, faults: list[Fault], causes: Collection[str]) -> bool:
    """Whether ``sent`` overlaps a fault of a kind in ``causes``."""
    return any(f.kind in causes and overlaps(sent, f) for f in faults)


def uncertain_problems(ledger: Ledger, causes: Collection[str]) -> list[str]:
    """Every ``uncertain`` receipt that overlaps no fault of a kind in ``causes``."""
    return [
        f"{s.call.principal}/{s.request_id} ({s.call.what}) ended uncertain "
        f"({s.receipt.reason_code}) between {s.submitted:%H:%M:%S.%f} and {s.receipt.occurred_at:%H:%M:%S.%f}, "
        f"overlapping no fault of {sorted(causes)}"
        for s in ledger.sent
        if s.receipt and s.receipt.outcome == "uncertain" and not explained(s, ledger.faults, causes)
    ]


def audit_problems(verified: dict[str, Any]) -> list[str]:
    problems = [] if verified["ok"] else [f"audit verify failed: {verified['result']}"]
    if verified["missing_stream_seqs"]:
        problems.append(f"stream sequences missing from audit: {verified['missing_stream_seqs']}")
    if verified.get("missing_at_start"):
        problems.append(f"stream messages missing before the chain's first record: {verified['missing_at_start']}")
    if (verified["audited_last_seq"] or 0) < (verified["stream_last_seq"] or 0):
        problems.append(f"audit never caught up: {verified['audited_last_seq']} < {verified['stream_last_seq']}")
    return problems


def write_report(
    path: Path, lines: list[str], ledger: Ledger, problems: list[str], extra: dict[str, Any] | None = None
) -> None:
    """The report: ``summary`` lines, ``problems``, ``faults``, every request, and ``extra``'s keys."""
    requests = [
        {
            "principal": s.call.principal,
            "request_id": s.request_id,
            "tool": s.call.tool,
            "operation": s.call.operation,
            "path": s.call.arguments.get("path"),
            "key": s.call.key,
            "submitted": s.submitted.isoformat(),
            "receipts": s.copies,
            "outcome": s.receipt.outcome if s.receipt else None,
            "reason_code": s.receipt.reason_code if s.receipt else None,
            "reason": s.receipt.reason if s.receipt else None,
            "ended": s.receipt.occurred_at.isoformat() if s.receipt else None,
            "resolution": s.resolution.resolution if s.resolution else None,
        }
        for s in ledger.sent
    ]
    faults = [{"kind": f.kind, "start": f.start.isoformat(), "end": f.end.isoformat()} for f in ledger.faults]
    report = {"summary": lines, "problems": problems, "faults": faults, "requests": requests, **(extra or {})}
    path.write_text(json.dumps(report, indent=1))
