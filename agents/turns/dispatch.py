"""Queuing Celery work by task name.

The modules that decide what runs (turns.accept, turns.summaries) queue tasks through here and never
import agents/tasks.py, which imports them: one direction of imports. tasks.py registers each
task under the name given here (tests/test_dispatch.py checks that every name is registered).
"""

from __future__ import annotations

from typing import Any

from celery import chain, chord, signature
from django.conf import settings

from agents.models import SPECIALISTS

SHADOW = "coaching.shadow"
SPECIALIST = "coaching.specialist"
SYNTH = "coaching.synth"
TURN_WATCHDOG = "coaching.turn_watchdog"
SUMMARY_WRITE = "coaching.summary_write"

# Seconds after the deadline before the watchdog looks: the normal path finishes
# inside the deadline, so the watchdog only ever acts on a turn that is really stuck.
WATCHDOG_GRACE_S = 1.0


def turn_canvas(turn_id: int) -> Any:
    """The turn's agents after Coach's reply has started: Shadow, then Persona, Plasticity and
    Stability at once, then Synth (arbitration, the critic gate, delivery) once all three have
    ended. Each step takes its inputs from the database (the prefix and Shadow's findings are
    stored on commit); the signatures are immutable, so no step reads another's return value."""
    specialists = [signature(SPECIALIST, args=(turn_id, agent), immutable=True) for agent in SPECIALISTS]
    return chain(
        signature(SHADOW, args=(turn_id,), immutable=True),
        chord(specialists, signature(SYNTH, args=(turn_id,), immutable=True)),
    )


def turn_pipeline_start(turn_id: int) -> None:
    """Queue the turn's canvas and its watchdog (after the turn is committed)."""
    turn_canvas(turn_id).apply_async()
    signature(TURN_WATCHDOG, args=(turn_id,)).apply_async(
        countdown=settings.COACHING_TURN_DEADLINE_S + WATCHDOG_GRACE_S
    )


def summary_write_queue(session_id: int, scope: str, until_seq: int | None) -> None:
    """Queue a summary of the session (compaction.summary_write), in the background."""
    signature(SUMMARY_WRITE, args=(session_id, scope, until_seq)).apply_async()
