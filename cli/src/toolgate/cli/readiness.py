"""Waiting for a local stack's services: each answers or pulls from its consumer, and the policy is usable."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING

import msgspec
import nats
from nats.aio.client import Client
from nats.js.errors import NotFoundError

from toolgate.contracts import catalog
from toolgate.contracts.catalog import Rpc
from toolgate.contracts.errors import Problem
from toolgate.contracts.listing import Readiness
from toolgate.contracts.nats_permissions import OPERATOR
from toolgate.shared.connections import connect_once

if TYPE_CHECKING:
    from toolgate.cli.stack import Stack

__all__ = ["PolicyNotReady", "wait_ready"]

log = logging.getLogger("toolgate.stack")

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
    stack: Stack, services: tuple[str, ...], timeout_s: float = 60.0, *, policy_required: bool = True
) -> None:
    """Wait until each service answers (registry, asked as the operator) or pulls from its consumer.

    A consumer is looked at as its own service's user, the only one with that right.

    The policy service must then also answer ``tg.policy.ready`` with ``ready``; with
    ``policy_required=False`` its reason is only logged.

    Raises:
        RuntimeError: a service exited; TimeoutError: not ready in ``timeout_s`` seconds.
        PolicyNotReady: the policy service holds no usable policy (the message says why).
    """
    deadline = time.monotonic() + timeout_s
    for service in services:
        watcher = OPERATOR if service == "registry" else service
        nc = await connect_once(stack.nats_url, **stack.connect_options(watcher))
        try:
            while not await _ready(nc, service):
                if dead := stack.dead():
                    said = "; ".join(f"{name}: {stack.last_words(name)}" for name in dead)
                    raise RuntimeError(f"{', '.join(dead)} exited ({said}); see {stack.state_dir / 'logs'}")
                if time.monotonic() > deadline:
                    raise TimeoutError(f"{service} not ready after {timeout_s}s")
                await asyncio.sleep(0.1)
        finally:
            await nc.close()
        if service == "policy":
            await _policy_ready(stack, policy_required, deadline)


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


async def _ready(nc: Client, service: str) -> bool:
    if service == "registry":
        try:
            await nc.request(Rpc.REGISTRY_LIST, b"{}", timeout=1)
        except (nats.errors.TimeoutError, nats.errors.NoRespondersError):
            return False
        return True
    try:
        info = await nc.jetstream().consumer_info(catalog.STREAM, _CONSUMERS[service].durable)
    except (NotFoundError, nats.errors.TimeoutError):
        return False
    return (info.num_waiting or 0) > 0
