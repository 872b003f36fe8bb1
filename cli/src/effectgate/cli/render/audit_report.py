"""What ``effectgate audit verify`` says about a ``tg.audit.verify`` answer: every problem, one line each."""

from __future__ import annotations

from typing import Any

from rich.markup import escape

__all__ = ["problems", "signature_problems"]


def problems(reply: dict[str, Any]) -> list[str]:
    """Each problem the answer names (rich markup, agent text escaped); empty when the chain verifies."""
    found: list[str] = []
    result = reply["result"]
    if not result["ok"]:
        found.append(
            f"[red]audit chain broken at record {result['first_broken']}[/red]: {escape(str(result['reason']))}"
        )
    found += signature_problems(reply.get("bad_signatures") or [], int(reply.get("bad_signature_count") or 0))
    if differing := reply.get("differing_from_stream") or []:
        records = ", ".join(map(str, differing))
        found.append(f"[red]{reply['differing_count']} record(s) differ from the stream[/red]: records {records}")
    if missing := reply.get("missing_stream_seqs") or []:
        found.append(f"[red]events never audited[/red]: stream sequences {', '.join(map(str, missing))}")
    if start := reply.get("missing_at_start"):
        found.append(
            f"[red]events missing at the start of the chain[/red]: stream sequences {start['first']} to"
            f" {start['last']} (the stream holds them; the chain begins after them)"
        )
    if disordered := reply.get("out_of_stream_order") or []:
        found.append(f"[red]chain out of stream order[/red] at records {', '.join(map(str, disordered))}")
    return found


def signature_problems(faults: list[dict[str, Any]], count: int) -> list[str]:
    """The records whose signature does not verify: a heading and one line per record kept."""
    if not count:
        return []
    lines = [f"[red]{count} record(s) with a signature that does not verify[/red] (forged or edited):"]
    for fault in faults:
        lines.append(
            f"  record {fault['sequence']} ({escape(str(fault['event_type']))}): {escape(str(fault['reason']))}"
        )
    return lines
