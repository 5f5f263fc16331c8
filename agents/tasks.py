"""Celery tasks: thin wrappers over pipeline steps. They take ids and return small dicts
(no coachee text: results live in Redis and must not hold personal data)."""

import logging
from collections.abc import Callable
from typing import Any

from celery import shared_task
from django.conf import settings

from agents import privacy
from agents.memory import compaction
from agents.operations import replay
from agents.pipeline import steps
from agents.turns import dispatch, finish, sessions, summaries

logger = logging.getLogger(__name__)


def _never_raise(step: Callable[[], str], *, turn_id: int, agent: str) -> dict[str, Any]:
    # An unexpected error (a database hiccup) costs this agent only, and the turn degrades: a
    # task that raised would stop the canvas (the chord's callback, Synth, would never run).
    try:
        status = step()
    except Exception:
        logger.exception("%s step crashed on turn %s", agent, turn_id)
        status = "crashed"
    return {"turn_id": turn_id, "agent": agent, "status": status}


@shared_task(name=dispatch.SHADOW, acks_late=True)
def shadow_task(turn_id: int) -> dict[str, Any]:
    return _never_raise(lambda: steps.shadow_step(turn_id=turn_id), turn_id=turn_id, agent="shadow")


@shared_task(name=dispatch.SPECIALIST, acks_late=True)
def specialist_task(turn_id: int, agent: str) -> dict[str, Any]:
    return _never_raise(lambda: steps.specialist_step(turn_id=turn_id, agent=agent), turn_id=turn_id, agent=agent)


@shared_task(name=dispatch.SYNTH, acks_late=True)
def synth_task(turn_id: int) -> dict[str, Any]:
    try:
        status = steps.synth_step(turn_id=turn_id)
    except Exception:
        # Do not leave the coachee waiting for the watchdog: deliver the fallback now.
        logger.exception("synth step crashed on turn %s", turn_id)
        delivered = finish.turn_fallback(turn_id=turn_id, reason="synth step crashed", missing=["synth"])
        status = "fallback" if delivered else "stale"
    return {"turn_id": turn_id, "agent": "synth", "status": status}


@shared_task(name=dispatch.TURN_WATCHDOG, acks_late=True)
def turn_watchdog_task(turn_id: int) -> dict[str, Any]:
    return {"turn_id": turn_id, "expired": finish.turn_expire(turn_id=turn_id)}


@shared_task(name="coaching.expire_overdue_turns")
def expire_overdue_turns_task() -> dict[str, Any]:
    return {"expired": finish.overdue_turns_expire()}


# Its time limits come with each job (operations.replay.replay_job_start: they grow with its runs).
@shared_task(name="coaching.prompt_replay", acks_late=True)
def prompt_replay_task(job_id: int) -> dict[str, Any]:
    replay.replay_job_run(job_id)
    return {"job_id": job_id}


@shared_task(name="coaching.prune_raw_outputs")
def prune_raw_outputs_task() -> dict[str, Any]:
    return {"pruned": privacy.raw_outputs_prune(older_than_days=settings.COACHING_RAW_RETENTION_DAYS)}


# --- Memory: summaries between and inside sessions --------------------------------------


@shared_task(
    name=dispatch.SUMMARY_WRITE,
    acks_late=True,
    soft_time_limit=summaries.SUMMARY_TIME_LIMIT_S - 60,
    time_limit=summaries.SUMMARY_TIME_LIMIT_S,
)
def summary_write_task(session_id: int, scope: str, until_seq: int | None) -> dict[str, Any]:
    try:
        summary = compaction.summary_write(session_id=session_id, scope=scope, until_seq=until_seq)
    finally:
        summaries.summary_lease_release(session_id=session_id, scope=scope)
    return {
        "session_id": session_id,
        "scope": scope,
        "summary_id": summary.pk if summary else None,
        "status": summary.status if summary else "nothing to summarise",
    }


@shared_task(name="coaching.sessions_compact_idle")
def sessions_compact_idle_task() -> dict[str, Any]:
    """Beat: end idle sessions (queuing their summaries) and requeue ended ones never summarised."""
    ended = sessions.idle_sessions_end(idle_minutes=settings.COACHING_SESSION_IDLE_MINUTES)
    requeued = summaries.unsummarised_sessions_queue()
    return {"ended": ended, "requeued": requeued}
