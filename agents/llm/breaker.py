"""A circuit breaker per model endpoint, shared by every process through Redis.

    closed ──(N consecutive health failures)──> open ──(cooldown)──> half-open
       ^                                                                 │
       └──────────────── the one probe succeeds ─────────────────────────┘
                         (the probe fails: open again, a new cooldown)

Only endpoint-health failures count (timeouts, connection errors, 5xx); a 4xx, a 429 or
invalid JSON means the server is up and answering. While open, calls fail at once with
`LLMCircuitOpen` instead of each waiting out its own timeout. The state lives on the cache's
Redis database, so Daphne and every Celery worker see the same breaker. If Redis itself
cannot be reached the breaker lets calls through: it protects the model server, it must not
become a second way to fail.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

import redis
from django.conf import settings
from redis.backoff import NoBackoff
from redis.retry import Retry

from agents.llm.errors import LLMCircuitOpen

logger = logging.getLogger(__name__)

KEY_PREFIX = "coaching:breaker"
# Redis answers in well under a millisecond; a breaker that waits longer than this for it is
# worse than none, so the call goes ahead (fail open).
REDIS_TIMEOUT_S = 0.5

# KEYS[1] state hash, KEYS[2] probe lock; ARGV: now, threshold, ttl. Returns 1 when this
# failure opened (or re-opened) the breaker. One script, so two processes failing at once
# cannot both miss the threshold or both re-open it.
_RECORD_FAILURE = """
local failures = redis.call('HINCRBY', KEYS[1], 'failures', 1)
local opened_at = redis.call('HGET', KEYS[1], 'opened_at')
local probing = redis.call('EXISTS', KEYS[2])
redis.call('EXPIRE', KEYS[1], ARGV[3])
if (not opened_at and failures >= tonumber(ARGV[2])) or probing == 1 then
  redis.call('HSET', KEYS[1], 'opened_at', ARGV[1])
  redis.call('DEL', KEYS[2])
  return 1
end
return 0
"""


def make_client(url: str) -> redis.Redis:
    # No retries: redis-py's default retries with backoff would make every model call wait
    # seconds on a Redis outage, exactly when failing open should cost nothing.
    return redis.Redis.from_url(
        url, socket_timeout=REDIS_TIMEOUT_S, socket_connect_timeout=REDIS_TIMEOUT_S, retry=Retry(NoBackoff(), 0)
    )


@functools.lru_cache(maxsize=4)
def _client(url: str) -> redis.Redis:
    return make_client(url)


def redis_url() -> str:
    # The cache's logical database: short-lived shared state, like the per-user limits.
    return f"{settings.REDIS_URL}/{settings.REDIS_DB_BASE + 3}"


@dataclass(frozen=True)
class BreakerState:
    state: str  # "closed", "open" or "half_open"
    failures: int
    opened_at: float | None


class CircuitBreaker:
    """The breaker of one endpoint. `clock` is injectable so tests need not sleep."""

    def __init__(
        self,
        name: str,
        *,
        client: redis.Redis,
        threshold: int,
        cooldown_s: float,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.name = name
        self.client = client
        self.threshold = max(1, threshold)
        self.cooldown_s = cooldown_s
        self.clock = clock
        self.key = f"{KEY_PREFIX}:{name}"
        self.probe_key = f"{KEY_PREFIX}:{name}:probe"
        # State outlives a quiet period by far less than a day; nothing needs it longer.
        self.ttl_s = max(3600, int(cooldown_s * 10))

    def state(self) -> BreakerState:
        try:
            raw: dict[bytes, bytes] = self.client.hgetall(self.key)  # type: ignore[assignment]  # sync client
        except redis.RedisError:
            return BreakerState("closed", 0, None)
        failures = int(raw.get(b"failures", 0))
        opened = raw.get(b"opened_at")
        if opened is None:
            return BreakerState("closed", failures, None)
        opened_at = float(opened)
        state = "open" if self.clock() < opened_at + self.cooldown_s else "half_open"
        return BreakerState(state, failures, opened_at)

    def before_call(self) -> None:
        """Raise LLMCircuitOpen unless a call may go ahead (closed, or the half-open probe)."""
        current = self.state()
        if current.state == "closed":
            return
        if current.state == "half_open":
            try:
                # One probe at a time across all processes; the lock expires with the cooldown
                # so a probe whose process died does not keep the breaker half-open for ever.
                if self.client.set(self.probe_key, "1", nx=True, ex=max(1, int(self.cooldown_s))):
                    logger.info("circuit breaker %s half-open: letting one probe through", self.name)
                    return
            except redis.RedisError:
                return
        raise LLMCircuitOpen(self.name, retry_after_s=self.retry_after(current))

    def retry_after(self, current: BreakerState) -> float:
        if current.opened_at is None:
            return 0.0
        return max(0.0, current.opened_at + self.cooldown_s - self.clock())

    def record_success(self) -> None:
        try:
            if self.client.delete(self.key, self.probe_key):
                logger.info("circuit breaker %s closed", self.name)
        except redis.RedisError:
            pass

    def record_failure(self) -> bool:
        """Count a health failure; True when this one opened the breaker."""
        try:
            opened = self.client.eval(
                _RECORD_FAILURE, 2, self.key, self.probe_key, repr(self.clock()), self.threshold, self.ttl_s
            )
        except redis.RedisError:
            return False
        if opened:
            logger.warning("circuit breaker %s opened for %.0f s", self.name, self.cooldown_s)
        return bool(opened)

    def reset(self) -> None:
        self.record_success()


def for_endpoint(name: str) -> CircuitBreaker:
    return CircuitBreaker(
        name,
        client=_client(redis_url()),
        threshold=settings.COACHING_LLM_BREAKER_THRESHOLD,
        cooldown_s=settings.COACHING_LLM_BREAKER_COOLDOWN_S,
    )


def open_endpoints(names: list[str]) -> list[str]:
    """Which of these endpoints are failing fast right now (open; half-open counts as open
    for the coachee: most calls are still refused)."""
    return [name for name in dict.fromkeys(names) if for_endpoint(name).state().state != "closed"]


def reset_all() -> None:
    """Forget every breaker (tests, and an operator after fixing an endpoint)."""
    client = _client(redis_url())
    try:
        keys = list(client.scan_iter(match=f"{KEY_PREFIX}:*"))
        if keys:
            client.delete(*keys)
    except redis.RedisError:
        logger.warning("could not reset the circuit breakers: Redis is unreachable")
