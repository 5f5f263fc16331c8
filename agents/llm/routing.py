"""Role → endpoint routing: an agent's primary endpoint, then its ordered fallbacks.

A fallback is tried when the endpoint before it refuses at once (its breaker is open) or a
call fails before its first token. Every call holds one of its endpoint's slots (limits.py)
while it runs; the wait for it is bounded by the caller's deadline and reported.

Streams (Coach) fall back only before the first content token. After it, a failure is the
caller's to show (an error with Retry): a reply spliced from a second model would read as one
answer that no model wrote.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from django.conf import settings

from agents.llm import breaker, limits
from agents.llm.client import Completion, EndpointSpec
from agents.llm.errors import LLMCircuitOpen, LLMError, LLMOutputError, LLMRequestsDisabled, LLMTransientError

if TYPE_CHECKING:
    from agents.models import AgentConfig

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Route:
    """One endpoint an agent may be served by, with its concurrency limit."""

    spec: EndpointSpec
    max_concurrency: int
    endpoint_id: int | None = None
    trusted_for_coachee_data: bool = False


@dataclass
class RouteReport:
    """What routing did for one call (or one agent run's calls): recorded on the AgentRun."""

    served: Route | None = None
    slot_wait_s: float = 0.0
    failed: list[str] = field(default_factory=list)  # "endpoint: error code", in order

    @property
    def slot_wait_ms(self) -> int:
        return int(self.slot_wait_s * 1000)

    def fell_back(self, primary: Route) -> bool:
        return self.served is not None and self.served.spec.name != primary.spec.name


def cache_salt_for(coachee_id: int) -> str:
    """The coachee's prefix-cache salt: secret (keyed by SECRET_KEY, so no one can compute
    another coachee's and probe the cache with it), stable (their own turns share a prefix),
    64 hex characters (vLLM takes at most 128, no '@', '/' or '\\')."""
    key = settings.SECRET_KEY.encode()
    return hmac.new(key, f"cache-salt:{coachee_id}".encode(), hashlib.sha256).hexdigest()


def routes_for(config: AgentConfig) -> list[Route]:
    """The agent's primary endpoint, then its fallbacks in order (each endpoint once).

    Reads `config.fallbacks` (prefetched by the turn cache; one query otherwise)."""
    endpoints = [config.endpoint, *(f.endpoint for f in config.fallbacks.all())]
    routes: list[Route] = []
    for endpoint in endpoints:
        if any(r.spec.name == endpoint.name for r in routes):
            continue
        routes.append(
            Route(
                EndpointSpec.from_endpoint(endpoint),
                endpoint.max_concurrency,
                endpoint.pk,
                endpoint.trusted_for_coachee_data,
            )
        )
    return routes


def falls_back_on(exc: LLMError) -> bool:
    """Does this failure send the call to the next endpoint?

    Anything about the endpoint (open breaker, unreachable, timeout, 5xx, 429, a 4xx from a
    misconfigured server) does; an answer that came but is unusable is the repair's business,
    and requests switched off stay off."""
    return not isinstance(exc, (LLMOutputError, LLMRequestsDisabled))


def _refuse_if_open(endpoint: str) -> limits.GiveUp:
    """For a call waiting for a slot: stop waiting once the endpoint's breaker has opened (the
    calls ahead are failing), so the call moves on to a fallback or fails fast."""

    def check() -> None:
        circuit = breaker.for_endpoint(endpoint)
        current = circuit.state()
        if current.state == "open":
            raise LLMCircuitOpen(endpoint, retry_after_s=circuit.retry_after(current))

    return check


def first_available(routes: list[Route]) -> tuple[list[Route], LLMError | None]:
    """Routes from the first whose breaker lets a call through (asking it, as `before_call`
    does: a half-open breaker's one probe is taken here), and the refusal when none does."""
    refusal: LLMError | None = None
    for index, route in enumerate(routes):
        try:
            breaker.for_endpoint(route.spec.name).before_call()
        except LLMError as exc:
            refusal = exc
            continue
        return routes[index:], None
    return routes, refusal


def complete_routed(
    routes: list[Route],
    call: Callable[[EndpointSpec, float], Completion],
    *,
    deadline: float,
    report: RouteReport,
) -> Completion:
    """One completion from the first endpoint that gives one. `call(spec, timeout_s)` makes
    the request; it raises LLMError subclasses (client.chat_complete)."""
    last: LLMError | None = None
    for route in routes:
        remaining = deadline - time.time()
        if remaining <= 0:
            break
        try:
            lease = limits.acquire(
                route.spec.name,
                route.max_concurrency,
                deadline=deadline,
                timeout_s=remaining,
                give_up=_refuse_if_open(route.spec.name),
            )
        except LLMCircuitOpen as exc:
            last = exc
            report.failed.append(f"{route.spec.name}: {exc.code}")
            continue
        report.slot_wait_s += lease.waited_s
        try:
            completion = call(route.spec, max(0.1, deadline - time.time()))
        except LLMError as exc:
            if not falls_back_on(exc):
                raise
            last = exc
            report.failed.append(f"{route.spec.name}: {exc.code}")
            logger.warning("%s failed (%s); trying the next endpoint", route.spec.name, exc.code)
            continue
        finally:
            lease.release()
        report.served = route
        return completion
    if last is None:
        raise LLMTransientError("no time left before the stage deadline")
    raise last


async def stream_routed(
    routes: list[Route],
    open_stream: Callable[[Route, int], AsyncIterator[str]],
    *,
    deadline: float,
    report: RouteReport,
) -> AsyncIterator[str]:
    """The pieces of one streamed reply. `open_stream(route, index)` starts the request on a
    route (index 0 is the first tried). Before the first content piece a failure moves on to
    the next route; after it the failure is raised to the caller."""
    last: LLMError | None = None
    for index, route in enumerate(routes):
        if deadline - time.time() <= 0:
            break
        try:
            # Coach's stream takes the endpoint's next free slot ahead of background calls.
            lease = await limits.aacquire(
                route.spec.name,
                route.max_concurrency,
                deadline=deadline,
                give_up=_refuse_if_open(route.spec.name),
                priority=True,
            )
        except LLMCircuitOpen as exc:
            last = exc
            report.failed.append(f"{route.spec.name}: {exc.code}")
            continue
        report.slot_wait_s += lease.waited_s
        stream = open_stream(route, index)
        try:
            try:
                first = await anext(aiter(stream))
            except StopAsyncIteration:
                report.served = route  # an empty reply is still this endpoint's answer
                return
            except LLMError as exc:
                if not falls_back_on(exc):
                    raise
                last = exc
                report.failed.append(f"{route.spec.name}: {exc.code}")
                logger.warning(
                    "%s failed before its first token (%s); trying the next endpoint", route.spec.name, exc.code
                )
                continue
            report.served = route
            yield first
            async for piece in stream:
                yield piece
            return
        finally:
            await stream.aclose()  # type: ignore[attr-defined]  # async generators have aclose
            await lease.arelease()
    if last is None:
        raise LLMTransientError("no time left before the deadline")
    raise last
