"""Mechanism-removal check: each mechanism of mutations.toml, removed alone, must fail a test.

For each entry: replace its one line, run its tests, write the file's original bytes back.
A test run that fails (pytest exit 1) caught the removal; one that passes means the
mechanism is not tested (SURVIVED); anything else (no tests, a collection error, a
timeout) is an error. Exits non-zero on any survivor or error, and when one of the
guarantees 1-8 of docs/explanation/architecture.md has no entry.

The listed tests first pass unchanged in a child forked from this process (warm,
tests/mutations/warm.py), which then imports the installed distributions those tests imported;
each removal's tests then run warm, without seconds of imports each. Tests that fail warm must
pass unchanged in a new pytest process (cold), and a removal they test runs cold.
``--shard K/N`` takes every Nth entry from the Kth (CI runs the shards side by side, each in a
copy of its own, as a removal edits the sources).

    .venv/bin/python tests/mutations/run.py [--only NAME ...] [--shard K/N] [--list FILE]
"""

from __future__ import annotations

import argparse
import shlex
import signal
import sys
import time
import tomllib
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

from warm import WarmPytest  # next to this file: the script's directory is on sys.path

ROOT = Path(__file__).resolve().parents[2]
LIST = Path(__file__).with_name("mutations.toml")
GUARANTEES = range(1, 9)
RUN_TIMEOUT_S = 600
"""How long one removal's tests may run, seconds (niced beside another run, they may wait for the CPU)."""
BASELINE_TIMEOUT_S = 1800
"""How long the unchanged listed tests may run, seconds."""
VERDICTS: dict[int | None, str] = {0: "SURVIVED", 1: "caught"}
"""pytest's exit status → the verdict on a removal; any other status is an error."""
FIELDS = ("name", "guarantee", "mechanism", "file", "find", "replace", "tests")
RUNS = WarmPytest(ROOT)
COLD: set[str] = set()
"""Test ids (or prefixes) that failed the warm baseline: a removal they test runs cold."""


class Invalid(Exception):
    """The list cannot be applied as written."""


@dataclass(frozen=True)
class Mutation:
    """One removal: ``find`` (one line, once in ``file``) becomes ``replace``."""

    name: str
    guarantee: int
    mechanism: str
    file: str
    find: str
    replace: str
    tests: list[str]


@dataclass(frozen=True)
class Result:
    """How one removal ended: ``caught``, ``SURVIVED`` or ``error``."""

    mutation: Mutation
    verdict: str
    seconds: float
    detail: str = ""


def load(path: Path) -> list[Mutation]:
    """Every entry of ``path``, each checked for its fields and its one-line edit."""
    entries = tomllib.loads(path.read_text(encoding="utf-8")).get("mutation", [])
    mutations = [_entry(raw) for raw in entries]
    names = [m.name for m in mutations]
    if len(set(names)) != len(names):
        raise Invalid("entry names must be unique")
    return mutations


def _entry(raw: dict[str, object]) -> Mutation:
    name = str(raw.get("name", "?"))
    if sorted(raw) != sorted(FIELDS):
        raise Invalid(f"{name}: needs exactly the fields {', '.join(FIELDS)}")
    texts = [raw[key] for key in ("name", "mechanism", "file", "find", "replace")]
    tests, guarantee = raw["tests"], raw["guarantee"]
    if not all(isinstance(text, str) and text for text in texts):
        raise Invalid(f"{name}: name, mechanism, file, find and replace must be non-empty strings")
    if not isinstance(guarantee, int) or guarantee not in GUARANTEES:
        raise Invalid(f"{name}: guarantee must be one of 1-8")
    if not isinstance(tests, list) or not tests or not all(isinstance(test, str) for test in tests):
        raise Invalid(f"{name}: tests must list at least one pytest node id or file")
    if "\n" in f"{raw['find']}{raw['replace']}" or raw["find"] == raw["replace"]:
        raise Invalid(f"{name}: find and replace must be two different single lines")
    return Mutation(**raw)  # type: ignore[arg-type]  # every field checked above


