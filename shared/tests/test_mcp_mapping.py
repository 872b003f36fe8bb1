import copy
from typing import Any

import jsonschema_rs
import msgspec
import pytest

from effectgate.contracts.tools.descriptors import SEMVER, TOOL_NAME, RateLimit, ToolDescriptor, rate_of
from effectgate.contracts.vocabulary import RiskTier, SideEffectClass
from effectgate.shared.mcp.hints import admitted, classify
from effectgate.shared.mcp.mapping import (
    DRAFT_2020_12,
    McpToolInfo,
    coerce_semver,
    descriptor_from_mcp,
    input_schema,
    operation_changes,
    operation_from_mcp,
    output_schema,
    tool_from_wire,
)
from effectgate.shared.mcp.servers import McpServerConfig, Override

RO, RW, IW = SideEffectClass.READ_ONLY, SideEffectClass.REVERSIBLE_WRITE, SideEffectClass.IRREVERSIBLE_WRITE
REPO_SCHEMA = {"type": "object", "properties": {"repo_path": {"type": "string"}}, "required": ["repo_path"]}


def tool(name: str, annotations: dict[str, bool | None] | None, **kw: Any) -> McpToolInfo:
    return McpToolInfo(
        name=name,
        description=f"{name} tool",
        input_schema=copy.deepcopy(REPO_SCHEMA),
        annotations=annotations,
        **kw,
    )


def config(**kw: Any) -> McpServerConfig:
    return McpServerConfig(name="git", command="/usr/bin/true", **kw)


def trusted(**kw: Any) -> McpServerConfig:
    return config(trust_hints=True, **kw)


def mapped(cfg: McpServerConfig, annotations: dict[str, bool | None] | None) -> tuple[SideEffectClass, RiskTier]:
    operation = descriptor_from_mcp(cfg, "1.0.0", [tool("t", annotations)]).operations["t"]
    return operation.side_effect_class, operation.risk_tier


@pytest.mark.parametrize(
    ("annotations", "expected"),
    [
        ({"readOnlyHint": True, "openWorldHint": False}, (RO, RiskTier.TRIVIAL)),
        ({"readOnlyHint": True, "openWorldHint": True}, (RO, RiskTier.LOW)),
        ({"readOnlyHint": True}, (RO, RiskTier.LOW)),  # openWorldHint defaults to true
        ({"readOnlyHint": True, "destructiveHint": True, "openWorldHint": False}, (RO, RiskTier.TRIVIAL)),
        ({"readOnlyHint": False, "destructiveHint": False, "idempotentHint": False}, (RW, RiskTier.MEDIUM)),
        ({"readOnlyHint": False, "destructiveHint": False, "openWorldHint": True}, (RW, RiskTier.MEDIUM)),
        ({"destructiveHint": False}, (RW, RiskTier.MEDIUM)),  # readOnlyHint defaults to false
        ({"readOnlyHint": False}, (IW, RiskTier.HIGH)),  # destructiveHint defaults to true
        ({"readOnlyHint": False, "destructiveHint": True, "idempotentHint": True}, (IW, RiskTier.HIGH)),
        ({"readOnlyHint": None, "destructiveHint": None}, (IW, RiskTier.HIGH)),
        ({"idempotentHint": True, "openWorldHint": False}, (IW, RiskTier.HIGH)),
        ({}, (IW, RiskTier.HIGH)),
        (None, (IW, RiskTier.HIGH)),
    ],
)
def test_trusted_annotations_map_with_the_spec_defaults(
    annotations: dict[str, bool | None] | None, expected: tuple[SideEffectClass, RiskTier]
) -> None:
    assert classify(annotations) == expected
    assert mapped(trusted(), annotations) == expected


def test_descriptor_identity_limits_and_operations() -> None:
    tools = [tool("git_log", {"readOnlyHint": True}), tool("git_reset", {"destructiveHint": True})]
    descriptor = descriptor_from_mcp(config(), "2026.10.19", tools)

    assert descriptor.name == "mcp_git" and TOOL_NAME.match(descriptor.name)
    assert descriptor.version == "2026.10.19"
    assert descriptor.adapter == "mcp:git"
    assert sorted(descriptor.operations) == ["git_log", "git_reset"]
    assert descriptor.operations["git_log"].description == "git_log tool"
    assert descriptor.timeout_s == 30.0
    assert descriptor.rate_limit == RateLimit(calls=30, period_s=60.0)
    wire = msgspec.json.encode(descriptor)
    assert msgspec.json.decode(wire, type=ToolDescriptor) == descriptor


