"""Handoffs between a turn's stages: a step queued before its input exists waits here for it.

Queuing a step only once its input exists puts a whole hop on the turn's critical path: the
publish, the pickup and the step's own reads (the benchmark measured 28 ms from Shadow's end to
the first specialist's model call, the three starting at once in one process, and ~20 ms from
Coach's prefix to Shadow's call). So steps are queued early, read what they can, and wait:

- `PREFIX`: Shadow, queued when the turn is accepted, waits for the shared prefix that Coach
  is building in Daphne (given once it is stored, or when Coach will not build it);
- `SHADOW`: the trio, queued as Shadow's model call starts, waits for Shadow's findings (given
  once Shadow's run is committed, before its blackboard write, or Shadow failed, or the turn
  ended);
- `TRIO`: Synth, queued with the trio, waits for the three specialists (each gives when its
  run has ended, whatever the outcome): partial fan-in at the specialists' stage deadline.

A handoff is a Redis list per (turn, stage, taker): `give` pushes a token onto each taker's
list; `wait` blocks on its own (BLPOP) in short slices and between slices asks the database
(`done`) whether the stage already ended: a token lost with Redis, or taken by an earlier
delivery of a redelivered task, costs at most a slice. A wait always returns by its deadline;
the step then goes on without the input (Shadow builds the prefix itself; a specialist runs
without Shadow's findings, as when Shadow fails).
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

from agents.models import SPECIALISTS

logger = logging.getLogger(__name__)

PREFIX = "prefix"
SHADOW = "shadow"
TRIO = "trio"
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


def _token_key(turn_id: int, stage: str, taker: str) -> str:
    return f"coaching:handoff:{turn_id}:{stage}:{taker}"


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


def forget(turn_id: int) -> None:
    """The turn has ended: drop its tokens and its queued mark (they would expire anyway)."""
    keys = [_queued_key(turn_id), _token_key(turn_id, PREFIX, "shadow")]
    keys += [_token_key(turn_id, SHADOW, agent) for agent in SPECIALISTS]
    keys.append(_token_key(turn_id, TRIO, "synth"))
    with contextlib.suppress(redis.RedisError):
        _redis().delete(*keys)


def give(turn_id: int, stage: str, takers: Iterable[str]) -> None:
    """`stage` of this turn has ended (or will not come): the waiting takers go on."""
    try:
        pipe = _redis().pipeline(transaction=False)
        for taker in takers:
            pipe.rpush(_token_key(turn_id, stage, taker), 1)
            pipe.expire(_token_key(turn_id, stage, taker), TOKEN_TTL_S)
        pipe.execute()
    except redis.RedisError as exc:
        logger.warning("handoff %s of turn %s not given (%s); takers will ask the database", stage, turn_id, exc)


def wait(turn_id: int, stage: str, taker: str, *, deadline: float, done: Callable[[], bool], tokens: int = 1) -> bool:
    """Block until `tokens` handoffs of `stage` reach `taker` (Synth waits for three), `done()`
    says the stage already ended, or the deadline (epoch seconds) passes. True when the stage
    ended; False at the deadline."""
    key = _token_key(turn_id, stage, taker)
    received = 0
    while True:
        remaining = deadline - time.time()
        if remaining <= 0:
            return False
        wait_s = min(SLICE_S, remaining)
        try:
            if _redis().blpop([key], timeout=wait_s) is not None:
                received += 1
                if received >= tokens:
                    return True
                continue
        except redis.RedisError as exc:
            logger.warning("handoff %s of turn %s: Redis failed (%s); asking the database", stage, turn_id, exc)
            time.sleep(wait_s)
        if done():
            return True
