"""Waiting for a local stack's services: each answers or pulls from its consumer, and the policy is usable.

While it waits it says which service it waits for and why that one is not ready yet
(:mod:`effectgate.cli.stack.waiting`); a service not ready by the deadline stops the start, naming
it and its reason. An MCP server still starting does not: it is awaited until the same
deadline, then left ``starting``.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from datetime import datetime
from typing import TYPE_CHECKING

import msgspec
import nats
from nats.aio.client import Client
from nats.js import JetStreamContext
from nats.js.errors import NotFoundError

from effectgate.cli.stack.waiting import Note, Said, mcp_settled, not_ready_reasons
from effectgate.contracts.bus import catalog
from effectgate.contracts.bus.catalog import Rpc
from effectgate.contracts.bus.nats_accounts import js_api_of
from effectgate.contracts.bus.nats_permissions import OPERATOR
from effectgate.contracts.errors import Problem
from effectgate.contracts.rpc.listing import Readiness
from effectgate.shared.runtime.connections import connect_once

if TYPE_CHECKING:
    from effectgate.cli.stack.system import Stack

__all__ = ["PolicyNotReady", "wait_ready"]

log = logging.getLogger("effectgate.stack")

_CONSUMERS = {
    "policy": catalog.POLICY_CONSUMER,
    "executor": catalog.EXECUTOR_DECISIONS,
    "approvals": catalog.APPROVALS_CONSUMER,
    "audit": catalog.AUDIT_CONSUMER,
    "chatops": catalog.CHATOPS_APPROVALS,
}


class PolicyNotReady(Problem, RuntimeError):
    """The policy service runs but has no valid, non-empty policy: every request would be denied."""


async def wait_ready(
    stack: Stack,
    services: tuple[str, ...],
    timeout_s: float = 60.0,
    *,
    policy_required: bool = True,
    note: Note | None = None,
    mcp_since: datetime | None = None,
) -> list[str]:
    """Wait until each service answers (registry, asked as the operator) or pulls from its consumer.

    A service run as replicas is ready when its consumer has a pull request open per replica
    (the audit's standby does not pull: one).

    A consumer is looked at as its own service's user, the only one with that right.

    Args:
        stack: the stack being started.
        services: the services to wait for, in order.
        timeout_s: how long all of them may take together, seconds.
        policy_required: the policy service must then also answer ``tg.policy.ready`` with
            ``ready``; ``False``: its reason is only logged.
        note: told, once each, what is awaited (``waiting for executor: MCP servers still starting: git``).
        mcp_since: when the executor was started: each configured MCP server is then awaited
            until it has left ``starting`` or the deadline has passed
            (:func:`effectgate.cli.stack.waiting.mcp_settled`).

    Returns:
        The MCP servers still starting at the deadline (``[]``: none, or ``mcp_since`` not given).

    Raises:
        RuntimeError: a service exited; TimeoutError: not ready in ``timeout_s`` seconds (naming why).
        PolicyNotReady: the policy service holds no usable policy (the message says why).
    """
    deadline, say = time.monotonic() + timeout_s, Said(note)
    for service in services:
        await _one_ready(stack, service, deadline, timeout_s, say)
        if service == "policy":
            await _policy_ready(stack, policy_required, deadline)
    return await mcp_settled(stack, mcp_since, deadline, say) if mcp_since is not None else []


async def _one_ready(stack: Stack, service: str, deadline: float, timeout_s: float, say: Said) -> None:
    """Wait for ``service``, saying why it is not ready yet about once a second."""
    options = stack.connect_options(OPERATOR if service == "registry" else service)
    nc = await connect_once(stack.nats_url, **options)
    js = nc.jetstream(prefix=js_api_of(options.get("user")))  # the bot's account imports its consumers' API
    try:
        for tick in itertools.count():
            if await _ready(nc, js, service, _pullers(stack, service)):
                return
            if dead := stack.dead():
                said = "; ".join(f"{name}: {stack.last_words(name)}" for name in dead)
                raise RuntimeError(f"{', '.join(dead)} exited ({said}); see {stack.state_dir / 'logs'}")
            why = await not_ready_reasons(stack, service) if tick % 10 == 0 or time.monotonic() > deadline else ""
            if time.monotonic() > deadline:
                raise TimeoutError(f"{service} not ready after {timeout_s:g} s{f': {why}' if why else ''}")
            if tick % 10 == 0:
                say(f"waiting for {service}{f': {why}' if why else ''}")
            await asyncio.sleep(0.1)
    finally:
        await nc.close()


async def _policy_ready(stack: Stack, required: bool, deadline: float) -> None:
    """Ask ``tg.policy.ready`` as the operator; raise (or log) its reason when no usable policy is loaded.

    Asked again until ``deadline`` (``time.monotonic()``) while nothing answers yet: a pull
    left waiting on the consumer by an earlier process can look ready before this one is.
    """
    nc = await connect_once(stack.nats_url, **stack.connect_options(OPERATOR))
    try:
        while True:
            try:
                reply = await nc.request(Rpc.POLICY_READY, b"{}", timeout=5)
                break
            except nats.errors.NoRespondersError:
                if time.monotonic() > deadline:
                    raise TimeoutError("the policy service does not answer tg.policy.ready") from None
                await asyncio.sleep(0.1)
    finally:
        await nc.close()
    readiness = msgspec.json.decode(reply.data, type=Readiness)
    stack.policy_version = readiness.version
    if readiness.ready:
        return
    if required:
        raise PolicyNotReady(f"the policy service is not ready: {readiness.reason}")
    log.warning("the policy service is not ready: %s", readiness.reason)


def _pullers(stack: Stack, service: str) -> int:
    """Pull requests that show every replica of ``service`` serving: one per replica (the audit: its writer's)."""
    return 1 if service == "audit" else max(1, len(stack.replicas(service)))


async def _ready(nc: Client, js: JetStreamContext, service: str, pullers: int = 1) -> bool:
    if service == "registry":
        try:
            await nc.request(Rpc.REGISTRY_LIST, b"{}", timeout=1)
        except (nats.errors.TimeoutError, nats.errors.NoRespondersError):
            return False
        return True
    try:
        info = await js.consumer_info(catalog.STREAM, _CONSUMERS[service].durable)
    except (NotFoundError, nats.errors.TimeoutError):
        return False
    return (info.num_waiting or 0) >= pullers
