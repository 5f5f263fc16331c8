"""When a session's summary is written: in the session when the history no longer fits, at its
end, and again for a session whose summary task was lost. Queued by name through dispatch."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.db import transaction
from django.db.models import Exists, OuterRef
from django.utils import timezone

from agents.models import (
    CoachingSession,
    Message,
    SessionStatus,
    SessionSummary,
    SummaryScope,
    Turn,
)
from agents.turns import dispatch


def history_needs_compaction(dropped: dict[str, Any]) -> bool:
    return bool(dropped.get("history_messages"))


def in_session_until_seq(*, oldest_kept_seq: int, user_seq: int) -> int:
    """Summarise up to the middle of the history that still fits: the next turns then have
    room again, instead of a new summary at every turn."""
    return oldest_kept_seq + (user_seq - oldest_kept_seq) // 2


def in_session_compaction_schedule(*, turn: Turn) -> None:
    oldest = turn.shared_dropped.get("oldest_kept_seq")
    if oldest is None:
        return
    until = in_session_until_seq(oldest_kept_seq=int(oldest), user_seq=turn.user_message.seq)
    session_id = turn.session_id

    def enqueue() -> None:
        dispatch.summary_write_queue(session_id, SummaryScope.IN_SESSION, until)

    transaction.on_commit(enqueue)


def session_summary_schedule(*, session_id: int) -> None:
    def enqueue() -> None:
        dispatch.summary_write_queue(session_id, SummaryScope.SESSION, None)

    transaction.on_commit(enqueue)


def unsummarised_sessions_queue(*, older_than_minutes: int = 10, within_days: int = 7, limit: int = 50) -> list[int]:
    """Ended sessions that still have no summary attempt (a lost task): queue them again.

    Only sessions ended in the last `within_days`: a recovery for lost tasks, not a backfill
    of every session that ended before summaries existed (that is a one-off job)."""
    now = timezone.now()
    ids = list(
        CoachingSession.objects.filter(
            status=SessionStatus.ENDED,
            ended_at__lt=now - timedelta(minutes=older_than_minutes),
            ended_at__gte=now - timedelta(days=within_days),
        )
        .filter(Exists(Message.objects.filter(session=OuterRef("pk")).exclude(text="")))
        .exclude(Exists(SessionSummary.objects.filter(session=OuterRef("pk"), scope=SummaryScope.SESSION)))
        .values_list("pk", flat=True)[:limit]
    )
    for pk in ids:
        session_summary_schedule(session_id=pk)
    return ids
