"""Shadow → trio handoff: the trio is queued while Shadow runs and waits here for its findings.

Queuing the trio only when Shadow's task returns put a whole Celery hop on the turn's critical
path: the chord's publish, the pickup and each specialist's own reads, with the three starting
at once in one process (the benchmark measured 28 ms from Shadow's end to the first
specialist's model call). Shadow's task queues the trio (and Synth, the chord's body) as it
starts its model call instead; each specialist reads what it needs while Shadow's model works,
then waits for this handoff, given once Shadow's run and blackboard write are committed (or
Shadow failed, or the turn ended).

The handoff is a Redis list per (turn, specialist): `give` pushes a token onto each; `wait`
blocks on its own (BLPOP) in short slices and between slices asks the database (`done`)
whether Shadow already ended: a token lost with Redis, or taken by an earlier delivery of a
redelivered task, costs at most a slice. A wait always returns by its deadline (the Shadow
stage's); the specialist then goes on without the findings, as when Shadow fails.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import time
from collections.abc import Callable, Iterable

import redis
from django.conf import settings
from redis.backoff import NoBackoff
from redis.retry import Retry

logger = logging.getLogger(__name__)

# A wait asks the database after this long without a token.
SLICE_S = 1.0
# Tokens nobody took (a specialist skipped, or already done) disappear after this long.
TOKEN_TTL_S = 300


@functools.lru_cache(maxsize=4)
def _client(url: str) -> redis.Redis:
    # The socket must outlast a blocking slice; no retries: a Redis outage falls back to `done`.
    return redis.Redis.from_url(
        url, socket_timeout=SLICE_S + 2.0, socket_connect_timeout=0.5, retry=Retry(NoBackoff(), 0)
    )


def _redis() -> redis.Redis:
    return _client(f"{settings.REDIS_URL}/{settings.REDIS_DB_BASE + 3}")


def _token_key(turn_id: int, taker: str) -> str:
    return f"coaching:handoff:{turn_id}:shadow:{taker}"


def _queued_key(turn_id: int) -> str:
    return f"coaching:handoff:{turn_id}:trio-queued"


def queue_once(turn_id: int, publish: Callable[[], None]) -> bool:
    """Run `publish` (queue the trio) unless it already ran for this turn; True if it ran now.
    If it raises, the mark is taken back so a later call can try again."""
    client = _redis()
    if not client.set(_queued_key(turn_id), 1, nx=True, ex=TOKEN_TTL_S):
        return False
    try:
        publish()
    except BaseException:
        client.delete(_queued_key(turn_id))
        raise
    return True


def forget(turn_id: int, takers: Iterable[str]) -> None:
    """The turn has ended: drop its tokens and its queued mark (they would expire anyway)."""
    with contextlib.suppress(redis.RedisError):
        _redis().delete(_queued_key(turn_id), *(_token_key(turn_id, taker) for taker in takers))


def give(turn_id: int, takers: Iterable[str]) -> None:
    """Shadow has ended (or will not run): the waiting specialists go on."""
    try:
        pipe = _redis().pipeline(transaction=False)
        for taker in takers:
            pipe.rpush(_token_key(turn_id, taker), 1)
            pipe.expire(_token_key(turn_id, taker), TOKEN_TTL_S)
        pipe.execute()
    except redis.RedisError as exc:
        logger.warning("handoff of turn %s not given (%s); the trio will ask the database", turn_id, exc)


def wait(turn_id: int, taker: str, *, deadline: float, done: Callable[[], bool]) -> bool:
    """Block until the handoff reaches `taker`, `done()` says Shadow already ended, or the
    deadline (epoch seconds) passes. True when Shadow ended; False at the deadline."""
    key = _token_key(turn_id, taker)
    while True:
        remaining = deadline - time.time()
        if remaining <= 0:
            return False
        wait_s = min(SLICE_S, remaining)
        try:
            if _redis().blpop([key], timeout=wait_s) is not None:
                return True
        except redis.RedisError as exc:
            logger.warning("handoff of turn %s: Redis failed (%s); asking the database", turn_id, exc)
            time.sleep(wait_s)
        if done():
            return True