def mutated(mutation: Mutation, original: bytes) -> bytes:
    """``original`` with the removal applied; the result must still compile."""
    text, hint = original.decode("utf-8"), ""
    if text.count(mutation.find) != 1:
        if mutation.replace in text:
            hint = " (is an interrupted run's removal still in place?)"
        raise Invalid(f"{mutation.name}: `find` occurs {text.count(mutation.find)} times in {mutation.file}{hint}")
    changed = text.replace(mutation.find, mutation.replace)
    if mutation.file.endswith(".py"):
        try:
            compile(changed, mutation.file, "exec")
        except SyntaxError as error:
            raise Invalid(f"{mutation.name}: the replacement does not compile: {error}") from None
    return changed.encode("utf-8")


def pytest_command(tests: list[str], first_failure: bool = True) -> list[str]:
    """pytest's arguments for ``tests`` with the project's addopts, stopping at the first failure."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    addopts = config["tool"]["pytest"]["ini_options"].get("addopts", [])
    addopts = addopts if isinstance(addopts, str) else shlex.join(addopts)
    return ["-q", *(["-x"] if first_failure else []), "-p", "no:cacheprovider", "-o", f"addopts={addopts}", *tests]


def run_tests(tests: list[str], cold: bool = True, timeout_s: float = RUN_TIMEOUT_S) -> tuple[int | None, str]:
    """pytest's exit status (``None``: no result in time) and the last lines it printed.

    Cold: a new pytest process. Warm: a child forked from :data:`RUNS`, which by then imported
    what earlier runs imported from outside the checkout: the project's modules are imported
    afresh (with the removal in place), the installed distributions are not imported again.
    """
    status, printed = RUNS.run(pytest_command(tests), timeout_s, cold=cold)
    if status is None:
        return None, f"no result within {timeout_s:.0f}s"
    return status, "\n".join([f"pytest exit {status}", *printed.strip().splitlines()[-15:]])


def apply_and_test(mutation: Mutation, originals: dict[str, bytes]) -> Result:
    """One removal's result; every error is reported in it, never raised."""
    started = time.monotonic()
    try:
        status, detail = _removed_and_tested(mutation, originals[mutation.file])
        verdict = VERDICTS.get(status, "error")
    except Invalid as error:
        verdict, detail = "error", str(error)
    return Result(mutation, verdict, time.monotonic() - started, detail)


def _removed_and_tested(mutation: Mutation, original: bytes) -> tuple[int | None, str]:
    path, change = ROOT / mutation.file, mutated(mutation, original)
    if path.read_bytes() != original:  # edited since the start: writing it back would undo that edit
        raise Invalid(f"{mutation.file} changed while the check ran; not touching it")
    try:
        path.write_bytes(change)
        return run_tests(mutation.tests, cold=runs_cold(mutation.tests))
    finally:
        path.write_bytes(original)


def snapshot(mutations: list[Mutation]) -> dict[str, bytes]:
    """The original bytes of every listed file; refuses a list that cannot be applied to them."""
    missing = sorted({m.file for m in mutations if not (ROOT / m.file).is_file()})
    if missing:
        raise Invalid(f"no such file: {', '.join(missing)}")
    originals = {m.file: (ROOT / m.file).read_bytes() for m in mutations}
    for mutation in mutations:
        mutated(mutation, originals[mutation.file])
    return originals


def uncovered(mutations: list[Mutation]) -> list[int]:
    """Guarantees 1-8 without any entry."""
    return sorted(set(GUARANTEES) - {m.guarantee for m in mutations})


def print_row(result: Result) -> None:
    m = result.mutation
    mechanism = m.mechanism if len(m.mechanism) <= 72 else m.mechanism[:71] + "…"
    print(f"{m.name:<44} {m.guarantee:>2}  {mechanism:<72}  {result.verdict:<8} {result.seconds:6.1f}", flush=True)
    if result.verdict != "caught":
        print("    " + result.detail.replace("\n", "\n    "), file=sys.stderr, flush=True)