def test_the_servers_rate_is_shared_and_a_tools_own_rate_is_its_operations() -> None:
    overrides = {"git_log": Override(rate_limit=RateLimit(calls=2, period_s=10.0))}
    cfg = config(rate_limit=RateLimit(calls=90, period_s=60.0), overrides=overrides)
    descriptor = descriptor_from_mcp(cfg, "1.0.0", [tool("git_log", None), tool("git_reset", None)])

    assert descriptor.rate_limit == RateLimit(calls=90, period_s=60.0)
    assert descriptor.operations["git_log"].rate_limit == RateLimit(calls=2, period_s=10.0)
    assert descriptor.operations["git_reset"].rate_limit is None
    assert rate_of(descriptor, "git_log") == ("mcp_git.git_log", RateLimit(calls=2, period_s=10.0))
    assert rate_of(descriptor, "git_reset") == ("mcp_git", RateLimit(calls=90, period_s=60.0))
    live = operation_from_mcp(config(), tool("git_log", None))
    assert operation_changes(descriptor.operations["git_log"], live) == [], "a rate is no tool definition change"


def test_stricter_override_is_applied_on_a_trusted_server() -> None:
    overrides = {
        "git_log": Override(side_effect_class=SideEffectClass.SECURITY_SENSITIVE, risk_tier=RiskTier.CRITICAL),
        "git_status": Override(side_effect_class=RO),  # same rank: accepted
        "git_commit": Override(risk_tier=RiskTier.HIGH),
    }
    tools = [
        tool("git_log", {"readOnlyHint": True}),
        tool("git_status", {"readOnlyHint": True, "openWorldHint": False}),
        tool("git_commit", {"readOnlyHint": False, "destructiveHint": False}),
    ]
    ops = descriptor_from_mcp(trusted(overrides=overrides), "1.0.0", tools).operations

    assert (ops["git_log"].side_effect_class, ops["git_log"].risk_tier) == (
        SideEffectClass.SECURITY_SENSITIVE,
        RiskTier.CRITICAL,
    )
    assert (ops["git_status"].side_effect_class, ops["git_status"].risk_tier) == (RO, RiskTier.TRIVIAL)
    assert (ops["git_commit"].side_effect_class, ops["git_commit"].risk_tier) == (RW, RiskTier.HIGH)


@pytest.mark.parametrize(
    ("override", "field"),
    [
        (Override(side_effect_class=RO), "side_effect_class"),
        (Override(side_effect_class=RW), "side_effect_class"),
        (Override(risk_tier=RiskTier.MEDIUM), "risk_tier"),
        (Override(side_effect_class=SideEffectClass.FINANCIAL, risk_tier=RiskTier.TRIVIAL), "risk_tier"),
    ],
)
def test_looser_override_is_refused_on_a_trusted_server(override: Override, field: str) -> None:
    cfg = trusted(overrides={"git_reset": override})
    with pytest.raises(ValueError, match=rf"servers\.git\.overrides\.git_reset\.{field}: .* looser than"):
        descriptor_from_mcp(cfg, "1.0.0", [tool("git_reset", {"destructiveHint": True})])


@pytest.mark.parametrize(
    "annotations",
    [
        {"readOnlyHint": True, "openWorldHint": False},
        {"readOnlyHint": True},
        {"destructiveHint": False},
        {"readOnlyHint": False, "destructiveHint": False, "idempotentHint": True},
        {},
        None,
    ],
)
def test_untrusted_hints_never_loosen_the_servers_default(annotations: dict[str, bool | None] | None) -> None:
    assert mapped(config(), annotations) == (IW, RiskTier.HIGH)


def test_the_same_lying_hint_is_believed_only_from_a_trusted_server() -> None:
    lie = {"readOnlyHint": True, "openWorldHint": False}
    assert mapped(trusted(), lie) == (RO, RiskTier.TRIVIAL)
    assert mapped(config(), lie) == mapped(config(), None) == (IW, RiskTier.HIGH)


@pytest.mark.parametrize(
    ("annotations", "expected"),
    [
        ({"readOnlyHint": True, "openWorldHint": False}, (RO, RiskTier.TRIVIAL)),
        ({"readOnlyHint": True, "destructiveHint": True}, (RO, RiskTier.TRIVIAL)),  # destructive needs readOnly=false
        ({"openWorldHint": True}, (RO, RiskTier.LOW)),
        ({"destructiveHint": False}, (RW, RiskTier.MEDIUM)),
        ({"readOnlyHint": False}, (RW, RiskTier.MEDIUM)),
        ({"readOnlyHint": False, "destructiveHint": True}, (IW, RiskTier.HIGH)),
        ({"destructiveHint": True, "openWorldHint": False}, (IW, RiskTier.HIGH)),
        ({}, (RO, RiskTier.TRIVIAL)),
        (None, (RO, RiskTier.TRIVIAL)),
    ],
)
def test_untrusted_hints_can_only_raise_what_the_operator_set(
    annotations: dict[str, bool | None] | None, expected: tuple[SideEffectClass, RiskTier]
) -> None:
    assert admitted(annotations) == expected
    assert mapped(config(default_side_effect_class=RO, default_risk_tier=RiskTier.TRIVIAL), annotations) == expected


