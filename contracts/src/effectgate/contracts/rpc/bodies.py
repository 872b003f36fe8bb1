"""Which body each request/reply subject takes and which it answers with.

One entry per subject of :class:`~effectgate.contracts.bus.catalog.Rpc` (its pattern, as the
catalog spells it): the request's body type and the reply's. A request whose body is not read
has :class:`NoBody`. Every type is declared in :mod:`effectgate.contracts.rpc`, or is the page
query of a paged listing (:class:`~effectgate.contracts.bus.paging.PageQuery`). A found record
(``tg.records.get.*``) is answered with its stored bytes; its reply type is the answer without one.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Final, NamedTuple

import msgspec

from effectgate.contracts.bus.catalog import Rpc
from effectgate.contracts.bus.paging import PageQuery
from effectgate.contracts.rpc import approvals, audit, contents, listing, policy, recheck, records, registry, uncertain

__all__ = ["RPC_BODIES", "Bodies", "NoBody"]


class NoBody(msgspec.Struct, frozen=True):
    """The body of a request whose body is not read: send ``{}`` (or nothing)."""


class Bodies(NamedTuple):
    """The body types of one request/reply subject.

    Attributes:
        query: the request's body.
        reply: the answer's body (a generic listing reply names its item, e.g.
            ``ApprovalsPage[PendingApproval]``).
    """

    query: Any
    reply: Any


_LISTED = approvals.PendingApproval

RPC_BODIES: Final[Mapping[str, Bodies]] = MappingProxyType(
    {
        Rpc.REGISTRY_PUBLISH: Bodies(registry.PublishRequest, registry.RegistryReply),
        Rpc.REGISTRY_GET: Bodies(registry.GetQuery, registry.RegistryReply),
        Rpc.REGISTRY_LIST: Bodies(NoBody, registry.RegistryReply),
        Rpc.POLICY_RECHECK: Bodies(recheck.RecheckQuery, recheck.RecheckAnswer),
        Rpc.EXECUTOR_CONTENTS: Bodies(contents.ContentQuery, contents.ContentAnswer),
        Rpc.POLICY_READY: Bodies(NoBody, listing.Readiness),
        Rpc.POLICY_PUBLISH: Bodies(policy.PublishRequest, policy.PublishReply),
        Rpc.POLICY_BUDGETS: Bodies(policy.CountersQuery, policy.CountersReply),
        Rpc.POLICY_BUDGETS_RESOLVE: Bodies(policy.ResolveQuery, policy.ResolveReply),
        Rpc.TOOLS_LIST: Bodies(PageQuery, listing.ToolsReply),
        Rpc.TOOLS_GET: Bodies(listing.ToolsQuery, listing.ToolsReply),
        Rpc.APPROVALS_LIST: Bodies(PageQuery, approvals.ApprovalsPage[_LISTED]),
        Rpc.APPROVALS_SHOW: Bodies(approvals.ShowQuery, approvals.ApprovalShown[_LISTED]),
        Rpc.APPROVALS_DECIDE: Bodies(approvals.DecideCommand, approvals.DecideReply),
        Rpc.APPROVALS_WITHDRAW: Bodies(approvals.WithdrawCommand, approvals.WithdrawReply),
        Rpc.APPROVALS_STATUS: Bodies(approvals.WithdrawCommand, approvals.ApprovalStatus),
        Rpc.AUDIT_TRAIL: Bodies(audit.TrailQuery, audit.TrailReply),
        Rpc.AUDIT_VERIFY: Bodies(NoBody, audit.VerifyReply),
        Rpc.AUDIT_EXPORT: Bodies(audit.ExportQuery, audit.ExportReply),
        Rpc.AUDIT_ALARMS: Bodies(audit.AlarmsQuery, audit.AlarmsReply),
        Rpc.AUDIT_REQUESTS: Bodies(audit.RequestsQuery, audit.RequestsReply),
        Rpc.RECORDS_GET: Bodies(records.RecordQuery, records.RecordReply),
        Rpc.UNCERTAIN_LIST: Bodies(PageQuery, uncertain.UncertainPage[uncertain.UncertainCall]),
        Rpc.UNCERTAIN_RESOLVE: Bodies(uncertain.ResolveCommand, uncertain.ResolveAnswer),
    }
)
"""Subject pattern (:class:`~effectgate.contracts.bus.catalog.Rpc`) → its :class:`Bodies`."""
