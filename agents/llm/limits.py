"""Each endpoint's max concurrency, held across every process: a lease semaphore in Redis.

The design of LiteLLM's `parallel_request_limiter_v3`: one sorted set per endpoint holds the
slots in use, each a random id scored by when its lease expires. One Lua script prunes expired
slots, counts and adds, on Redis's own clock (so the hosts' clocks never matter and two
processes cannot both take the last slot). A worker that dies mid-call leaves a slot that expires
with its lease (the call's own timeout plus a margin), so a crash heals by itself. Release
removes exactly that id: a second release, or one after the lease expired, changes nothing.

A per-process limit (LiteLLM Router's `max_parallel_requests`) overshoots by the number of
processes; this one does not, which is what tests/test_routing.py checks with two workers.

If Redis cannot be reached the call goes ahead without a slot, as the circuit breaker does:
the limit protects the model server, it must not become a second way to fail.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass

import redis

from agents.llm import breaker
from agents.llm.errors import LLMTransientError

logger = logging.getLogger(__name__)

KEY_PREFIX = "coaching:slots"
# Added to a lease beyond the call's own timeout: the release after a call that used its whole
# timeout must still find its slot (a slot expiring under a live call would let one more in).
LEASE_MARGIN_S = 5.0
# How often a waiting call asks again. A model call takes seconds; 25 ms of polling delay is
# noise there, and ~40 tiny scripts a second per waiter are nothing for Redis.
POLL_S = 0.025
# A waiting call asks `give_up` (the endpoint's breaker) this often: a server that started
# failing while calls queued for it sends them on to a fallback instead of to the deadline.
GIVE_UP_CHECK_S = 0.1

# KEYS[1] the endpoint's slot set; ARGV: slot id, limit, lease ms. Returns 1 when the slot was
# taken. Scores are expiry times in ms on Redis's clock (TIME): no host clock is involved.
_ACQUIRE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[2]) then
  return 0
end
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[3]), ARGV[1])
local last = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
redis.call('PEXPIREAT', KEYS[1], math.floor(tonumber(last[2])) + 1000)
return 1
"""

# KEYS[1] the slot set. The number of slots in use, expired ones left out.
_IN_USE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
return redis.call('ZCARD', KEYS[1])
"""


class LLMSlotTimeout(LLMTransientError):
    """Every slot of the endpoint stayed taken until the stage's deadline: the call was not made."""

    code = "llm_busy"

    def __init__(self, endpoint: str, *, waited_s: float) -> None:
        super().__init__(f"endpoint {endpoint} had no free slot for {waited_s:.1f} s (its max concurrency)")
        self.endpoint = endpoint
        self.waited_s = waited_s


def _key(endpoint: str) -> str:
    return f"{KEY_PREFIX}:{endpoint}"


def _client() -> redis.Redis:
    # The breaker's Redis database and client: the same short timeouts and no retries.
    return breaker._client(breaker.redis_url())


@dataclass
class Lease:
    """One slot of one endpoint, held for one call (or no slot: `slot` is None)."""

    endpoint: str
    slot: str | None
    waited_s: float

    def release(self) -> None:
        if self.slot is None:
            return
        slot, self.slot = self.slot, None
        try:
            _client().zrem(_key(self.endpoint), slot)
        except redis.RedisError:
            logger.warning("could not release a slot of %s; it expires with its lease", self.endpoint)

    async def arelease(self) -> None:
        if self.slot is not None:
            await asyncio.to_thread(self.release)


def _try_take(endpoint: str, slot: str, limit: int, lease_s: float) -> bool | None:
    """True: taken; False: all slots in use; None: Redis is unreachable (go ahead without one)."""
    try:
        return bool(_client().eval(_ACQUIRE, 1, _key(endpoint), slot, limit, int(lease_s * 1000)))
    except redis.RedisError:
        logger.warning("concurrency limit of %s not applied: Redis is unreachable", endpoint)
        return None


def _lease_s(deadline: float, timeout_s: float | None) -> float:
    call_s = timeout_s if timeout_s is not None else max(0.0, deadline - time.time())
    return call_s + LEASE_MARGIN_S


GiveUp = Callable[[], None]


def acquire(
    endpoint: str, limit: int, *, deadline: float, timeout_s: float | None = None, give_up: GiveUp | None = None
) -> Lease:
    """Wait for a slot of `endpoint` until `deadline` (epoch seconds); the lease lasts the call's
    `timeout_s` (or until the deadline) plus a margin. A limit below 1 means no limit.
    `give_up` is called now and then while waiting; whatever it raises ends the wait."""
    started = time.monotonic()
    if limit < 1:
        return Lease(endpoint, None, 0.0)
    slot = uuid.uuid4().hex
    checked = started
    while True:
        if give_up is not None and time.monotonic() - checked >= GIVE_UP_CHECK_S:
            checked = time.monotonic()
            give_up()
        taken = _try_take(endpoint, slot, limit, _lease_s(deadline, timeout_s))
        waited = time.monotonic() - started
        if taken is None:
            return Lease(endpoint, None, waited)
        if taken:
            return Lease(endpoint, slot, waited)
        if time.time() + POLL_S >= deadline:
            raise LLMSlotTimeout(endpoint, waited_s=waited)
        time.sleep(POLL_S)


async def aacquire(
    endpoint: str, limit: int, *, deadline: float, timeout_s: float | None = None, give_up: GiveUp | None = None
) -> Lease:
    """`acquire` for the event loop (Coach): each attempt in a worker thread, waits on the loop."""
    started = time.monotonic()
    if limit < 1:
        return Lease(endpoint, None, 0.0)
    slot = uuid.uuid4().hex
    checked = started
    while True:
        if give_up is not None and time.monotonic() - checked >= GIVE_UP_CHECK_S:
            checked = time.monotonic()
            await asyncio.to_thread(give_up)
        taken = await asyncio.to_thread(_try_take, endpoint, slot, limit, _lease_s(deadline, timeout_s))
        waited = time.monotonic() - started
        if taken is None:
            return Lease(endpoint, None, waited)
        if taken:
            return Lease(endpoint, slot, waited)
        if time.time() + POLL_S >= deadline:
            raise LLMSlotTimeout(endpoint, waited_s=waited)
        await asyncio.sleep(POLL_S)


def in_use(endpoint: str) -> int:
    """Slots of `endpoint` held right now, across every process (the admin and tests read it)."""
    return int(_client().eval(_IN_USE, 1, _key(endpoint)))  # type: ignore[arg-type]  # sync client


def reset_all() -> None:
    """Forget every slot (tests)."""
    client = _client()
    try:
        keys = list(client.scan_iter(match=f"{KEY_PREFIX}:*"))
        if keys:
            client.delete(*keys)
    except redis.RedisError:
        logger.warning("could not reset the concurrency slots: Redis is unreachable")
