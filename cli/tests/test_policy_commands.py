"""``effectgate policy check`` offline, and the ``--since`` window of ``simulate``."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from typer.testing import CliRunner

from effectgate.cli.app import app
from effectgate.cli.commands.policy import window_start

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize(("since", "back"), [("90s", 90), ("30m", 1800), ("24h", 86400), ("7d", 604800)])
def test_a_window_is_a_number_and_a_unit(since: str, back: int) -> None:
    assert window_start(since, NOW) == NOW - timedelta(seconds=back)


@pytest.mark.parametrize("since", ["", "24", "h", "1.5h", "-1h", "24 hours", "1w"])
def test_anything_else_is_refused_saying_what_is_expected(since: str) -> None:
    with pytest.raises(ValueError, match="a whole number and s, m, h or d"):
        window_start(since, NOW)


@pytest.fixture
def offline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, repo_root: Path) -> Path:
    """No stack to reach; the shipped principals and attributes."""
    monkeypatch.delenv("NATS_URL", raising=False)
    monkeypatch.setenv("EFFECTGATE_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("EFFECTGATE_POLICY_PRINCIPALS_FILE", str(repo_root / "deploy/policy/principals.toml"))
    monkeypatch.setenv("EFFECTGATE_POLICY_ATTRIBUTES_FILE", str(repo_root / "deploy/policy/attributes.toml"))
    monkeypatch.setenv("COLUMNS", "400")
    return tmp_path


def test_check_accepts_the_shipped_policy_offline_and_says_what_it_could_not_check(
    offline: Path, repo_root: Path
) -> None:
    done = CliRunner().invoke(app, ["policy", "check", str(repo_root / "deploy/policy/policy.cedar")])
    assert done.exit_code == 0, done.output
    assert "valid: 11 policies, version sha256:" in done.stdout
    assert "checked without the registered tools" in " ".join(done.stderr.split())


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ('@id("a") permit (principal, action, resource) when { principal has department };', "'a'"),
        ("permit (principal, action, resource);", "no @id"),
        ('@id("b") permit (principal, action == Action::"run", resource);', "run"),
        ('@id("c") permit (principal, action, resource) when { context.args has to && context.args.to == 1 };', "to"),
        ("@id(", "does not parse"),
        ("// nothing left\n", "holds no policy"),
        ('@id("d") permit (principal, action == Action::"execute_with_approval", resource);', "@approver_role"),
    ],
)
def test_check_refuses_an_invalid_policy_pointing_at_the_problem(offline: Path, text: str, named: str) -> None:
    policy = offline / "bad.cedar"
    policy.write_text(text)
    done = CliRunner().invoke(app, ["policy", "check", str(policy)])
    said = " ".join(done.stderr.split())
    assert done.exit_code == 1 and str(policy) in said and named in said, said


def test_check_names_a_file_it_cannot_read(offline: Path) -> None:
    done = CliRunner().invoke(app, ["policy", "check", str(offline / "missing.cedar")])
    assert done.exit_code == 2 and "cannot read" in done.stderr


@pytest.mark.parametrize(
    ("old", "new", "said"),
    [
        (
            '"REVERSIBLE_WRITE" &&',
            '"REVERSIBLE_WRTE" &&',
            "policy 'reversible-write-autonomous': compares context.side_effect",
        ),
        (
            '@approver_role("sre")',
            '@approver_role("operatr")',
            "policy 'production-approval': @approver_role('operatr')",
        ),
        (
            "context.risk_rank <= 1 &&  // trivial",
            "context.risk_rank = 1 &&  // trivial",
            "'=' is not a valid operator in Cedar",
        ),
        ("  principal.autonomy < 3\n", "  principal.autonomi < 3\n", "attribute `autonomi` on entity type `Agent`"),
    ],
)
def test_check_prints_each_problem_as_file_line_column(
    offline: Path, repo_root: Path, old: str, new: str, said: str
) -> None:
    shipped = (repo_root / "deploy/policy/policy.cedar").read_text()
    policy = offline / "typo.cedar"
    policy.write_text(shipped.replace(old, new, 1))
    line = next(n for n, text in enumerate(shipped.replace(old, new, 1).splitlines(), 1) if new.strip() in text)

    done = CliRunner().invoke(app, ["policy", "check", str(policy)])

    placed = [text for text in done.stderr.splitlines() if text.startswith(f"{policy}:{line}:")]
    assert done.exit_code == 1 and len(placed) == 1 and said in placed[0], done.stderr


@pytest.fixture
def decoy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A working directory that is not the repository's, with a decoy deploy/policy; no policy file setting."""
    work = tmp_path / "elsewhere"
    (work / "deploy" / "policy").mkdir(parents=True)
    (work / "deploy" / "policy" / "principals.toml").write_text("not = [toml")
    (work / "deploy" / "policy" / "attributes.toml").write_text("not = [toml")
    monkeypatch.chdir(work)
    for name in ("EFFECTGATE_POLICY_PRINCIPALS_FILE", "EFFECTGATE_POLICY_ATTRIBUTES_FILE", "EFFECTGATE_DEPLOY_DIR"):
        monkeypatch.delenv(name, raising=False)
    return work


