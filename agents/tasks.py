"""Celery tasks: thin wrappers over pipeline steps. They take ids and return small dicts
(no coachee text: results live in Redis and must not hold personal data)."""

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from celery import group, shared_task
from django.conf import settings

from agents import compaction, handoff, pipeline, privacy, prompt_ops, services
from agents.models import SPECIALISTS, Agent

logger = logging.getLogger(__name__)

# Seconds after the deadline before the watchdog looks: the normal path finishes
# inside the deadline, so the watchdog only ever acts on a turn that is really stuck.
WATCHDOG_GRACE_S = 1.0
# Shadow's task waits this long at most for the trio's early publish before trying it itself
# (Celery's publish retries take a few seconds when the broker is down).
EARLY_QUEUE_JOIN_S = 10.0
# How long after Shadow's model call starts the trio is queued (trio_queue_soon).
TRIO_QUEUE_DELAY_S = 0.015


def _never_raise(step: Callable[[], str], *, turn_id: int, agent: str) -> dict[str, Any]:
    # An unexpected error (a database hiccup) costs this agent only, and the turn degrades:
    # the next stage is told all the same (the handoffs are given whatever the outcome).
    try:
        status = step()
    except Exception:
        logger.exception("%s step crashed on turn %s", agent, turn_id)
        status = "crashed"
    return {"turn_id": turn_id, "agent": agent, "status": status}


@shared_task(name="coaching.shadow", acks_late=True)
def shadow_task(turn_id: int) -> dict[str, Any]:
    early: list[threading.Thread] = []
    result = _never_raise(
        lambda: pipeline.shadow_step(
            turn_id=turn_id, prefix_from_coach=True, before_call=lambda: early.append(trio_queue_soon(turn_id))
        ),
        turn_id=turn_id,
        agent="shadow",
    )
    # Whatever became of Shadow: the trio is queued (if queuing it early failed) and goes on.
    if result["status"] != "succeeded":
        handoff.give(turn_id, handoff.SHADOW, SPECIALISTS)
    for thread in early:
        thread.join(EARLY_QUEUE_JOIN_S)  # its outcome first: a publish in flight holds the once-mark
    try:
        trio_queue(turn_id)
    except Exception:
        logger.exception("could not queue the trio of turn %s", turn_id)
        services.turn_fallback(
            turn_id=turn_id,
            reason="the turn's agents could not be queued",
            missing=["persona", "plasticity", "stability", "synth"],
        )
    return result


@shared_task(name="coaching.specialist", acks_late=True)
def specialist_task(turn_id: int, agent: str) -> dict[str, Any]:
    try:
        return _never_raise(
            lambda: pipeline.specialist_step(turn_id=turn_id, agent=agent, after_shadow=True),
            turn_id=turn_id,
            agent=agent,
        )
    finally:
        handoff.give(turn_id, handoff.TRIO, [Agent.SYNTH])  # this specialist is done, one way or another


@shared_task(name="coaching.synth", acks_late=True)
def synth_task(turn_id: int) -> dict[str, Any]:
    try:
        status = pipeline.synth_step(turn_id=turn_id, after_trio=True)
    except Exception:
        # Do not leave the coachee waiting for the watchdog: deliver the fallback now.
        logger.exception("synth step crashed on turn %s", turn_id)
        delivered = services.turn_fallback(turn_id=turn_id, reason="synth step crashed", missing=["synth"])
        status = "fallback" if delivered else "stale"
    return {"turn_id": turn_id, "agent": "synth", "status": status}


@shared_task(name="coaching.turn_watchdog", acks_late=True)
def turn_watchdog_task(turn_id: int) -> dict[str, Any]:
    return {"turn_id": turn_id, "expired": services.turn_expire(turn_id=turn_id)}


@shared_task(name="coaching.expire_overdue_turns")
def expire_overdue_turns_task() -> dict[str, Any]:
    return {"expired": services.overdue_turns_expire()}


# Its time limits come with each job (prompt_ops.replay_job_start: they grow with its runs).
@shared_task(name="coaching.prompt_replay", acks_late=True)
def prompt_replay_task(job_id: int) -> dict[str, Any]:
    prompt_ops.replay_job_run(job_id)
    return {"job_id": job_id}


@shared_task(name="coaching.prune_raw_outputs")
def prune_raw_outputs_task() -> dict[str, Any]:
    return {"pruned": privacy.raw_outputs_prune(older_than_days=settings.COACHING_RAW_RETENTION_DAYS)}


def trio_canvas(turn_id: int) -> Any:
    """persona | plasticity | stability | synth, queued together while Shadow runs: each
    specialist waits for Shadow's findings, Synth (arbitration, critic gate, delivery) for the
    three specialists, through handoff.py, so no stage waits for a publish and a pickup."""
    return group(*(specialist_task.si(turn_id, agent) for agent in SPECIALISTS), synth_task.si(turn_id))


def trio_queue(turn_id: int) -> None:
    """Queue the trio and Synth, once per turn."""
    handoff.queue_once(turn_id, trio_canvas(turn_id).apply_async)


def trio_queue_soon(turn_id: int) -> threading.Thread:
    """Queue the trio beside Shadow's model call: the specialists then read their inputs while
    Shadow's model works and wait for its findings (handoff.py). A failure here is retried
    when Shadow's task ends."""

    def queue() -> None:
        # Once Shadow's request is out: published at once, the four tasks' publish competed
        # with the request's own preparation (traced: 5.8 ms from Shadow's model call to the
        # request at the server, 4.5 ms with this wait); the model answers far later.
        time.sleep(TRIO_QUEUE_DELAY_S)
        try:
            trio_queue(turn_id)
        except Exception:
            logger.warning("could not queue the trio of turn %s early; Shadow's task will", turn_id, exc_info=True)

    thread = threading.Thread(target=queue, name=f"trio-queue-{turn_id}", daemon=True)
    thread.start()
    return thread


def turn_canvas(turn_id: int) -> Any:
    """shadow, which queues persona | plasticity | stability | synth as its model call starts
    (trio_queue_soon); each stage waits for the one before it (handoff.py)."""
    return shadow_task.si(turn_id)


def turn_pipeline_start(turn_id: int) -> None:
    turn_canvas(turn_id).apply_async()
    turn_watchdog_task.apply_async((turn_id,), countdown=settings.COACHING_TURN_DEADLINE_S + WATCHDOG_GRACE_S)


# --- Memory: summaries between and inside sessions --------------------------------------


@shared_task(name="coaching.summary_write", acks_late=True, soft_time_limit=900, time_limit=960)
def summary_write_task(session_id: int, scope: str, until_seq: int | None) -> dict[str, Any]:
    summary = compaction.summary_write(session_id=session_id, scope=scope, until_seq=until_seq)
    return {
        "session_id": session_id,
        "scope": scope,
        "summary_id": summary.pk if summary else None,
        "status": summary.status if summary else "nothing to summarise",
    }


@shared_task(name="coaching.sessions_compact_idle")
def sessions_compact_idle_task() -> dict[str, Any]:
    """Beat: end idle sessions (queuing their summaries) and requeue ended ones never summarised."""
    ended = compaction.idle_sessions_end(idle_minutes=settings.COACHING_SESSION_IDLE_MINUTES)
    requeued = compaction.unsummarised_sessions_queue()
    return {"ended": ended, "requeued": requeued}
