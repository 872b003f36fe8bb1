"""The Cedar schema every policy is validated against, and the actions it declares.

Cedar schema syntax: https://docs.cedarpolicy.com/schema/human-readable-schema.html.
The context shape must match what :mod:`toolgate.policy.engine` builds per request.
"""

from __future__ import annotations

__all__ = ["ACTION_APPROVAL", "ACTION_EXECUTE", "SCHEMA_TEXT"]

ACTION_EXECUTE = "execute"
"""Asked first: may the call run without a person?"""

ACTION_APPROVAL = "execute_with_approval"
"""Asked second: may it run once an approver with the policy's ``@approver_role`` agrees?"""

SCHEMA_TEXT = """
// The entities and actions toolgate policies are written against.
entity Agent = {
  autonomy: Long,          // 0..3, from the principal directory
  roles: Set<String>,      // from the principal directory
};
entity Tool;               // id = tool name

type RequestContext = {
  operation: String,       // operation name within the tool
  side_effect: String,     // SideEffectClass value, e.g. "REVERSIBLE_WRITE"
  side_effect_rank: Long,  // 0 READ_ONLY .. 5 SECURITY_SENSITIVE
  risk: String,            // RiskTier value, e.g. "medium"
  risk_rank: Long,         // 0 trivial .. 4 critical
  tool: String,            // tool name
  version: String,         // tool version (SemVer)
};

action execute, execute_with_approval appliesTo {
  principal: Agent,
  resource: Tool,
  context: RequestContext,
};
"""
"""Cedar schema (Cedar schema syntax) every policy is validated against when loaded."""
