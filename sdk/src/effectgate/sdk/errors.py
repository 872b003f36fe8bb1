"""What the SDK raises."""

from __future__ import annotations

import nats

from effectgate.contracts.errors import NatsUnreachable, Problem

__all__ = [
    "ApprovalsNoAnswer",
    "BusUnreachable",
    "DuplicateRequest",
    "GatewayStoreFull",
    "RegistryNoAnswer",
    "RecordsNoAnswer",
    "RegistryUnavailable",
    "ResultUnavailable",
    "UnknownTool",
]


class DuplicateRequest(Problem):
    """The stream already held a message with this request id: nothing new was submitted."""


class GatewayStoreFull(Problem):
    """The gateway's store (its JetStream stream) is full: the request was not stored, so it was not accepted.

    Nothing will run and no receipt will come for it; the same request may be sent again once
    the operator has made room. The message names the limit the server reported.

    Attributes:
        request_id: the request that was not accepted.
        limit: the server's description of the limit, e.g. ``maximum bytes exceeded``.
    """

    def __init__(self, request_id: str, limit: str) -> None:
        super().__init__(
            f"the gateway's store is full ({limit}): request {request_id} was not accepted and will not run; "
            "send it again once the operator has made room"
        )
        self.request_id, self.limit = request_id, limit


class ApprovalsNoAnswer(Problem, nats.errors.Error):
    """The approvals service did not answer a withdrawal in time: nothing is known to have changed; ask again."""


class RecordsNoAnswer(Problem, nats.errors.TimeoutError):
    """A stored record could not be read now: the executor did not answer in time, or refused (the message says)."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "a stored record could not be read now"


class RegistryUnavailable(Problem):
    """The tool listing did not answer or refused the lookup."""


class ResultUnavailable(Problem):
    """A result kept out of band could not be read back (expired, missing or corrupted)."""


class RegistryNoAnswer(RegistryUnavailable, nats.errors.Error):
    """The registry did not answer in time (a bus fault: retrying may succeed)."""


class UnknownTool(RegistryUnavailable):
    """The registry has no such tool or version."""


class BusUnreachable(NatsUnreachable, nats.errors.NoServersError):
    """No connection to the NATS server after a few attempts; the message names the URL and the last reason."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "cannot reach NATS"
