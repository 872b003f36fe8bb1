"""Which JetStream refusals mean the store is full (nats-server's codes and descriptions), and which do not."""

from __future__ import annotations

import pytest
from nats.js.errors import APIError, ServiceUnavailableError

from effectgate.contracts.bus.stream_limits import store_full


@pytest.mark.parametrize(
    ("error", "full"),
    [
        (ServiceUnavailableError(code=503, err_code=10077, description="maximum bytes exceeded"), True),
        (ServiceUnavailableError(code=503, err_code=10077, description="maximum messages exceeded"), True),
        (ServiceUnavailableError(code=503, err_code=10077, description="maximum messages per subject exceeded"), True),
        (ServiceUnavailableError(code=503, err_code=10023, description="insufficient resources"), True),
        (APIError(code=500, err_code=10047, description="insufficient storage resources available"), True),
        (ServiceUnavailableError(code=503, err_code=10077, description="write failed: disk I/O error"), False),
        (APIError(code=400, err_code=10071, description="wrong last sequence: 3"), False),
        (
            ServiceUnavailableError(code=503, err_code=10008, description="JetStream system temporarily unavailable"),
            False,
        ),
        (TimeoutError(), False),
        (OSError("maximum bytes exceeded"), False),
    ],
    ids=["bytes", "messages", "per-subject", "server", "account", "io", "sequence", "unavailable", "timeout", "os"],
)
def test_only_a_store_with_no_room_counts_as_full(error: BaseException, full: bool) -> None:
    assert (store_full(error) is not None) is full
