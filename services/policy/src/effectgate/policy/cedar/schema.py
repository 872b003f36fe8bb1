"""The Cedar schema every policy is validated against, and the actions it declares.

Cedar schema syntax: https://docs.cedarpolicy.com/schema/human-readable-schema.html. Three
parts are generated: the ``Args`` record from the registered operations' input schemas
(:mod:`effectgate.policy.cedar.args_schema`), and the declared agent and tool attributes
(:mod:`effectgate.policy.cedar.attributes`).
"""

from __future__ import annotations

from collections.abc import Mapping

from effectgate.policy.cedar.args_schema import CedarType, render

__all__ = ["ACTION_APPROVAL", "ACTION_EXECUTE", "schema_text"]

ACTION_EXECUTE = "execute"
"""Asked first: may the call run without a person?"""

ACTION_APPROVAL = "execute_with_approval"
"""Asked second: may it run once an approver with the policy's ``@approver_role`` agrees?"""

_TEMPLATE = """
// The entities and actions effectgate policies are written against.
entity Agent = {{
  autonomy: Long,          // 0..3, from the principal directory
  roles: Set<String>,      // from the principal directory
{agent}}};
entity Tool = {{           // id = tool name
{tool}}};

type Args = {args};        // the call's arguments, typed from the registered input schemas

type RequestContext = {{
  operation: String,       // operation name within the tool
  side_effect: String,     // SideEffectClass value, e.g. "REVERSIBLE_WRITE"
  side_effect_rank: Long,  // 0 READ_ONLY .. 5 SECURITY_SENSITIVE
  risk: String,            // RiskTier value, e.g. "medium"
  risk_rank: Long,         // 0 trivial .. 4 critical
  tool: String,            // tool name
  version: String,         // tool version (SemVer)
  open_world: Bool,        // the call reaches a party outside the system
  destination_host?: String,  // host of the URL at the operation's destination pointer
  amount?: decimal,        // the number at the operation's amount pointer
  args: Args,
}};

action execute, execute_with_approval appliesTo {{
  principal: Agent,
  resource: Tool,
  context: RequestContext,
}};
"""


def _declared(types: Mapping[str, str]) -> str:
    return "".join(f"  {name}?: {typed},\n" for name, typed in sorted(types.items()))


def schema_text(args: CedarType, agent_types: Mapping[str, str], tool_types: Mapping[str, str]) -> str:
    """The Cedar schema for a vocabulary of arguments and the declared attributes.

    Args:
        args: the ``Args`` record (every attribute optional).
        agent_types: declared agent attribute name to Cedar type (optional attributes).
        tool_types: the same for tools.
    """
    return _TEMPLATE.format(args=render(args), agent=_declared(agent_types), tool=_declared(tool_types))