def test_an_operator_default_is_the_floor_of_an_untrusted_server() -> None:
    cfg = config(default_side_effect_class=RW, default_risk_tier=RiskTier.MEDIUM)

    assert mapped(cfg, None) == (RW, RiskTier.MEDIUM)
    assert mapped(cfg, {"readOnlyHint": True}) == (RW, RiskTier.MEDIUM)
    assert mapped(cfg, {"destructiveHint": True}) == (IW, RiskTier.HIGH)


@pytest.mark.parametrize(
    ("override", "annotations", "expected"),
    [
        (Override(side_effect_class=RO, risk_tier=RiskTier.TRIVIAL), None, (RO, RiskTier.TRIVIAL)),
        (Override(side_effect_class=RO), {"readOnlyHint": True}, (RO, RiskTier.HIGH)),  # tier: the server default
        (Override(side_effect_class=RO, risk_tier=RiskTier.LOW), {"destructiveHint": True}, (IW, RiskTier.HIGH)),
        (
            Override(side_effect_class=SideEffectClass.FINANCIAL),
            {"readOnlyHint": True},
            (SideEffectClass.FINANCIAL, RiskTier.HIGH),
        ),
        (Override(risk_tier=RiskTier.CRITICAL), {"destructiveHint": False}, (IW, RiskTier.CRITICAL)),
    ],
)
def test_an_override_is_the_operators_word_on_an_untrusted_server(
    override: Override, annotations: dict[str, bool | None] | None, expected: tuple[SideEffectClass, RiskTier]
) -> None:
    assert mapped(config(overrides={"t": override}), annotations) == expected


def test_override_for_an_unlisted_tool_is_refused() -> None:
    cfg = config(overrides={"git_nuke": Override(risk_tier=RiskTier.CRITICAL)})
    with pytest.raises(ValueError, match="git_nuke"):
        descriptor_from_mcp(cfg, "1.0.0", [tool("git_log", {"readOnlyHint": True})])


def test_duplicate_tool_names_are_refused() -> None:
    with pytest.raises(ValueError, match="twice"):
        descriptor_from_mcp(config(), "1.0.0", [tool("a", None), tool("a", None)])


def test_pins_become_const_and_stay_required() -> None:
    original = tool("git_log", {"readOnlyHint": True})
    pins = {"repo_path": "/srv/repo", "branch": "main"}
    schema = descriptor_from_mcp(config(pinned_arguments=pins), "1.0.0", [original]).operations["git_log"].input_schema

    assert schema["properties"]["repo_path"] == {"const": "/srv/repo"}
    assert schema["properties"]["branch"] == {"const": "main"}
    assert schema["required"] == ["repo_path", "branch"]
    assert original.input_schema == REPO_SCHEMA  # the listing is not modified
    validator = jsonschema_rs.validator_for(schema)
    assert validator.is_valid({"repo_path": "/srv/repo", "branch": "main"})
    assert not validator.is_valid({"repo_path": "/etc", "branch": "main"})
    assert not validator.is_valid({"branch": "main"})


def test_input_schema_declares_2020_12_unless_it_has_a_dialect() -> None:
    assert input_schema({"type": "object"}, {})["$schema"] == DRAFT_2020_12
    draft7 = "http://json-schema.org/draft-07/schema#"
    assert input_schema({"$schema": draft7, "type": "object"}, {})["$schema"] == draft7


def result(structured: Any, content: list[Any] | None = None) -> dict[str, Any]:
    return {
        "structured": structured,
        "content": [{"type": "text", "text": "x"}] if content is None else content,
    }


def test_output_schema_without_tool_schema_allows_null_structured() -> None:
    validator = jsonschema_rs.validator_for(output_schema(None))

    assert validator.is_valid(result(None))
    assert validator.is_valid(result({"any": 1}))
    assert not validator.is_valid({"structured": None})  # content is required
    assert not validator.is_valid({"content": []})  # structured is required
    assert not validator.is_valid(result("text"))
    assert not validator.is_valid(result(None, content="text"))  # type: ignore[arg-type]


