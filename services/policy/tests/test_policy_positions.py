"""A refused policy names each problem at its line and column, once, first cause first."""

from __future__ import annotations

from pathlib import Path

import pytest

from effectgate.contracts.directory import PrincipalDirectory
from effectgate.policy.cedar.attributes import Attributes
from effectgate.policy.cedar.loading import build_engine, load_policy
from effectgate.policy.errors import PolicyInvalid

SHIPPED = (Path(__file__).resolve().parents[3] / "deploy/policy/policy.cedar").read_text(encoding="utf-8")
DIRECTORY = PrincipalDirectory.from_toml(
    (Path(__file__).resolve().parents[3] / "deploy/policy/principals.toml").read_text(encoding="utf-8")
)


EXECUTE_HEAD = 'permit (principal is Agent, action == Action::"execute", resource is Tool)'


def _refused(text: str) -> PolicyInvalid:
    with pytest.raises(PolicyInvalid) as refused:
        build_engine(text, DIRECTORY, Attributes(), [])
    return refused.value


def _typo(old: str, new: str) -> str:
    assert SHIPPED.count(old) >= 1, old
    return SHIPPED.replace(old, new, 1)


def _at(text: str, problem: str) -> str:
    line, column, _ = problem.split(":", 2)
    return text.splitlines()[int(line) - 1][int(column) - 1 :]


def _line_of(text: str, fragment: str) -> int:
    return next(n for n, line in enumerate(text.splitlines(), 1) if fragment in line)


@pytest.mark.parametrize(
    ("old", "new", "message", "token"),
    [
        (
            "  context.risk_rank <= 2  // trivial, low or medium\n};",
            "  context.risk_rank <= 2\n}",
            "unexpected token `@`",
            '@id("reversible-write-approval")',
        ),
        (
            EXECUTE_HEAD + "\nwhen {\n  principal.autonomy >= 2",
            EXECUTE_HEAD.replace("permit", "permt") + "\nwhen {\n  principal.autonomy >= 2",
            "invalid policy effect: permt",
            "permt (",
        ),
        (
            '  context.side_effect == "READ_ONLY" &&\n  context.risk_rank <= 1',
            '  contex.side_effect == "READ_ONLY" &&\n  context.risk_rank <= 1',
            "invalid member access `contex.side_effect`",
            "contex.side_effect",
        ),
        (
            "context.risk_rank <= 1 &&  // trivial",
            "context.risk_rank = 1 &&  // trivial",
            "'=' is not a valid operator",
            "= 1 &&",
        ),
        (
            'context.amount.lessThan(decimal("0.0000"))',
            'context.amount.lessThan(decimal("0.0000")) && && true',
            "unexpected token `&&`",
            "&& true",
        ),
        (
            'resource is Tool)\nwhen {\n  principal.autonomy >= 1 &&\n  context.side_effect == "PRODUCTION"',
            'reource is Tool)\nwhen {\n  principal.autonomy >= 1 &&\n  context.side_effect == "PRODUCTION"',
            "invalid variable in the policy scope: reource",
            "reource is Tool",
        ),
    ],
)
def test_a_parse_error_names_the_line_and_column_of_the_offending_token(
    old: str, new: str, message: str, token: str
) -> None:
    text = _typo(old, new)

    refused = _refused(text)

    assert refused.reason.startswith("policy does not parse: ") and message in refused.reason, refused.reason
    assert len(refused.problems) == 1 and _at(text, refused.problems[0]).startswith(token), refused.problems


def test_a_parse_error_at_the_end_of_the_text_is_placed_at_its_end() -> None:
    text = SHIPPED.rstrip().removesuffix(";")

    refused = _refused(text)

    assert refused.problems == (f"{len(text.splitlines())}:2: unexpected end of input",), refused.problems


@pytest.mark.parametrize(
    ("old", "new", "token"),
    [
        (
            'resource is Tool)\nwhen {\n  principal.autonomy >= 1 &&\n  context.side_effect == "READ_ONLY"',
            'resource is Tol)\nwhen {\n  principal.autonomy >= 1 &&\n  context.side_effect == "READ_ONLY"',
            "Tol",
        ),
        ("context.risk_rank >= 4 &&  // critical", "context.risk_rnk >= 4 &&", "risk_rnk"),
        (
            'action == Action::"execute", resource is Tool)\nwhen {\n  principal.autonomy >= 2',
            'action == Action::"exeucte", resource is Tool)\nwhen {\n  principal.autonomy >= 2',
            'Action::"exeucte"',
        ),
        ("  principal.autonomy < 3\n", "  principal.autonomi < 3\n", "autonomi"),
    ],
)
def test_one_misspelled_word_is_one_problem_at_its_position(old: str, new: str, token: str) -> None:
    text = _typo(old, new)

    refused = _refused(text)

    assert refused.reason.startswith("policy fails validation against the effectgate Cedar schema: ")
    assert len(refused.problems) == 1, refused.problems  # not once per action, no "no applicable action" echo
    assert _at(text, refused.problems[0]).startswith(token), refused.problems


def test_several_mistakes_are_listed_in_file_order() -> None:
    text = _typo("context.risk_rank >= 4 &&  // critical", "context.risk_rnk >= 4 &&")
    text = text.replace(
        'principal.autonomy >= 2 &&\n  context.side_effect == "REVERSIBLE_WRITE"',
        'principal.autonomi >= 2 &&\n  context.side_effect == "REVERSIBLE_WRITE"',
        1,
    )

    refused = _refused(text)

    lines = [int(problem.split(":", 1)[0]) for problem in refused.problems]
    assert lines == sorted(lines) and len(lines) == 2, refused.problems
    assert lines == [_line_of(text, "autonomi >= 2"), _line_of(text, "risk_rnk")]


def test_a_never_matching_has_and_an_enum_typo_are_placed_together_in_order() -> None:
    text = _typo('context.side_effect == "PRODUCTION"', 'context.side_effect == "PRODUCTON"')
    text = text.replace(
        "context has amount &&\n  principal has max_amount", "context has amont &&\n  principal has max_amount", 1
    )

    refused = _refused(text)

    assert refused.reason.startswith("policy can never match: ")
    assert [_at(text, p)[:10] for p in refused.problems] == ['"PRODUCTON', "amont &&"], refused.problems


def test_past_the_search_bound_the_refusal_still_names_cedars_message(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("effectgate.policy.cedar.locations.MAX_PROBES", 3)
    text = _typo(
        'action == Action::"execute_with_approval", resource is Tool)\nwhen {\n  principal.autonomy >= 2',
        'action == Action::"execute_with_approval", resource is Tool)\nwhen {\n  principal.autonomy >= 2 && &&',
    )

    refused = _refused(text)

    assert (
        refused.problems == ("unexpected token `&&`",)
        and refused.reason == "policy does not parse: unexpected token `&&`"
    )


def test_a_policy_file_keeps_its_problems_with_its_path(tmp_path: Path) -> None:
    policy = tmp_path / "policy.cedar"
    policy.write_text(_typo('context.side_effect == "PRODUCTION"', 'context.side_effect == "PRODUCTON"'))
    principals = Path(__file__).resolve().parents[3] / "deploy/policy/principals.toml"

    with pytest.raises(PolicyInvalid) as refused:
        load_policy(policy, principals)

    assert refused.value.reason.startswith(f"{policy}: policy can never match: ") and refused.value.path == str(policy)
    assert len(refused.value.problems) == 1 and '"PRODUCTON"' in refused.value.problems[0]