@pytest.mark.parametrize("source", ["default", "deploy dir", "exported", "option"])
def test_check_reads_the_files_up_gives_the_policy_service_from_any_directory(
    offline: Path, decoy: Path, repo_root: Path, monkeypatch: pytest.MonkeyPatch, source: str
) -> None:
    copy = offline / "copy"
    (copy / "policy").mkdir(parents=True)
    for name in ("principals.toml", "attributes.toml"):
        (copy / "policy" / name).write_text((repo_root / "deploy/policy" / name).read_text())
    options: list[str] = []
    if source == "deploy dir":
        monkeypatch.setenv("EFFECTGATE_DEPLOY_DIR", str(copy))
    elif source == "exported":
        monkeypatch.setenv("EFFECTGATE_POLICY_PRINCIPALS_FILE", str(copy / "policy/principals.toml"))
        monkeypatch.setenv("EFFECTGATE_POLICY_ATTRIBUTES_FILE", str(copy / "policy/attributes.toml"))
    elif source == "option":
        options = [
            "--principals",
            str(copy / "policy/principals.toml"),
            "--attributes",
            str(copy / "policy/attributes.toml"),
        ]
    base = repo_root / "deploy" if source == "default" else copy

    done = CliRunner().invoke(app, ["policy", "check", str(repo_root / "deploy/policy/policy.cedar"), *options])

    assert done.exit_code == 0, done.output
    read = f"read: principal directory {base / 'policy/principals.toml'}, attributes {base / 'policy/attributes.toml'}"
    assert read in " ".join(done.stdout.split())


def test_files_of_the_deciding_replica_are_compared_with_those_read() -> None:
    from effectgate.cli.commands.policy_explain import Read, _files
    from effectgate.contracts.events import DecisionMade
    from effectgate.contracts.vocabulary import Verdict

    def decided(digest: str | None) -> DecisionMade:
        return DecisionMade(
            event_id="d", occurred_at=NOW, request_id="r", principal="p", verdict=Verdict.DENY,
            reason_code="x", reason="x", entities_digest=digest,
        )  # fmt: skip

    read = Read("read: principal directory a, attributes b", "sha256:here")
    shown = {digest: str(_files(read, decided(digest))) for digest in ("sha256:here", "sha256:there", None)}

    assert all(text.startswith("read: principal directory a, attributes b\n") for text in shown.values())
    assert "decided over the same principal directory and attributes" in shown["sha256:here"]
    assert (
        "warning: these differ" in shown["sha256:there"]
        and "(sha256:there there, sha256:here here)" in shown["sha256:there"]
    )
    assert "does not name the principal directory and attributes" in shown[None]
