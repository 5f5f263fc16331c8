"""Each endpoint's max concurrency, held across every process: a lease semaphore in Redis.

The design of LiteLLM's `parallel_request_limiter_v3`: one sorted set per endpoint holds the
slots in use, each a random id scored by when its lease expires. One Lua script prunes expired
slots, counts and adds, on Redis's own clock (so the hosts' clocks never matter and two
processes cannot both take the last slot). A worker that dies mid-call leaves a slot that expires
with its lease (the call's own timeout plus a margin), so a crash heals by itself. Release
removes exactly that id: a second release, or one after the lease expired, changes nothing.

A per-process limit (LiteLLM Router's `max_parallel_requests`) overshoots by the number of
processes; this one does not, which is what tests/test_routing.py checks with two workers.

Coach first: a Coach call that finds every slot taken registers as waiting (a second sorted set,
each entry a short lease it renews while it polls), and a background call takes a free slot
only when more slots are free than Coach calls wait. So the next slot that frees goes to Coach,
even when background calls have waited longer and poll just as often. Chosen over a reserved
share of slots for Coach: a reserve wastes capacity when Coach is idle and cannot exist at a
limit of 1 (the embedded llama.cpp server); the waiting set costs one more key per endpoint and
nothing while no Coach call waits. A crashed waiter's entry expires within WAITER_LEASE_MS.

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

# A waiting Coach call's entry lasts this long unless renewed; it renews on every poll (every
# POLL_S), so only a waiter whose process died (or whose event loop stalled for a second) lapses,
# and then background calls are held back by it for at most this long.
WAITER_LEASE_MS = 1000

# KEYS[1] the endpoint's slot set, KEYS[2] its set of waiting Coach calls; ARGV: slot id, limit,
# lease ms, priority (1: Coach, 0: background), waiter lease ms. Returns 1 when the slot was
# taken. Scores are expiry times in ms on Redis's clock (TIME): no host clock is involved.
# A priority call takes any free slot, and registers as waiting when there is none; a
# background call takes one only when more are free than priority calls wait.
_ACQUIRE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
local free = tonumber(ARGV[2]) - redis.call('ZCARD', KEYS[1])
if ARGV[4] == '1' then
  if free < 1 then
    redis.call('ZADD', KEYS[2], now + tonumber(ARGV[5]), ARGV[1])
    redis.call('PEXPIRE', KEYS[2], tonumber(ARGV[5]) + 1000)
    return 0
  end
  redis.call('ZREM', KEYS[2], ARGV[1])
elseif free <= redis.call('ZCARD', KEYS[2]) then
  return 0
end
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[3]), ARGV[1])
local last = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
redis.call('PEXPIREAT', KEYS[1], math.floor(tonumber(last[2])) + 1000)
return 1
"""

# KEYS[1] a slot set (or the waiting set). The number of entries, expired ones left out.
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


def _waiting_key(endpoint: str) -> str:
    return f"{KEY_PREFIX}:{endpoint}:coach-waiting"


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


def _try_take(endpoint: str, slot: str, limit: int, lease_s: float, priority: bool = False) -> bool | None:
    """True: taken; False: all slots in use (or, for a background call, the free ones are
    Coach's); None: Redis is unreachable (go ahead without one)."""
    try:
        return bool(
            _client().eval(
                _ACQUIRE,
                2,
                _key(endpoint),
                _waiting_key(endpoint),
                slot,
                limit,
                int(lease_s * 1000),
                int(priority),
                WAITER_LEASE_MS,
            )
        )
    except redis.RedisError:
        logger.warning("concurrency limit of %s not applied: Redis is unreachable", endpoint)
        return None


def _stop_waiting(endpoint: str, slot: str) -> None:
    """A Coach call that gave up waiting (deadline, open breaker, cancelled) holds nothing back."""
    try:
        _client().zrem(_waiting_key(endpoint), slot)
    except redis.RedisError:
        logger.warning("could not withdraw a waiting call of %s; it expires with its lease", endpoint)


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
    endpoint: str,
    limit: int,
    *,
    deadline: float,
    timeout_s: float | None = None,
    give_up: GiveUp | None = None,
    priority: bool = False,
) -> Lease:
    """`acquire` for the event loop (Coach): each attempt in a worker thread, waits on the loop.
    `priority` (Coach's stream): the next free slot is this call's, ahead of background calls
    that waited longer."""
    started = time.monotonic()
    if limit < 1:
        return Lease(endpoint, None, 0.0)
    slot = uuid.uuid4().hex
    checked = started
    try:
        while True:
            if give_up is not None and time.monotonic() - checked >= GIVE_UP_CHECK_S:
                checked = time.monotonic()
                await asyncio.to_thread(give_up)
            taken = await asyncio.to_thread(_try_take, endpoint, slot, limit, _lease_s(deadline, timeout_s), priority)
            waited = time.monotonic() - started
            if taken is None:
                return Lease(endpoint, None, waited)
            if taken:
                return Lease(endpoint, slot, waited)
            if time.time() + POLL_S >= deadline:
                raise LLMSlotTimeout(endpoint, waited_s=waited)
            await asyncio.sleep(POLL_S)
    except BaseException:
        if priority:
            await asyncio.shield(asyncio.to_thread(_stop_waiting, endpoint, slot))
        raise


def waiting_first(endpoint: str) -> int:
    """Coach calls waiting for a slot of `endpoint` now, lapsed entries left out (tests read it)."""
    return int(_client().eval(_IN_USE, 1, _waiting_key(endpoint)))  # type: ignore[arg-type]  # sync client


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