def _interrupted(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt  # unwinds through apply_and_test's finally: the file is restored


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", action="append", metavar="NAME", help="run only this entry (repeatable)")
    parser.add_argument("--shard", metavar="K/N", help="run every Nth entry from the Kth")
    parser.add_argument("--list", type=Path, default=LIST, help="the list of removals (default: %(default)s)")
    args = parser.parse_args(argv)
    try:
        mutations = load(args.list)
        originals, chosen = snapshot(mutations), select(mutations, args.only, args.shard)
    except Invalid as error:
        print(f"mutations: {error}", file=sys.stderr)
        return 2
    signal.signal(signal.SIGTERM, _interrupted)
    try:
        return report(run_all(chosen, originals), uncovered(mutations)) if baseline(chosen) else 2
    except KeyboardInterrupt:
        print("mutations: interrupted; every file was restored", file=sys.stderr)
        return 130


def select(mutations: list[Mutation], only: list[str] | None, shard: str | None = None) -> list[Mutation]:
    """The entries named in ``only`` (all of them without it), of them those of ``shard`` (``K/N``)."""
    unknown = sorted(set(only or []) - {m.name for m in mutations})
    if unknown:
        raise Invalid(f"no entry named {', '.join(unknown)}")
    named = [m for m in mutations if not only or m.name in only]
    index, count = shard_of(shard) if shard else (1, 1)
    return named[index - 1 :: count]


def shard_of(text: str) -> tuple[int, int]:
    """``K/N`` as ``(K, N)`` with ``1 <= K <= N``.

    Raises:
        Invalid: ``text`` is not of that form.
    """
    index, _, count = text.partition("/")
    if not (index.isdigit() and count.isdigit() and 1 <= int(index) <= int(count)):
        raise Invalid(f"--shard takes K/N with 1 <= K <= N, not {text!r}")
    return int(index), int(count)


def baseline(chosen: list[Mutation]) -> bool:
    """Whether every listed test passes with nothing removed (else a failing test proves nothing).

    Run warm; those that fail warm (every one when the run ended otherwise) must pass cold, and a
    removal they test runs cold, so that a warm failure is always the removal's doing.
    """
    tests = list(dict.fromkeys(test for m in chosen for test in m.tests))
    started = time.monotonic()
    status, printed = RUNS.run(["-rfE", *pytest_command(tests, first_failure=False)], BASELINE_TIMEOUT_S)
    failed = {line.split()[1] for line in printed.splitlines() if line.startswith(("FAILED ", "ERROR "))}
    COLD.update(failed if status in (0, 1) or failed else {""})  # "": every test id starts with it
    seconds = time.monotonic() - started
    print(f"baseline, warm: {len(tests)} test ids, exit {status}, {len(failed)} failed ({seconds:.0f}s)", flush=True)
    return not COLD or cold_baseline(tests if "" in COLD else sorted(failed))


def cold_baseline(tests: list[str]) -> bool:
    """Whether ``tests``, which failed warm, pass unchanged in a new pytest process."""
    started = time.monotonic()
    status, detail = run_tests(tests, timeout_s=BASELINE_TIMEOUT_S)
    seconds = time.monotonic() - started
    print(f"baseline, cold: {len(tests)} test ids pass unchanged: {status == 0} ({seconds:.0f}s)", flush=True)
    for test in tests:
        print(f"    cold: {test}", flush=True)
    if status != 0:
        print("mutations: the listed tests must pass before anything is removed\n" + detail, file=sys.stderr)
    return status == 0


def runs_cold(tests: list[str]) -> bool:
    """Whether a removal of these tests runs cold: one of them failed the warm baseline."""
    return any(failed.startswith(test) or test.startswith(failed) for failed in COLD for test in tests)


def run_all(chosen: list[Mutation], originals: dict[str, bytes]) -> list[Result]:
    """Apply each removal in turn, printing its row as soon as it is known."""
    print(f"{'name':<44} {'g':>2}  {'mechanism':<72}  {'result':<8} {'s':>6}", flush=True)
    results = []
    for mutation in chosen:
        results.append(apply_and_test(mutation, originals))
        print_row(results[-1])
    return results


def report(results: list[Result], missing: list[int]) -> int:
    """Print the summary; 0 only if every removal was caught and every guarantee has an entry."""
    bad = [r.mutation.name for r in results if r.verdict != "caught"]
    total = sum(r.seconds for r in results)
    print(f"\n{len(results) - len(bad)}/{len(results)} removals caught in {total:.0f}s", flush=True)
    if bad:
        print(f"not caught: {', '.join(bad)}", file=sys.stderr)
    if missing:
        print(f"guarantees without an entry: {missing}", file=sys.stderr)
    return 1 if bad or missing else 0


if __name__ == "__main__":
    sys.exit(main())
