"""A coachee's own data: everything exported as JSON, or everything deleted.

Deletion removes the rows (sessions, messages, events, turns, agent runs, blackboard versions,
conflicts and annotations cascade from the user) and what Redis holds about the user, closes
their sockets, and leaves an AccountDeletion row without personal data.
"""

import hashlib
import hmac
import time
from collections import Counter
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.cache import cache
from django.db import transaction
from django.utils import timezone

from agents.models import (
    AccountDeletion,
    AccountSettings,
    AgentRun,
    BlackboardVersion,
    CoachingSession,
    Message,
    Prediction,
    ReplayJobResult,
    SessionSummary,
    Turn,
)
from agents.turns import event_log, limits

EXPORT_FORMAT_VERSION = 1


def account_export(*, user_id: int) -> dict[str, Any]:
    """Everything the product holds about a coachee, in plain JSON."""
    user = get_user_model().objects.get(pk=user_id)
    sessions = []
    for session in CoachingSession.objects.filter(coachee_id=user_id).order_by("created_at"):
        turns = Turn.objects.filter(session=session).order_by("started_at")
        runs_by_turn: dict[int, list[dict[str, Any]]] = {}
        for run in AgentRun.objects.filter(turn__session=session).order_by("started_at"):
            runs_by_turn.setdefault(run.turn_id, []).append(
                {
                    "agent": run.agent,
                    "round": run.round,
                    "status": run.status,
                    "output": run.parsed_output,
                    "started_at": run.started_at.isoformat(),
                }
            )
        sessions.append(
            {
                "id": session.pk,
                "title": session.title,
                "status": session.status,
                "locale": session.locale,
                "created_at": session.created_at.isoformat(),
                "ended_at": session.ended_at.isoformat() if session.ended_at else None,
                "messages": [
                    {"seq": m.seq, "role": m.role, "text": m.text, "created_at": m.created_at.isoformat()}
                    for m in Message.objects.filter(session=session).order_by("seq")
                ],
                "turns": [
                    {
                        "id": t.pk,
                        "status": t.status,
                        "degraded": t.degraded,
                        "escalation": t.escalation,
                        "started_at": t.started_at.isoformat(),
                        "agents": runs_by_turn.get(t.pk, []),
                        # The coachee's own thumbs on the full answer, and what they wrote.
                        "feedback": [
                            {"rating": f.get_rating_display(), "comment": f.comment, "at": f.updated_at.isoformat()}
                            for f in t.feedback.all()
                        ],
                    }
                    for t in turns.prefetch_related("feedback")
                ],
                "summaries": [
                    {"scope": su.scope, "status": su.status, "created_at": su.created_at.isoformat(), "data": su.data}
                    for su in SessionSummary.objects.filter(session=session).order_by("covers_until_seq", "attempt")
                ],
            }
        )
    return {
        "format": EXPORT_FORMAT_VERSION,
        "exported_at": timezone.now().isoformat(),
        "account": {
            "username": user.get_username(),
            "date_joined": user.date_joined.isoformat(),
            # The chosen language ("" = the browser's), kept in AccountSettings.
            "locale": AccountSettings.objects.filter(user_id=user_id).values_list("locale", flat=True).first() or "",
        },
        "sessions": sessions,
        "memory": [
            {"version": v.version, "created_at": v.created_at.isoformat(), "data": v.data}
            for v in BlackboardVersion.objects.filter(coachee_id=user_id).order_by("version")
        ],
        "predictions": [
            {
                "commitment": p.commitment,
                "probability": p.probability,
                "made_at": p.made_at.isoformat(),
                "due_at": p.due_at.isoformat(),
                "status": p.status,
                "outcome": p.outcome,
            }
            for p in Prediction.objects.filter(coachee_id=user_id).order_by("made_at")
        ],
    }


def subject_hash(user_id: int) -> str:
    # Keyed, so the audit row cannot be matched back to an id by hashing candidate ids.
    return hmac.new(settings.SECRET_KEY.encode(), f"user:{user_id}".encode(), hashlib.sha256).hexdigest()


def account_delete(*, user_id: int) -> AccountDeletion:
    """Delete the coachee and all their data; keep only an anonymous record that it happened."""
    with transaction.atomic():
        user = get_user_model().objects.select_for_update().get(pk=user_id)
        _, deleted = user.delete()
        record = AccountDeletion.objects.create(
            subject=subject_hash(user_id), counts=dict(Counter({k.split(".")[-1]: v for k, v in deleted.items()}))
        )
    event_log.user_sockets_close(user_id=user_id)
    minute = int(time.time() // 60)
    limits.sockets_forget(user_id=user_id)
    cache.delete_many([f"coaching:turns:{user_id}:{m}" for m in (minute - 1, minute, minute + 1)])
    return record


def raw_outputs_prune(*, older_than_days: int) -> int:
    """Blank raw outputs and stored prompts of turns older than the retention; returns runs pruned."""
    cutoff = timezone.now() - timedelta(days=older_than_days)
    pruned = (
        AgentRun.objects.filter(turn__started_at__lt=cutoff)
        .exclude(raw_output="", prompt_values={}, extra_instructions="")
        .update(raw_output="", prompt_values={}, extra_instructions="")
    )
    Turn.objects.filter(started_at__lt=cutoff).exclude(shared_prompt="").update(shared_prompt="")
    # A summarizer's raw reply is coachee text too; the structured summary stays (it is the memory).
    SessionSummary.objects.filter(created_at__lt=cutoff).exclude(raw_output="").update(raw_output="")
    # A replay's raw answer was made from the same stored prompt: it goes with its run's.
    ReplayJobResult.objects.filter(run__turn__started_at__lt=cutoff).exclude(raw_output="").update(raw_output="")
    return pruned
