"""What the SDK raises.

Hierarchy::

    DuplicateRequest            the stream already held this request id
    ApprovalsNoAnswer           a withdrawal got no answer in time (also a nats.errors.Error)
    RegistryUnavailable         the tool listing did not answer or refused the lookup
    ├── RegistryNoAnswer        no answer in time (also a nats.errors.Error: retrying may succeed)
    └── UnknownTool             no such tool or version for this principal
    ResultUnavailable           a result kept out of band could not be read back
    BusUnreachable              no connection to NATS after a few attempts (also a
                                toolgate.contracts.errors.NatsUnreachable and a
                                nats.errors.NoServersError)

Also :class:`toolgate.sdk.receipts.ReceiptKeyMissing` and
:class:`toolgate.sdk.sealing.SealingKeyMissing`, raised before anything is sent.
"""

from __future__ import annotations

import nats

from toolgate.contracts.errors import NatsUnreachable, Problem

__all__ = [
    "ApprovalsNoAnswer",
    "BusUnreachable",
    "DuplicateRequest",
    "RegistryNoAnswer",
    "RegistryUnavailable",
    "ResultUnavailable",
    "UnknownTool",
]


class DuplicateRequest(Problem):
    """The stream already held a message with this request id: nothing new was submitted."""


class ApprovalsNoAnswer(Problem, nats.errors.Error):
    """The approvals service did not answer a withdrawal in time: nothing is known to have changed; ask again."""


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