def test_output_schema_wraps_tool_schema_and_keeps_refs_resolvable() -> None:
    tool_schema = {
        "$defs": {
            "Time": {
                "type": "object",
                "properties": {"datetime": {"type": "string"}},
                "required": ["datetime"],
            }
        },
        "type": "object",
        "properties": {"source": {"$ref": "#/$defs/Time"}},
        "required": ["source"],
    }
    schema = output_schema(tool_schema)
    validator = jsonschema_rs.validator_for(schema)

    assert schema["$schema"] == DRAFT_2020_12 and schema["required"] == ["structured", "content"]
    assert validator.is_valid(result({"source": {"datetime": "2026-01-01T00:00:00Z"}}))
    assert not validator.is_valid(result({"source": {"datetime": 5}}))
    assert not validator.is_valid(result(None))  # a tool with an outputSchema must return structured content
    assert "$defs" in tool_schema  # the listing is not modified


@pytest.mark.parametrize(
    ("reported", "expected"),
    [
        ("2026.10.19", "2026.10.19"),
        ("2025.04.05", "2025.4.5"),
        ("1.2.3", "1.2.3"),
        ("v1.2", "1.2.0"),
        ("7", "7.0.0"),
        ("1.2.3+build.7", "1.2.3"),
        ("1.2.3-rc.1", "1.2.3-rc.1"),
        ("1.2.3-rc.01", "1.2.3"),  # invalid pre-release (leading zero) is dropped
        ("1.2.3-beta+exp.sha", "1.2.3-beta"),
        (" 0.1.0 ", "0.1.0"),
        ("unknown", "0.0.0"),
        ("", "0.0.0"),
        ("1.2.3.4", "0.0.0"),
    ],
)
def test_version_coercion(reported: str, expected: str) -> None:
    assert coerce_semver(reported) == expected
    assert SEMVER.match(coerce_semver(reported))
    assert descriptor_from_mcp(config(), reported, []).version == expected


def test_tool_from_wire_reads_the_fields_the_mapping_uses() -> None:
    wire = {
        "name": "git_log",
        "title": "Git log",
        "inputSchema": REPO_SCHEMA,
        "outputSchema": {"type": "object"},
        "annotations": {"readOnlyHint": True, "title": "x", "destructiveHint": "yes"},
        "_meta": {"vendor": 1},
    }

    info = tool_from_wire(wire)

    assert info == McpToolInfo(
        name="git_log",
        description="",
        input_schema=REPO_SCHEMA,
        output_schema={"type": "object"},
        annotations={"readOnlyHint": True, "destructiveHint": None, "idempotentHint": None, "openWorldHint": None},
    )
    assert tool_from_wire({"name": "t", "inputSchema": {}}).annotations is None


@pytest.mark.parametrize("wire", [{"inputSchema": {}}, {"name": "t"}, {"name": "t", "inputSchema": []}])
def test_tool_from_wire_refuses_a_broken_entry(wire: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="MCP tool"):
        tool_from_wire(wire)


def test_operation_changes_name_every_difference() -> None:
    registered = operation_from_mcp(trusted(), tool("t", {"readOnlyHint": True, "openWorldHint": False}))
    changed = tool("t", {"destructiveHint": True}, output_schema={"type": "object"})
    live = operation_from_mcp(trusted(), msgspec.structs.replace(changed, description="new", input_schema={}))

    assert operation_changes(registered, registered) == []
    assert operation_changes(registered, live) == [
        "input schema",
        "output schema",
        "side-effect class READ_ONLY -> IRREVERSIBLE_WRITE",
        "risk tier trivial -> high",
        "open world False -> True",
        "description",
    ]


def test_descriptor_description_names_the_upstream_version() -> None:
    descriptor = descriptor_from_mcp(config(), "2025.04.25", [tool("t", None)])
    assert descriptor.version == "2025.4.25"
    assert descriptor.description == "Tools of the MCP server 'git' (upstream version 2025.04.25)"


@pytest.mark.parametrize(
    ("trust", "hints", "override", "expected"),
    [
        (True, {"readOnlyHint": True, "openWorldHint": False}, None, False),
        (True, {"readOnlyHint": True, "openWorldHint": True}, None, True),
        (True, {"readOnlyHint": True}, None, True),  # the specification's default
        (True, {"readOnlyHint": True, "openWorldHint": True}, False, False),  # the operator's word
        (False, {"readOnlyHint": True, "openWorldHint": False}, None, True),  # an untrusted hint is not believed
        (False, {"readOnlyHint": True}, False, False),
    ],
)
def test_open_world_comes_from_the_hint_when_trusted_and_from_the_operator_always(
    trust: bool, hints: dict[str, bool], override: bool | None, expected: bool
) -> None:
    overrides = {"t": Override(open_world=override)} if override is not None else {}
    made = config(trust_hints=trust, overrides=overrides)
    assert operation_from_mcp(made, tool("t", hints)).open_world is expected
