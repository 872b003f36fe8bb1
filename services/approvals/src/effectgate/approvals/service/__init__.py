"""The approvals workflow over its ports: open (or join) on decision, vote, reject, withdraw, expire.

Publishing is injected (``publish(subject, event)``), so this module does no I/O of its
own; every outgoing vote, grant or rejection is signed with the approvals key
(:mod:`effectgate.approvals.announcer`): the executor runs nothing on an unsigned or
foreign approval.
"""

from __future__ import annotations

from effectgate.approvals.service.answering import Answering
from effectgate.approvals.service.core import Workflow
from effectgate.approvals.service.opening import Opening

__all__ = ["Approvals", "Workflow"]


class Approvals(Opening, Answering):
    """The approvals workflow: open (or join) on decision, vote, reject, withdraw, expire (see :class:`Workflow`)."""
