"""Per-user limits counted in Redis: turns a minute, and the sockets one user may hold open."""

from __future__ import annotations

import functools
import time

import redis
from django.conf import settings
from django.core.cache import cache

# The rate limit counts messages in fixed windows of this many seconds.
RATE_WINDOW_S = 60


# Open sockets are leases, not a counter: each socket is a member of its user's sorted set
# (channel name → when its lease ends) and renews its lease while it lives. Whatever ends a
# socket without a clean close (a crashed consumer, a killed process) stops counting within a
# lease; a counter that missed one decrement stayed high for an hour (the probe's finding 4).
SOCKET_LEASE_S = 60


SOCKET_LEASE_RENEW_S = 20


def turn_rate_allows(*, user_id: int) -> bool:
    """One more message this minute? A fixed one-minute window per user."""
    key = f"coaching:turns:{user_id}:{int(time.time() // RATE_WINDOW_S)}"
    cache.add(key, 0, timeout=120)
    return int(cache.incr(key)) <= settings.COACHING_TURNS_PER_MINUTE


def rate_window_ends() -> float:
    """When the current rate-limit window ends (epoch seconds)."""
    return (time.time() // RATE_WINDOW_S + 1) * RATE_WINDOW_S


@functools.lru_cache(maxsize=4)
def _redis_client(url: str) -> redis.Redis:
    return redis.Redis.from_url(url, socket_timeout=2.0, socket_connect_timeout=1.0)


def _redis() -> redis.Redis:
    # The cache's database; raw commands, since Django's cache API has no sorted sets.
    return _redis_client(f"{settings.REDIS_URL}/{settings.REDIS_DB_BASE + 3}")


def _sockets_key(user_id: int) -> str:
    return f"coaching:sockets:{user_id}"


def socket_open_allowed(*, user_id: int, socket_id: str) -> bool:
    """Take a lease for a new socket of this user; False (and no lease) when too many are open."""
    key = _sockets_key(user_id)
    now = time.time()
    pipe = _redis().pipeline(transaction=True)
    pipe.zremrangebyscore(key, "-inf", now)
    pipe.zadd(key, {socket_id: now + SOCKET_LEASE_S})
    pipe.zcard(key)
    pipe.expire(key, SOCKET_LEASE_S)
    count = int(pipe.execute()[2])
    if count > settings.COACHING_MAX_SOCKETS_PER_USER:
        _redis().zrem(key, socket_id)
        return False
    return True


def socket_lease_renew(*, user_id: int, socket_id: str) -> None:
    key = _sockets_key(user_id)
    pipe = _redis().pipeline(transaction=True)
    pipe.zadd(key, {socket_id: time.time() + SOCKET_LEASE_S})
    pipe.expire(key, SOCKET_LEASE_S)
    pipe.execute()


def socket_closed(*, user_id: int, socket_id: str) -> None:
    _redis().zrem(_sockets_key(user_id), socket_id)


def sockets_open(*, user_id: int) -> int:
    """Sockets of this user holding a live lease."""
    count: int = _redis().zcount(_sockets_key(user_id), time.time(), "+inf")  # type: ignore[assignment]
    return count


def sockets_forget(*, user_id: int) -> None:
    _redis().delete(_sockets_key(user_id))
